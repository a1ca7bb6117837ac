package main

import (
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/utxo-cache/utxo-cache/chain"
)

var pprofRE = regexp.MustCompile(`pprof on (http://[0-9.]+:[0-9]+)/debug/pprof/`)

// adminGet fetches path from serve's admin listener.
func (p *serveProc) adminGet(path string) (int, string) {
	p.t.Helper()
	m := pprofRE.FindStringSubmatch(p.stderr.String())
	if m == nil {
		p.t.Fatalf("serve did not print its pprof address:\n%s", p.stderr)
	}
	resp, err := p.client.Get(m[1] + path)
	if err != nil {
		p.t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		p.t.Fatalf("GET %s: %v", path, err)
	}
	return resp.StatusCode, string(b)
}

// TestAdminListenerHidesCommandLine: the admin listener serves pprof, but
// never the command line, which holds --admin-token.
func TestAdminListenerHidesCommandLine(t *testing.T) {
	t.Parallel()
	p := startServe(t, filepath.Join(t.TempDir(), "data"), "--admin-listen", "127.0.0.1:0")
	defer p.stop()
	if code, body := p.adminGet("/debug/pprof/cmdline"); code != http.StatusNotFound || strings.Contains(body, e2eToken) {
		t.Fatalf("/debug/pprof/cmdline: %d %q, want 404 without the token", code, body)
	}
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/goroutine?debug=1", "/debug/pprof/heap", "/debug/pprof/symbol"} {
		code, body := p.adminGet(path)
		if code != http.StatusOK {
			t.Errorf("GET %s: %d, want 200", path, code)
		}
		if strings.Contains(body, e2eToken) {
			t.Errorf("GET %s shows the admin token", path)
		}
	}
}

// TestAdminTokenFile: --admin-token-file (or UTXO_CACHE_ADMIN_TOKEN_FILE)
// gives the token without putting it on the command line; a trailing
// newline is not part of it. Giving both the token and the file is a usage
// error, and a file that cannot give a token is refused; either way before
// the store is created.
func TestAdminTokenFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tokenFile := writeFile(t, dir, "token", []byte(e2eToken+"\n"))
	p := startServe(t, filepath.Join(dir, "data"), "--admin-token-file", tokenFile)
	b := newTestChain(1).blocks[0]
	if r := p.do(http.MethodPost, "/v1/blocks", "application/json", chain.AppendBlockJSON(nil, b)); r.code != http.StatusOK {
		t.Fatalf("POST a block with the token of the file: %s", r)
	}
	p.stop()

	crlf := writeFile(t, dir, "crlf", []byte("tok\r\n"))
	empty := writeFile(t, dir, "empty", []byte("\n"))
	spaced := writeFile(t, dir, "spaced", []byte("tok \n"))
	for _, c := range []struct {
		name  string
		env   []string
		args  []string
		code  int
		parts []string
	}{
		{"both flags", nil, []string{"--admin-token", "x", "--admin-token-file", tokenFile}, 2,
			[]string{"--admin-token and --admin-token-file are both set"}},
		{"token in the environment, file flag", []string{"UTXO_CACHE_ADMIN_TOKEN=x"}, []string{"--admin-token-file", tokenFile}, 2,
			[]string{"both set"}},
		{"file in the environment, token flag", []string{"UTXO_CACHE_ADMIN_TOKEN_FILE=" + tokenFile}, []string{"--admin-token", "x"}, 2,
			[]string{"both set"}},
		{"missing file", nil, []string{"--admin-token-file", filepath.Join(dir, "nope")}, 1, []string{"--admin-token-file", "no such file"}},
		{"empty file", nil, []string{"--admin-token-file", empty}, 1, []string{"empty"}},
		{"trailing space in the file", nil, []string{"--admin-token-file", spaced}, 1, []string{"whitespace"}},
		{"trailing space in the flag", nil, []string{"--admin-token", "tok "}, 2, []string{"whitespace"}},
		{"control character", nil, []string{"--admin-token", "t\tok"}, 2, []string{"control character"}},
		{"both wallet flags", nil, []string{"--wallet-token", "x", "--wallet-token-file", tokenFile}, 2,
			[]string{"--wallet-token and --wallet-token-file are both set"}},
		{"wallet token in the environment, file flag", []string{"UTXO_CACHE_WALLET_TOKEN=x"}, []string{"--wallet-token-file", tokenFile}, 2,
			[]string{"both set"}},
		{"empty wallet token file", nil, []string{"--wallet-token-file", empty}, 1, []string{"--wallet-token-file", "empty"}},
		{"wallet token with a space", nil, []string{"--wallet-token", "tok "}, 2, []string{"whitespace"}},
		{"the wallet token is the admin token", nil, []string{"--admin-token", "same", "--wallet-token", "same"}, 2,
			[]string{"--wallet-token is the admin token"}},
	} {
		store := filepath.Join(dir, "refused")
		args := append([]string{"serve", "--listen", "127.0.0.1:0", "--data-dir", store}, c.args...)
		r := cli(t, c.env, nil, args...)
		t.Run(c.name, func(t *testing.T) {
			wantFail(t, r, c.code, c.parts...)
			if _, err := os.Stat(store); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("a refused serve left %s behind (%v)", store, err)
			}
		})
	}
	// A CRLF line end is trimmed too.
	if got, err := resolveSecret("admin-token", "", crlf); err != nil || got != "tok" {
		t.Fatalf("token of a CRLF file: %q, %v", got, err)
	}
}

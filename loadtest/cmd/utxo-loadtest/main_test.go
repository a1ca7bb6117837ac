package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runWith runs the command with args and the environment vars, and returns
// its exit status, standard output and standard error.
func runWith(args []string, vars map[string]string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	e := &env{stdout: &stdout, stderr: &stderr, getenv: func(k string) string { return vars[k] }}
	code := run(e, args)
	return code, stdout.String(), stderr.String()
}

// TestCommandLine: help, usage errors (exit 2, before anything starts) and
// flags from the environment, as utxo-cache's commands have them.
func TestCommandLine(t *testing.T) {
	code, out, _ := runWith([]string{"--help"}, nil)
	if code != 0 || !strings.Contains(out, "Usage: utxo-loadtest [flags]") || !strings.Contains(out, "env: UTXO_CACHE_SCENARIO") {
		t.Errorf("--help: exit %d, output:\n%s", code, out)
	}
	for _, tc := range []struct {
		name string
		args []string
		vars map[string]string
		want string
	}{
		{"argument", []string{"extra"}, nil, "takes no arguments"},
		{"remote target", []string{"--target", "http://example.com:8080", "--admin-token", "t"}, nil, "not a loopback address"},
		{"remote target from the environment", []string{"--admin-token", "t"}, map[string]string{"UTXO_CACHE_TARGET": "http://example.com:8080"}, "not a loopback address"},
		{"bad environment value", nil, map[string]string{"UTXO_CACHE_SEED": "x"}, "UTXO_CACHE_SEED"},
		{"bare without bodies", []string{"--bare-serve", "127.0.0.1:0"}, nil, "--bare-serve needs --bare-bodies"},
		{"chain profile", []string{"--chain-profile", "dogecoin"}, nil, "want bitcoin or cardano"},
	} {
		code, _, errOut := runWith(tc.args, tc.vars)
		if code != 2 || !strings.Contains(errOut, tc.want) || !strings.Contains(errOut, "Run 'utxo-loadtest --help'") {
			t.Errorf("%s: exit %d, stderr %q: want 2 and %q", tc.name, code, errOut, tc.want)
		}
	}
}

// TestWriteChain: --write-chain writes the scenario's preload chain and
// starts nothing (no utxo-cache binary is needed).
func TestWriteChain(t *testing.T) {
	path := filepath.Join(t.TempDir(), "chain.jsonl")
	code, out, errOut := runWith([]string{"--scenario", "smoke", "--write-chain", path}, nil)
	if code != 0 || !strings.Contains(out, "utxo-cache ingest --data-dir DIR "+path) {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
		t.Fatalf("the chain file: %v", err)
	}
}

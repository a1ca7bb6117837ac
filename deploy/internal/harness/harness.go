// Package harness is what the tests of deploy/ share: the repository's
// paths, free loopback ports, processes owned by one test, and a small HTTP
// client for the service (post a block, read the tip and a balance, wait
// for a condition with a deadline).
//
// Every process and file it starts is tied to the test that asked for it and
// is stopped and removed by that test's cleanup, so a failed test leaves
// nothing running and no port taken.
package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// RepoRoot is the repository's root directory (the parent of deploy/).
func RepoRoot(t testing.TB) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "deploy", "Containerfile")); err == nil {
			return dir
		}
		if filepath.Dir(dir) == dir {
			t.Fatalf("no repository root above %s (looked for deploy/Containerfile)", wd)
		}
	}
}

// DeployDir is RepoRoot/deploy.
func DeployDir(t testing.TB) string { return filepath.Join(RepoRoot(t), "deploy") }

// portsGiven are the ports FreePort has returned in this process.
var portsGiven struct {
	sync.Mutex
	m map[int]bool
}

// FreePort returns a loopback TCP port that was free a moment ago, and that
// it has not returned before in this process: the kernel may hand a port
// just closed to the next caller, and tests running in parallel must not be
// given the same one. The caller binds it soon after; another process could
// take it in between, which the caller sees as a start-up failure.
func FreePort(t testing.TB) int {
	t.Helper()
	portsGiven.Lock()
	defer portsGiven.Unlock()
	if portsGiven.m == nil {
		portsGiven.m = make(map[int]bool)
	}
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !portsGiven.m[port] {
			portsGiven.m[port] = true
			return port
		}
	}
	t.Fatal("no loopback port that was not handed out before")
	return 0
}

// NeedTool skips t when the named program is not on PATH, with the command
// that installs it; it returns the program's path.
func NeedTool(t testing.TB, name, install string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s not found: install it with `%s` (deploy/README.md)", name, install)
	}
	return p
}

// Process is a child process owned by one test: its output goes to a log
// file under the test's temporary directory, and the test's cleanup stops it
// (SIGTERM, then SIGKILL after a grace period) and waits for it.
type Process struct {
	Name string
	Log  string

	cmd  *exec.Cmd
	done chan struct{}
	mu   sync.Mutex
	err  error
}

// Start starts name with args (env added to the test's environment) and
// registers its stop with t.Cleanup.
func Start(t testing.TB, name string, env []string, bin string, args ...string) *Process {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	p := &Process{Name: name, Log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		f.Close()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(p.done)
	}()
	t.Cleanup(func() {
		if err := p.Stop(30 * time.Second); err != nil && t.Failed() {
			t.Logf("%s: %v", name, err)
		}
		if t.Failed() {
			t.Logf("log of %s (%s):\n%s", name, logPath, p.Tail(4000))
		}
	})
	return p
}

// Stop sends SIGTERM to the process group and waits up to grace for the
// exit, then sends SIGKILL. It returns the process's exit error (nil for a
// clean exit) and is safe to call more than once.
func (p *Process) Stop(grace time.Duration) error {
	select {
	case <-p.done:
	default:
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(grace):
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// Exited reports whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Tail is the last n bytes of the process's log.
func (p *Process) Tail(n int) string {
	b, _ := os.ReadFile(p.Log)
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// Eventually calls cond until it returns nil or the deadline passes, and
// then fails t with cond's last error. Between calls it waits a short,
// fixed poll interval: the condition is what the test waits for.
func Eventually(t testing.TB, within time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v", what, within, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Client speaks to one utxo-cache node.
type Client struct {
	Base string // http://host:port
	HTTP *http.Client
}

// NewClient is a Client of base with a bounded per-request timeout.
func NewClient(base string) *Client {
	return &Client{Base: strings.TrimRight(base, "/"), HTTP: &http.Client{Timeout: 30 * time.Second}}
}

// ErrStatus is returned for an answer whose status is not the expected one.
var ErrStatus = errors.New("unexpected HTTP status")

// Get fetches path and decodes a JSON answer into out (if not nil); any
// status but 200 is an ErrStatus carrying the body.
func (c *Client) Get(ctx context.Context, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.Base+path, nil)
	if err != nil {
		return err
	}
	return c.do(req, out)
}

func (c *Client) do(req *http.Request, out any) error {
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("%s %s: read body: %w", req.Method, req.URL, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %d %s: %w", req.Method, req.URL, resp.StatusCode, bytes.TrimSpace(body), ErrStatus)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("%s %s: decode %q: %w", req.Method, req.URL, body, err)
	}
	return nil
}

// Healthy is nil once GET /healthz answers 200.
func (c *Client) Healthy(ctx context.Context) error { return c.Get(ctx, "/healthz", nil) }

// Ready is nil once GET /readyz answers 200.
func (c *Client) Ready(ctx context.Context) error { return c.Get(ctx, "/readyz", nil) }

// Tip is the answer of GET /v1/tip.
type Tip struct {
	Tip *struct {
		Height uint64 `json:"height"`
		Hash   string `json:"hash"`
	} `json:"tip"`
	UTXOCount   uint64 `json:"utxo_count"`
	UTXODigest  string `json:"utxo_digest"`
	Replication *struct {
		Seq       uint64 `json:"seq"`
		WriterSeq uint64 `json:"writer_seq"`
		LagBlocks uint64 `json:"lag_blocks"`
	} `json:"replication"`
}

// TipAt reads GET /v1/tip?min_seq=seq (waiting on the node up to its
// --max-wait for that state).
func (c *Client) TipAt(ctx context.Context, seq uint64) (Tip, error) {
	var tip Tip
	err := c.Get(ctx, "/v1/tip?min_seq="+strconv.FormatUint(seq, 10), &tip)
	return tip, err
}

// Balance is the answer of GET /v1/addresses/ADDR/balance.
type Balance struct {
	Value     string `json:"value"`
	UTXOCount uint64 `json:"utxo_count"`
}

// BalanceAt reads an address's balance at commit sequence seq or later.
func (c *Client) BalanceAt(ctx context.Context, address string, seq uint64) (Balance, error) {
	var b Balance
	err := c.Get(ctx, "/v1/addresses/"+address+"/balance?min_seq="+strconv.FormatUint(seq, 10), &b)
	return b, err
}

// PostBlock posts a JSON block with the admin token and returns the commit
// sequence of the state it left.
func (c *Client) PostBlock(ctx context.Context, token string, block []byte) (uint64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.Base+"/v1/blocks", bytes.NewReader(block))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	var ans struct {
		Applied bool   `json:"applied"`
		Seq     uint64 `json:"seq"`
	}
	if err := c.do(req, &ans); err != nil {
		return 0, err
	}
	if !ans.Applied {
		return ans.Seq, fmt.Errorf("block not applied (seq %d)", ans.Seq)
	}
	return ans.Seq, nil
}

// Block is a JSON block at height (1 starts an empty store) whose one
// coinbase transaction pays value to address. Hashes are derived from the
// height, so consecutive heights chain.
func Block(height uint64, address string, value uint64) []byte {
	hash := func(tag byte, h uint64) string {
		return strings.Repeat(fmt.Sprintf("%02x", tag), 24) + fmt.Sprintf("%016x", h)
	}
	b := map[string]any{
		"height": height,
		"hash":   hash(0xb0, height),
		"txs": []any{map[string]any{
			"hash":     hash(0xa0, height),
			"coinbase": true,
			"inputs":   []any{},
			"outputs":  []any{map[string]any{"address": address, "value": value}},
		}},
	}
	if height > 1 {
		b["prev_hash"] = hash(0xb0, height-1)
	}
	out, err := json.Marshal(b)
	if err != nil {
		panic(err) // a map of strings and numbers always encodes
	}
	return out
}

// dialOK is nil when a TCP connection to addr succeeds.
func dialOK(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	return c.Close()
}

// PID is the process's id (its process group's too: Start makes it a
// group leader).
func (p *Process) PID() int { return p.cmd.Process.Pid }

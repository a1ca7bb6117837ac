package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The tests run the real binary as a subprocess, as an operator would: exit
// status, streams, environment and signals are part of what they check.

// binary is the utxo-cache binary TestMain builds.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "utxo-cache-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "utxo-cache")
	args := []string{"build", "-o", binary}
	if raceEnabled {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, ".")...)
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// cliResult is what one run of the binary left.
type cliResult struct {
	stdout, stderr string
	code           int
}

func (r cliResult) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// cli runs the binary with args. env adds NAME=value entries to an
// environment from which every UTXO_CACHE_ variable of the test's own
// environment has been removed.
func cli(t *testing.T, env []string, stdin io.Reader, args ...string) cliResult {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = testEnv(env)
	cmd.Stdin = stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := cliResult{stdout: stdout.String(), stderr: stderr.String()}
	var xe *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &xe):
		res.code = xe.ExitCode()
	default:
		t.Fatalf("run %v: %v", args, err)
	}
	return res
}

func testEnv(extra []string) []string {
	var env []string
	gorace := "atexit_sleep_ms=0"
	for _, kv := range os.Environ() {
		switch {
		case strings.HasPrefix(kv, envPrefix):
		case strings.HasPrefix(kv, "GORACE="):
			gorace = strings.TrimPrefix(kv, "GORACE=") + " " + gorace
		default:
			env = append(env, kv)
		}
	}
	// A -race binary sleeps a second before it exits (to catch races at
	// exit) unless told otherwise: every clean stop would take a second.
	env = append(env, "GORACE="+gorace)
	return append(env, extra...)
}

// mustCLI runs the binary and fails the test unless it exits 0.
func mustCLI(t *testing.T, args ...string) cliResult {
	t.Helper()
	r := cli(t, nil, nil, args...)
	if r.code != 0 {
		t.Fatalf("utxo-cache %s: %s", strings.Join(args, " "), r)
	}
	return r
}

// statsJSONLine returns `stats --json` of the store in dir, without its newline.
func statsJSONLine(t *testing.T, dir string) string {
	t.Helper()
	return strings.TrimSuffix(mustCLI(t, "stats", "--data-dir", dir, "--json").stdout, "\n")
}

func wantStats(t *testing.T, dir, want string) {
	t.Helper()
	if got := statsJSONLine(t, dir); got != want {
		t.Fatalf("stats --json of %s:\n got %s\nwant %s", dir, got, want)
	}
}

// wantFail checks that r exited with code and that its stderr holds every
// one of parts.
func wantFail(t *testing.T, r cliResult, code int, parts ...string) {
	t.Helper()
	t.Logf("exit %d, stderr: %s", r.code, r.stderr)
	if r.code != code {
		t.Fatalf("want exit %d: %s", code, r)
	}
	for _, p := range parts {
		if !strings.Contains(r.stderr, p) {
			t.Fatalf("stderr does not mention %q: %s", p, r)
		}
	}
}

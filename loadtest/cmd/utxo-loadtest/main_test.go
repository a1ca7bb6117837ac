package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/utxo-cache/utxo-cache/loadtest"
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
		{"compare one report", []string{"--compare", "a.json"}, nil, "--compare takes two report.json files"},
		{"scale with a feed", []string{"--scenario", "scale", "--block-rate", "5", "--bin", "/bin/true"}, nil, "keeps no model"},
	} {
		code, _, errOut := runWith(tc.args, tc.vars)
		if code != 2 || !strings.Contains(errOut, tc.want) || !strings.Contains(errOut, "Run 'utxo-loadtest --help'") {
			t.Errorf("%s: exit %d, stderr %q: want 2 and %q", tc.name, code, errOut, tc.want)
		}
	}
}

// TestCompareCommand: --compare prints two reports side by side, each
// figure on one line with both values.
func TestCompareCommand(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, rps float64) string {
		r := loadtest.Report{Version: loadtest.ReportVersion, Scenario: "standard",
			Configs: []loadtest.ConfigResult{{Name: "disk", Max: loadtest.PhaseResult{AchievedRate: rps}}}}
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	a, b := write("a.json", 1000), write("b.json", 1250)
	code, out, errOut := runWith([]string{"--compare", a, b}, nil)
	if code != 0 || !strings.Contains(out, "disk max req/s") || !strings.Contains(out, "1.25") {
		t.Fatalf("exit %d, stdout:\n%s\nstderr %q", code, out, errOut)
	}
	if code, _, errOut := runWith([]string{"--compare", a, filepath.Join(dir, "missing.json")}, nil); code != 1 || !strings.Contains(errOut, "missing.json") {
		t.Fatalf("a missing report: exit %d, stderr %q", code, errOut)
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

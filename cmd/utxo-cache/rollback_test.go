package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

func TestRollback(t *testing.T) {
	t.Parallel()
	c := newTestChain(6)
	dir := t.TempDir()
	store := filepath.Join(dir, "store")
	mustCLI(t, "ingest", "--data-dir", store, writeJSONL(t, dir, "blocks.jsonl", c.blocks))

	r := mustCLI(t, "rollback", "--data-dir", store, "--height", "4")
	if want := fmt.Sprintf("new tip: height 4 hash %s\n", c.blocks[3].Hash); r.stdout != want {
		t.Fatalf("stdout %q, want %q", r.stdout, want)
	}
	wantStats(t, store, c.stats(4))

	r = mustCLI(t, "rollback", "--data-dir", store, "--hash", c.blocks[1].Hash.String())
	if !strings.Contains(r.stdout, "new tip: height 2 ") {
		t.Fatal(r)
	}
	wantStats(t, store, c.stats(2))

	mustCLI(t, "rollback", "--data-dir", store, "--height", "2") // the tip: a no-op
	wantStats(t, store, c.stats(2))

	wantFail(t, cli(t, nil, nil, "rollback", "--data-dir", store, "--height", "3"), 1, "above the tip", "invalid argument")
	// Block 5 was rolled back: its hash is no longer on the chain.
	wantFail(t, cli(t, nil, nil, "rollback", "--data-dir", store, "--hash", c.blocks[4].Hash.String()), 1, "not on the current chain")
	wantStats(t, store, c.stats(2))

	// The chain grows again from the rolled-back tip.
	mustCLI(t, "ingest", "--data-dir", store, filepath.Join(dir, "blocks.jsonl"))
	wantStats(t, store, c.stats(6))

	r = mustCLI(t, "rollback", "--data-dir", store, "--height", "0")
	if r.stdout != "new tip: empty (no block applied)\n" {
		t.Fatal(r)
	}
	wantStats(t, store, c.stats(0))
}

func TestRollbackTooDeep(t *testing.T) {
	t.Parallel()
	c := newTestChain(6)
	dir := t.TempDir()
	store := filepath.Join(dir, "store")
	mustCLI(t, "ingest", "--data-dir", store, "--rollback-window", "2", writeJSONL(t, dir, "blocks.jsonl", c.blocks))

	wantFail(t, cli(t, nil, nil, "rollback", "--data-dir", store, "--rollback-window", "2", "--height", "3"), 1, "rollback too deep")
	// A wider window does not bring back undo data the store has pruned.
	wantFail(t, cli(t, nil, nil, "rollback", "--data-dir", store, "--height", "1"), 1, "rollback too deep")
	wantStats(t, store, c.stats(6))

	mustCLI(t, "rollback", "--data-dir", store, "--rollback-window", "2", "--height", "4")
	wantStats(t, store, c.stats(4))
}

func TestRollbackUsage(t *testing.T) {
	t.Parallel()
	store := t.TempDir()
	for _, args := range [][]string{
		{"rollback", "--data-dir", store},
		{"rollback", "--data-dir", store, "--height", "1", "--hash", strings.Repeat("00", 32)},
		{"rollback", "--data-dir", store, "--height", "-1"},
		{"rollback", "--data-dir", store, "--hash", "abc"},
		{"rollback", "--data-dir", store, "--height", "1", "extra"},
	} {
		wantFail(t, cli(t, nil, nil, args...), 2, "Run 'utxo-cache rollback --help'")
	}
	// A flag wins over the environment for the target too.
	env := []string{envName("hash") + "=" + strings.Repeat("00", 32)}
	wantFail(t, cli(t, env, nil, "rollback", "--data-dir", store, "--height", "1"), 1, "above the tip")
	wantFail(t, cli(t, nil, nil, "rollback", "--data-dir", filepath.Join(store, "missing"), "--height", "1"), 1, "no store at")
}

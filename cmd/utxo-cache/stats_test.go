package main

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestStatsEmptyStore(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	store := filepath.Join(dir, "store")
	r := mustCLI(t, "ingest", "--data-dir", store, writeFile(t, dir, "empty.jsonl", nil))
	if a, s := summary(t, r); a != 0 || s != 0 || !strings.Contains(r.stdout, "tip empty") {
		t.Fatal(r)
	}
	wantStats(t, store, `{"tip":null,"utxo_count":0,"utxo_digest":"`+strings.Repeat("0", 64)+`"}`)
	r = mustCLI(t, "stats", "--data-dir", store)
	if !strings.Contains(r.stdout, "empty") {
		t.Fatal(r)
	}
}

func TestStatsHuman(t *testing.T) {
	t.Parallel()
	c := newTestChain(3)
	dir := t.TempDir()
	store := filepath.Join(dir, "store")
	mustCLI(t, "ingest", "--data-dir", store, writeJSONL(t, dir, "blocks.jsonl", c.blocks))
	r := mustCLI(t, "stats", "--data-dir", store)
	d := c.states[3].digest()
	for _, want := range []string{
		"height 3 hash " + c.blocks[2].Hash.String(),
		"utxo digest", d.String(),
		"disk size", "read amplification",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stats lacks %q:\n%s", want, r.stdout)
		}
	}
}

func TestStatsMissingStore(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "missing")
	wantFail(t, cli(t, nil, nil, "stats", "--data-dir", missing, "--json"), 1, "no store at")
}

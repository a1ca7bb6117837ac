package main

import (
	"bytes"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

// runIn runs command function run in this process with args and returns its
// error and output.
func runIn(run func(*env, []string) error, args ...string) (error, string, string) {
	var stdout, stderr bytes.Buffer
	e := &env{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr, getenv: func(string) string { return "" }}
	err := run(e, args)
	return err, stdout.String(), stderr.String()
}

// wantWrongChain checks that err is the refusal of a chain, matching
// disk.ErrWrongChain, and that its message names both chains and the command.
func wantWrongChain(t *testing.T, err error, have, command, want string) {
	t.Helper()
	msg := "holds " + have + " blocks; " + command + " feeds " + want
	if !errors.Is(err, disk.ErrWrongChain) || !strings.Contains(err.Error(), msg) {
		t.Fatalf("%s: %v; want ErrWrongChain saying %q", command, err, msg)
	}
}

// TestChainRefused: a store records the chain of the command that created
// it; a command that would feed another chain into it is refused before
// anything is applied (disk.ErrWrongChain, both chains named), the store as
// it was. A serve that takes POSTed blocks without a follower serves any
// chain's store (what it takes must link to the tip) and leaves its chain as
// it is; a store it creates records generic.
func TestChainRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	btcStore := filepath.Join(dir, "btc")
	genStore := filepath.Join(dir, "gen")
	mustCLI(t, "import-bitcoin", "--data-dir", btcStore, bitcoinFixture("blk_0_to_4.dat.bz2"))
	jsonl := writeJSONL(t, dir, "blocks.jsonl", newTestChain(3).blocks)
	mustCLI(t, "ingest", "--data-dir", genStore, jsonl)
	btcStats, genStats := statsJSONLine(t, btcStore), statsJSONLine(t, genStore)

	err, _, _ := runIn(runIngest, "--data-dir", btcStore, jsonl)
	wantWrongChain(t, err, "bitcoin", "ingest", "generic")
	err, _, _ = runIn(runImportBitcoin, "--data-dir", genStore, bitcoinFixture("blk_0_to_4.dat.bz2"))
	wantWrongChain(t, err, "generic", "import-bitcoin", "bitcoin")
	// The follower is refused before it contacts its node (port 1: nothing).
	err, _, _ = runIn(runServe, "--data-dir", genStore, "--listen", "127.0.0.1:0", "--follow-bitcoin-rest", "http://127.0.0.1:1")
	wantWrongChain(t, err, "generic", "serve", "bitcoin")
	wantStats(t, btcStore, btcStats)
	wantStats(t, genStore, genStats)

	// The store's own chain is taken again (resumed: nothing new).
	mustCLI(t, "ingest", "--data-dir", genStore, jsonl)
	wantStats(t, genStore, genStats)

	// A bitcoin store served with --admin-token: reads, and POSTed blocks
	// only where they link (a generic block does not); its chain stays.
	p := launchServe(t, []string{"serve", "--listen", "127.0.0.1:0", "--data-dir", btcStore, "--log-level", "warn", "--admin-token", e2eToken})
	p.waitReady(time.Now().Add(60 * time.Second))
	if r := p.get("/v1/tip"); r.code != http.StatusOK || !strings.Contains(string(r.body), `"height":4`) {
		t.Fatalf("GET /v1/tip of the bitcoin store: %s", r)
	}
	block := blockJSON(t, newTestChain(1).blocks[0])
	if r := p.do(http.MethodPost, "/v1/blocks", "application/json", block); r.code != http.StatusConflict {
		t.Fatalf("POST of a block that does not link to the bitcoin tip: %s, want 409", r)
	}
	p.stop()
	wantStats(t, btcStore, btcStats)
	err, _, _ = runIn(runIngest, "--data-dir", btcStore, jsonl)
	wantWrongChain(t, err, "bitcoin", "ingest", "generic")

	// A store created by a serve that takes POSTed blocks records generic.
	postStore := filepath.Join(dir, "posted")
	p = launchServe(t, []string{"serve", "--listen", "127.0.0.1:0", "--data-dir", postStore, "--log-level", "warn", "--admin-token", e2eToken})
	p.waitReady(time.Now().Add(60 * time.Second))
	if r := p.do(http.MethodPost, "/v1/blocks", "application/json", block); r.code != http.StatusOK {
		t.Fatalf("POST of the first block to a new store: %s", r)
	}
	p.stop()
	postStats := statsJSONLine(t, postStore)
	err, _, _ = runIn(runImportBitcoin, "--data-dir", postStore, bitcoinFixture("blk_0_to_4.dat.bz2"))
	wantWrongChain(t, err, "generic", "import-bitcoin", "bitcoin")
	wantStats(t, postStore, postStats)
}

package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/utxo-cache/utxo-cache/chain"
)

// bulkDepths are the store depths of the bulk tests: spent records and
// undo deltas of the last blocks are kept, and the change log keeps 6.
var bulkDepths = []string{"--prune-depth", "3", "--rollback-window", "6"}

// TestIngestBulk ingests a chain of 40 blocks, split over a JSON lines and
// a CBOR file at several places, with --bulk: the change log's last 6
// blocks are read again from wherever they start (in the first file and
// the second, at the second's first record, inside the second). The
// store's tip, count and digest are the chain's, computed apart; ingest
// then goes on from the tip with more blocks, as after any ingest, and a
// rollback of the whole rollback window works.
func TestIngestBulk(t *testing.T) {
	t.Parallel()
	c := newTestChain(44)
	for _, split := range []int{37, 34, 12} {
		t.Run(fmt.Sprint("split=", split), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			first := writeJSONL(t, dir, "first.jsonl", c.blocks[:split])
			second := writeCBOR(t, dir, "second.cbor", c.blocks[split:40])
			store := filepath.Join(dir, "store")
			args := append([]string{"ingest", "--data-dir", store, "--bulk"}, bulkDepths...)
			r := mustCLI(t, append(args, first, second)...)
			if a, s := summary(t, r); a != 40 || s != 0 {
				t.Fatalf("applied %d skipped %d, want 40 and 0: %s", a, s, r)
			}
			if !strings.Contains(r.stdout, "; 40 blocks bulk loaded; ") || !strings.Contains(r.stderr, "bulk loaded blocks 1..40") {
				t.Fatalf("the summary does not say 40 blocks were bulk loaded: %s", r)
			}
			wantStats(t, store, c.stats(40))

			more := writeJSONL(t, dir, "more.jsonl", c.blocks[40:])
			r = mustCLI(t, append(args, more)...) // --bulk on a store with blocks: the writer's
			if !strings.Contains(r.stderr, "the store already holds blocks") {
				t.Fatalf("no note that --bulk does not apply: %s", r)
			}
			wantStats(t, store, c.stats(44))
			mustCLI(t, "rollback", "--data-dir", store, "--height", "38", "--rollback-window", "6")
			wantStats(t, store, c.stats(38))
		})
	}
}

// TestIngestBulkOverlappingFiles: a file that repeats the last blocks of
// the one before is loaded as the writer applies it: the repeated blocks
// skipped; one that repeats a block of another chain is refused.
func TestIngestBulkOverlappingFiles(t *testing.T) {
	t.Parallel()
	c := newTestChain(30)
	dir := t.TempDir()
	first := writeJSONL(t, dir, "first.jsonl", c.blocks[:20])
	second := writeCBOR(t, dir, "second.cbor", c.blocks[17:])
	store := filepath.Join(dir, "store")
	r := mustCLI(t, append(append([]string{"ingest", "--data-dir", store, "--bulk"}, bulkDepths...), first, second)...)
	if a, s := summary(t, r); a != 30 || s != 3 {
		t.Fatalf("applied %d skipped %d, want 30 and 3: %s", a, s, r)
	}
	wantStats(t, store, c.stats(30))

	fork := *c.blocks[19] // block 20 of another chain
	fork.Hash = testHash("fork", 20)
	third := writeCBOR(t, dir, "fork.cbor", []*chain.Block{&fork})
	store2 := filepath.Join(dir, "store2")
	r = cli(t, nil, nil, append(append([]string{"ingest", "--data-dir", store2, "--bulk"}, bulkDepths...), first, third)...)
	wantFail(t, r, 1, "record 1 (height 20)", "not on the chain loaded", "nothing applied: the store is still empty")
	wantStats(t, store2, c.stats(0))
}

// TestIngestBulkShortChain: a chain of one block, and one shorter than the
// rollback window, with a change log of one change and of the default
// retention.
func TestIngestBulkShortChain(t *testing.T) {
	t.Parallel()
	c := newTestChain(4)
	for _, n := range []int{1, 4} {
		for _, retention := range []string{"1", "0"} {
			dir := t.TempDir()
			file := writeJSONL(t, dir, "blocks.jsonl", c.blocks[:n])
			store := filepath.Join(dir, "store")
			r := mustCLI(t, append(append([]string{"ingest", "--data-dir", store, "--bulk", "--replication-retention", retention}, bulkDepths...), file)...)
			if !strings.Contains(r.stdout, fmt.Sprintf("; %d blocks bulk loaded; ", n)) {
				t.Fatalf("%d blocks, retention %s: not bulk loaded: %s", n, retention, r)
			}
			wantStats(t, store, c.stats(n))
		}
	}
}

// TestIngestBulkRefusesBadBlocks: a bad block among the bulk-loaded ones
// stops ingest with the writer's reason, its height, and the store empty;
// an undecodable record after an unknown input reports the input.
func TestIngestBulkRefusesBadBlocks(t *testing.T) {
	t.Parallel()
	c := newTestChain(30)
	withUnknownInput := func(b *chain.Block) *chain.Block {
		bad := *b
		bad.Txs = append(append([]chain.Tx(nil), b.Txs...), chain.Tx{Hash: testHash("bad"),
			Inputs: []chain.OutPoint{{TxHash: testHash("unknown"), Index: 3}}, Outputs: []chain.Output{{Address: "mallory", Value: 1}}})
		return &bad
	}
	unknown := append([]*chain.Block(nil), c.blocks...)
	unknown[7] = withUnknownInput(c.blocks[7])
	unlinked := append([]*chain.Block(nil), c.blocks...)
	broken := *c.blocks[12]
	broken.PrevHash = testHash("elsewhere")
	unlinked[12] = &broken
	both := append([]*chain.Block(nil), unlinked...)
	both[5] = withUnknownInput(c.blocks[5])
	for _, tc := range []struct {
		name   string
		blocks []*chain.Block
		want   []string
	}{
		{"unknown input", unknown, []string{"block 8 tx", "unknown input", "nothing applied: the store is still empty"}},
		{"not the next block", unlinked, []string{"record 13 (height 13)", "prev_hash", "nothing applied: the store is still empty"}},
		{"unknown input, then not the next block", both, []string{"block 6 tx", "unknown input", "nothing applied: the store is still empty"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			file := writeCBOR(t, dir, "bad.cbor", tc.blocks)
			store := filepath.Join(dir, "store")
			r := cli(t, nil, nil, append(append([]string{"ingest", "--data-dir", store, "--bulk"}, bulkDepths...), file)...)
			wantFail(t, r, 1, tc.want...)
			wantStats(t, store, c.stats(0))
		})
	}
}

// TestIngestBulkKeepsTheReserve: a load that would leave less than
// --disk-reserve-bytes free stops before it writes a table, with the store
// empty.
func TestIngestBulkKeepsTheReserve(t *testing.T) {
	t.Parallel()
	c := newTestChain(12)
	dir := t.TempDir()
	file := writeJSONL(t, dir, "blocks.jsonl", c.blocks)
	store := filepath.Join(dir, "store")
	r := cli(t, nil, nil, append(append([]string{"ingest", "--data-dir", store, "--bulk", "--disk-reserve-bytes", "100000GiB"}, bulkDepths...), file)...)
	wantFail(t, r, 1, "not enough free space", "nothing applied: the store is still empty")
	wantStats(t, store, c.stats(0))
}

func TestIngestBulkUsageErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := writeJSONL(t, dir, "blocks.jsonl", newTestChain(2).blocks)
	store := filepath.Join(dir, "store")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--bulk", "--format", "json", "-"}, "cannot read - (standard input)"},
		{[]string{"--bulk", "--bulk-memory", "1MiB", file}, "--bulk-memory"},
	} {
		r := cli(t, nil, nil, append([]string{"ingest", "--data-dir", store}, tc.args...)...)
		wantFail(t, r, 2, tc.want)
	}
}

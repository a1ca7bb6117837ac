package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/node"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

var summaryRE = regexp.MustCompile(`ingest: applied (\d+) blocks, skipped (\d+) already applied, (\d+) UTXO changes in \S+; tip (\S+); (\d+) UTXOs`)

// summary parses ingest's summary line: blocks applied and skipped.
func summary(t *testing.T, r cliResult) (applied, skipped int) {
	t.Helper()
	m := summaryRE.FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("no summary line: %s", r)
	}
	applied, _ = strconv.Atoi(m[1])
	skipped, _ = strconv.Atoi(m[2])
	return applied, skipped
}

func TestIngestJSONL(t *testing.T) {
	t.Parallel()
	c := newTestChain(6)
	dir := t.TempDir()
	file := writeJSONL(t, dir, "blocks.jsonl", c.blocks)
	store := filepath.Join(dir, "store")

	r := mustCLI(t, "ingest", "--data-dir", store, file)
	if a, s := summary(t, r); a != 6 || s != 0 {
		t.Fatalf("applied %d skipped %d: %s", a, s, r)
	}
	// How many blocks went in catch-up windows depends on how many were
	// decoded when the writer took them: any number is right.
	if !strings.Contains(r.stdout, fmt.Sprintf("tip 6/%s; %d UTXOs; ", c.blocks[5].Hash, len(c.states[6]))) {
		t.Fatalf("summary lacks the final tip and count: %s", r)
	}
	wantStats(t, store, c.stats(6))
}

func TestIngestCBOR(t *testing.T) {
	t.Parallel()
	c := newTestChain(6)
	dir := t.TempDir()
	file := writeCBOR(t, dir, "blocks.cbor", c.blocks)
	store := filepath.Join(dir, "store")

	r := mustCLI(t, "ingest", "--data-dir", store, file)
	if a, s := summary(t, r); a != 6 || s != 0 {
		t.Fatalf("applied %d skipped %d: %s", a, s, r)
	}
	wantStats(t, store, c.stats(6))
}

// TestIngestFilesInOrder ingests one chain split over a JSONL and a CBOR file.
func TestIngestFilesInOrder(t *testing.T) {
	t.Parallel()
	c := newTestChain(5)
	dir := t.TempDir()
	first := writeJSONL(t, dir, "first.json", c.blocks[:2])
	second := writeCBOR(t, dir, "second.cbor", c.blocks[2:])
	store := filepath.Join(dir, "store")
	mustCLI(t, "ingest", "--data-dir", store, first, second)
	wantStats(t, store, c.stats(5))
}

func TestIngestResumes(t *testing.T) {
	t.Parallel()
	c := newTestChain(6)
	dir := t.TempDir()
	partial := writeJSONL(t, dir, "partial.jsonl", c.blocks[:3])
	full := writeJSONL(t, dir, "full.jsonl", c.blocks)
	store := filepath.Join(dir, "store")

	mustCLI(t, "ingest", "--data-dir", store, partial)
	wantStats(t, store, c.stats(3))

	// As after an interruption: the same file again, from its first block.
	r := mustCLI(t, "ingest", "--data-dir", store, full)
	if a, s := summary(t, r); a != 3 || s != 3 {
		t.Fatalf("applied %d skipped %d, want 3 and 3: %s", a, s, r)
	}
	wantStats(t, store, c.stats(6))

	r = mustCLI(t, "ingest", "--data-dir", store, full)
	if a, s := summary(t, r); a != 0 || s != 6 {
		t.Fatalf("re-run applied %d skipped %d, want 0 and 6: %s", a, s, r)
	}
	wantStats(t, store, c.stats(6))
}

func TestIngestStopsAtBadBlock(t *testing.T) {
	t.Parallel()
	c := newTestChain(4)
	bad := *c.blocks[2]
	bad.Txs = append([]chain.Tx(nil), bad.Txs...)
	bad.Txs = append(bad.Txs, chain.Tx{Hash: testHash("bad"), Inputs: []chain.OutPoint{{TxHash: testHash("unknown"), Index: 3}},
		Outputs: []chain.Output{{Address: "mallory", Value: 1}}})
	blocks := []*chain.Block{c.blocks[0], c.blocks[1], &bad, c.blocks[3]}

	for _, tc := range []struct {
		name  string
		write func(t *testing.T, dir, name string, blocks []*chain.Block) string
		file  string
	}{
		{"jsonl", writeJSONL, "bad.jsonl"},
		{"cbor", writeCBOR, "bad.cbor"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			file := tc.write(t, dir, tc.file, blocks)
			store := filepath.Join(dir, "store")
			r := cli(t, nil, nil, "ingest", "--data-dir", store, file)
			wantFail(t, r, 1, file, "record 3", "height 3", "unknown input", "nothing of it applied")
			if a, _ := summary(t, r); a != 2 {
				t.Fatalf("applied %d, want 2: %s", a, r)
			}
			// Blocks 1 and 2 stay applied, nothing of block 3 is.
			wantStats(t, store, c.stats(2))
		})
	}
}

func TestIngestStopsAtUndecodableRecord(t *testing.T) {
	t.Parallel()
	c := newTestChain(4)
	dir := t.TempDir()
	var buf bytes.Buffer
	w := chain.NewJSONLWriter(&buf)
	for _, b := range c.blocks[:2] {
		if err := w.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	w.Flush()
	fmt.Fprintf(&buf, "{\"height\": 3, \"hash\": \"%s\", \"prev_hash\": \"%s\"}\n", c.blocks[2].Hash, c.blocks[1].Hash)
	file := writeFile(t, dir, "undecodable.jsonl", buf.Bytes())
	store := filepath.Join(dir, "store")

	r := cli(t, nil, nil, "ingest", "--data-dir", store, file)
	wantFail(t, r, 1, file, "record 3", "txs", "invalid block")
	wantStats(t, store, c.stats(2))
}

func TestIngestRefusesAForeignBlockBelowTheTip(t *testing.T) {
	t.Parallel()
	c := newTestChain(4)
	other := newTestChain(4)
	other.blocks[1].Hash = testHash("fork", 2)
	dir := t.TempDir()
	store := filepath.Join(dir, "store")
	mustCLI(t, "ingest", "--data-dir", store, writeJSONL(t, dir, "main.jsonl", c.blocks))

	file := writeJSONL(t, dir, "fork.jsonl", other.blocks[:2])
	r := cli(t, nil, nil, "ingest", "--data-dir", store, file)
	wantFail(t, r, 1, file, "record 2", "height 2", "not on the store's chain", "not the next block")
	if a, s := summary(t, r); a != 0 || s != 1 {
		t.Fatalf("applied %d skipped %d, want 0 and 1: %s", a, s, r)
	}
	wantStats(t, store, c.stats(4))
}

func TestIngestStdin(t *testing.T) {
	t.Parallel()
	c := newTestChain(3)
	var buf bytes.Buffer
	w := chain.NewCBORSeqWriter(&buf)
	for _, b := range c.blocks {
		if err := w.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	w.Flush()
	store := filepath.Join(t.TempDir(), "store")

	r := cli(t, nil, bytes.NewReader(buf.Bytes()), "ingest", "--data-dir", store, "-")
	wantFail(t, r, 2, "--format")

	r = cli(t, nil, bytes.NewReader(buf.Bytes()), "ingest", "--data-dir", store, "--format", "cbor", "-")
	if r.code != 0 {
		t.Fatal(r)
	}
	wantStats(t, store, c.stats(3))
}

func TestIngestUsageErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	store := filepath.Join(dir, "store")
	txt := writeFile(t, dir, "blocks.txt", nil)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"ingest", "--data-dir", store}, "no FILE"},
		{[]string{"ingest", "--data-dir", store, txt}, "extension"},
		{[]string{"ingest", "--data-dir", store, "--format", "xml", txt}, "--format"},
		{[]string{"ingest", "--data-dir", store, "--prune-depth", "0", txt}, "--prune-depth"},
		{[]string{"ingest", "--data-dir", store, "--no-such-flag", txt}, "no-such-flag"},
	} {
		wantFail(t, cli(t, nil, nil, tc.args...), 2, tc.want)
	}
	wantFail(t, cli(t, nil, nil, "ingest", "--data-dir", store, filepath.Join(dir, "missing.jsonl")), 1, "missing.jsonl")
}

// TestIngestSignal stops an ingest that waits on a pipe: it exits 128+signal
// after closing the store, whose tip is the last block the summary counts.
func TestIngestSignal(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		sig  syscall.Signal
		code int
	}{{syscall.SIGINT, 130}, {syscall.SIGTERM, 143}} {
		t.Run(tc.sig.String(), func(t *testing.T) {
			t.Parallel()
			c := newTestChain(2)
			store := filepath.Join(t.TempDir(), "store")
			cmd := exec.Command(binary, "ingest", "--data-dir", store, "--format", "json", "-")
			cmd.Env = testEnv(nil)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			w := chain.NewJSONLWriter(stdin)
			for _, b := range c.blocks {
				if err := w.Write(b); err != nil {
					t.Fatal(err)
				}
			}
			w.Flush()
			// Ingest catches signals before it opens the store: once Pebble's
			// LOCK file exists, a signal stops it cleanly, whether it is
			// applying a block or waiting on the pipe for more.
			for {
				if _, err := os.Stat(filepath.Join(store, "LOCK")); err == nil {
					break
				}
				if time.Since(start) > 30*time.Second {
					t.Fatal("ingest did not open its store within 30s")
				}
				time.Sleep(time.Millisecond)
			}
			cmd.Process.Signal(tc.sig)
			err = cmd.Wait()
			stdin.Close()
			r := cliResult{stdout: stdout.String(), stderr: stderr.String(), code: cmd.ProcessState.ExitCode()}
			wantFail(t, r, tc.code, "stopped by SIG", "closed cleanly")
			applied, _ := summary(t, r)
			wantStats(t, store, c.stats(applied))
		})
	}
}

// TestIngestStopsAtBlockOverMemoryBudget: a block over --max-block-memory
// stops ingest (exit 1) with a message that says so, before anything of it
// is applied; the blocks before it stay applied.
func TestIngestStopsAtBlockOverMemoryBudget(t *testing.T) {
	t.Parallel()
	c := newTestChain(4)
	big := *c.blocks[2]
	big.Txs = append([]chain.Tx(nil), big.Txs...)
	tx := chain.Tx{Hash: testHash("big")}
	for i := range 500 {
		tx.Outputs = append(tx.Outputs, chain.Output{Address: fmt.Sprintf("big-%03d", i), Value: 1})
	}
	big.Txs = append(big.Txs, tx)
	if chain.BlockMemory(&big) <= 1<<20 {
		t.Fatal("the test block is not over 1MiB of estimated memory")
	}
	dir := t.TempDir()
	file := writeJSONL(t, dir, "big.jsonl", []*chain.Block{c.blocks[0], c.blocks[1], &big, c.blocks[3]})
	store := filepath.Join(dir, "store")
	r := cli(t, nil, nil, "ingest", "--data-dir", store, "--max-block-memory", "1MiB", file)
	wantFail(t, r, 1, file, "record 3", "of memory to apply, over the limit of 1.0 MiB (1048576 bytes)", "too large")
	if a, _ := summary(t, r); a != 2 {
		t.Fatalf("applied %d, want 2: %s", a, r)
	}
	wantStats(t, store, c.stats(2))
	wantFail(t, cli(t, nil, nil, "ingest", "--data-dir", store, "--max-block-memory", "100KiB", file), 2, "--max-block-memory")
}

// TestBlockCacheBytes: --block-cache-bytes takes a size of at least 8MiB
// on every command that opens a store to write it; anything else is a usage
// error (exit 2) that creates no store. A valid size imports as usual.
func TestBlockCacheBytes(t *testing.T) {
	t.Parallel()
	c := newTestChain(3)
	dir := t.TempDir()
	file := writeJSONL(t, dir, "blocks.jsonl", c.blocks)
	for _, cmd := range []string{"ingest", "import-bitcoin", "import-cardano", "serve"} {
		for _, v := range []string{"lots", "1MiB", "-8MiB"} {
			store := filepath.Join(dir, cmd+v)
			args := []string{cmd, "--data-dir", store, "--block-cache-bytes", v}
			if cmd != "serve" {
				args = append(args, file)
			}
			r := cli(t, nil, nil, args...)
			if r.code != 2 || !strings.Contains(r.stderr, "--block-cache-bytes") || !strings.Contains(r.stderr, "at least 8MiB") {
				t.Errorf("%s --block-cache-bytes %s: %s", cmd, v, r)
			}
			if _, err := os.Stat(store); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s: a refused command left %s: %v", cmd, store, err)
			}
		}
	}
	store := filepath.Join(dir, "store")
	r := mustCLI(t, "ingest", "--data-dir", store, "--block-cache-bytes", "64MiB", file)
	if a, _ := summary(t, r); a != 3 {
		t.Fatalf("applied %d: %s", a, r)
	}
	wantStats(t, store, c.stats(3))
}

// TestIngestReplicationRetention: ingest --replication-retention N leaves a
// change log of the last N changes (a replica asking for an older one gets
// disk.ErrLogTruncated and bootstraps), with the same state as the default.
func TestIngestReplicationRetention(t *testing.T) {
	t.Parallel()
	c := newTestChain(10)
	dir := t.TempDir()
	file := writeJSONL(t, dir, "blocks.jsonl", c.blocks)
	for _, keep := range []uint64{0, 1, 3} {
		store := filepath.Join(dir, fmt.Sprint("store", keep))
		args := []string{"ingest", "--data-dir", store}
		if keep > 0 {
			args = append(args, "--replication-retention", fmt.Sprint(keep))
		}
		mustCLI(t, append(args, file)...)
		wantStats(t, store, c.stats(10))
		s, err := disk.Open(store, disk.Options{Derivers: node.IndexDerivers()})
		if err != nil {
			t.Fatal(err)
		}
		v, err := s.PublishedView()
		if err != nil {
			t.Fatal(err)
		}
		kept := keep
		if keep == 0 {
			kept = 10 // the rollback window is longer than the chain
		}
		if _, n, err := v.Changes(10-kept, 1<<30); err != nil || uint64(n) != kept {
			t.Errorf("retention %d: the changes after seq %d: %d, %v; want %d", keep, 10-kept, n, err, kept)
		}
		if kept < 10 {
			if _, _, err := v.Changes(10-kept-1, 1<<30); !errors.Is(err, disk.ErrLogTruncated) {
				t.Errorf("retention %d: the changes after seq %d: %v, want ErrLogTruncated", keep, 10-kept-1, err)
			}
		}
		v.Close()
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

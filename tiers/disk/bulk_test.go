package disk_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/internal/workload"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
	"github.com/utxo-cache/utxo-cache/writer"
)

// bulkChain generates a chain of the profile: seed blocks until about
// seedLive outputs are live, then ordinary blocks of txs transactions.
func bulkChain(t *testing.T, profile workload.Profile, seed int64, seedLive, ordinary, txs int) []*chain.Block {
	t.Helper()
	gen, err := workload.New(workload.Options{Seed: seed, Profile: profile, TxsPerBlock: txs, Addresses: 500})
	if err != nil {
		t.Fatal(err)
	}
	var blocks []*chain.Block
	for gen.Live() < seedLive {
		blocks = append(blocks, gen.NextSeed(200))
	}
	for range ordinary {
		blocks = append(blocks, gen.Next())
	}
	return blocks
}

// applyWindows applies blocks through a writer in catch-up windows, as
// ingest does (a target above every block), in backlogs of 16.
func applyWindows(t *testing.T, st *disk.Store, wo writer.Options, blocks []*chain.Block) error {
	t.Helper()
	wo.WindowBlocks = 8
	w := writer.New(st, wo)
	defer w.Close()
	for len(blocks) > 0 {
		n := min(16, len(blocks))
		if _, err := w.ApplyBlocks(context.Background(), blocks[:n], 1<<62); err != nil {
			return err
		}
		blocks = blocks[n:]
	}
	return nil
}

// rereader reads blocks again for a bulk load (BulkOptions.Reread).
func rereader(blocks []*chain.Block) func(uint64, func(*chain.Block) error) error {
	return func(from uint64, fn func(*chain.Block) error) error {
		for _, b := range blocks[from-blocks[0].Height:] {
			if err := fn(b); err != nil {
				return err
			}
		}
		return nil
	}
}

// bulkThenWindows loads blocks into st with a bulk load, all but the last
// tail, and applies those through windows.
func bulkThenWindows(t *testing.T, st *disk.Store, wo writer.Options, blocks []*chain.Block, mem int, tail uint64) (disk.State, error) {
	t.Helper()
	l, err := st.NewBulkLoad(disk.BulkOptions{MemBytes: mem, SkipUnknownInputs: wo.SkipUnknownInputs, Reread: rereader(blocks)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := l.Close(); err != nil {
			t.Error(err)
		}
	}()
	for _, b := range blocks {
		if err := l.Add(b); err != nil {
			return disk.State{}, err
		}
	}
	below := l.Tip().Height + 1 - tail
	loaded, err := l.Finish(context.Background(), below)
	if err != nil {
		return disk.State{}, err
	}
	created, spent := l.Changes()
	wantCreated, wantSpent := countChanges(blocks[:below-blocks[0].Height])
	if created != wantCreated || spent != wantSpent {
		t.Fatalf("bulk load counts %d created and %d spent, the blocks %d and %d", created, spent, wantCreated, wantSpent)
	}
	// All in the bottom level but the state row's table (over the first
	// rows, flushed to level 0).
	if levels := disk.TableLevels(st); levels[len(levels)-1] < 2 || slices.Max(levels[1:len(levels)-1]) > 0 {
		t.Fatalf("tables per level after the bulk load: %v, want them in the bottom level", levels)
	}
	return loaded, applyWindows(t, st, wo, blocks[below-blocks[0].Height:])
}

// countChanges counts the outputs blocks create and spend as the writer
// counts each block (an output created and spent in one block in neither,
// an input that spends no live output in neither).
func countChanges(blocks []*chain.Block) (created, spent uint64) {
	live := map[chain.OutPoint]uint64{} // → the height that created it
	for _, b := range blocks {
		for i := range b.Txs {
			tx := &b.Txs[i]
			for _, op := range tx.Spends() {
				h, ok := live[op]
				switch {
				case !ok:
				case h == b.Height:
					created--
				default:
					spent++
				}
				delete(live, op)
			}
			tx.Creates(func(index uint32, _ *chain.Output, _ bool) {
				live[chain.OutPoint{TxHash: tx.Hash, Index: index}] = b.Height
				created++
			})
		}
	}
	return created, spent
}

// compareRows fails unless both stores hold the same rows, byte for byte.
func compareRows(t *testing.T, what string, a, b *disk.Store) {
	t.Helper()
	ra, rb := disk.RawRows(t, a), disk.RawRows(t, b)
	perPrefix := func(rows []disk.Row) map[byte]int {
		m := map[byte]int{}
		for _, r := range rows {
			m[r.Key[0]]++
		}
		return m
	}
	for i := 0; i < min(len(ra), len(rb)); i++ {
		if !bytes.Equal(ra[i].Key, rb[i].Key) || !bytes.Equal(ra[i].Value, rb[i].Value) {
			t.Fatalf("%s: row %d differs:\n windows %x = %x\n bulk    %x = %x\nrows per prefix: windows %v, bulk %v",
				what, i, ra[i].Key, ra[i].Value, rb[i].Key, rb[i].Value, perPrefix(ra), perPrefix(rb))
		}
	}
	if len(ra) != len(rb) {
		t.Fatalf("%s: windows store holds %d rows, bulk %d (per prefix: %v, %v)", what, len(ra), len(rb), perPrefix(ra), perPrefix(rb))
	}
}

func openStore(t *testing.T, opts disk.Options) *disk.Store {
	t.Helper()
	st, err := disk.Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	})
	return st
}

// TestBulkLoadEqualsWindows imports the same chain into two stores, one
// through catch-up windows only, the other by a bulk load of all its
// blocks, or all but the last few (which windows then apply), and requires
// every row of the two to be equal, byte for byte: outputs, every index
// row, balance and asset rows, block rows, undo deltas, spent records and
// spent-at lists, the change log and the state row. Then both roll back as
// deep as they may and take the same blocks again, and must still be
// equal. Small buffers make the sorts spill many runs.
func TestBulkLoadEqualsWindows(t *testing.T) {
	cases := []bulkCase{
		{name: "cardano-indexes", profile: workload.Cardano, opts: cardanoIndexes, mem: 64 << 10, tails: []uint64{0, 4, 10}},
		{name: "bitcoin", profile: workload.Bitcoin, mem: 1 << 30, tails: []uint64{0, 4, 10}},
		{name: "cardano-long-log", profile: workload.Cardano, opts: withLog(cardanoIndexes, 40), mem: 256 << 10, tails: []uint64{0}},
		{name: "mid-chain-skip-unknown", profile: workload.Bitcoin, wo: writer.Options{SkipUnknownInputs: true}, skip: 7, mem: 64 << 10, tails: []uint64{0, 10}},
		{name: "self-contained-undo", profile: workload.Cardano, opts: disk.Options{UndoMode: disk.UndoSelfContained}, mem: 1 << 30, tails: []uint64{0}},
		{name: "no-change-log", profile: workload.Bitcoin, opts: disk.Options{NoChangeLog: true}, mem: 1 << 30, tails: []uint64{0}},
	}
	for _, c := range cases {
		// Blocks left to the writer: none, fewer than the rollback window,
		// more than the prune depth and the rollback window together.
		for _, tail := range c.tails {
			c := c
			c.name = fmt.Sprintf("%s/tail=%d", c.name, tail)
			c.tail = tail
			testBulkLoadEqualsWindows(t, c)
		}
	}
}

type bulkCase struct {
	name    string
	profile workload.Profile
	opts    disk.Options
	wo      writer.Options
	skip    int // blocks of the chain left out at its start
	mem     int
	tails   []uint64 // each a run: blocks left to the writer
	tail    uint64
}

func testBulkLoadEqualsWindows(t *testing.T, c bulkCase) {
	t.Run(c.name, func(t *testing.T) {
		t.Parallel()
		opts := c.opts
		opts.PruneDepth, opts.RollbackWindow = 3, 6
		blocks := bulkChain(t, c.profile, 5, 4000, 60, 30)[c.skip:]
		a, b := openStore(t, opts), openStore(t, opts)
		if err := applyWindows(t, a, c.wo, blocks); err != nil {
			t.Fatal(err)
		}
		loaded, err := bulkThenWindows(t, b, c.wo, blocks, c.mem, c.tail)
		if err != nil {
			t.Fatal(err)
		}
		if loaded.UtxoCount == 0 || loaded.Seq == 0 {
			t.Fatalf("bulk load loaded nothing: %+v", loaded)
		}
		if c.wo.SkipUnknownInputs && a.State().SkippedInputs == 0 {
			t.Fatal("no input skipped: the case tests nothing")
		}
		if sa, sb := a.State(), b.State(); sa != sb {
			t.Fatalf("states differ:\n windows %+v\n bulk    %+v", sa, sb)
		}
		compareRows(t, "after the import", a, b)

		// As deep as a rollback may go, then the same blocks again.
		tip := a.State().Tip.Height
		target := tip - opts.RollbackWindow
		again := blocks[target+1-blocks[0].Height:]
		for _, st := range []*disk.Store{a, b} {
			w := writer.New(st, c.wo)
			if _, err := w.Rollback(context.Background(), target); err != nil {
				t.Fatal(err)
			}
			w.Close()
		}
		compareRows(t, "after a rollback", a, b)
		for _, st := range []*disk.Store{a, b} {
			if err := applyWindows(t, st, c.wo, again); err != nil {
				t.Fatal(err)
			}
		}
		compareRows(t, "after the blocks again", a, b)
	})
}

func withLog(o disk.Options, retention uint64) disk.Options {
	o.LogRetention = retention
	return o
}

// TestBulkLoadRefusesBadBlocks: a chain with a bad block, bulk loaded,
// gives the error the writer gives it (the same kind, at the same block)
// and leaves the store empty.
func TestBulkLoadRefusesBadBlocks(t *testing.T) {
	good := bulkChain(t, workload.Bitcoin, 9, 2000, 30, 20)
	const bad = 20 // the index of the bad block
	faults := map[string]func(blocks []*chain.Block){
		"unknown input": func(blocks []*chain.Block) {
			blocks[bad].Txs[3].Inputs[0] = chain.OutPoint{TxHash: chain.Hash{0xee}, Index: 1}
		},
		"spent twice in a block": func(blocks []*chain.Block) {
			blocks[bad].Txs[5].Inputs[0] = blocks[bad].Txs[2].Inputs[1]
		},
		"spent in an earlier block": func(blocks []*chain.Block) {
			blocks[bad].Txs[4].Inputs[1] = blocks[bad-3].Txs[6].Inputs[0]
		},
		"created while live": func(blocks []*chain.Block) {
			tx := blocks[bad-5].Txs[0] // a coinbase, whose outputs are still live
			blocks[bad].Txs = append(blocks[bad].Txs, tx)
		},
		"not the next block": func(blocks []*chain.Block) {
			blocks[bad].PrevHash = chain.Hash{0x01}
		},
		// An unknown input in a block before one that does not link: the
		// earlier block's error is the one given.
		"unknown input before a broken link": func(blocks []*chain.Block) {
			blocks[bad-2].Txs[3].Inputs[0] = chain.OutPoint{TxHash: chain.Hash{0xee}, Index: 1}
			blocks[bad].PrevHash = chain.Hash{0x01}
		},
	}
	for name, fault := range faults {
		t.Run(name, func(t *testing.T) {
			blocks := make([]*chain.Block, len(good))
			for i, b := range good {
				c := *b
				c.Txs = slices.Clone(b.Txs)
				for j := range c.Txs {
					c.Txs[j].Inputs = slices.Clone(c.Txs[j].Inputs)
				}
				blocks[i] = &c
			}
			fault(blocks)
			opts := disk.Options{PruneDepth: 3, RollbackWindow: 6}
			a, b := openStore(t, opts), openStore(t, opts)
			werr := applyWindows(t, a, writer.Options{}, blocks)
			if werr == nil {
				t.Fatal("the writer took the bad chain: the case tests nothing")
			}
			_, berr := bulkLoadAll(t, b, blocks)
			if berr == nil {
				t.Fatalf("bulk load took the bad chain; the writer said %v", werr)
			}
			for _, kind := range []error{chain.ErrUnknownInput, chain.ErrDoubleSpend, chain.ErrDuplicateOutpoint, chain.ErrNotNextBlock} {
				if errors.Is(werr, kind) != errors.Is(berr, kind) {
					t.Fatalf("errors differ in kind:\n writer %v\n bulk   %v", werr, berr)
				}
			}
			if h := failedHeight(werr); !strings.Contains(berr.Error(), h) {
				t.Fatalf("bulk error %q does not name %q, as the writer's does: %v", berr, h, werr)
			}
			if st := b.State(); !st.Tip.Empty || st.Seq != 0 || st.UtxoCount != 0 {
				t.Fatalf("after a refused bulk load the store is at %+v, want empty", st)
			}
			for _, r := range disk.RawRows(t, b) {
				if r.Key[0] != 0x01 {
					t.Fatalf("after a refused bulk load the store holds row %x", r.Key)
				}
			}
		})
	}
}

// bulkLoadAll bulk loads every block (a depth of 0 below the tip).
func bulkLoadAll(t *testing.T, st *disk.Store, blocks []*chain.Block) (disk.State, error) {
	t.Helper()
	l, err := st.NewBulkLoad(disk.BulkOptions{MemBytes: 64 << 10, Reread: rereader(blocks)})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, b := range blocks {
		if err := l.Add(b); err != nil {
			// As ingest does: the blocks before a block that does not
			// link are checked for an earlier refusal.
			if cerr := l.Check(context.Background()); cerr != nil {
				return disk.State{}, cerr
			}
			return disk.State{}, err
		}
	}
	return l.Finish(context.Background(), l.Tip().Height+1)
}

// failedHeight is "block N" of the writer's error.
func failedHeight(err error) string {
	var h uint64
	s := err.Error()
	i := strings.Index(s, "block ")
	if i < 0 {
		return s
	}
	fmt.Sscanf(s[i:], "block %d", &h)
	return fmt.Sprintf("block %d ", h)
}

// TestBulkLoadRefusesAStoreWithBlocks: a bulk load fills an empty store
// only.
func TestBulkLoadRefusesAStoreWithBlocks(t *testing.T) {
	blocks := bulkChain(t, workload.Bitcoin, 3, 500, 2, 10)
	st := openStore(t, disk.Options{})
	if err := applyWindows(t, st, writer.Options{}, blocks[:1]); err != nil {
		t.Fatal(err)
	}
	if _, err := st.NewBulkLoad(disk.BulkOptions{}); !errors.Is(err, disk.ErrBulkRefused) {
		t.Fatalf("bulk load of a store with a block: %v, want ErrBulkRefused", err)
	}
	counting := openStore(t, disk.Options{Counters: true})
	if _, err := counting.NewBulkLoad(disk.BulkOptions{}); !errors.Is(err, disk.ErrBulkRefused) {
		t.Fatalf("bulk load of a store with counters: %v, want ErrBulkRefused", err)
	}
}

// TestBulkLoadRemovesAKilledLoadsFiles: a load killed before its Close
// leaves its directory in the store's; the next load removes it, and its
// own Close removes its own.
func TestBulkLoadRemovesAKilledLoadsFiles(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, "bulk-load-12345")
	if err := os.MkdirAll(stale, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(stale, "run-000001"), []byte("left over"), 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := disk.Open(dir, disk.Options{NoChangeLog: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	l, err := st.NewBulkLoad(disk.BulkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatalf("a killed load's directory is still there: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "bulk-load-*")); len(left) != 0 {
		t.Fatalf("after Close: %v", left)
	}
}

// TestBulkLoadFinishFailsCleanly: a cancelled context, and blocks that
// read differently the second time (the change log's), fail Finish with
// the store left empty.
func TestBulkLoadFinishFailsCleanly(t *testing.T) {
	blocks := bulkChain(t, workload.Bitcoin, 11, 500, 12, 10)
	changed := make([]*chain.Block, len(blocks))
	copy(changed, blocks)
	last := *blocks[len(blocks)-1]
	last.Hash = chain.Hash{0x42}
	changed[len(changed)-1] = &last
	for name, tc := range map[string]struct {
		ctx    func() context.Context
		reread []*chain.Block
		want   string
	}{
		"cancelled": {ctx: func() context.Context {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx
		}, reread: blocks, want: context.Canceled.Error()},
		"blocks changed": {ctx: context.Background, reread: changed, want: "the blocks changed"},
	} {
		t.Run(name, func(t *testing.T) {
			st := openStore(t, disk.Options{PruneDepth: 3, RollbackWindow: 6})
			l, err := st.NewBulkLoad(disk.BulkOptions{MemBytes: 64 << 10, Reread: rereader(tc.reread)})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			for _, b := range blocks {
				if err := l.Add(b); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := l.Finish(tc.ctx(), l.Tip().Height+1); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Finish: %v, want an error saying %q", err, tc.want)
			}
			if s := st.State(); !s.Tip.Empty || s.Seq != 0 {
				t.Fatalf("after a failed Finish the store is at %+v", s)
			}
			for _, r := range disk.RawRows(t, st) {
				if r.Key[0] != 0x01 {
					t.Fatalf("after a failed Finish the store holds row %x", r.Key)
				}
			}
		})
	}
}

// freeSpace is a file system's free bytes as a test sets them.
type freeSpace struct{ free uint64 }

func (f *freeSpace) AvailableBytes() (uint64, error) { return f.free, nil }

// TestBulkLoadKeepsItsReserve: a load whose next run or table would leave
// less than its reserve free stops with ErrBulkNoSpace, nothing loaded: a
// spill while the blocks are added, or, with a buffer that never spills,
// the first table.
func TestBulkLoadKeepsItsReserve(t *testing.T) {
	blocks := bulkChain(t, workload.Bitcoin, 13, 2000, 10, 20)
	for name, mem := range map[string]int{"a sorted run": 64 << 10, "a table": 1 << 30} {
		t.Run(name, func(t *testing.T) {
			st := openStore(t, disk.Options{PruneDepth: 3, RollbackWindow: 6})
			space := &freeSpace{free: 100 << 20}
			l, err := st.NewBulkLoad(disk.BulkOptions{MemBytes: mem, Reread: rereader(blocks), Space: space, Reserve: 100<<20 - 1<<10})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			for _, b := range blocks {
				if err = l.Add(b); err != nil {
					break
				}
			}
			if err == nil {
				_, err = l.Finish(context.Background(), l.Tip().Height+1)
			}
			if !errors.Is(err, disk.ErrBulkNoSpace) {
				t.Fatalf("load with 1 KiB above its reserve: %v, want ErrBulkNoSpace", err)
			}
			if s := st.State(); !s.Tip.Empty || s.Seq != 0 {
				t.Fatalf("after a refused load the store is at %+v", s)
			}
		})
	}
}

package disk_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/internal/workload"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
	"github.com/utxo-cache/utxo-cache/writer"
)

// TestWindowMemoryEstimate holds Store.WindowBlockBytes, the estimate the
// writer bounds a catch-up window's memory with (--catch-up-bytes), to the
// heap a window really holds at its peak: once its whole batch is built,
// before Pebble commits it (the overlay, every block's records and undo
// delta, the sorted writes and Pebble's copy of them). The window takes
// 300-transaction blocks, as the apply benchmark's, with undo deltas and
// spent records kept for every block (the most a window holds): of the
// bitcoin profile, of the cardano profile (longer addresses, assets, some
// datums), and of the cardano profile with a 4 KiB datum on the first
// output of every transaction (outputs whose size the estimate must follow);
// the cardano ones also on a store with every Cardano index (payment and
// stake credential, policy, asset), where an output is written once more
// under each value it is indexed by.
func TestWindowMemoryEstimate(t *testing.T) {
	if testing.Short() {
		t.Skip("builds stores of 20,000 UTXOs")
	}
	if raceEnabled {
		// make test runs it without the race detector (NORACE_TESTS): it
		// measures one goroutine's heap, at a tenth of the time.
		t.Skip("the race detector's instrumentation makes heap figures meaningless")
	}
	for _, c := range []struct {
		name    string
		profile workload.Profile
		datum   int
		opts    disk.Options
	}{
		{"bitcoin", workload.Bitcoin, 0, disk.Options{}},
		{"cardano", workload.Cardano, 0, disk.Options{}},
		{"cardano-4KiB-datums", workload.Cardano, 4 << 10, disk.Options{}},
		{"cardano-indexes", workload.Cardano, 0, cardanoIndexes},
		{"cardano-indexes-4KiB-datums", workload.Cardano, 4 << 10, cardanoIndexes},
	} {
		t.Run(c.name, func(t *testing.T) { testWindowMemory(t, c.profile, c.datum, c.opts) })
	}
}

func testWindowMemory(t *testing.T, profile workload.Profile, datum int, opts disk.Options) {
	ctx := context.Background()
	gen, err := workload.New(workload.Options{Seed: 11, Profile: profile})
	if err != nil {
		t.Fatal(err)
	}
	st, w := seeded(t, gen, opts, writer.Options{WindowBlocks: 1000, WindowBytes: 1 << 40, LiveMargin: 1}, 20_000, 5_000)
	blocks := make([]*chain.Block, 40)
	var estimate int64 // the window's (all blocks but the last), as the writer counts it
	changes := 0
	for i := range blocks {
		b := gen.Next()
		blocks[i] = b
		if datum > 0 {
			for j := range b.Txs {
				if outs := b.Txs[j].Outputs; len(outs) > 0 {
					outs[0].Datum, outs[0].DatumHash = make([]byte, datum), nil
				}
			}
		}
		if i == len(blocks)-1 {
			break
		}
		estimate += st.WindowBlockBytes(b)
		for j := range b.Txs {
			changes += len(b.Txs[j].Spends()) + len(b.Txs[j].Outputs) + 1
		}
	}

	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := ms.HeapAlloc
	var peak uint64
	disk.OnBatchBuilt(st, func() {
		runtime.GC()
		runtime.ReadMemStats(&ms)
		peak = max(peak, ms.HeapAlloc)
	})
	res, err := w.ApplyBlocks(ctx, blocks, blocks[len(blocks)-1].Height)
	disk.OnBatchBuilt(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Windows != 1 || res.WindowBlocks != len(blocks)-1 {
		t.Fatalf("%d windows of %d blocks in all; want one of %d (the last block goes alone)", res.Windows, res.WindowBlocks, len(blocks)-1)
	}
	if peak < before {
		t.Fatalf("heap at the window's peak %d < %d before it: the hook did not run", peak, before)
	}
	used := int64(peak - before)
	t.Logf("window of %d blocks, %d inputs and outputs: %d bytes at its peak, %.0f each; estimate %d (%.0f%%)",
		res.WindowBlocks, changes, used, float64(used)/float64(changes), estimate, 100*float64(used)/float64(estimate))
	if used > estimate {
		t.Errorf("a window held %d bytes at its peak, more than the %d Store.WindowBlockBytes promises: --catch-up-bytes would not bound its memory",
			used, estimate)
	}
}

// TestWindowTooLargeToSort checks what becomes of a window whose writes go
// past what a sorted batch can hold (32-bit offsets; lowered here): the
// commit refuses it with nothing written, without failing the store, and
// the writer applies its blocks one by one, to the state a store that never
// made windows reaches.
func TestWindowTooLargeToSort(t *testing.T) {
	ctx := context.Background()
	apply := func(limit int, windows bool) (disk.State, writer.BatchResult) {
		gen, err := workload.New(workload.Options{Seed: 5, Profile: workload.Bitcoin, TxsPerBlock: 40})
		if err != nil {
			t.Fatal(err)
		}
		opts := writer.Options{WindowBlocks: 1000, WindowBytes: 1 << 40, LiveMargin: 1}
		if !windows {
			opts.WindowBytes = -1
		}
		st, w := seeded(t, gen, disk.Options{}, opts, 2_000, 500)
		blocks := make([]*chain.Block, 12)
		for i := range blocks {
			blocks[i] = gen.Next()
		}
		disk.SetBatchLimit(st, limit)
		res, err := w.ApplyBlocks(ctx, blocks, blocks[len(blocks)-1].Height+100)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Failed(); err != nil {
			t.Fatalf("store failed: %v", err)
		}
		return st.Published(), res
	}
	want, _ := apply(0, false)
	got, res := apply(128<<10, true)
	if res.Windows != 0 || res.Applied != 12 {
		t.Fatalf("%d windows, %d blocks applied; want none (every window too large) and 12 applied one by one", res.Windows, res.Applied)
	}
	if got.Tip != want.Tip || got.UtxoCount != want.UtxoCount || got.Digest != want.Digest || got.Seq != want.Seq {
		t.Fatalf("after the refused windows: %+v; applied one by one: %+v", got, want)
	}
	// The same blocks fit a sorted batch at the default limit.
	if _, res := apply(0, true); res.Windows != 1 {
		t.Fatalf("%d windows at the default limit; want 1", res.Windows)
	}
}

// seeded opens a store of so in a new directory with a writer of opts, and
// applies gen's seed blocks of seedOutputs outputs each until gen holds
// live UTXOs. Both are closed when t ends.
func seeded(t *testing.T, gen *workload.Generator, so disk.Options, opts writer.Options, live, seedOutputs int) (*disk.Store, *writer.Writer) {
	t.Helper()
	st, err := disk.Open(t.TempDir(), so)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	w := writer.New(st, opts)
	t.Cleanup(func() { w.Close() }) // before the store's: cleanups run last first
	for gen.Live() < live {
		if _, err := w.Apply(context.Background(), gen.NextSeed(seedOutputs)); err != nil {
			t.Fatal(err)
		}
	}
	return st, w
}

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

// TestWindowMemoryEstimate holds disk.WindowChangeBytes, the estimate the
// writer bounds a catch-up window's memory with (--catch-up-bytes), to the
// heap a window really holds at its peak: once its whole batch is built,
// before Pebble commits it (the overlay, every block's records and undo
// delta, the sorted writes and Pebble's copy of them). The window takes
// 300-transaction blocks of the bitcoin profile, as the apply benchmark's,
// with undo deltas and spent records kept for every block (the most a
// window holds).
func TestWindowMemoryEstimate(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a store of 20,000 UTXOs")
	}
	ctx := context.Background()
	gen, err := workload.New(workload.Options{Seed: 11, Profile: workload.Bitcoin})
	if err != nil {
		t.Fatal(err)
	}
	st, err := disk.Open(t.TempDir(), disk.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	w := writer.New(st, writer.Options{WindowBlocks: 1000, WindowBytes: 1 << 40, LiveMargin: 1})
	defer w.Close()
	for gen.Live() < 20_000 {
		if _, err := w.Apply(ctx, gen.NextSeed(5_000)); err != nil {
			t.Fatal(err)
		}
	}
	blocks := make([]*chain.Block, 40)
	changes := 0 // the window's (all blocks but the last), as the writer counts them
	for i := range blocks {
		blocks[i] = gen.Next()
		if i == len(blocks)-1 {
			break
		}
		for j := range blocks[i].Txs {
			tx := &blocks[i].Txs[j]
			changes += len(tx.Spends()) + len(tx.Outputs) + 1
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
	used := float64(peak-before) / float64(changes)
	t.Logf("window of %d blocks, %d inputs and outputs: %.0f bytes each at its peak (estimate %d)", res.WindowBlocks, changes, used, disk.WindowChangeBytes)
	if used > disk.WindowChangeBytes {
		t.Errorf("a window held %.0f bytes per input or output at its peak, more than the %d bytes disk.WindowChangeBytes promises: --catch-up-bytes would not bound its memory",
			used, disk.WindowChangeBytes)
	}
}

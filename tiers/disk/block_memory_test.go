package disk_test

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"runtime"
	"testing"

	"github.com/utxo-cache/utxo-cache/cache"
	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/query"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
	"github.com/utxo-cache/utxo-cache/writer"
)

// heapNow is the heap in use after two full collections (the second
// empties the sync.Pools, whose items survive one).
func heapNow() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// peakTier is a cache tier that measures the heap while the writer
// invalidates a change (the publish step: the change set and the guards
// built from it are alive).
type peakTier struct{ peak *uint64 }

func (peakTier) Name() string { return "peak" }
func (peakTier) Get(context.Context, string, string) (cache.Entry, bool) {
	return cache.Entry{}, false
}
func (peakTier) Set(context.Context, string, string, cache.Entry) {}
func (p peakTier) Invalidate(context.Context, uint64, []string) error {
	*p.peak = max(*p.peak, heapNow())
	return nil
}

// bigBlocks returns a block of txs transactions of outs outputs each, every
// output to its own address of addrLen bytes (the most a block's outputs
// cost: every one a new address, a new balance row), and the next block,
// which spends every one of them in txs transactions of one output each.
func bigBlocks(height uint64, txs, outs, addrLen int) (create, spend *chain.Block) {
	hash := func(kind byte, i int) chain.Hash {
		var h chain.Hash
		h[0] = kind
		binary.BigEndian.PutUint64(h[1:], height)
		binary.BigEndian.PutUint64(h[9:], uint64(i))
		h[31] = 1
		return h
	}
	create = &chain.Block{Height: height, Hash: hash(0xb0, 0), PrevHash: hash(0xb0, -1)}
	spend = &chain.Block{Height: height + 1, Hash: hash(0xb1, 0), PrevHash: create.Hash}
	for i := range txs {
		tx := chain.Tx{Hash: hash(0xa0, i), Outputs: make([]chain.Output, outs)}
		for j := range tx.Outputs {
			tx.Outputs[j] = chain.Output{Address: fmt.Sprintf("addr1q%0*d", addrLen-6, i*outs+j), Value: 1_000_000}
		}
		create.Txs = append(create.Txs, tx)
		in := chain.Tx{Hash: hash(0xa1, i), Inputs: make([]chain.OutPoint, outs),
			Outputs: []chain.Output{{Address: fmt.Sprintf("addr1q%0*d", addrLen-6, i), Value: uint64(outs)}}}
		for j := range in.Inputs {
			in.Inputs[j] = chain.OutPoint{TxHash: tx.Hash, Index: uint32(j)}
		}
		spend.Txs = append(spend.Txs, in)
	}
	return create, spend
}

// blockPhases is the heap one block takes through each step, above the
// heap before its body arrived.
type blockPhases struct {
	body, decoded, commit, publish, after int64
}

// peak is the most the block held at once.
func (ph blockPhases) peak() int64 { return max(ph.body, ph.decoded, ph.commit, ph.publish) }

// applyMeasured applies the JSON block body through w, as the API does
// (decode, then Apply), and returns the heap each step held above before.
// The body and the block are dropped before the last figure.
func applyMeasured(t *testing.T, st *disk.Store, w *writer.Writer, body []byte, invalidatePeak *uint64, before uint64) blockPhases {
	t.Helper()
	above := func(v uint64) int64 { return int64(v) - int64(before) }
	var ph blockPhases
	ph.body = above(heapNow())
	b, err := chain.DecodeBlockJSON(body, chain.Limits{MaxBlockMemory: 1 << 40})
	if err != nil {
		t.Fatal(err)
	}
	ph.decoded = above(heapNow())
	var peak uint64
	disk.OnBatchBuilt(st, func() { peak = max(peak, heapNow()) })
	*invalidatePeak = 0
	if _, err := w.Apply(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	disk.OnBatchBuilt(st, nil)
	ph.commit = above(peak)
	ph.publish = above(*invalidatePeak)
	return ph
}

// TestBlockMemory measures the heap a large block takes on its way through
// the writer: its body, the decoded block, the commit's batch (its peak,
// once built), the invalidation before the publish (the change set and the
// guards built from it). It holds the peak to the body's size plus
// chain.BlockMemory, the estimate the decoders refuse a block over
// Limits.MaxBlockMemory with, and checks that the memory goes back once
// the block is acknowledged, and once it is rolled back.
//
// A block of outputs, each to a new address (of 60 bytes, then of 1,000),
// then a block that spends them all: what one output and one input cost at
// most. The store's bounded caches (the young-output view, the balance
// cache) are small and full before the blocks, as on a node that has run
// for a while: a block replaces their entries, it does not grow them.
// Pebble's background compactions are off: they would blur the figures.
func TestBlockMemory(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's instrumentation makes heap figures meaningless")
	}
	cases := []struct{ txs, outs, addrLen int }{{40, 500, 60}, {20, 300, 1000}}
	if *blockMemoryTxs > 0 {
		cases = []struct{ txs, outs, addrLen int }{{*blockMemoryTxs, 500, 60}}
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("outputs=%d/address=%d", c.txs*c.outs, c.addrLen), func(t *testing.T) {
			testBlockMemory(t, c.txs, c.outs, c.addrLen)
		})
	}
}

// blockMemoryTxs replaces TestBlockMemory's blocks by one pair of that
// many transactions of 500 outputs (and of 500 inputs), to measure a block
// at a budget's limit: 700 transactions make a block of 350,000 outputs,
// about the most the default budget of 1 GiB admits.
var blockMemoryTxs = flag.Int("block-memory-txs", 0, "TestBlockMemory: transactions of 500 outputs in the measured blocks (0: the test's own cases)")

// everydayBytes bounds what a store keeps between blocks whatever their
// size: the reused buffers of an everyday block (the change-log record's,
// up to 1 MiB; the dedup maps), Pebble's log buffers of records up to
// 4 MiB and its compression buffers.
const everydayBytes = 6 << 20

func testBlockMemory(t *testing.T, txs, outs, addrLen int) {
	ctx := context.Background()
	st, err := disk.Open(t.TempDir(), disk.WithoutCompactions(disk.Options{RecentOutputs: 2000, BalanceCache: 2000}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	w := writer.New(st, writer.Options{})
	t.Cleanup(func() { w.Close() })
	var invalidatePeak uint64
	w.Subscribe(query.New(st, query.Options{Tiers: []cache.Tier{peakTier{&invalidatePeak}}}))

	// Ordinary blocks first: the caches fill, and the store's reused
	// buffers take their everyday size.
	warm, warmSpend := bigBlocks(1, 10, 300, addrLen)
	warm.PrevHash = chain.Hash{}
	for _, b := range []*chain.Block{warm, warmSpend} {
		if _, err := w.Apply(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	create, spend := bigBlocks(3, txs, outs, addrLen)
	create.PrevHash = warmSpend.Hash
	bodies := [][]byte{chain.AppendBlockJSON(nil, create), chain.AppendBlockJSON(nil, spend)}
	estimates := []int64{int64(len(bodies[0])) + chain.BlockMemory(create), int64(len(bodies[1])) + chain.BlockMemory(spend)}
	create, spend = nil, nil
	n := txs * outs

	start := heapNow()
	for i, what := range []string{"outputs", "inputs"} {
		before := heapNow()
		body := append([]byte(nil), bodies[i]...)
		ph := applyMeasured(t, st, w, body, &invalidatePeak, before)
		body = nil
		disk.WaitLargeCommitFlushed(st)
		ph.after = int64(heapNow()) - int64(before)
		if what == "inputs" {
			// An apply's change-log record carries the outputs the block
			// spent (chain.Change.Spent), which the block's own bytes cannot
			// bound: the commit builds it in about three copies (each
			// output's encoding, the record, the batch's copy of it).
			v, err := st.PublishedView()
			if err != nil {
				t.Fatal(err)
			}
			rec, err := v.ChangeRecord(v.State().Seq)
			v.Close()
			if err != nil {
				t.Fatal(err)
			}
			c, _, err := chain.DecodeChangeCBOR(rec, chain.Limits{MaxBlockMemory: 1 << 40})
			if err != nil {
				t.Fatal(err)
			}
			spentBytes := len(rec) - len(chain.AppendBlockCBOR(nil, c.Block))
			t.Logf("the change record carries %d bytes of spent outputs", spentBytes)
			estimates[i] += 3 * int64(spentBytes)
		}
		per := func(v int64) float64 { return float64(v) / float64(n) }
		t.Logf("%d %s (%d bytes of JSON each): heap per item: body %.0f, decoded %.0f, commit %.0f, publish %.0f; peak %.0f, estimate %.0f; kept after: %d bytes",
			n, what, len(bodies[i])/n, per(ph.body), per(ph.decoded), per(ph.commit), per(ph.publish), per(ph.peak()), per(estimates[i]), ph.after)
		if ph.peak() > estimates[i] {
			t.Errorf("the block of %s held %d bytes at its peak, more than its body and the %d chain.BlockMemory estimates: --max-block-memory would not bound it",
				what, ph.peak(), estimates[i])
		}
		// A batch over half the memtable (a block of more than some 65,000
		// outputs at the default 64 MiB) goes to Pebble as a flushable
		// batch, whose memory Pebble's queue of memtables, re-sliced, keeps
		// reachable until its next flush (the next large commit, or a full
		// memtable): the measurement of a block that large (-block-memory-txs)
		// reports it and checks the heap once the next block is applied.
		if ph.after > everydayBytes && (*blockMemoryTxs == 0 || i == 1) {
			t.Errorf("the block of %s left %d bytes in use after its acknowledgement (its peak %d), more than the %d a store keeps between blocks",
				what, ph.after, ph.peak(), everydayBytes)
		}
		_ = body
	}
	if _, err := w.Rollback(ctx, 2); err != nil {
		t.Fatal(err)
	}
	disk.WaitLargeCommitFlushed(st)
	kept := int64(heapNow()) - int64(start)
	t.Logf("after rolling both back: %d bytes above the heap before them", kept)
	if kept > everydayBytes {
		t.Errorf("rolling the blocks back left %d bytes in use above the heap before them", kept)
	}
}

package writer

import (
	"context"
	"errors"
	"testing"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

// TestPruneBudget spends a backlog of outputs larger than the prune budget
// and checks, block by block, the Retention rules of tiers/disk (doc.go):
//
//   - a spent record reads as spent while tip - spent_height <= PruneDepth
//     and as not found after, whatever the pruning backlog;
//   - it is physically deleted only once tip - spent_height > PruneDepth +
//     RollbackWindow;
//   - no block deletes more than PruneBudget records, and the backlog still
//     drains: all spent records are eventually deleted.
//
// Records are spent at two heights, so that the budget runs out in the middle
// of one height's list and pruning resumes there and moves on to the next.
func TestPruneBudget(t *testing.T) {
	const (
		pruneDepth     = 2
		rollbackWindow = 2
		budget         = 3
		outputs        = 20
	)
	st, err := disk.Open(storeDir(t), disk.Options{
		PruneDepth: pruneDepth, RollbackWindow: rollbackWindow, PruneBudget: budget,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	w := New(st, Options{})
	defer w.Close()
	ctx := context.Background()

	funding := h(100)
	out := func(i int) chain.OutPoint { return chain.OutPoint{TxHash: funding, Index: uint32(i)} }
	spendTx := func(hash chain.Hash, from, to int) chain.Tx {
		tx := chain.Tx{Hash: hash, Outputs: []chain.Output{{Address: "sink", Value: 1}}}
		for i := from; i < to; i++ {
			tx.Inputs = append(tx.Inputs, out(i))
		}
		return tx
	}
	coinbase := chain.Tx{Hash: funding, Coinbase: true}
	for range outputs {
		coinbase.Outputs = append(coinbase.Outputs, chain.Output{Address: "alice", Value: 10})
	}

	// Height 1 creates the outputs; height 2 spends 0..10 and height 3
	// spends 11..14 (15 spent: five blocks' budget); 15..19 stay live.
	spentAt := make(map[chain.OutPoint]uint64)
	txsAt := map[uint64][]chain.Tx{
		1: {coinbase},
		2: {spendTx(h(101), 0, 11)},
		3: {spendTx(h(102), 11, 15)},
	}
	for height, txs := range txsAt {
		for _, tx := range txs {
			for _, op := range tx.Inputs {
				spentAt[op] = height
			}
		}
	}
	spent := uint64(len(spentAt))

	// Every spent record is deletable from tip firstPrunable on (its spent
	// height + PruneDepth + RollbackWindow + 1); at budget per block from
	// there, the last goes by tip drainedBy.
	const firstPrunable = 2 + pruneDepth + rollbackWindow + 1
	drainedBy := uint64(firstPrunable) + (spent+budget-1)/budget - 1

	before := st.Health().PrunedSpentRecords
	var prev chain.Hash
	for height := uint64(1); height <= drainedBy+3; height++ {
		b := &chain.Block{Height: height, Hash: h(byte(height)), PrevHash: prev, Txs: txsAt[height]}
		if _, err := w.Apply(ctx, b); err != nil {
			t.Fatalf("apply block %d: %v", height, err)
		}
		prev = b.Hash

		after := st.Health().PrunedSpentRecords
		delta := after - before
		before = after
		if delta > budget {
			t.Errorf("tip %d: block deleted %d spent records, budget %d", height, delta, budget)
		}
		if height < firstPrunable && after != 0 {
			t.Errorf("tip %d: %d spent records deleted, but none is older than PruneDepth + RollbackWindow (%d)",
				height, after, pruneDepth+rollbackWindow)
		}
		if height >= drainedBy && after != spent {
			t.Errorf("tip %d: %d of %d spent records deleted; at %d a block from tip %d, all should be by tip %d",
				height, after, spent, budget, firstPrunable, drainedBy)
		}
		checkRetention(t, st, height, pruneDepth, outputs, out, spentAt)
	}
}

// checkRetention reads every output of the test through a fresh view at tip
// and checks that each spent one shows exactly while tip - spent_height <=
// pruneDepth, and each live one shows unspent.
func checkRetention(t *testing.T, st *disk.Store, tip, pruneDepth uint64, outputs int,
	out func(int) chain.OutPoint, spentAt map[chain.OutPoint]uint64) {
	t.Helper()
	v, err := st.NewView()
	if err != nil {
		t.Fatalf("tip %d: view: %v", tip, err)
	}
	defer v.Close()
	if got := v.Tip().Height; got != tip {
		t.Fatalf("view tip %d, want %d", got, tip)
	}
	for i := range outputs {
		op := out(i)
		u, sp, err := v.Utxo(op)
		spentHeight, isSpent := spentAt[op]
		switch {
		case isSpent && tip < spentHeight:
			if err != nil || sp != nil {
				t.Errorf("tip %d: %s (spent later, at %d): spent=%v err=%v, want live", tip, op, spentHeight, sp, err)
			}
		case isSpent && tip-spentHeight <= pruneDepth:
			if err != nil || sp == nil || sp.Height != spentHeight {
				t.Errorf("tip %d: %s spent at %d: spent=%v err=%v, want its spent record", tip, op, spentHeight, sp, err)
			} else if u.OutPoint != op {
				t.Errorf("tip %d: %s read as %s", tip, op, u.OutPoint)
			}
		case isSpent:
			if !errors.Is(err, chain.ErrNotFound) {
				t.Errorf("tip %d: %s spent at %d (more than %d blocks ago): spent=%v err=%v, want not found",
					tip, op, spentHeight, pruneDepth, sp, err)
			}
		default:
			if err != nil || sp != nil {
				t.Errorf("tip %d: live %s: spent=%v err=%v", tip, op, sp, err)
			}
		}
	}
}

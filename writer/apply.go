package writer

import (
	"fmt"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

// apply validates and commits b. Writer goroutine only.
func (w *Writer) apply(b *chain.Block) (Result, error) {
	st := w.store.State()
	tip := st.Tip
	if done, err := w.alreadyApplied(tip, b); err != nil || done {
		return Result{Tip: tip, Seq: st.Seq}, err
	}
	if err := chain.CheckLinkage(tip, b); err != nil {
		return Result{Tip: tip, Seq: st.Seq}, err
	}
	txn, err := w.store.NewBlock(b)
	if err != nil {
		return Result{Tip: tip, Seq: st.Seq}, err
	}
	if err := w.fill(txn, b); err != nil {
		return Result{Tip: tip, Seq: st.Seq}, err
	}
	// The guard runs once the block is known valid (nothing is written
	// before Commit): an invalid block gets its own error, not 507.
	estimate := estimateBlock(b)
	if err := w.guard(estimate); err != nil {
		return Result{Tip: tip, Seq: st.Seq}, fmt.Errorf("block %d: %w", b.Height, err)
	}
	cs, err := txn.Commit()
	if err != nil {
		return Result{Tip: tip, Seq: st.Seq}, err
	}
	w.noteApplied(estimate)
	return Result{Applied: true, Tip: cs.NewTip, Seq: cs.Seq, Changes: cs}, nil
}

// fill validates b against what txn has seen so far and reports its spends
// and creations to txn. Writer goroutine only.
func (w *Writer) fill(txn *disk.BlockTxn, b *chain.Block) error {
	if err := txn.Prefetch(blockInputs(b)); err != nil {
		return fmt.Errorf("block %d: %w", b.Height, err)
	}
	spentInBlock := make(map[chain.OutPoint]struct{})
	for pos := range b.Txs {
		tx := &b.Txs[pos]
		for vin, in := range tx.Spends() {
			if _, twice := spentInBlock[in]; twice {
				return fmt.Errorf("block %d tx %s spends %s twice in the block: %w",
					b.Height, tx.Hash, in, chain.ErrDoubleSpend)
			}
			rec, found, err := txn.Lookup(in)
			if err != nil {
				return fmt.Errorf("block %d: %w", b.Height, err)
			}
			if !found || rec.Spent != nil {
				if w.opts.SkipUnknownInputs {
					txn.SkipInput()
					continue
				}
				return fmt.Errorf("block %d tx %s input %s is not a live unspent output: %w",
					b.Height, tx.Hash, in, chain.ErrUnknownInput)
			}
			spentInBlock[in] = struct{}{}
			if err := txn.Spend(in, tx.Hash, uint32(vin)); err != nil {
				return err
			}
		}
		var createErr error
		tx.Creates(func(index uint32, out *chain.Output, collateral bool) {
			if createErr != nil {
				return
			}
			createErr = w.create(txn, b, uint32(pos), tx, index, out, collateral)
		})
		if createErr != nil {
			return createErr
		}
	}
	return nil
}

// blockInputs lists the outpoints b's transactions spend, in block order.
func blockInputs(b *chain.Block) []chain.OutPoint {
	n := 0
	for i := range b.Txs {
		n += len(b.Txs[i].Spends())
	}
	ops := make([]chain.OutPoint, 0, n)
	for i := range b.Txs {
		ops = append(ops, b.Txs[i].Spends()...)
	}
	return ops
}

func (w *Writer) create(txn *disk.BlockTxn, b *chain.Block, pos uint32, tx *chain.Tx, index uint32, out *chain.Output, collateral bool) error {
	op := chain.OutPoint{TxHash: tx.Hash, Index: index}
	rec, found, err := txn.Lookup(op)
	if err != nil {
		return fmt.Errorf("block %d: %w", b.Height, err)
	}
	if found && rec.Spent == nil {
		return fmt.Errorf("block %d tx %s output %d: %s is already live: %w",
			b.Height, tx.Hash, index, op, chain.ErrDuplicateOutpoint)
	}
	u := chain.NewUtxo(b, pos, tx, index, out, collateral)
	return txn.Create(&u)
}

// alreadyApplied reports whether b is the block already at its height on the
// current chain: re-posting it is a no-op that succeeds (docs/blocks.md).
func (w *Writer) alreadyApplied(tip chain.Tip, b *chain.Block) (bool, error) {
	if tip.Empty || b.Height > tip.Height {
		return false, nil
	}
	h, found, err := w.store.HashAt(b.Height)
	if err != nil {
		return false, err
	}
	return found && h == b.Hash, nil
}

// rollbackRequest resolves the target of r and rolls back to it.
// Writer goroutine only.
func (w *Writer) rollbackRequest(r request) (Result, error) {
	target := r.target
	if r.targetHash != nil {
		st := w.store.State()
		height, found, err := w.store.HeightOfHash(*r.targetHash)
		if err != nil {
			return Result{Tip: st.Tip, Seq: st.Seq}, err
		}
		if !found {
			return Result{Tip: st.Tip, Seq: st.Seq}, fmt.Errorf("block %s is not on the current chain: %w",
				*r.targetHash, chain.ErrInvalidArgument)
		}
		target = height
	}
	return w.rollback(target)
}

// rollback reverts the chain to target: one change, however many blocks.
// Writer goroutine only.
func (w *Writer) rollback(target uint64) (Result, error) {
	st := w.store.State()
	if err := w.store.CheckRollback(target); err != nil {
		return Result{Tip: st.Tip, Seq: st.Seq}, err
	}
	if target == st.Tip.Height {
		return Result{Tip: st.Tip, Seq: st.Seq}, nil
	}
	if err := w.guard(w.rollbackEstimate(st.Tip.Height - target)); err != nil {
		return Result{Tip: st.Tip, Seq: st.Seq}, fmt.Errorf("rollback to %d: %w", target, err)
	}
	cs, err := w.store.RollbackTo(target)
	if err != nil {
		return Result{Tip: st.Tip, Seq: st.Seq}, fmt.Errorf("rollback to %d: %w", target, err)
	}
	return Result{Applied: true, Tip: cs.NewTip, Seq: cs.Seq, Changes: cs}, nil
}

package disk

import (
	"encoding/binary"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/utxo-cache/utxo-cache/chain"
)

// undoPointDeleteMax is the largest undo backlog pruned with point deletions.
const undoPointDeleteMax = 64

// pruneWork counts what one block's pruning deleted; the store's counters
// take it only once the batch has committed.
type pruneWork struct{ records, undo uint64 }

// prune adds to the block's batch b the deletion of spent records and undo
// deltas that no reachable state needs, with bounded work, and advances the
// cursors in st. touched holds the rows the block itself writes: those are
// never pruned here (the block's write wins).
//
// Spent records: a record spent at height S is shown while tip - S <=
// PruneDepth, and the tip can go back by up to RollbackWindow, so it is kept
// until tip - S > PruneDepth + RollbackWindow. Rows the block only looked up
// are pruned as usual. Undo deltas: a rollback to
// tip - RollbackWindow needs the deltas of the heights above it, so the delta
// of height h goes once h <= tip - RollbackWindow.
//
// blocks is how many blocks the batch applies (a catch-up window's count):
// the spent records examined are bounded by blocks × PruneBudget, the work
// those blocks would have done one by one.
func (s *Store) prune(b *keyBatch, st *State, touched map[chain.OutPoint]*txnEntry, work *pruneWork, blocks int) error {
	tip := st.Tip.Height
	if keep := s.opts.PruneDepth + s.opts.RollbackWindow; tip > keep {
		if err := s.pruneSpent(b, st, tip-keep, touched, work, blocks*s.opts.PruneBudget); err != nil {
			return err
		}
	}
	if w := s.opts.RollbackWindow; tip >= w {
		if limit := tip - w + 1; st.UndoFloor < limit {
			// Normally one delta goes per block: a point deletion. A range
			// deletion would be one tombstone per block, and every read
			// re-processes the range tombstones in the memtable (measured:
			// 70% of an import's CPU). A large backlog (a store reopened
			// with a smaller window, or one that started mid-chain) is one
			// range deletion: bounded work either way.
			if gap := limit - st.UndoFloor; gap <= undoPointDeleteMax {
				for h := st.UndoFloor; h < limit; h++ {
					_ = b.Delete(heightKey(prefixUndo, h), nil)
					if s.count.on {
						_ = b.Delete(counterUndoKey(h), nil)
					}
				}
			} else {
				_ = b.DeleteRange(heightKey(prefixUndo, st.UndoFloor), heightKey(prefixUndo, limit), nil)
				if s.count.on {
					_ = b.DeleteRange(counterUndoKey(st.UndoFloor), counterUndoKey(limit), nil)
				}
			}
			work.undo += limit - st.UndoFloor
			st.UndoFloor = limit
		}
	}
	return nil
}

// pruneSpent deletes the records spent below height limit, at most
// budget of them, resuming at (st.PruneHeight, st.PruneOffset).
func (s *Store) pruneSpent(b *keyBatch, st *State, limit uint64, touched map[chain.OutPoint]*txnEntry, work *pruneWork, budget int) error {
	if st.PruneHeight >= limit {
		return nil
	}
	it, err := s.db.NewIter(&pebble.IterOptions{
		LowerBound: heightKey(prefixSpentAt, st.PruneHeight),
		UpperBound: heightKey(prefixSpentAt, limit),
	})
	if err != nil {
		return err
	}
	defer it.Close()
	var key []byte
	for valid := it.First(); valid; valid = it.Next() {
		h := binary.BigEndian.Uint64(it.Key()[1:])
		list := it.Value()
		if len(list)%packedOutPointLen != 0 {
			return fmt.Errorf("spent list at %d: %w", h, ErrCorrupt)
		}
		offset := 0
		if h == st.PruneHeight {
			offset = int(st.PruneOffset) * packedOutPointLen
		}
		for ; offset < len(list); offset += packedOutPointLen {
			if budget == 0 {
				st.PruneHeight, st.PruneOffset = h, uint32(offset/packedOutPointLen)
				return it.Error()
			}
			budget--
			var op chain.OutPoint
			copy(op.TxHash[:], list[offset:])
			op.Index = binary.BigEndian.Uint32(list[offset+chain.HashSize:])
			if e, ok := touched[op]; ok && e.dirty {
				continue // the block rewrites this row; its write wins
			}
			key = appendOutPointKey(key[:0], op)
			// The outpoint may have been re-created since it was spent: only a
			// record spent at h is this list's to delete.
			v, closer, err := s.db.Get(key)
			if err == pebble.ErrNotFound {
				continue
			}
			if err != nil {
				return err
			}
			r, err := decodeRecord(op, v)
			closer.Close()
			if err != nil {
				return err
			}
			if r.Spent != nil && r.Spent.Height == h {
				_ = b.Delete(key, nil)
				work.records++
			}
		}
		_ = b.Delete(it.Key(), nil)
	}
	st.PruneHeight, st.PruneOffset = limit, 0
	return it.Error()
}

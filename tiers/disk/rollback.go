package disk

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/changeset"
)

// HeightOfHash returns the height of the block with hash h on the current
// chain; found is false when no block on it has that hash.
func (s *Store) HeightOfHash(h chain.Hash) (height uint64, found bool, err error) {
	v, err := s.get(hashBlockKey(h))
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("disk: read block hash: %w", err)
	}
	if len(v) != 8 {
		return 0, false, fmt.Errorf("disk: block height of %d bytes: %w", len(v), ErrCorrupt)
	}
	return binary.BigEndian.Uint64(v), true, nil
}

// HashAt returns the hash of the block at height on the current chain.
func (s *Store) HashAt(height uint64) (h chain.Hash, found bool, err error) {
	p, found, err := s.PointAt(height)
	return p.Hash, found, err
}

// PointAt returns the block at height on the current chain as a point: its
// hash and slot (0 for a block applied without one, or by a store from
// before slots were kept). Safe for concurrent use; a block rolled back or
// applied meanwhile may or may not be seen.
func (s *Store) PointAt(height uint64) (p chain.Point, found bool, err error) {
	v, err := s.get(heightKey(prefixBlockHash, height))
	if errors.Is(err, pebble.ErrNotFound) {
		return p, false, nil
	}
	if err != nil {
		return p, false, fmt.Errorf("disk: read block hash: %w", err)
	}
	p, err = decodeBlockHashRow(height, v)
	return p, err == nil, err
}

// RecentPoints returns points of the current chain from its tip back into
// the rollback window, newest first, for a follower to offer its node as
// possible intersections: the tip, then the blocks 1, 2, 4, 8, … below it,
// and last the oldest block the window reaches (the tip's height minus
// RollbackWindow, or height 0); heights below the store's first block (a
// store started mid-chain) are left out. All are read from one snapshot, so
// they belong to one chain. An empty store has none.
func (s *Store) RecentPoints() ([]chain.Point, error) {
	v, err := s.NewView()
	if err != nil {
		return nil, err
	}
	defer v.Close()
	tip := v.Tip()
	if tip.Empty {
		return nil, nil
	}
	floor := uint64(0)
	if tip.Height > s.opts.RollbackWindow {
		floor = tip.Height - s.opts.RollbackWindow
	}
	var heights []uint64
	for d := uint64(0); ; d = max(1, 2*d) {
		if tip.Height-floor <= d {
			heights = append(heights, floor)
			break
		}
		heights = append(heights, tip.Height-d)
	}
	points := make([]chain.Point, 0, len(heights))
	for _, h := range heights {
		val, closer, err := v.snap.Get(heightKey(prefixBlockHash, h))
		if errors.Is(err, pebble.ErrNotFound) {
			break // below the store's first block: nothing older either
		}
		if err != nil {
			return nil, fmt.Errorf("disk: read block hash: %w", err)
		}
		p, err := decodeBlockHashRow(h, val)
		closer.Close()
		if err != nil {
			return nil, err
		}
		points = append(points, p)
	}
	return points, nil
}

// CheckRollback reports whether a rollback to target can be exact: nil, or
// an error matching chain.ErrInvalidArgument (target above the tip) or
// chain.ErrRollbackTooDeep (beyond the window or the undo data kept).
func (s *Store) CheckRollback(target uint64) error {
	st := s.State()
	if st.Tip.Empty || target > st.Tip.Height {
		return fmt.Errorf("rollback target %d is above the tip %s: %w", target, st.Tip, chain.ErrInvalidArgument)
	}
	if st.Tip.Height-target > s.opts.RollbackWindow {
		return fmt.Errorf("rollback to %d is %d blocks below the tip %d, the window is %d: %w",
			target, st.Tip.Height-target, st.Tip.Height, s.opts.RollbackWindow, chain.ErrRollbackTooDeep)
	}
	if target == st.Tip.Height {
		return nil
	}
	// Every height in (target, tip] needs its delta. Walk them down from the
	// tip: a gap is fine only below a delta whose block started the store
	// (its previous tip is empty): rolling that block back empties the store,
	// which is the state "right after" any height below it.
	it, err := s.db.NewIter(&pebble.IterOptions{
		LowerBound: heightKey(prefixUndo, target+1),
		UpperBound: heightKey(prefixUndo, st.Tip.Height+1),
	})
	if err != nil {
		return err
	}
	defer it.Close()
	want := st.Tip.Height
	var lowest []byte // value of the lowest delta of the run
	for valid := it.Last(); valid && want > target; valid = it.Prev() {
		if binary.BigEndian.Uint64(it.Key()[1:]) != want {
			break
		}
		lowest = append(lowest[:0], it.Value()...)
		want--
	}
	if err := it.Error(); err != nil {
		return err
	}
	if want == target {
		return nil
	}
	if lowest != nil {
		if u, err := decodeUndo(lowest); err == nil && u.prev.Empty {
			return nil
		}
	}
	return fmt.Errorf("rollback to %d: no undo data kept for height %d: %w", target, want, chain.ErrRollbackTooDeep)
}

// RollbackTo reverts the chain to height target (CheckRollback must have
// passed): one change of the commit sequence, committed as one synced batch
// per reverted block. Every batch but the last records the rollback in
// progress (State.RollingBack), so that a crash in between is completed by
// the next Open; the last raises Seq. It returns what the whole rollback
// changed. Writer goroutine only; nothing is published (see Publish).
//
// On an error the blocks reverted so far stay reverted, the rollback stays
// recorded as in progress, and the store takes no more writes (ErrFailed):
// reopening it completes the rollback.
func (s *Store) RollbackTo(target uint64) (*changeset.Set, error) {
	if err := s.canWrite(); err != nil {
		return nil, err
	}
	st := s.State()
	merged := newChanges(st.Tip, 0)
	merged.cs.Rollback = true
	for !st.Tip.Empty && st.Tip.Height > target {
		cs, err := s.rollbackBlock(target)
		if err != nil {
			return nil, s.fail(err)
		}
		merged.merge(cs)
		st = s.State()
	}
	merged.cs.NewTip, merged.cs.Seq = st.Tip, st.Seq
	return &merged.cs, nil
}

// rollbackBlock reverts the tip block in one synced batch, on the way down
// to target. Writer goroutine only.
func (s *Store) rollbackBlock(target uint64) (*changeset.Set, error) {
	prev := s.State()
	if prev.Tip.Empty {
		return nil, fmt.Errorf("disk: rollback of an empty store: %w", chain.ErrInvalidArgument)
	}
	h := prev.Tip.Height
	raw, err := s.get(heightKey(prefixUndo, h))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, fmt.Errorf("disk: no undo data for block %d: %w", h, chain.ErrRollbackTooDeep)
	}
	if err != nil {
		return nil, fmt.Errorf("disk: read undo %d: %w", h, err)
	}
	undo, err := decodeUndo(raw)
	if err != nil {
		return nil, err
	}
	st := prev
	st.Tip = undo.prev
	st.SkippedInputs -= min(st.SkippedInputs, undo.skipped)
	if st.Tip.Empty || st.Tip.Height <= target {
		st.Seq++ // the last batch: the rollback is one change
		st.RollingBack, st.RollbackTarget = false, 0
	} else {
		st.RollingBack, st.RollbackTarget = true, target
	}
	// The rows of heights >= h go with this block; new blocks will write
	// them again, so the prune cursors must not stay above h (or above 0,
	// when the store empties: its next block may have any height).
	floor := h
	if st.Tip.Empty {
		floor = 0
	}
	if st.PruneHeight >= floor {
		st.PruneHeight, st.PruneOffset = floor, 0
	}
	st.UndoFloor = min(st.UndoFloor, floor)

	b := s.writeBatch()
	defer s.releaseScratch()
	s.dropLapses()
	ch := newChanges(prev.Tip, len(undo.entries))
	ch.cs.Rollback = true
	d := newDerived(s.dims, s.dimFuncs, b, &st, ch, len(undo.entries))
	var key, val []byte
	touched := make(map[chain.OutPoint]*chain.Utxo, len(undo.entries)) // live after the undo, or nil
	// removed: outputs live before the undo and not after; replaced: an
	// output live before the undo that the block created on an outpoint
	// whose earlier output it spent (a transaction hash used again), which
	// the undo makes live again: another output than the one a pending
	// transaction may spend.
	var removed, replaced []chain.OutPoint
	for _, e := range undo.entries {
		key = appendOutPointKey(key[:0], e.op)
		cur, err := s.get(key)
		if err != nil {
			return nil, fmt.Errorf("disk: rollback %d: row %s: %w", h, e.op, errors.Join(err, ErrCorrupt))
		}
		after, err := decodeRecord(e.op, cur)
		if err != nil {
			return nil, err
		}
		var before *Record
		switch e.kind {
		case undoAbsent:
		case undoSpentHere:
			if after.Spent == nil || after.Spent.Height != h {
				return nil, fmt.Errorf("disk: rollback %d: %s is not spent at %d: %w", h, e.op, h, ErrCorrupt)
			}
			before = &Record{Utxo: after.Utxo}
		case undoFullRecord:
			r, err := decodeRecord(e.op, e.before)
			if err != nil {
				return nil, err
			}
			before = &r
		}
		if after.Spent == nil {
			d.remove(&after.Utxo)
			s.lapseLease(b, e.op) // removed: its lease lapses (lease.go)
			if after.Frozen {
				s.lapseFreeze(b, e.op, h, "the rollback of the block that created it")
			}
		}
		if before != nil {
			// The block found it unfrozen or ended its freeze: a rollback
			// does not bring a freeze back (freeze.go).
			before.Frozen = false
		}
		if before != nil && before.Spent == nil {
			d.add(&before.Utxo)
			touched[e.op] = &before.Utxo
			if after.Spent == nil {
				replaced = append(replaced, e.op)
			}
		} else {
			touched[e.op] = nil
			if after.Spent == nil {
				removed = append(removed, e.op)
			}
		}
		ch.outPoint(e.op)
		if before == nil {
			_ = b.Delete(key, nil)
		} else {
			val = appendRecord(val[:0], before)
			_ = b.Set(key, val, nil)
		}
	}
	countFrom, fromLowered, err := s.rollbackCounters(b, d, h)
	if err != nil {
		return nil, fmt.Errorf("disk: rollback %d: %w", h, err)
	}
	if err := d.flushBalances(s.db, s.balances, s.opts.PrefetchWorkers); err != nil {
		return nil, fmt.Errorf("disk: rollback %d: %w", h, err)
	}
	_ = b.Delete(heightKey(prefixSpentAt, h), nil)
	_ = b.Delete(heightKey(prefixUndo, h), nil)
	_ = b.Delete(heightKey(prefixBlockHash, h), nil)
	_ = b.Delete(heightKey(prefixBlockTime, h), nil)
	_ = b.Delete(hashBlockKey(prev.Tip.Hash), nil)
	if err := s.visibilityEdge(h, ch); err != nil {
		return nil, fmt.Errorf("disk: rollback %d: %w", h, err)
	}
	live := func(op chain.OutPoint) (*chain.Utxo, bool) { u, ok := touched[op]; return u, ok }
	if err := s.pendingRollback(b, h, &st, live, removed, replaced); err != nil {
		return nil, fmt.Errorf("disk: rollback %d: %w", h, err)
	}
	moves, err := s.rollbackMoves(b, &st)
	if err != nil {
		return nil, fmt.Errorf("disk: rollback %d: %w", h, err)
	}
	logFloor := s.logFloor
	if !st.RollingBack { // the last batch: the rollback's one change
		target := chain.Tip{Height: target, Hash: st.Tip.Hash, Empty: st.Tip.Empty}
		var err error
		if logFloor, err = s.logChange(b, &st, &chain.Change{Kind: chain.ChangeRollback, Target: target, Pending: moves}); err != nil {
			return nil, err
		}
	}
	_ = b.Set(keyState, appendState(nil, &st), nil)
	raised := s.raiseSchema(b) // its balance rows may have asset rows now
	if err := s.commitKeys(b); err != nil {
		return nil, fmt.Errorf("disk: commit rollback of %d: %w", h, err)
	}
	if raised {
		s.schemaVersion = SchemaVersion
	}
	s.afterCommit(b)
	s.reportLapses()
	s.logFloor = logFloor
	if fromLowered {
		s.count.from = countFrom
	}
	// The young-output view may hold outputs this block created: drop it
	// (exactness over a warm view; rollbacks are rare).
	s.recent.reset()
	d.commitBalances(s.balances)
	s.state.Store(&st)
	s.addPendingTouched(ch, false)
	ch.setBalances(d)
	ch.cs.NewTip, ch.cs.Seq = st.Tip, st.Seq
	return &ch.cs, nil
}

// rollbackMoves returns the pending moves of the rollback so far: those of
// its earlier batches (the keyRollbackMoves row) and this batch's. A batch
// that is not the rollback's last writes them to the row, so that a crash in
// between loses none (the reopened store completes the rollback); the last
// deletes the row. The row's value is a change record (chain.AppendChangeCBOR:
// a rollback to height 0 with no hash, at the batch's seq, whose "pending"
// member holds the moves; the figures of "after" are zero), the codec the
// change log uses. Writer goroutine only.
func (s *Store) rollbackMoves(b *keyBatch, st *State) ([]chain.PendingMove, error) {
	var moves []chain.PendingMove
	raw, err := s.get(keyRollbackMoves)
	switch {
	case err == nil:
		c, rest, err := chain.DecodeChangeCBOR(raw, chain.Limits{})
		if err != nil || len(rest) != 0 {
			return nil, errors.Join(fmt.Errorf("disk: rollback moves row: %v", err), ErrCorrupt)
		}
		moves = c.Pending
	case !errors.Is(err, pebble.ErrNotFound):
		return nil, err
	}
	moves = append(moves, s.pendingMoves(0)...)
	switch {
	case !st.RollingBack:
		if raw != nil {
			_ = b.Delete(keyRollbackMoves, nil)
		}
	case len(moves) > 0:
		rec, err := chain.AppendChangeCBOR(nil, &chain.Change{Seq: st.Seq, Kind: chain.ChangeRollback, Target: chain.Tip{Empty: true}, Pending: moves})
		if err != nil {
			return nil, err
		}
		_ = b.Set(keyRollbackMoves, rec, nil)
	}
	return moves, nil
}

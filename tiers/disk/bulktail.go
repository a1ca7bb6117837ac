package disk

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/internal/extsort"
)

// # What a bulk load keeps of the blocks at its tip
//
// A store at tip L keeps, of its last blocks, what a rollback, a reader of
// spent records or a replica may still need (see prune and the change
// log): the undo delta of each block above L - RollbackWindow, the spent
// record and spent-at list of each spend at L - PruneDepth - RollbackWindow
// or above, and the change-log record of each of the last LogRetention
// blocks. A bulk load builds them as a window would have left them at L,
// from the same replay of each outpoint's events (bulkTail):
//
//   - undo: each block's entries in the order the block first touched each
//     outpoint (its events' chain order), each with the row as it was
//     before the block (undoEntryOf): absent for a creation; for a spend of
//     a live output, "spent here", or the live row in full in
//     UndoSelfContained mode or when the block creates the outpoint again;
//     a creation over a spent record that pruning has not yet removed
//     (PruneDepth + RollbackWindow blocks after its spend: one by one) has
//     that record in full;
//   - spent-at lists: the outpoints each block spent, in its spends' order;
//   - change-log records: the block (read again through
//     BulkOptions.Reread), the outputs it spent that were live before it
//     (in outpoint order), and the tip, count and digest after it: the
//     count and digest at L less the changes of the blocks above it.

// bulkTail collects what the blocks at a bulk load's tip keep.
type bulkTail struct {
	last     uint64 // L, the tip of the load
	keepFrom uint64 // a spend at or above keeps its spent record
	undoFrom uint64 // a block at or above keeps its undo delta
	logFrom  uint64 // a block at or above keeps its change-log record (MaxUint64: no log)
	keep     uint64 // PruneDepth + RollbackWindow
	compact  bool   // UndoCompact

	undo    *extsort.Sorter // event order → outpoint, kind, before row
	spentAt *extsort.Sorter // event order → packed outpoint
	logged  *extsort.Sorter // height, outpoint → row of an output spent live
	skipped map[uint64]uint64
	deltas  map[uint64]*blockDelta // the log's blocks' count and digest changes

	key, val []byte
}

// blockDelta is what a block changed of the count and the digest.
type blockDelta struct {
	count  int64
	digest chain.Digest
}

func (l *BulkLoad) newTail(last uint64) (*bulkTail, error) {
	o := &l.s.opts
	t := &bulkTail{last: last, keep: o.PruneDepth + o.RollbackWindow, compact: o.UndoMode == UndoCompact,
		logFrom: ^uint64(0), skipped: map[uint64]uint64{}, deltas: map[uint64]*blockDelta{}}
	if last > t.keep {
		t.keepFrom = last - t.keep
	}
	if last >= o.RollbackWindow {
		t.undoFrom = last - o.RollbackWindow + 1
	}
	if r := o.LogRetention; r > 0 {
		t.logFrom = l.first
		if last+1 > r {
			t.logFrom = max(l.first, last+1-r)
		}
	}
	mem := max(l.opts.MemBytes/8, 1<<20)
	var err error
	for _, p := range []**extsort.Sorter{&t.undo, &t.spentAt, &t.logged} {
		if *p, err = extsort.New(l.sortOptions(mem)); err != nil {
			t.close()
			return nil, fmt.Errorf("disk: bulk load: %w", err)
		}
	}
	return t, nil
}

func (t *bulkTail) close() {
	for _, so := range []*extsort.Sorter{t.undo, t.spentAt, t.logged} {
		if so != nil {
			so.Close()
		}
	}
}

func (t *bulkTail) delta(h uint64) *blockDelta {
	d := t.deltas[h]
	if d == nil {
		d = &blockDelta{}
		t.deltas[h] = d
	}
	return d
}

// outpointTail follows one outpoint's events for the tail: the undo entry
// of the block being replayed, until the outpoint's events of that block
// end.
type outpointTail struct {
	t       *bulkTail
	op      chain.OutPoint
	pending bool
	height  uint64
	order   [bulkEventKeyLen - bulkOutPointLen]byte
	before  []byte // the row before the block, nil: none
	live    bool   // before is a live row
	created bool   // the block creates the outpoint
}

// touch records that the block at e.height touched the outpoint, which
// was before (nil: no row; live: a live row) before it; create: by a
// creation.
func (o *outpointTail) touch(e *bulkEvent, before []byte, live, create bool) error {
	if e.height < o.t.undoFrom {
		return nil
	}
	if o.pending && o.height == e.height {
		o.created = o.created || create
		return nil
	}
	if err := o.flush(); err != nil {
		return err
	}
	o.pending, o.height, o.live, o.created = true, e.height, live, create
	copy(o.order[:], e.order)
	o.before = append(o.before[:0], before...)
	if before == nil {
		o.before = nil
	}
	return nil
}

// flush writes the pending undo entry.
func (o *outpointTail) flush() error {
	if !o.pending {
		return nil
	}
	o.pending = false
	t := o.t
	kind := undoFullRecord
	switch {
	case o.before == nil:
		kind = undoAbsent
	case t.compact && o.live && !o.created:
		kind = undoSpentHere
	}
	t.val = append(t.val[:0], o.op.TxHash[:]...)
	t.val = binary.BigEndian.AppendUint32(t.val, o.op.Index)
	t.val = append(t.val, kind)
	if kind == undoFullRecord {
		t.val = append(t.val, o.before...)
	}
	return t.undo.Add(o.order[:], t.val)
}

// spend records a spend at e of the live output whose row is rec, created
// at height createdAt.
func (t *bulkTail) spend(e *bulkEvent, rec []byte, createdAt uint64) error {
	if e.height >= t.keepFrom {
		t.val = append(t.val[:0], e.op.TxHash[:]...)
		t.val = binary.BigEndian.AppendUint32(t.val, e.op.Index)
		if err := t.spentAt.Add(e.order, t.val); err != nil {
			return err
		}
	}
	if e.height < t.logFrom {
		return nil
	}
	if createdAt != e.height { // live before the block: in its record's spent list
		t.key = binary.BigEndian.AppendUint64(t.key[:0], e.height)
		t.key = append(t.key, e.op.TxHash[:]...)
		t.key = binary.BigEndian.AppendUint32(t.key, e.op.Index)
		if err := t.logged.Add(t.key, rec); err != nil {
			return err
		}
	}
	r, err := decodeRecord(e.op, rec)
	if err != nil {
		return fmt.Errorf("disk: bulk load: %w", err)
	}
	d := t.delta(e.height)
	d.count--
	d.digest.SubTerm(chain.UtxoTerm(&r.Utxo))
	return nil
}

// create records a creation at e of the output whose row is rec.
func (t *bulkTail) create(e *bulkEvent, rec []byte) error {
	if e.height < t.logFrom {
		return nil
	}
	r, err := decodeRecord(e.op, rec)
	if err != nil {
		return fmt.Errorf("disk: bulk load: %w", err)
	}
	d := t.delta(e.height)
	d.count++
	d.digest.AddTerm(chain.UtxoTerm(&r.Utxo))
	return nil
}

// skip counts an input skipped at height h.
func (t *bulkTail) skip(h uint64) {
	if h >= t.undoFrom {
		t.skipped[h]++
	}
}

// recordPresent reports whether the spent record of a spend at height s is
// still on disk when the block at height h begins, one block at a time:
// pruning removes it once the tip is more than PruneDepth +
// RollbackWindow above s.
func (t *bulkTail) recordPresent(s, h uint64) bool { return s+t.keep >= h-1 }

// write adds the tail's rows to rows: undo deltas, spent-at lists and
// change-log records. hashes holds the hashes of the blocks from
// min(undoFrom, logFrom) - 1 up (what the undo deltas' previous tips and
// the log's records name); st is the state at the tip.
func (l *BulkLoad) writeTail(ctx context.Context, t *bulkTail, hashes map[uint64]chain.Hash, st *State, rows *extsort.Sorter) error {
	// Undo deltas: every block from undoFrom, entries or not.
	it, err := t.undo.Sort()
	if err != nil {
		return fmt.Errorf("disk: bulk load: %w", err)
	}
	defer it.Close()
	more := it.Next()
	for h := max(t.undoFrom, l.first); h <= t.last; h++ {
		u := undoDelta{prev: chain.Tip{Empty: true}, skipped: t.skipped[h]}
		if h > l.first {
			u.prev = chain.Tip{Height: h - 1, Hash: hashes[h-1]}
		}
		for ; more && binary.BigEndian.Uint64(it.Key()) == h; more = it.Next() {
			v := it.Value()
			e := undoEntry{kind: v[bulkOutPointLen]}
			copy(e.op.TxHash[:], v)
			e.op.Index = binary.BigEndian.Uint32(v[chain.HashSize:])
			if e.kind == undoFullRecord {
				e.before = v[bulkOutPointLen+1:]
			}
			u.entries = append(u.entries, e)
		}
		if err := rows.Add(heightKey(prefixUndo, h), appendUndo(nil, &u)); err != nil {
			return err
		}
	}
	if err := errors.Join(it.Err(), ctx.Err()); err != nil {
		return err
	}
	if more {
		return fmt.Errorf("disk: bulk load: undo entry at %x out of range: %w", it.Key(), ErrCorrupt)
	}

	// Spent-at lists, of the blocks that spent a live output.
	sit, err := t.spentAt.Sort()
	if err != nil {
		return fmt.Errorf("disk: bulk load: %w", err)
	}
	defer sit.Close()
	var list []byte
	h, any := uint64(0), false
	for sit.Next() {
		sh := binary.BigEndian.Uint64(sit.Key())
		if any && sh != h {
			if err := rows.Add(heightKey(prefixSpentAt, h), list); err != nil {
				return err
			}
			list = list[:0]
		}
		h, any = sh, true
		list = append(list, sit.Value()...)
	}
	if err := sit.Err(); err != nil {
		return fmt.Errorf("disk: bulk load: %w", err)
	}
	if any {
		if err := rows.Add(heightKey(prefixSpentAt, h), list); err != nil {
			return err
		}
	}

	if t.logFrom > t.last {
		return nil
	}
	return l.writeLog(ctx, t, hashes, st, rows)
}

// errRereadDone stops BulkOptions.Reread once the log's last block is read.
var errRereadDone = errors.New("disk: bulk load: the blocks read again are all read")

// writeLog adds the change-log records of the blocks from logFrom to the
// tip, read again through BulkOptions.Reread.
func (l *BulkLoad) writeLog(ctx context.Context, t *bulkTail, hashes map[uint64]chain.Hash, st *State, rows *extsort.Sorter) error {
	if l.opts.Reread == nil {
		return errors.New("disk: bulk load: the change log needs its blocks read again (BulkOptions.Reread)")
	}
	// The figures after each block, from the tip's down.
	after := make([]chain.Summary, t.last-t.logFrom+1)
	count, digest := st.UtxoCount, st.Digest
	for h := t.last; ; h-- {
		after[h-t.logFrom] = chain.Summary{Tip: chain.Tip{Height: h, Hash: hashes[h]}, UtxoCount: count, Digest: digest}
		if h == t.logFrom {
			break
		}
		if d := t.deltas[h]; d != nil {
			count = uint64(int64(count) - d.count)
			digest.SubTerm(d.digest)
		}
	}
	it, err := t.logged.Sort()
	if err != nil {
		return fmt.Errorf("disk: bulk load: %w", err)
	}
	defer it.Close()
	more := it.Next()
	next := t.logFrom
	err = l.opts.Reread(t.logFrom, func(b *chain.Block) error {
		if b.Height == t.last+1 {
			return errRereadDone
		}
		if b.Height != next || b.Hash != hashes[b.Height] {
			return fmt.Errorf("disk: bulk load: read again, block %d/%s where %d/%s was: the blocks changed", b.Height, b.Hash, next, hashes[next])
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		var spent []chain.Utxo
		for ; more && binary.BigEndian.Uint64(it.Key()) == b.Height; more = it.Next() {
			var op chain.OutPoint
			copy(op.TxHash[:], it.Key()[8:])
			op.Index = binary.BigEndian.Uint32(it.Key()[8+chain.HashSize:])
			r, err := decodeRecord(op, it.Value())
			if err != nil {
				return fmt.Errorf("disk: bulk load: %w", err)
			}
			r.Utxo.OutPoint = op
			spent = append(spent, r.Utxo)
		}
		c := &chain.Change{Seq: b.Height - l.first + 1, Kind: chain.ChangeApply, Block: b, SpentKnown: true, Spent: spent,
			After: after[b.Height-t.logFrom]}
		rec, err := chain.AppendChangeCBOR(nil, c)
		if err != nil {
			return fmt.Errorf("disk: change record %d: %w", c.Seq, err)
		}
		if err := rows.Add(changeLogKey(c.Seq), rec); err != nil {
			return err
		}
		next++
		return nil
	})
	if err != nil && !errors.Is(err, errRereadDone) {
		return err
	}
	if next != t.last+1 {
		return fmt.Errorf("disk: bulk load: read again, blocks %d..%d, want up to %d", t.logFrom, next-1, t.last)
	}
	return it.Err()
}

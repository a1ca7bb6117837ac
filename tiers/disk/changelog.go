package disk

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/utxo-cache/utxo-cache/chain"
)

// ErrLogTruncated is returned by View.Changes when a change after the asked
// seq is no longer kept: the reader must start again from a checkpoint.
var ErrLogTruncated = errors.New("disk: change log truncated")

// ErrAhead is returned by View.Changes when the asked seq is above the
// view's: the reader has a state this store never had.
var ErrAhead = errors.New("disk: asked seq is ahead of the store")

// The change log (0x09 seq[8]) keeps every change of the commit sequence in
// the wire form replicas read (chain.AppendChangeCBOR: the block of an
// apply, the target of a rollback, the figures after it). Each record is
// written in the batch of the change itself, so the log can never disagree
// with the state: a snapshot that shows seq S holds the record of S. It keeps
// the last LogRetention changes: each change deletes the record
// LogRetention below it (a point deletion; a backlog after the retention was
// lowered goes as one range deletion), so pruning costs O(1) per change.
//
// Value layout (version 1): the wire record, as is, so serving a range of the
// log is a concatenation of values.

func changeLogKey(seq uint64) []byte { return heightKey(prefixChangeLog, seq) }

// logChange adds the record of the change st ends (kind, with the block or
// the rollback target) to b, and prunes the log below the retention. It
// returns the log floor (lowest seq kept) once b commits. Writer only.
func (s *Store) logChange(b *keyBatch, st *State, c *chain.Change) (uint64, error) {
	floor := s.logFloor
	if s.opts.LogRetention == 0 {
		return floor, nil
	}
	c.Seq = st.Seq
	c.After = chain.Summary{Tip: st.Tip, UtxoCount: st.UtxoCount, Digest: st.Digest}
	rec, err := chain.AppendChangeCBOR(s.logBuf[:0], c)
	if err != nil {
		return floor, fmt.Errorf("disk: change record %d: %w", st.Seq, err)
	}
	s.logBuf = rec // reused by the next change: the batch copies rec
	return s.logRecord(b, st.Seq, rec, floor), nil
}

// logRecord adds the wire record rec of change seq to b and prunes the log
// below the retention, given the floor before b; it returns the floor once b
// commits. A catch-up window calls it once per block, in seq order.
func (s *Store) logRecord(b *keyBatch, seq uint64, rec []byte, floor uint64) uint64 {
	_ = b.Set(changeLogKey(seq), rec, nil)
	if floor == 0 {
		floor = seq
	}
	if seq > s.opts.LogRetention {
		if limit := seq - s.opts.LogRetention + 1; floor < limit {
			if limit-floor <= 8 {
				for q := floor; q < limit; q++ {
					_ = b.Delete(changeLogKey(q), nil)
				}
			} else {
				_ = b.DeleteRange(changeLogKey(floor), changeLogKey(limit), nil)
			}
			floor = limit
		}
	}
	return floor
}

// loadLogFloor finds the lowest seq the log keeps (0: the log is empty).
func (s *Store) loadLogFloor() error {
	it, err := s.db.NewIter(&pebble.IterOptions{
		LowerBound: []byte{prefixChangeLog},
		UpperBound: []byte{prefixChangeLog + 1},
	})
	if err != nil {
		return err
	}
	defer it.Close()
	if it.First() {
		s.logFloor = binary.BigEndian.Uint64(it.Key()[1:])
	}
	return it.Error()
}

// Changes returns the wire records of the changes after seq after, in order,
// as one CBOR sequence of at most maxBytes (but at least one record when any
// exists), and how many it holds. It answers nothing when after is the
// view's seq, ErrAhead when after is above it, and ErrLogTruncated when the
// change after it is no longer kept (or the log is off). A reader that
// forwards the records (the change-log endpoint) uses a ChangeCursor, which
// copies nothing.
func (v *View) Changes(after uint64, maxBytes int) ([]byte, int, error) {
	c, err := v.ChangeCursor(after)
	if err != nil {
		return nil, 0, err
	}
	defer c.Close()
	var out []byte
	n := 0
	for {
		rec, err := c.Next()
		if err != nil {
			return nil, 0, err
		}
		if rec == nil || (n > 0 && len(out)+len(rec) > maxBytes) {
			return out, n, nil
		}
		out = append(out, rec...)
		n++
	}
}

// ChangeCursor reads the wire records of a view's change log in seq order,
// handing out Pebble's own bytes: nothing is copied, so a reader that
// forwards records as it reads them holds one record's worth of the store's
// blocks at a time, however many it forwards. It holds a Pebble iterator,
// which pins the store's files and memory tables of its moment until Close:
// a cursor is for one answer, not for a long-lived reader. Not safe for
// concurrent use; Close it before its view.
type ChangeCursor struct {
	it    *pebble.Iterator // nil: nothing after the asked seq, or closed
	want  uint64           // the seq of the record Next returns
	moved bool             // Next has returned the record the iterator is on
	done  bool             // past the last record
}

// ChangeCursor opens a cursor on the changes after seq after. Its errors are
// those of Changes, found here, before any record is read: ErrAhead when
// after is above the view's seq, ErrLogTruncated when the change after it is
// not kept. With after equal to the view's seq the cursor is empty.
func (v *View) ChangeCursor(after uint64) (*ChangeCursor, error) {
	switch seq := v.state.Seq; {
	case after > seq:
		return nil, fmt.Errorf("seq %d is above this store's %d: %w", after, seq, ErrAhead)
	case after == seq:
		return &ChangeCursor{}, nil
	}
	it, err := v.snap.NewIter(&pebble.IterOptions{
		LowerBound: changeLogKey(after + 1),
		UpperBound: changeLogKey(v.state.Seq + 1),
	})
	if err != nil {
		return nil, fmt.Errorf("disk: change log: %w", err)
	}
	want := after + 1
	if !it.First() {
		err = it.Error()
		_ = it.Close()
		if err != nil {
			return nil, fmt.Errorf("disk: change log: %w", err)
		}
		return nil, fmt.Errorf("change %d is not kept: %w", want, ErrLogTruncated)
	}
	if got := binary.BigEndian.Uint64(it.Key()[1:]); got != want {
		_ = it.Close()
		return nil, fmt.Errorf("change %d is not kept (the log starts at %d): %w", want, got, ErrLogTruncated)
	}
	return &ChangeCursor{it: it, want: want}, nil
}

// Next returns the next record, nil after the last. The record is valid
// until the next call of Next or Close: Pebble's bytes, not to be modified.
// A gap in the log (a record missing between two kept ones) is ErrCorrupt.
func (c *ChangeCursor) Next() ([]byte, error) {
	if c.it == nil || c.done {
		return nil, nil
	}
	if c.moved && !c.it.Next() {
		c.done = true
		if err := c.it.Error(); err != nil {
			return nil, fmt.Errorf("disk: change log: %w", err)
		}
		return nil, nil
	}
	c.moved = true
	if got := binary.BigEndian.Uint64(c.it.Key()[1:]); got != c.want {
		c.done = true
		return nil, fmt.Errorf("disk: change log: record %d after %d: %w", got, c.want-1, ErrCorrupt)
	}
	rec, err := c.it.ValueAndErr()
	if err != nil {
		c.done = true
		return nil, corruption(fmt.Errorf("disk: change log: record %d: %w", c.want, err))
	}
	c.want++
	return rec, nil
}

// Close releases the cursor's iterator. Safe to call more than once.
func (c *ChangeCursor) Close() error {
	if c.it == nil {
		return nil
	}
	err := c.it.Close()
	c.it = nil
	return err
}

// Checkpoint writes a consistent copy of the store into dir (which must not
// exist) and returns the state it holds: a Pebble checkpoint, hard links
// where the file system allows. Writer goroutine only, and only at a published
// state (between changes), so the copy is the published state: the writer's
// Checkpoint request does that.
func (s *Store) Checkpoint(dir string) (State, error) {
	st := s.State()
	if st.RollingBack {
		return st, fmt.Errorf("disk: checkpoint during a rollback: %w", ErrFailed)
	}
	if err := s.db.Checkpoint(dir, pebble.WithFlushedWAL()); err != nil {
		return st, fmt.Errorf("disk: checkpoint into %s: %w", dir, err)
	}
	return st, nil
}

// Recount computes the UTXO count and digest of the store from its outpoint
// rows alone, independently of the figures its state row carries, for
// verifying a store that came from elsewhere (a checkpoint, a backup). It
// reads every row of the store on the way, not only the outpoint rows, so
// that Pebble checks the checksum of every data block: a store damaged in
// transit anywhere (an index, a balance, the undo data) fails with an error
// rather than opening quietly. A full scan: a few seconds per million
// outputs. stop, polled during the scan, may abandon it with ErrStopped.
func (s *Store) Recount(stop func() bool) (count uint64, digest chain.Digest, err error) {
	it, err := s.db.NewIter(nil)
	if err != nil {
		return 0, digest, err
	}
	defer it.Close()
	var op chain.OutPoint
	rows := 0
	for valid := it.First(); valid; valid = it.Next() {
		if rows++; rows%4096 == 0 && stop != nil && stop() {
			return 0, digest, ErrStopped
		}
		k := it.Key()
		v, err := it.ValueAndErr()
		if err != nil {
			return 0, digest, corruption(fmt.Errorf("disk: row %x: %w", k, err))
		}
		if len(k) == 0 || k[0] != prefixUtxo {
			continue
		}
		if len(k) != outPointKeyLen {
			return 0, digest, fmt.Errorf("disk: outpoint key %x: %w", k, ErrCorrupt)
		}
		copy(op.TxHash[:], k[1:1+chain.HashSize])
		op.Index = binary.BigEndian.Uint32(k[1+chain.HashSize:])
		r, err := decodeRecord(op, v)
		if err != nil {
			return 0, digest, err
		}
		if r.Spent == nil {
			digest.Add(&r.Utxo)
			count++
		}
	}
	return count, digest, corruption(it.Error())
}

// corruption adds ErrCorrupt to an error of Pebble's that reports corrupt
// data (with Options.ReturnCorruption).
func corruption(err error) error {
	if err != nil && pebble.IsCorruptionError(err) && !errors.Is(err, ErrCorrupt) {
		return fmt.Errorf("%w: %w", err, ErrCorrupt)
	}
	return err
}

// ChangeRecord returns a copy of the wire record of change seq from the
// view's log: ErrLogTruncated when it is not kept (or the log is off),
// ErrAhead when seq is above the view's.
func (v *View) ChangeRecord(seq uint64) ([]byte, error) {
	if seq > v.state.Seq {
		return nil, fmt.Errorf("change %d is above this store's %d: %w", seq, v.state.Seq, ErrAhead)
	}
	val, closer, err := v.snap.Get(changeLogKey(seq))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, fmt.Errorf("change %d is not kept: %w", seq, ErrLogTruncated)
	}
	if err != nil {
		return nil, corruption(fmt.Errorf("disk: change log: record %d: %w", seq, err))
	}
	defer closer.Close()
	return append([]byte(nil), val...), nil
}

// FirstKept returns the lowest seq the view's change log keeps (0: none).
// A reader that must resume from the log's start (a publisher whose
// destination lost what it had) starts after FirstKept-1.
func (v *View) FirstKept() (uint64, error) {
	it, err := v.snap.NewIter(&pebble.IterOptions{
		LowerBound: []byte{prefixChangeLog},
		UpperBound: changeLogKey(v.state.Seq + 1),
	})
	if err != nil {
		return 0, fmt.Errorf("disk: change log: %w", err)
	}
	defer it.Close()
	if it.First() {
		return binary.BigEndian.Uint64(it.Key()[1:]), nil
	}
	return 0, it.Error()
}

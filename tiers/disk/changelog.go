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
// change after it is no longer kept (or the log is off).
func (v *View) Changes(after uint64, maxBytes int) ([]byte, int, error) {
	switch seq := v.state.Seq; {
	case after > seq:
		return nil, 0, fmt.Errorf("seq %d is above this store's %d: %w", after, seq, ErrAhead)
	case after == seq:
		return nil, 0, nil
	}
	it, err := v.snap.NewIter(&pebble.IterOptions{
		LowerBound: changeLogKey(after + 1),
		UpperBound: changeLogKey(v.state.Seq + 1),
	})
	if err != nil {
		return nil, 0, fmt.Errorf("disk: change log: %w", err)
	}
	defer it.Close()
	var out []byte
	n := 0
	want := after + 1
	for valid := it.First(); valid; valid = it.Next() {
		if got := binary.BigEndian.Uint64(it.Key()[1:]); got != want {
			if n == 0 {
				return nil, 0, fmt.Errorf("change %d is not kept (the log starts at %d): %w", want, got, ErrLogTruncated)
			}
			return nil, 0, fmt.Errorf("disk: change log: record %d after %d: %w", got, want-1, ErrCorrupt)
		}
		if n > 0 && len(out)+len(it.Value()) > maxBytes {
			break
		}
		out = append(out, it.Value()...)
		n++
		want++
	}
	if err := it.Error(); err != nil {
		return nil, 0, fmt.Errorf("disk: change log: %w", err)
	}
	if n == 0 {
		return nil, 0, fmt.Errorf("change %d is not kept: %w", want, ErrLogTruncated)
	}
	return out, n, nil
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

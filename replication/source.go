package replication

import (
	"context"
	"fmt"
	"io"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

// Errors of the change log, as Source.Changes returns them.
var (
	ErrLogTruncated = disk.ErrLogTruncated
	ErrAhead        = disk.ErrAhead
)

// SourceOptions configure a Source.
type SourceOptions struct {
	// Staging is the directory checkpoints are staged in (created if
	// missing; on the store's file system, so Pebble hard-links its files).
	Staging string
	// MaxCheckpoints bounds the checkpoints in progress at once. Default 2.
	MaxCheckpoints int
	// MaxChangeStreams bounds the change-log answers being written at once
	// (OpenChanges; replicas waiting in a long poll hold none). Default
	// DefaultMaxChangeStreams.
	MaxChangeStreams int
}

// DefaultMaxChangeStreams is SourceOptions.MaxChangeStreams' default: room
// for every replica of a large set to fetch the same change at once.
const DefaultMaxChangeStreams = 32

// EnsureDefaults returns o with its zero fields filled.
func (o SourceOptions) EnsureDefaults() SourceOptions {
	if o.MaxCheckpoints <= 0 {
		o.MaxCheckpoints = 2
	}
	if o.MaxChangeStreams <= 0 {
		o.MaxChangeStreams = DefaultMaxChangeStreams
	}
	return o
}

// Source serves a writer's change log and checkpoints to replicas. Safe for
// concurrent use.
//
// # Bounds
//
// Both kinds of answer are streamed, and each holds something of the store
// while it is written: a checkpoint its staged hard links (the whole store's
// files, which compactions then cannot reclaim), a change-log answer a Pebble
// iterator (the files and memory tables of its moment). Neither copies the
// store into memory: a change-log answer forwards the records from the
// store's own blocks, so its heap is a few buffers whatever the size of its
// changes. How many of each are open at once is bounded (MaxCheckpoints,
// MaxChangeStreams; ErrBusy beyond), and how long one is held is the HTTP
// layer's business: it drops an answer whose reader stops reading.
type Source struct {
	store   *disk.Store
	cp      checkpointer
	staging string
	slots   chan struct{} // one per checkpoint in progress
	streams chan struct{} // one per change-log answer in progress
}

// NewSource serves store's log, and checkpoints taken by cp (the writer),
// staged under staging, at most maxCheckpoints at once (default 2), with the
// other SourceOptions at their defaults.
func NewSource(store *disk.Store, cp checkpointer, staging string, maxCheckpoints int) *Source {
	return NewSourceWith(store, cp, SourceOptions{Staging: staging, MaxCheckpoints: maxCheckpoints})
}

// NewSourceWith serves store's log, and checkpoints taken by cp (the
// writer), as opts say.
func NewSourceWith(store *disk.Store, cp checkpointer, opts SourceOptions) *Source {
	opts = opts.EnsureDefaults()
	return &Source{store: store, cp: cp, staging: opts.Staging,
		slots:   make(chan struct{}, opts.MaxCheckpoints),
		streams: make(chan struct{}, opts.MaxChangeStreams)}
}

// Changes returns the published changes after seq after, as a CBOR sequence
// of at most maxBytes (at least one change when any exists), how many it
// holds, and the seq and tip of the published state they were read at.
// Errors match ErrLogTruncated and ErrAhead. It builds the answer in memory
// and takes no stream slot: for in-process readers; the HTTP endpoint uses
// OpenChanges.
func (s *Source) Changes(after uint64, maxBytes int) (data []byte, n int, seq uint64, tip chain.Tip, err error) {
	v, err := s.store.PublishedView()
	if err != nil {
		return nil, 0, 0, chain.Tip{}, err
	}
	defer v.Close()
	data, n, err = v.Changes(after, maxBytes)
	return data, n, v.State().Seq, v.Tip(), err
}

// ChangeStream is one change-log answer, open on the published state:
// WriteTo writes exactly the bytes Source.Changes would return, record by
// record, straight from the store. Close it when done, whatever happened:
// that frees its stream slot and its view. Not safe for concurrent use.
type ChangeStream struct {
	// Seq and Tip are the published state the changes are read at.
	Seq uint64
	Tip chain.Tip

	view     *disk.View
	cur      *disk.ChangeCursor
	maxBytes int
	release  func() // nil once closed
}

// OpenChanges opens the answer of the changes after seq after, at most
// maxBytes of them (at least one change when any exists). Its errors are
// found before anything is written: ErrBusy when MaxChangeStreams answers
// are being written, ErrLogTruncated, ErrAhead.
func (s *Source) OpenChanges(after uint64, maxBytes int) (*ChangeStream, error) {
	select {
	case s.streams <- struct{}{}:
	default:
		return nil, fmt.Errorf("%d change-log answers in progress: %w", cap(s.streams), ErrBusy)
	}
	release := func() { <-s.streams }
	v, err := s.store.PublishedView()
	if err != nil {
		release()
		return nil, err
	}
	cur, err := v.ChangeCursor(after)
	if err != nil {
		_ = v.Close()
		release()
		return nil, err
	}
	st := v.State()
	return &ChangeStream{Seq: st.Seq, Tip: st.Tip, view: v, cur: cur, maxBytes: maxBytes, release: release}, nil
}

// WriteTo writes the changes to w, one record at a time as the store holds
// it, and returns the bytes written. A failure after some records leaves w
// with the records before it, whole.
func (c *ChangeStream) WriteTo(w io.Writer) (int64, error) {
	var written int64
	for n := 0; ; n++ {
		rec, err := c.cur.Next()
		if err != nil {
			return written, err
		}
		if rec == nil || (n > 0 && written+int64(len(rec)) > int64(c.maxBytes)) {
			return written, nil
		}
		m, err := w.Write(rec)
		written += int64(m)
		if err != nil {
			return written, err
		}
	}
}

// Close frees the stream's view and its slot. Safe to call more than once.
func (c *ChangeStream) Close() error {
	if c.release == nil {
		return nil
	}
	err := c.cur.Close()
	if verr := c.view.Close(); err == nil {
		err = verr
	}
	c.release()
	c.release = nil
	return err
}

// Checkpoint stages a checkpoint of the published state; Close it when
// streamed. It fails with ErrBusy when maxCheckpoints are in progress.
func (s *Source) Checkpoint(ctx context.Context) (*Checkpoint, error) {
	select {
	case s.slots <- struct{}{}:
	default:
		return nil, fmt.Errorf("%d checkpoints in progress: %w", cap(s.slots), ErrBusy)
	}
	c, err := Take(ctx, s.cp, s.staging)
	if err != nil {
		<-s.slots
		return nil, err
	}
	c.release = func() { <-s.slots }
	return c, nil
}

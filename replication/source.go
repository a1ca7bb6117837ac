package replication

import (
	"context"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

// Errors of the change log, as Source.Changes returns them.
var (
	ErrLogTruncated = disk.ErrLogTruncated
	ErrAhead        = disk.ErrAhead
)

// Source serves a writer's change log and checkpoints to replicas. Safe for
// concurrent use.
type Source struct {
	store   *disk.Store
	cp      checkpointer
	staging string
	slots   chan struct{} // one per checkpoint in progress
}

// NewSource serves store's log, and checkpoints taken by cp (the writer),
// staged under staging, at most maxCheckpoints at once (default 2).
func NewSource(store *disk.Store, cp checkpointer, staging string, maxCheckpoints int) *Source {
	if maxCheckpoints <= 0 {
		maxCheckpoints = 2
	}
	return &Source{store: store, cp: cp, staging: staging, slots: make(chan struct{}, maxCheckpoints)}
}

// Changes returns the published changes after seq after, as a CBOR sequence
// of at most maxBytes (at least one change when any exists), how many it
// holds, and the seq and tip of the published state they were read at.
// Errors match ErrLogTruncated and ErrAhead.
func (s *Source) Changes(after uint64, maxBytes int) (data []byte, n int, seq uint64, tip chain.Tip, err error) {
	v, err := s.store.PublishedView()
	if err != nil {
		return nil, 0, 0, chain.Tip{}, err
	}
	defer v.Close()
	data, n, err = v.Changes(after, maxBytes)
	return data, n, v.State().Seq, v.Tip(), err
}

// Checkpoint stages a checkpoint of the published state; Close it when
// streamed. It fails with ErrBusy when maxCheckpoints are in progress.
func (s *Source) Checkpoint(ctx context.Context) (*Checkpoint, error) {
	select {
	case s.slots <- struct{}{}:
	default:
		return nil, ErrBusy
	}
	c, err := Take(ctx, s.cp, s.staging)
	if err != nil {
		<-s.slots
		return nil, err
	}
	c.release = func() { <-s.slots }
	return c, nil
}

package disk

import (
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
)

// publishedSnapshot is a Pebble snapshot of one committed state, shared by
// every reader of that state and closed when the last of them is done.
//
// refs counts one reference for being published plus one per open View. It
// only reaches zero after the snapshot was replaced (Publish drops the
// published reference) and every View was closed; a reader that loads the
// pointer just as it reaches zero fails to take a reference (acquire sees
// zero) and loads the new one instead, so a closed snapshot is never read.
type publishedSnapshot struct {
	snap  *pebble.Snapshot
	state State
	// spenders is the pending spender of each outpoint at state (the 0x0c
	// rows of snap, immutable: pending.go).
	spenders *spenderShards
	refs     atomic.Int64
}

// acquire takes a reference, or reports false when the snapshot is already
// released.
func (p *publishedSnapshot) acquire() bool {
	for {
		n := p.refs.Load()
		if n <= 0 {
			return false
		}
		if p.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

func (p *publishedSnapshot) release() {
	if p.refs.Add(-1) == 0 {
		_ = p.snap.Close()
	}
}

// Publish makes the committed state the one readers see: it fixes a
// snapshot of it and swaps it in atomically with its state, releasing the
// previous snapshot (closed once its last View is closed, so an old snapshot
// pins no data longer than its readers need it). Writer goroutine only, and
// only after the caches have been invalidated for every change up to the
// committed state: that order is what keeps a reader from seeing a commit
// whose invalidation is still running. Open publishes the state it found.
func (s *Store) Publish() {
	p := &publishedSnapshot{snap: s.db.NewSnapshot(), state: s.State(), spenders: s.pending.spender}
	p.refs.Store(1)
	if old := s.published.Swap(p); old != nil {
		old.release()
	}
}

// unpublish drops the published reference (Close).
func (s *Store) unpublish() {
	if old := s.published.Swap(nil); old != nil {
		old.release()
	}
}

// Published returns the published state: the one PublishedView reads. Safe
// from any goroutine.
func (s *Store) Published() State {
	if p := s.published.Load(); p != nil {
		return p.state
	}
	return s.State()
}

// PublishedView opens a view of the published state. Safe from any
// goroutine; Close the view when done. It fails with ErrClosed after Close.
func (s *Store) PublishedView() (*View, error) {
	for {
		p := s.published.Load()
		if p == nil {
			return nil, ErrClosed
		}
		if p.acquire() {
			return &View{s: s, snap: p.snap, state: p.state, ref: p}, nil
		}
	}
}

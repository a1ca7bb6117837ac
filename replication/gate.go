package replication

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/utxo-cache/utxo-cache/changeset"
)

// DefaultApplyPriorityWait is the bound of a replica's apply priority
// (ApplyGate) when none is configured. A change of a few hundred
// transactions costs a replica about 11 ms of CPU, plus its WAL sync, after
// the reads already running when it was announced (up to a few ms each);
// a rollback costs the work of every block it undoes. 50 ms covers an
// ordinary change and a rollback of a few blocks on a loaded replica, while
// no read ever waits longer than this for a change.
const DefaultApplyPriorityWait = 50 * time.Millisecond

// ApplyGate gives a replica's apply priority over new reads, the way a
// database standby trades query latency against replay lag (PostgreSQL's
// max_standby_streaming_delay). On a replica with one CPU, every point where
// the apply blocks (the WAL sync, the fetch of the change) puts it back at
// the end of a run queue of read handlers; parking new reads while a change
// is pending shortens that queue to the reads already running.
//
// # Holds
//
// The follower raises a hold when the writer's answer announces a change
// (Hold), and keeps one raised while it decodes, applies, verifies and
// publishes each change. A hold opens when the change is published
// (AfterPublish, on the replica's writer goroutine, before the apply
// returns), when the follower is done with the answer (Release: a change
// that failed, or an answer with nothing to apply), or when the bound has
// passed since it was raised, whichever comes first; the change then goes on
// competing with reads as it would without a gate. A hold that opened is
// never raised again: the next change gets a new one.
//
// # Reads
//
// Wait parks the caller while a hold is raised, until the hold opens or the
// caller's context ends; reads already past Wait are never held back. A
// read therefore waits at most the bound, and then answers from whatever
// state is published: the state before the change (the bound passed), or
// the change's (it was published). Both are states the replica published in
// order, so monotonic reads and min_seq are unaffected; a waiting read at
// most answers from a newer state than it would have.
//
// With no hold raised, Wait costs one atomic load. A nil *ApplyGate, or one
// with a bound of zero, never holds anything. An ApplyGate is safe for
// concurrent use; Hold is for the follower's goroutine.
type ApplyGate struct {
	wait    time.Duration
	m       *TailMetrics
	cur     atomic.Pointer[gateHold]
	waiting atomic.Int64 // reads parked in Wait now
	// afterFunc runs f once d has passed: time.AfterFunc (a test's clock).
	afterFunc func(d time.Duration, f func())
}

// gateHold is one raised hold; done is closed when it opens. Its timer is
// left to fire after an earlier opening (it then finds the hold open): it
// lives for one bound, and stopping it would need the timer shared between
// the follower and the writer goroutine.
type gateHold struct {
	done chan struct{}
	once sync.Once
}

// NewApplyGate returns a gate that holds new reads for at most wait while a
// change is pending; wait <= 0 turns it off. m receives its figures (nil:
// unexported ones).
func NewApplyGate(wait time.Duration, m *TailMetrics) *ApplyGate {
	if m == nil {
		m = NewTailMetrics(nil)
	}
	return &ApplyGate{wait: max(wait, 0), m: m, afterFunc: func(d time.Duration, f func()) { time.AfterFunc(d, f) }}
}

// Wait returns at once when no change is pending; otherwise it parks until
// the pending change is published, the gate's bound has passed since the
// change was announced, or ctx ends.
func (g *ApplyGate) Wait(ctx context.Context) {
	if g == nil {
		return
	}
	h := g.cur.Load()
	if h == nil {
		return
	}
	g.waiting.Add(1)
	start := time.Now()
	select {
	case <-h.done:
	case <-ctx.Done():
	}
	g.waiting.Add(-1)
	g.m.gateWaitSeconds.Observe(time.Since(start).Seconds())
}

// Hold raises a hold for a pending change, unless one is already raised.
// Tail goroutine only.
func (g *ApplyGate) Hold() {
	if g == nil || g.wait == 0 || g.cur.Load() != nil {
		return
	}
	h := &gateHold{done: make(chan struct{})}
	g.cur.Store(h)
	g.afterFunc(g.wait, func() {
		if g.open(h) {
			g.m.gateExpired.Inc()
		}
	})
}

// Release opens the raised hold, if any: the change it was raised for is
// published (AfterPublish), or the follower is done with it. Safe from any
// goroutine; a hold opens once.
func (g *ApplyGate) Release() {
	if g == nil {
		return
	}
	if h := g.cur.Load(); h != nil {
		g.open(h)
	}
}

// open opens h, if it is not open yet, and reports whether this call opened
// it.
func (g *ApplyGate) open(h *gateHold) (opened bool) {
	h.once.Do(func() {
		g.cur.CompareAndSwap(h, nil)
		close(h.done)
		opened = true
	})
	return opened
}

// Changed implements writer.Listener: nothing to do before the publish.
func (g *ApplyGate) Changed(*changeset.Set) {}

// AfterPublish implements writer.PublishListener: the change is published,
// the reads held for it may go (and answer from it).
func (g *ApplyGate) AfterPublish(*changeset.Set) { g.Release() }

// Holding reports whether a hold is raised: new reads wait.
func (g *ApplyGate) Holding() bool { return g != nil && g.cur.Load() != nil }

// Waiting returns how many reads the gate holds now.
func (g *ApplyGate) Waiting() int {
	if g == nil {
		return 0
	}
	return int(g.waiting.Load())
}

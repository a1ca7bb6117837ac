package workload

import (
	"math/rand/v2"

	"github.com/utxo-cache/utxo-cache/chain"
)

// The live set needs three operations, all O(1): add a new output, spend a
// uniformly random one, and spend a random young one. A slice with
// swap-delete does the first two; young outputs are kept apart in a ring and
// move to the slice when they age out. No map is needed: nothing is ever
// looked up by outpoint, and a map of millions of outpoints would cost a cache
// miss or two on every add and spend (it made a 300-tx block on a 2M-output
// set cost 3 ms instead of well under one) and some 60 bytes per output on
// top of the slice's 36.

// pool is a set of outpoints in a dense slice, in an arbitrary but
// deterministic order: removal swaps the last member into the hole.
type pool []chain.OutPoint

func (p *pool) add(op chain.OutPoint) { *p = append(*p, op) }

// takeAt removes and returns the member at position i.
func (p *pool) takeAt(i int) chain.OutPoint {
	s := *p
	op, last := s[i], len(s)-1
	s[i] = s[last]
	*p = s[:last]
	return op
}

// reservoir is a pool with an optional bound. Unbounded (bound 0) it holds
// every output offered and not taken since. Bounded, once full it keeps a
// uniform sample of the outputs offered and not taken (Vitter's algorithm R:
// the k-th offer enters with probability bound/k, replacing a uniformly
// chosen member); an output left out or replaced is frozen: live in the chain
// for good, never chosen again, and only counted. Until the bound is reached
// it draws no randomness, so a bounded generator makes the same blocks as an
// unbounded one up to that point.
type reservoir struct {
	pool
	bound  int // 0: unbounded
	frozen int // live outputs left out of the pool
}

// offer adds op to the pool or freezes it (or a member it replaces).
func (r *reservoir) offer(rng *rand.Rand, op chain.OutPoint) {
	if r.bound == 0 || len(r.pool) < r.bound {
		r.add(op)
		return
	}
	total := len(r.pool) + r.frozen + 1
	r.frozen++
	if j := rng.IntN(total); j < len(r.pool) {
		r.pool[j] = op
	}
}

// live returns the outputs offered and not taken: pooled and frozen.
func (r *reservoir) live() int { return len(r.pool) + r.frozen }

// youngRing holds the most recently created outputs, up to its capacity, in
// creation order; a spent one stays as a dead slot until overwritten. Pushing
// into a full ring evicts the oldest slot, which the caller moves to the pool
// if it is still live.
type youngRing struct {
	slots []youngSlot // len grows to cap, then wraps at next
	next  int
	live  int // live slots
}

type youngSlot struct {
	op   chain.OutPoint
	live bool
}

func newYoungRing(capacity int) youngRing {
	return youngRing{slots: make([]youngSlot, 0, capacity)}
}

// push adds op and returns the evicted slot's outpoint, if it was live.
func (r *youngRing) push(op chain.OutPoint) (evicted chain.OutPoint, ok bool) {
	r.live++
	if len(r.slots) < cap(r.slots) {
		r.slots = append(r.slots, youngSlot{op: op, live: true})
		return evicted, false
	}
	old := r.slots[r.next]
	r.slots[r.next] = youngSlot{op: op, live: true}
	r.next = (r.next + 1) % len(r.slots)
	if old.live {
		r.live--
	}
	return old.op, old.live
}

// find returns the position of a random live slot, or -1: it tries tries
// random slots, then, when exhaustive, scans from a random start, so that it
// finds one whenever r.live > 0.
func (r *youngRing) find(rng *rand.Rand, tries int, exhaustive bool) int {
	if r.live == 0 {
		return -1
	}
	for range tries {
		if i := rng.IntN(len(r.slots)); r.slots[i].live {
			return i
		}
	}
	if !exhaustive {
		return -1
	}
	start := rng.IntN(len(r.slots))
	for k := range r.slots {
		if i := (start + k) % len(r.slots); r.slots[i].live {
			return i
		}
	}
	panic("workload: young ring count out of sync")
}

// take spends the live slot at position i.
func (r *youngRing) take(i int) chain.OutPoint {
	r.slots[i].live = false
	r.live--
	return r.slots[i].op
}

package disk

import "github.com/utxo-cache/utxo-cache/chain"

// recentOutputs is a bounded in-memory view of recently created outputs that
// are still live, so that spending a young output (the common case) costs a
// map lookup instead of a Pebble read, as btcd's UTXO cache does.
//
// Invariant: every entry is live in the committed store with exactly this
// content. Entries are added and removed only after a batch commits, and the
// whole view is dropped on rollback, so a miss falls through to Pebble and a
// hit is always right. Only the writer goroutine touches it: no lock.
//
// Eviction is first-in first-out by creation: a ring of outpoints in insertion
// order; an evicted or spent outpoint simply stops being in the map.
type recentOutputs struct {
	capacity int
	m        map[chain.OutPoint]chain.Utxo
	ring     []chain.OutPoint // insertion order; len(ring) <= capacity
	head     int              // next slot to overwrite once the ring is full
}

func newRecentOutputs(capacity int) *recentOutputs {
	return &recentOutputs{capacity: capacity, m: make(map[chain.OutPoint]chain.Utxo)}
}

func (r *recentOutputs) get(op chain.OutPoint) (chain.Utxo, bool) {
	if r.capacity == 0 {
		return chain.Utxo{}, false
	}
	u, ok := r.m[op]
	return u, ok
}

func (r *recentOutputs) add(u *chain.Utxo) {
	if r.capacity == 0 {
		return
	}
	if len(r.ring) < r.capacity {
		r.ring = append(r.ring, u.OutPoint)
	} else {
		old := r.ring[r.head]
		// If old was re-created since, this evicts the newer entry early:
		// a later miss falls through to Pebble, so that costs a read, not
		// correctness.
		delete(r.m, old)
		r.ring[r.head] = u.OutPoint
		r.head = (r.head + 1) % r.capacity
	}
	r.m[u.OutPoint] = *u
}

func (r *recentOutputs) remove(op chain.OutPoint) { delete(r.m, op) }

// reset empties the view. It allocates a new map rather than clearing the
// old one, whose buckets (a cleared Go map keeps them) would hold the memory
// of a full view through the quiet time after a rollback.
func (r *recentOutputs) reset() {
	r.m = make(map[chain.OutPoint]chain.Utxo)
	r.ring = nil
	r.head = 0
}

func (r *recentOutputs) len() int { return len(r.m) }

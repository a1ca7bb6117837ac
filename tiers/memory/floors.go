package memory

import (
	"hash/maphash"
	"sync/atomic"
)

// floors is a fixed table of guard floors: the guard's slot holds the highest
// sequence any invalidation of a guard hashing there has raised it to.
//
// Guards share slots. Sharing only raises a guard's floor above its own last
// change, which discards or refuses entries that were still valid (an extra
// miss), never the reverse: a slot's floor is at least the floor of every
// guard in it, so the guard invariant holds per guard. The table is fixed
// (no growth, no eviction) because an evicted or reset floor would let an old
// fill back in.
//
// The hash seed is chosen once per table. It is fixed for the table's
// lifetime, which is all the invariant needs (floors never leave the
// process), and being unknown outside it keeps anyone from choosing guards
// that all land in one slot of a hot guard.
type floors struct {
	seed  maphash.Seed
	mask  uint64
	slots []atomic.Uint64
}

func newFloors(n int) *floors {
	return &floors{seed: maphash.MakeSeed(), mask: uint64(n - 1), slots: make([]atomic.Uint64, n)}
}

// hash is the guard's hash; slot(hash) is its floor. Callers reuse the hash
// to pick counter stripes.
func (f *floors) hash(guard string) uint64 { return maphash.String(f.seed, guard) }

func (f *floors) slot(h uint64) *atomic.Uint64 { return &f.slots[h&f.mask] }

// raise lifts the slot of hash h to at least seq. Floors only ever rise: an
// invalidation that arrives late with a lower seq leaves a higher floor alone.
func (f *floors) raise(h, seq uint64) {
	s := f.slot(h)
	for {
		cur := s.Load()
		if cur >= seq || s.CompareAndSwap(cur, seq) {
			return
		}
	}
}

package query

import (
	"math/rand/v2"
	"sync"
)

// hotSet keeps approximate read counts of at most n addresses, so the server
// can re-warm the ones wallets poll most after a change touches them, and the
// shapes of the first pages read of each (order and limit), so it re-warms
// the pages readers ask for, not a guess. When full, it halves every count
// and drops those that reach zero (an aging sketch: recent popularity wins).
// Safe for concurrent use.
type hotSet struct {
	mu struct {
		sync.Mutex
		counts map[string]*hotEntry
	}
	n int
}

// pageShape is a first page as a reader asks for it: its order and limit
// (the rest of its cache key is the address and an empty cursor).
type pageShape struct {
	desc  bool
	limit uint16
}

// maxHotPages is how many page shapes an address keeps: wallets read one or
// two (ascending and descending at one limit). A new shape replaces the
// oldest.
const maxHotPages = 2

type hotEntry struct {
	count uint32
	pages [maxHotPages]pageShape // pages[:npages], the oldest first
	n     uint8
}

// hotThreshold is the sampled reads since the last aging that make an
// address hot.
const hotThreshold = 4

// hotSampleMask samples one read in 16: popularity needs no exact counts, and
// a lock taken by every read would serialise the hot path.
const hotSampleMask = 15

// sampled reports whether this read should be counted.
func (h *hotSet) sampled() bool { return rand.Uint32()&hotSampleMask == 0 }

func newHotSet(n int) *hotSet {
	h := &hotSet{n: n}
	h.mu.counts = make(map[string]*hotEntry, n)
	return h
}

// touch counts a read of a (a balance).
func (h *hotSet) touch(a string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.entryLocked(a)
}

// touchPage counts a read of a's first page of shape p.
func (h *hotSet) touchPage(a string, p pageShape) {
	h.mu.Lock()
	defer h.mu.Unlock()
	e := h.entryLocked(a)
	if e == nil {
		return
	}
	for i := range e.n {
		if e.pages[i] == p {
			return
		}
	}
	if int(e.n) < maxHotPages {
		e.pages[e.n] = p
		e.n++
		return
	}
	copy(e.pages[:], e.pages[1:])
	e.pages[maxHotPages-1] = p
}

// entryLocked counts a read of a and returns its entry, nil when the set is
// full of addresses read more.
func (h *hotSet) entryLocked(a string) *hotEntry {
	e := h.mu.counts[a]
	if e == nil {
		if len(h.mu.counts) >= h.n {
			h.ageLocked()
			if len(h.mu.counts) >= h.n {
				return nil
			}
		}
		e = &hotEntry{}
		h.mu.counts[a] = e
	}
	e.count++
	return e
}

func (h *hotSet) ageLocked() {
	for k, e := range h.mu.counts {
		if e.count/2 == 0 {
			delete(h.mu.counts, k)
		} else {
			e.count /= 2
		}
	}
}

func (h *hotSet) contains(a string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	e := h.mu.counts[a]
	return e != nil && e.count >= hotThreshold
}

// pages appends to dst the first-page shapes read of a, if a is hot.
func (h *hotSet) pages(dst []pageShape, a string) []pageShape {
	h.mu.Lock()
	defer h.mu.Unlock()
	e := h.mu.counts[a]
	if e == nil || e.count < hotThreshold {
		return dst
	}
	return append(dst, e.pages[:e.n]...)
}

package query

import (
	"math/rand/v2"
	"sync"
)

// hotSet keeps approximate read counts of at most n addresses, so the server
// can re-warm the ones wallets poll most after a change touches them. When
// full, it halves every count and drops those that reach zero (an aging
// sketch: recent popularity wins). Safe for concurrent use.
type hotSet struct {
	mu struct {
		sync.Mutex
		counts map[string]uint32
	}
	n int
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
	h.mu.counts = make(map[string]uint32, n)
	return h
}

func (h *hotSet) touch(a string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.mu.counts[a]; !ok && len(h.mu.counts) >= h.n {
		h.ageLocked()
		if len(h.mu.counts) >= h.n {
			return
		}
	}
	h.mu.counts[a]++
}

func (h *hotSet) ageLocked() {
	for k, c := range h.mu.counts {
		if c/2 == 0 {
			delete(h.mu.counts, k)
		} else {
			h.mu.counts[k] = c / 2
		}
	}
}

func (h *hotSet) contains(a string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.mu.counts[a] >= hotThreshold
}

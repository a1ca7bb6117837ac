package query

import (
	"math/rand/v2"
	"slices"
	"sync"
)

// hotSet keeps approximate read counts of at most n addresses, so the server
// can re-warm the ones wallets poll most after a change touches them, and the
// shapes of the first pages read of each (order and limit), so it re-warms
// the pages readers ask for, not a guess, and only those read since their
// last warming: a page nobody reads between two blocks is not recomputed for
// nothing. When full, it halves every count and drops those that reach zero
// (an aging sketch: recent popularity wins). Safe for concurrent use.
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

// hotPage is a page shape read of an address, and whether a sampled read
// has asked for it since the warmer last took it.
type hotPage struct {
	shape pageShape
	read  bool
}

// maxHotPages is how many page shapes an address keeps: wallets read one or
// two (ascending and descending at one limit). A new shape replaces the
// oldest.
const maxHotPages = 2

type hotEntry struct {
	count uint32
	pages [maxHotPages]hotPage // pages[:n], the oldest first
	n     uint8
}

// hotThreshold is the sampled reads since the last aging that make an
// address hot.
const hotThreshold = 4

// hotSampleMask samples one read in 16: popularity needs no exact counts, and
// a lock taken by every read would serialise the hot path.
const hotSampleMask = 15

// sampled reports whether this read should be counted (by the hot set and
// the page shapes).
func sampled() bool { return rand.Uint32()&hotSampleMask == 0 }

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
		if e.pages[i].shape == p {
			e.pages[i].read = true
			return
		}
	}
	if int(e.n) < maxHotPages {
		e.pages[e.n] = hotPage{p, true}
		e.n++
		return
	}
	copy(e.pages[:], e.pages[1:])
	e.pages[maxHotPages-1] = hotPage{p, true}
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

// takePages appends to dst the first-page shapes of a read since they were
// last taken, if a is hot, and marks them unread.
func (h *hotSet) takePages(dst []pageShape, a string) []pageShape {
	h.mu.Lock()
	defer h.mu.Unlock()
	e := h.mu.counts[a]
	if e == nil || e.count < hotThreshold {
		return dst
	}
	for i := range e.n {
		if p := &e.pages[i]; p.read {
			dst = append(dst, p.shape)
			p.read = false
		}
	}
	return dst
}

// maxKeptShapes bounds the first-page shapes peeked per touched address.
const maxKeptShapes = 4

// shapeStats counts the shapes (order, limit) of sampled first-page reads,
// so the writer peeks the pages readers ask for. Safe for concurrent use.
type shapeStats struct {
	mu     sync.Mutex
	counts map[pageShape]uint32
	total  uint32
}

// shapeAging is the sampled reads after which every count is halved
// (recent use wins) and shapes that reach zero are dropped.
const shapeAging = 1 << 12

// add counts a sampled read of shape p.
func (st *shapeStats) add(p pageShape) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.counts == nil {
		st.counts = make(map[pageShape]uint32)
	}
	st.counts[p]++
	if st.total++; st.total >= shapeAging {
		st.total = 0
		for k, c := range st.counts {
			if c /= 2; c == 0 {
				delete(st.counts, k)
			} else {
				st.counts[k] = c
			}
		}
	}
}

// top appends the at most maxKeptShapes most read shapes to dst.
func (st *shapeStats) top(dst []pageShape) []pageShape {
	st.mu.Lock()
	defer st.mu.Unlock()
	start := len(dst)
	for p := range st.counts {
		dst = append(dst, p)
	}
	out := dst[start:]
	slices.SortFunc(out, func(a, b pageShape) int {
		return int(st.counts[b]) - int(st.counts[a])
	})
	return dst[:start+min(len(out), maxKeptShapes)]
}

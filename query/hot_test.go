package query

import (
	"slices"
	"testing"
)

// TestHotPagesReadSinceWarmed: the warmer gets the first-page shapes of a hot
// address that were read since it last took them, and nothing for an
// address that is not hot.
func TestHotPagesReadSinceWarmed(t *testing.T) {
	h := newHotSet(8)
	asc, desc := pageShape{limit: 100}, pageShape{desc: true, limit: 100}
	h.touchPage("a", asc)
	if got := h.takePages(nil, "a"); len(got) != 0 {
		t.Fatalf("pages of an address read once: %v", got)
	}
	h.touchPage("a", desc)
	h.touchPage("a", asc)
	h.touch("a") // a balance read: hot now, no new shape
	if !h.contains("a") {
		t.Fatal("a read 4 times is not hot")
	}
	if got := h.takePages(nil, "a"); !slices.Equal(got, []pageShape{asc, desc}) {
		t.Fatalf("pages %v, want %v", got, []pageShape{asc, desc})
	}
	if got := h.takePages(nil, "a"); len(got) != 0 {
		t.Fatalf("pages %v taken again with no read since", got)
	}
	h.touchPage("a", desc)
	if got := h.takePages(nil, "a"); !slices.Equal(got, []pageShape{desc}) {
		t.Fatalf("pages %v, want %v", got, []pageShape{desc})
	}
	// A third shape replaces the oldest.
	other := pageShape{limit: 10}
	h.touchPage("a", other)
	h.touchPage("a", asc)
	if got := h.takePages(nil, "a"); !slices.Equal(got, []pageShape{other, asc}) {
		t.Fatalf("pages %v, want %v", got, []pageShape{other, asc})
	}
}

// TestWarmQueuedOnce: an address touched by several changes before the
// warmer takes it is queued once, and needs its balance read if any of
// those changes lacked it.
func TestWarmQueuedOnce(t *testing.T) {
	s := &Server{warmQ: make(chan string, 8)}
	s.queued.m = make(map[string]bool)
	s.queueWarm("a", false)
	s.queueWarm("a", true)
	s.queueWarm("a", false)
	s.queueWarm("b", false)
	if n := len(s.warmQ); n != 2 {
		t.Fatalf("%d queued, want 2", n)
	}
	if a := <-s.warmQ; a != "a" || !s.dequeued(a) {
		t.Fatalf("first %q, or its balance not asked for", a)
	}
	if b := <-s.warmQ; b != "b" || s.dequeued(b) {
		t.Fatalf("second %q, or its balance asked for", b)
	}
	s.queueWarm("a", false) // taken: queued again
	if n := len(s.warmQ); n != 1 {
		t.Fatalf("%d queued after the warmer took it, want 1", n)
	}
}

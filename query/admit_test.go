package query

import (
	"testing"
	"time"
)

// TestAdmitterRule holds the admitter to its rule: a key is asked for only
// once a computation found it worth a round trip, filled only from its
// second such computation, and forgotten as soon as one costs less.
func TestAdmitterRule(t *testing.T) {
	a := newAdmitter(Admission{}) // Factor 2 × the measured round trip
	for range 200 {
		a.roundTrip(100 * time.Microsecond)
	}
	if got := time.Duration(a.threshold()); got < 195*time.Microsecond || got > 205*time.Microsecond {
		t.Fatalf("threshold after Gets of 100µs = %v, want about 200µs", got)
	}
	const key = "p|a|100||addr"
	steps := []struct {
		cost      time.Duration
		wantFill  bool
		wantAsked bool // after the computation
	}{
		{50 * time.Microsecond, false, false},  // cheap: not marked
		{300 * time.Microsecond, false, true},  // first expensive computation: marked, no fill
		{300 * time.Microsecond, true, true},   // second: filled
		{1 * time.Millisecond, true, true},     // and after
		{150 * time.Microsecond, false, false}, // cheaper than the round trip now: forgotten
		{300 * time.Microsecond, false, true},  // marked again from scratch
	}
	for i, s := range steps {
		if fill := a.computed(key, s.cost); fill != s.wantFill {
			t.Fatalf("step %d (cost %v): fill %v, want %v", i, s.cost, fill, s.wantFill)
		}
		if asked := a.ask(key); asked != s.wantAsked {
			t.Fatalf("step %d (cost %v): asked %v, want %v", i, s.cost, asked, s.wantAsked)
		}
	}
	if a.ask("p|a|100||other") {
		t.Fatal("a key never computed is asked for")
	}

	// The round trip moves the threshold: Gets of 1ms make 300µs cheap.
	for range 200 {
		a.roundTrip(time.Millisecond)
	}
	if a.computed(key, 300*time.Microsecond) || a.ask(key) {
		t.Fatal("a 300µs answer is still worth a 1ms round trip")
	}

	// With no Get to measure, cheap computations let the estimate drift
	// down, so that answers cheaper than a round trip measured high once
	// are asked for again in time: from a round trip of 1ms, and from the
	// first guess (50µs: under 65,536 ns, where a drift of 1/65536 in whole
	// nanoseconds would round to nothing).
	for _, d := range []*admitter{a, newAdmitter(Admission{})} {
		before := d.threshold()
		for range 100_000 {
			d.computed("p|a|100||cheap", 0)
		}
		if after := d.threshold(); after > before/3 || after == 0 {
			t.Fatalf("threshold %v after 100,000 cheap computations, from %v: want it below a third, above 0",
				time.Duration(after), time.Duration(before))
		}
	}

	// MinCost is a floor under the measured threshold.
	m := newAdmitter(Admission{MinCost: 5 * time.Millisecond})
	if m.computed(key, time.Millisecond); m.ask(key) {
		t.Fatal("an answer cheaper than MinCost was marked")
	}
	// All admits everything, marks nothing.
	all := newAdmitter(Admission{All: true})
	if !all.ask(key) || !all.computed(key, 0) {
		t.Fatal("Admission.All does not ask and fill every answer")
	}
}

// TestAdmitterDefaults: Factor 0 means 2, a negative Factor 0 (every
// answer worth a round trip unless MinCost says otherwise), and the
// threshold starts from defaultRoundTrip.
func TestAdmitterDefaults(t *testing.T) {
	if got := newAdmitter(Admission{}).threshold(); got != int64(2*defaultRoundTrip) {
		t.Fatalf("default threshold %v, want %v", time.Duration(got), 2*defaultRoundTrip)
	}
	if got := newAdmitter(Admission{Factor: -1}).threshold(); got != 0 {
		t.Fatalf("Factor -1: threshold %v, want 0", time.Duration(got))
	}
	if got := newAdmitter(Admission{Factor: -1, MinCost: time.Second}).threshold(); got != int64(time.Second) {
		t.Fatalf("Factor -1, MinCost 1s: threshold %v, want 1s", time.Duration(got))
	}
}

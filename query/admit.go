package query

import (
	"hash/maphash"
	"math"
	"sync/atomic"
	"time"
)

// Admission is the rule that decides which answers a remote tier (a tier
// that costs a network round trip: Redis) is asked for and filled with.
// A round trip pays only for an answer the store computes more slowly than
// the tier returns it; for every other answer the round trip, and the fill
// after a miss, are pure cost, and a remote tier asked for everything serves
// less than the store alone once most answers are cheap or read once.
//
// The rule (cost-based admission, the default): an answer is worth a round
// trip when computing it from the store took at least Threshold (below).
// The server asks a remote tier only for the answers that were worth one
// the last time this node computed them, and fills it only with an answer
// worth one that was computed here before: an answer is admitted on its
// second expensive computation, so an answer read once (a deep page behind
// a cursor nobody follows again, a random outpoint) never costs the tier a
// fill. The marks live in a fixed table per remote tier (admitSlots keys,
// 8 bytes each); a key that loses its slot to another is computed once more
// and marked again, and a key whose slot another key's fingerprint happens
// to match is asked for needlessly once: neither changes an answer, since
// what a tier returns is held to the guard invariant either way.
type Admission struct {
	// All asks and fills the remote tiers for every answer: no cost rule.
	All bool
	// MinCost is the least computing time that makes an answer worth a
	// round trip. Default 0: Factor alone decides.
	MinCost time.Duration
	// Factor times the tier's measured Get time (an exponentially weighted
	// mean of every Get the server made of it, queueing included: what a
	// reader pays) is the least computing time worth a round trip, unless
	// MinCost is more. Default 2; a negative Factor means 0.
	Factor float64
}

// admitSlots is the size of a remote tier's table of marked keys (a
// power of two).
const admitSlots = 1 << 16

// defaultRoundTrip is a remote tier's assumed Get time until the server
// has measured one: a Redis on the same host. It errs low on purpose: the
// server measures the round trip only by asking, and asks only for keys
// whose answers cost more than the threshold, so a guess too high would
// never be corrected (answers between the true threshold and the guessed
// one would never be asked for), where one too low is corrected by the
// first Gets it admits.
const defaultRoundTrip = 50 * time.Microsecond

// rttFrac is the fractional bits of admitter.rtt; driftShift makes each
// cheap computation take 1/65536 of it.
const (
	rttFrac    = 16
	driftShift = 16
)

// admitter applies an Admission to one remote tier. Safe for concurrent use.
type admitter struct {
	all     bool
	minCost int64   // ns
	factor  float64 // of rtt
	// rtt is the exponentially weighted mean of the tier's Gets, in ns
	// << rttFrac (fixed point, so that the drift below is exact at any
	// size).
	rtt  atomic.Int64
	seed maphash.Seed
	// marks[h&mask] == h|1 marks the key of hash h as worth a round trip.
	marks []atomic.Uint64
}

func newAdmitter(a Admission) *admitter {
	f := a.Factor
	switch {
	case f == 0:
		f = 2
	case f < 0:
		f = 0
	}
	ad := &admitter{all: a.All, minCost: int64(a.MinCost), factor: f, seed: maphash.MakeSeed()}
	ad.rtt.Store(int64(defaultRoundTrip) << rttFrac)
	if !a.All {
		ad.marks = make([]atomic.Uint64, admitSlots)
	}
	return ad
}

// mark returns key's slot and the value that marks it there.
func (a *admitter) mark(key string) (*atomic.Uint64, uint64) {
	h := maphash.String(a.seed, key)
	return &a.marks[h&(admitSlots-1)], h | 1
}

// ask reports whether the tier is worth asking for key.
func (a *admitter) ask(key string) bool {
	if a.all {
		return true
	}
	slot, v := a.mark(key)
	return slot.Load() == v
}

// computed records that key's answer took cost to compute from the store,
// and reports whether the tier should be filled with it.
func (a *admitter) computed(key string, cost time.Duration) bool {
	if a.all {
		return true
	}
	slot, v := a.mark(key)
	if int64(cost) < a.threshold() {
		slot.CompareAndSwap(v, 0)
		// The estimate drifts down while answers are cheap: a round trip
		// measured high once (a loaded moment) would otherwise hold the
		// threshold up with no Get left to correct it. Gets of marked keys
		// pull it back; 1/65536 per computation keeps the pull the
		// stronger by far (halving takes some 45,000 computations).
		rtt := a.rtt.Load()
		a.rtt.Store(rtt - rtt>>driftShift)
		return false
	}
	// Marked already: the second expensive computation fills.
	return slot.Swap(v) == v
}

// roundTrip records a Get of the tier that took d.
func (a *admitter) roundTrip(d time.Duration) {
	old := a.rtt.Load()
	sample := int64(d) << rttFrac
	// A lost update between concurrent Gets only drops a sample.
	a.rtt.Store(old + (sample-old)/16)
}

// threshold is the least computing time, in ns, worth a round trip.
func (a *admitter) threshold() int64 {
	t := int64(math.Round(a.factor * float64(a.rtt.Load()>>rttFrac)))
	return max(t, a.minCost)
}

package query

import (
	"encoding/binary"
	"hash/maphash"
	"math"
	"sync/atomic"
	"time"

	"github.com/utxo-cache/utxo-cache/chain"
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
// power of two): 2 MiB, room for the outpoints of batch lookups too.
const admitSlots = 1 << 18

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

	// Batch lookups (see "Batches" below). itemSeed hashes the outpoints
	// a batch marks, apart from the single reads' marks of the same keys.
	// itemCost is the mean time the store took per outpoint of a batch,
	// itemTrip the mean time a batch Get of the tier took per key beyond
	// one round trip; both ns << rttFrac, exponentially weighted (α 1/16),
	// 0 until measured.
	itemSeed           maphash.Seed
	itemCost, itemTrip atomic.Int64
}

// Batches. A batch lookup (lookup.go) asks a remote tier for many outpoints
// in one Get, which costs about rtt + n×itemTrip, against n×itemCost to read
// them from the store. One outpoint alone is never worth a round trip (a
// single Get of the store), but a batch of them can be, and once a batch
// pays the round trip, each outpoint more costs it little (itemTrip, a
// fraction of itemCost). So: a batch's outpoints are marked when a batch
// read them from the store at a cost worth a round trip, and the tier is
// filled with an outpoint on its second such read (an outpoint read once
// never costs a fill). A batch asks the tier for every outpoint it still
// needs when reading its marked ones from the store is expected to take
// Factor times that Get (and at least MinCost): the unmarked ones ride
// along for little, and may be there (filled by another node, or marked
// before their slot went to another key). The marks of batches are their
// own (itemSeed): an outpoint a batch marked is not asked for by a single
// read, whose answer costs less than any round trip.

func newAdmitter(a Admission) *admitter {
	f := a.Factor
	switch {
	case f == 0:
		f = 2
	case f < 0:
		f = 0
	}
	ad := &admitter{all: a.All, minCost: int64(a.MinCost), factor: f, seed: maphash.MakeSeed(), itemSeed: maphash.MakeSeed()}
	ad.rtt.Store(int64(defaultRoundTrip) << rttFrac)
	if !a.All {
		ad.marks = make([]atomic.Uint64, admitSlots)
	}
	return ad
}

// mark returns key's slot and the value that marks it there.
func (a *admitter) mark(key string) (*atomic.Uint64, uint64) {
	return a.slotOf(maphash.String(a.seed, key))
}

// markItem is mark for an outpoint of a batch: its hash is of the
// outpoint's bytes, so that a batch the tier is not asked for builds no
// key.
func (a *admitter) markItem(op chain.OutPoint) (*atomic.Uint64, uint64) {
	var b [chain.HashSize + 4]byte
	copy(b[:], op.TxHash[:])
	binary.BigEndian.PutUint32(b[chain.HashSize:], op.Index)
	return a.slotOf(maphash.Bytes(a.itemSeed, b[:]))
}

func (a *admitter) slotOf(h uint64) (*atomic.Uint64, uint64) {
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
	step(&a.rtt, int64(d)<<rttFrac)
}

// threshold is the least computing time, in ns, worth a round trip.
func (a *admitter) threshold() int64 {
	t := int64(math.Round(a.factor * float64(a.rtt.Load()>>rttFrac)))
	return max(t, a.minCost)
}

// markedItem reports whether a batch marked op.
func (a *admitter) markedItem(op chain.OutPoint) bool {
	if a.all {
		return true
	}
	slot, v := a.markItem(op)
	return slot.Load() == v
}

// batchWorth reports whether n outpoints that the store reads in cost
// (ns) are worth one batch Get of the tier.
func (a *admitter) batchWorth(n int, cost int64) bool {
	if a.all {
		return true
	}
	trip := float64(a.rtt.Load()>>rttFrac) + float64(n)*float64(a.itemTrip.Load()>>rttFrac)
	return float64(cost) >= a.factor*trip && cost >= a.minCost
}

// askBatch reports whether a batch that needs n outpoints, marked of them,
// should ask the tier for all n: whether the store is expected to take
// Factor times the Get of n to read the marked ones.
func (a *admitter) askBatch(n, marked int) bool {
	return a.all || (marked > 0 && a.batchWorth(n, int64(marked)*(a.itemCost.Load()>>rttFrac)))
}

// batchAsked records a batch Get of n keys that took d. The time per key
// starts at 0 and moves by a sixteenth of each sample, so one slow first
// Get (a connection dialled) does not set it.
func (a *admitter) batchAsked(n int, d time.Duration) {
	beyond := max(int64(d)-a.rtt.Load()>>rttFrac, 0) / int64(n)
	step(&a.itemTrip, beyond<<rttFrac)
}

// batchSkipped records a batch whose marked outpoints were not worth
// asking for. The time per key drifts down by 1/1024 each time, for the
// reason the round trip drifts (computed): a time measured high would
// otherwise never be measured again. Each Get it then allows moves the
// mean a sixteenth of the way back, so a tier that is not worth asking is
// asked for about one batch in a hundred.
func (a *admitter) batchSkipped() {
	trip := a.itemTrip.Load()
	a.itemTrip.Store(trip - trip>>10)
}

// batchComputed records that the store read n outpoints of a batch in
// cost, and reports whether they were worth a batch Get: those not marked
// are then marked (markOp), and those marked, asked for and missed are
// filled.
func (a *admitter) batchComputed(n int, cost time.Duration) bool {
	// The first measurement sets the mean: a store's cost errs high only
	// while it is cold, and a batch that asks the tier for nothing new
	// measures it again on its next miss.
	ewma(&a.itemCost, int64(cost)<<rttFrac/int64(n))
	return a.batchWorth(n, int64(cost))
}

// markOp marks op: a batch read it from the store at a cost worth a
// round trip.
func (a *admitter) markOp(op chain.OutPoint) {
	if a.all {
		return
	}
	slot, v := a.markItem(op)
	slot.Store(v)
}

// step moves the mean m a sixteenth of the way to sample (α 1/16). A lost
// update between concurrent callers only drops a sample.
func step(m *atomic.Int64, sample int64) {
	old := m.Load()
	m.Store(old + (sample-old)/16)
}

// ewma is step, but sets m to sample itself while m is 0 (unmeasured).
func ewma(m *atomic.Int64, sample int64) {
	if m.CompareAndSwap(0, sample) {
		return
	}
	step(m, sample)
}

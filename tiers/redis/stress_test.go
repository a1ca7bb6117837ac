package redis

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/utxo-cache/utxo-cache/cache"
)

var (
	stressSeed = flag.Uint64("redis.seed", 0, "seed of the randomized stress tests (0: from the clock)")
	stressTime = flag.Duration("redis.stress", 1500*time.Millisecond, "duration of each stress test")
)

// stressModel is the truth the stress test checks the tier against: a
// single writer committing seqs in order (commit), then invalidating the
// guards each commit touched, then publishing it; readers that read the
// published seq and fill later, as a reader of a published disk snapshot
// does. (Two writer goroutines invalidate concurrently, so that the server
// runs invalidations in any order; a commit is published once its own
// invalidation has returned.)
type stressModel struct {
	commitMu  sync.Mutex // serializes commits, as the one writer goroutine does
	committed atomic.Uint64
	published atomic.Uint64 // the highest seq whose Invalidate has returned
	// raised[g] is the highest seq whose Invalidate of guard g has returned:
	// from then on no Get may serve an entry of g below it.
	raised []atomic.Uint64
}

func (m *stressModel) commit() uint64 {
	m.commitMu.Lock()
	defer m.commitMu.Unlock()
	seq := m.committed.Load() + 1
	m.committed.Store(seq)
	return seq
}

// raise sets v to max(v, seq).
func raise(v *atomic.Uint64, seq uint64) {
	for {
		cur := v.Load()
		if cur >= seq || v.CompareAndSwap(cur, seq) {
			return
		}
	}
}

// stressReport is what the workers saw.
type stressReport struct {
	hits, violations atomic.Int64
	slowest          [3]atomic.Int64 // by op: get, set, invalidate, in ns
}

func (r *stressReport) observe(op int, d time.Duration) {
	for {
		cur := r.slowest[op].Load()
		if int64(d) <= cur || r.slowest[op].CompareAndSwap(cur, int64(d)) {
			return
		}
	}
}

const (
	stressGuards   = 8
	stressVariants = 3 // keys per guard: page limits, cursors
	stressWriters  = 2
	stressFillers  = 6
	stressCheckers = 4
)

func stressKey(g, v int) (key, guard string) {
	guard = "addr" + strconv.Itoa(g)
	return guard + "?limit=" + strconv.Itoa(10*(v+1)), guard
}

// runStress drives the tier with concurrent writers, fillers and checkers
// for d, while disturb (if any) runs beside them, and fails t on any Get
// that serves an entry below a floor raised before the Get began.
func runStress(t *testing.T, tier *Tier, d time.Duration, disturb func()) *stressReport {
	seed := *stressSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay with -redis.seed=%d)", seed, seed)
	m := &stressModel{raised: make([]atomic.Uint64, stressGuards)}
	rep := &stressReport{}
	ctx := context.Background()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var once sync.Once
	halt := func() { once.Do(func() { close(stop); wg.Wait() }) }
	defer halt() // also when disturb fails the test
	worker := func(id uint64, body func(rng *rand.Rand)) {
		rng := rand.New(rand.NewPCG(seed, id))
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
					body(rng)
					if !tier.Healthy() { // degraded calls return at once: do not spin
						time.Sleep(100 * time.Microsecond)
					}
				}
			}
		})
	}
	timed := func(op int, f func()) {
		start := time.Now()
		f()
		rep.observe(op, time.Since(start))
	}

	for w := range stressWriters {
		worker(uint64(100+w), func(rng *rand.Rand) {
			seq := m.commit()
			guards := make([]string, 0, 3)
			touched := rng.Perm(stressGuards)[:1+rng.IntN(3)]
			for _, g := range touched {
				_, guard := stressKey(g, 0)
				guards = append(guards, guard)
			}
			timed(2, func() {
				if err := tier.Invalidate(ctx, seq, guards); err != nil {
					t.Errorf("Invalidate(%d): %v", seq, err)
				}
			})
			for _, g := range touched {
				raise(&m.raised[g], seq)
			}
			raise(&m.published, seq)
			time.Sleep(time.Duration(rng.IntN(500)) * time.Microsecond)
		})
	}
	for w := range stressFillers {
		worker(uint64(200+w), func(rng *rand.Rand) {
			key, guard := stressKey(rng.IntN(stressGuards), rng.IntN(stressVariants))
			seq := m.published.Load() // the reader's snapshot
			if rng.IntN(4) == 0 {     // a slow reader: the disk read takes a while
				time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond)
			}
			if rng.IntN(2) == 0 { // the server's path: queued, stored later
				timed(1, func() { tier.SetAsync(key, guard, entryAt(seq)) })
			} else {
				timed(1, func() { tier.Set(ctx, key, guard, entryAt(seq)) })
			}
		})
	}
	for w := range stressCheckers {
		worker(uint64(300+w), func(rng *rand.Rand) {
			g := rng.IntN(stressGuards)
			key, guard := stressKey(g, rng.IntN(stressVariants))
			floor := m.raised[g].Load()
			var e cache.Entry
			var ok bool
			timed(0, func() { e, ok = tier.Get(ctx, key, guard) })
			if !ok {
				return
			}
			rep.hits.Add(1)
			if want := fmt.Sprintf(`"seq":%d}`, e.Seq); string(e.Body) != want {
				t.Errorf("%s: body %q for seq %d", key, e.Body, e.Seq)
			}
			if e.Seq < floor {
				if rep.violations.Add(1) <= 5 {
					t.Errorf("%s: Get served Seq %d, below floor %d raised before the Get began", key, e.Seq, floor)
				}
			}
		})
	}

	if disturb != nil {
		disturb()
	}
	time.Sleep(d)
	halt()
	st := tier.Stats()
	t.Logf("hits %d (stats %d), misses %d, stale discards %d, fills %d, refused %d, invalidations %d, outages %d, errors %v",
		rep.hits.Load(), st.Hits, st.Misses, st.StaleDiscards, st.Fills, st.FillsRefused, st.Invalidations, st.Outages, st.Errors)
	t.Logf("slowest get %v, set %v, invalidate %v", time.Duration(rep.slowest[0].Load()),
		time.Duration(rep.slowest[1].Load()), time.Duration(rep.slowest[2].Load()))
	if rep.violations.Load() > 0 {
		t.Fatalf("%d stale entries served", rep.violations.Load())
	}
	return rep
}

// TestStressGuardInvariant races fills against invalidations on a healthy
// Redis. It fails if Get does not check the floors (a fill stored before an
// invalidation would be served after it).
func TestStressGuardInvariant(t *testing.T) {
	s := startRedis(t)
	tier := newTier(t, s, nil)
	rep := runStress(t, tier, *stressTime, nil)
	st := tier.Stats()
	if rep.hits.Load() == 0 || st.StaleDiscards == 0 || st.FillsRefused == 0 {
		t.Fatalf("the race was not exercised: %d hits, %d stale discards, %d refused fills",
			rep.hits.Load(), st.StaleDiscards, st.FillsRefused)
	}
}

// TestStressThroughOutages runs the same load while Redis is killed and
// restarted empty, then paused and resumed with its data: every call
// returns within CallTimeout (plus scheduling), and no stale entry is served
// before, during or after.
func TestStressThroughOutages(t *testing.T) {
	s := startRedis(t)
	tier := newTier(t, s, func(o *Options) { o.CallTimeout = outageCallTimeout })
	phase := *stressTime / 5
	rep := runStress(t, tier, 0, func() {
		time.Sleep(phase)
		s.Kill()
		time.Sleep(phase)
		s.Restart()
		waitFor(t, 5*time.Second, "healthy after restart", tier.Healthy)
		time.Sleep(phase)
		s.Pause()
		time.Sleep(phase)
		s.Resume()
		waitFor(t, 5*time.Second, "healthy after resume", tier.Healthy)
		time.Sleep(phase)
	})
	for op, name := range []string{"Get", "Set", "Invalidate"} {
		if d := time.Duration(rep.slowest[op].Load()); d > outageCallTimeout+latencyMargin {
			t.Errorf("slowest %s took %v, more than CallTimeout %v + %v", name, d, outageCallTimeout, latencyMargin)
		}
	}
	if st := tier.Stats(); st.Outages < 2 {
		t.Fatalf("%d outages seen, want 2 (kill, pause)", st.Outages)
	}
	if !tier.Healthy() {
		t.Fatal("not healthy at the end")
	}
}

package memory

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/utxo-cache/utxo-cache/cache"
)

var seedFlag = flag.Uint64("seed", 0, "seed for randomized tests (0: from the clock)")

// testSeed returns the seed of a randomized test and logs it for replay.
// The goroutines' interleaving is not replayable; the choices each one makes
// are.
func testSeed(t *testing.T) uint64 {
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay with -seed=%d)", seed, seed)
	return seed
}

// snapshot is the simulated disk at one commit: the guard values as of seq.
// Published snapshots are immutable.
type snapshot struct {
	seq     uint64
	changed []uint64 // per guard: seq of its last change; the value is "g/changed"
}

func value(g int, changed uint64) string { return fmt.Sprintf("%d/%d", g, changed) }

func parseValue(body []byte) (g int, changed uint64, err error) {
	gs, cs, ok := strings.Cut(string(body), "/")
	g, err1 := strconv.Atoi(gs)
	c, err2 := strconv.ParseUint(cs, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("corrupt cached value %q", body)
	}
	return g, c, nil
}

// TestStaleFillNeverServed checks the guard invariant under concurrency. A
// writer commits steps to a simulated disk, each changing a random subset of
// guards, and invalidates them; once Invalidate returns it publishes the
// step as acknowledged. Fillers read the disk, sometimes dawdle, and Set what
// they read under the seq they read at (a slow reader's stale fill). Checkers
// note the acknowledged step, then Get, and require any hit to be a value
// not replaced by an acknowledged change; on a miss they fill like a
// read-through. Removing the floor check from Get fails this test at once:
// entries stored before an invalidation are then served after it.
func TestStaleFillNeverServed(t *testing.T) {
	for _, slots := range []int{16, 1 << 12} {
		t.Run(fmt.Sprintf("slots=%d", slots), func(t *testing.T) { stressTier(t, slots) })
	}
}

func stressTier(t *testing.T, slots int) {
	const (
		guards   = 64
		steps    = 1500
		fillers  = 4
		checkers = 4
	)
	seed := testSeed(t)
	tr := newTier(t, Options{MaxBytes: 1 << 20, FloorSlots: slots})
	names := make([]string, guards)
	for g := range names {
		names[g] = "addr" + strconv.Itoa(g)
	}
	key := func(g, page int) string { return names[g] + "/page" + strconv.Itoa(page) }

	var disk, acked atomic.Pointer[snapshot]
	genesis := &snapshot{changed: make([]uint64, guards)}
	disk.Store(genesis)
	acked.Store(genesis)

	// fill reads the disk and stores what it read, sometimes after a delay
	// long enough for the writer to commit and invalidate in between.
	fill := func(r *rand.Rand, g, page int) {
		s := disk.Load()
		e := cache.Entry{Seq: s.seq, Status: 200, Body: []byte(value(g, s.changed[g]))}
		if r.IntN(3) == 0 {
			for range r.IntN(200) {
				runtime.Gosched()
			}
		}
		tr.Set(ctx, key(g, page), names[g], e)
	}

	var ops atomic.Uint64 // reader operations, to pace the writer
	var hits, violations atomic.Uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	for i := range fillers + checkers {
		r := rand.New(rand.NewPCG(seed, uint64(i)))
		checker := i >= fillers
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				ops.Add(1)
				g, page := r.IntN(guards), r.IntN(2)
				if !checker {
					fill(r, g, page)
					continue
				}
				a := acked.Load() // before the Get begins
				e, ok := tr.Get(ctx, key(g, page), names[g])
				if !ok {
					fill(r, g, page)
					continue
				}
				hits.Add(1)
				eg, changed, err := parseValue(e.Body)
				switch {
				case err != nil:
					t.Error(err)
				case eg != g:
					t.Errorf("Get(%s) returned guard %d's value", names[g], eg)
				case changed > e.Seq:
					t.Errorf("entry seq %d holds a value of seq %d", e.Seq, changed)
				case changed < a.changed[g]:
					if violations.Add(1) <= 5 {
						t.Errorf("stale hit: guard %d value of seq %d (entry seq %d), but seq %d changed it and was acknowledged",
							g, changed, e.Seq, a.changed[g])
					}
				}
			}
		})
	}

	w := rand.New(rand.NewPCG(seed, 1<<32))
	for step := uint64(1); step <= steps; step++ {
		prev := disk.Load()
		next := &snapshot{seq: step, changed: append([]uint64(nil), prev.changed...)}
		var touched []string
		for g := range guards {
			if w.IntN(8) == 0 {
				next.changed[g] = step
				touched = append(touched, names[g])
			}
		}
		disk.Store(next) // the commit
		if err := tr.Invalidate(ctx, step, touched); err != nil {
			t.Fatal(err)
		}
		acked.Store(next)
		// Let the readers run between commits.
		for start := ops.Load(); ops.Load() < start+fillers+checkers && !t.Failed(); {
			runtime.Gosched()
		}
	}
	close(done)
	wg.Wait()

	s := tr.Stats()
	t.Logf("hits %d, stats %+v", hits.Load(), s)
	if violations.Load() > 0 {
		t.Fatalf("%d stale hits", violations.Load())
	}
	// The run must have exercised both sides of the invariant.
	if s.Hits == 0 || s.StaleDiscards == 0 || s.FillsRefusedStale == 0 {
		t.Fatalf("stress run too weak to mean anything: %+v", s)
	}
}

package workload

import (
	"reflect"
	"runtime"
	"testing"

	"github.com/utxo-cache/utxo-cache/chain"
)

// TestBoundedSpendsLiveOutputsOnce replays a bounded generator's chain on
// the test's own model of live outputs: every input spends a live output
// once, Live counts the frozen outputs too, and what the generator keeps is
// live.
func TestBoundedSpendsLiveOutputsOnce(t *testing.T) {
	for _, p := range []Profile{Bitcoin, Cardano} {
		t.Run(p.String(), func(t *testing.T) {
			g := mustNew(t, Options{Seed: 11, Profile: p, Addresses: 200_000, Spendable: 3000, TxsPerBlock: 100})
			m := newModel()
			for i := range 200 {
				var b *chain.Block
				if i%40 == 5 {
					b = g.NextSeed(8000)
				} else {
					b = g.Next()
				}
				m.apply(t, b)
			}
			if g.Frozen() == 0 {
				t.Fatal("nothing frozen: the bound was never reached")
			}
			if len(m.live) != g.Live() {
				t.Fatalf("model has %d live outputs, generator %d", len(m.live), g.Live())
			}
			kept := 0
			for op := range g.LiveOutPoints() {
				if _, ok := m.live[op]; !ok {
					t.Fatalf("kept output %s is not live", op)
				}
				kept++
			}
			if kept != g.Live()-g.Frozen() {
				t.Fatalf("kept %d, live %d, frozen %d", kept, g.Live(), g.Frozen())
			}
			if bound := 3000 + 3000/4 + youngWindow; kept > bound {
				t.Fatalf("kept %d outputs, bound %d", kept, bound)
			}
			if g.Tip() != m.tip {
				t.Fatalf("tip %v, model %v", g.Tip(), m.tip)
			}
			t.Logf("%d live, %d frozen, %d spends (%d young)", g.Live(), g.Frozen(), m.spends, m.young)
		})
	}
}

// TestBoundedSameBelowBound: until the bound is reached a bounded generator
// makes an unbounded one's blocks, so a chain file below the bound is the
// managed preload's chain.
func TestBoundedSameBelowBound(t *testing.T) {
	for _, p := range []Profile{Bitcoin, Cardano} {
		a := mustNew(t, Options{Seed: 5, Profile: p, TxsPerBlock: 60})
		b := mustNew(t, Options{Seed: 5, Profile: p, TxsPerBlock: 60, Spendable: 1 << 20})
		if !reflect.DeepEqual(a.NextSeed(20_000), b.NextSeed(20_000)) {
			t.Fatal("seed blocks differ")
		}
		for i := range 50 {
			if !reflect.DeepEqual(a.Next(), b.Next()) {
				t.Fatalf("%s: block %d differs", p, i)
			}
		}
	}
}

// TestGeneratorMemoryBounded grows bounded chains to two sizes, four times
// apart, and compares the heap the generator keeps at the end and at its
// peak (the live heap, sampled after a GC every few blocks, so that garbage
// awaiting collection does not count): neither may grow with the chain. An
// unbounded generator, measured the same way, shows the growth the bound
// removes, so the measurement can tell. Heap figures under the race
// detector mean nothing: it skips there (make test-norace runs it).
func TestGeneratorMemoryBounded(t *testing.T) {
	if raceEnabled {
		t.Skip("heap figures are not meaningful under -race")
	}
	if testing.Short() {
		t.Skip("grows chains of 1.6M outputs")
	}
	const small, large = 400_000, 1_600_000
	measure := func(spendable, live int) (kept, peak uint64) {
		g := mustNew(t, Options{Seed: 3, Profile: Cardano, Addresses: live / 2, Spendable: spendable})
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		base := ms.HeapAlloc
		for i := 0; g.Live() < live; i++ {
			if i%4 == 3 {
				g.Next()
			} else {
				g.NextSeed(10_000)
			}
			if i%8 == 0 {
				runtime.GC()
				runtime.ReadMemStats(&ms)
				peak = max(peak, ms.HeapAlloc-min(base, ms.HeapAlloc))
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&ms)
		kept = ms.HeapAlloc - min(base, ms.HeapAlloc)
		runtime.KeepAlive(g)
		return kept, max(peak, kept)
	}
	const bound = 100_000
	k1, p1 := measure(bound, small)
	k2, p2 := measure(bound, large)
	u1, _ := measure(0, small)
	u2, _ := measure(0, large)
	t.Logf("bounded (%d): kept %d KiB at %d live, %d KiB at %d; peak %d KiB, %d KiB", bound, k1>>10, small, k2>>10, large, p1>>10, p2>>10)
	t.Logf("unbounded: kept %d KiB at %d live, %d KiB at %d", u1>>10, small, u2>>10, large)
	// The cache of popular addresses fills as more ranks get drawn (2 MiB
	// more at the larger size), up to its bound of addressCache strings.
	const slack = 4 << 20
	if k2 > k1+k1/4+slack || p2 > p1+p1/4+slack {
		t.Errorf("a bounded generator's heap grows with the chain: kept %d -> %d, peak %d -> %d bytes", k1, k2, p1, p2)
	}
	if u2 < 2*u1 {
		t.Errorf("the unbounded generator's heap did not grow (%d -> %d bytes): the measurement cannot tell", u1, u2)
	}
}

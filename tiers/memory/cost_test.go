package memory

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"

	"github.com/utxo-cache/utxo-cache/cache"
)

// TestEntryCostHoldsHeap holds entryCost, what an entry costs the budget
// (--memory-cache-bytes), to the heap the tier really holds per entry: a
// tier is filled past its budget with entries shaped as the query server
// makes them (a cloned body, an ETag and a guard of their own), for bodies
// from an outpoint's answer to an address page, and the heap it holds beyond
// an empty tier's, divided by the entries it holds, must not exceed their
// cost. Measured with entryOverhead 384: 30 to 70 bytes under the cost.
func TestEntryCostHoldsHeap(t *testing.T) {
	if raceEnabled {
		t.Skip("measures the heap; -race adds its own to every allocation")
	}
	heap := func() uint64 {
		var ms runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	const budget = 8 << 20
	for _, size := range []int{40, 120, 200, 400, 1500, 2305, 4000} {
		before := heap()
		tr, err := New(Options{MaxBytes: budget})
		if err != nil {
			t.Fatal(err)
		}
		empty := heap() - before
		body := bytes.Repeat([]byte("x"), size)
		var cost int64
		for i := range int(2 * budget / (size + 160)) {
			g := fmt.Sprintf("a|addr1qxy2kgdygjrsqtzq2n0yrf2493p83kkfjhx%07d", i)
			e := cache.Entry{Seq: 1, Status: 200, ETag: fmt.Sprintf(`W/"%016x"`, i), Body: bytes.Clone(body)}
			cost = entryCost(g, &e)
			for range 3 { // seen often enough to be admitted
				tr.Set(ctx, fmt.Sprintf("u|%d", i), g, e)
			}
			if i%1000 == 0 {
				tr.Wait()
			}
		}
		tr.Wait()
		full := heap() - before
		entries := (tr.cache.MaxCost() - tr.cache.RemainingCost()) / cost
		tr.Close()
		if entries < budget/cost/2 {
			t.Fatalf("body %d: the tier holds %d entries of cost %d, under half its budget: the fill did not work", size, entries, cost)
		}
		per := float64(full-empty) / float64(entries)
		t.Logf("body %d: %d entries, %.0f bytes of heap each, cost %d", size, entries, per, cost)
		if per > float64(cost) {
			t.Errorf("an entry of a %d-byte body holds %.0f bytes of heap, more than its cost %d: --memory-cache-bytes would not bound the tier", size, per, cost)
		}
	}
}

package memory

import (
	"fmt"
	"math/rand/v2"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Stats are the tier's cumulative counters since New.
type Stats struct {
	// Hits are Gets answered from the tier.
	Hits uint64
	// Misses are Gets not answered, including stale discards and keys found
	// under another guard.
	Misses uint64
	// Fills are Sets handed to Ristretto (which may still decline to admit
	// them).
	Fills uint64
	// FillsRefusedStale are Sets refused because the entry's Seq was below
	// its guard's floor: a reader that read the disk before an invalidation.
	FillsRefusedStale uint64
	// FillsTooLarge are Sets not cached because the entry's cost exceeded
	// MaxEntryBytes.
	FillsTooLarge uint64
	// FillsDropped are Sets Ristretto dropped because its buffer was full.
	FillsDropped uint64
	// StaleDiscards are entries found by Get below their guard's floor, and
	// deleted.
	StaleDiscards uint64
	// Invalidations are guards whose floor Invalidate raised (one per guard
	// per call).
	Invalidations uint64
	// Evictions are entries Ristretto evicted to make room.
	Evictions uint64
}

// counters back Stats. Hits and misses are counted on every Get from every
// core, so they are striped over cache lines; the rest are rarer.
type counters struct {
	hits, misses, staleDiscards            striped
	fills, refusedStale, tooLarge, dropped atomic.Uint64
	invalidations, evictions               atomic.Uint64
}

func (c *counters) stats() Stats {
	return Stats{
		Hits:              c.hits.load(),
		Misses:            c.misses.load(),
		Fills:             c.fills.Load(),
		FillsRefusedStale: c.refusedStale.Load(),
		FillsTooLarge:     c.tooLarge.Load(),
		FillsDropped:      c.dropped.Load(),
		StaleDiscards:     c.staleDiscards.load(),
		Invalidations:     c.invalidations.Load(),
		Evictions:         c.evictions.Load(),
	}
}

const stripeCount = 16 // power of two

// striped is a counter spread over cache lines so that cores counting at
// once do not bounce one line between them. The stripe is picked at random
// (runtime's per-thread generator: no lock, no shared state).
type striped struct {
	cells [stripeCount]struct {
		n atomic.Uint64
		_ [56]byte // pad to a 64-byte cache line
	}
}

func (s *striped) inc() { s.cells[rand.Uint32()&(stripeCount-1)].n.Add(1) }

func (s *striped) load() uint64 {
	var n uint64
	for i := range s.cells {
		n += s.cells[i].n.Load()
	}
	return n
}

// register exposes the counters on reg, read at scrape time so the hot
// paths pay nothing for Prometheus.
func (t *Tier) register(reg prometheus.Registerer) error {
	counter := func(name, help string, f func(Stats) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "utxo_cache_memory_" + name, Help: help},
			func() float64 { return float64(f(t.Stats())) })
	}
	cs := []prometheus.Collector{
		counter("hits_total", "Gets answered from the memory tier.",
			func(s Stats) uint64 { return s.Hits }),
		counter("misses_total", "Gets not answered by the memory tier (stale discards included).",
			func(s Stats) uint64 { return s.Misses }),
		counter("fills_total", "Entries handed to the memory tier's cache.",
			func(s Stats) uint64 { return s.Fills }),
		counter("fills_refused_stale_total", "Fills refused because their seq was below the guard's floor.",
			func(s Stats) uint64 { return s.FillsRefusedStale }),
		counter("fills_too_large_total", "Fills not cached because they exceeded the entry size limit.",
			func(s Stats) uint64 { return s.FillsTooLarge }),
		counter("fills_dropped_total", "Fills dropped because the cache's write buffer was full.",
			func(s Stats) uint64 { return s.FillsDropped }),
		counter("stale_discards_total", "Entries found below their guard's floor and discarded.",
			func(s Stats) uint64 { return s.StaleDiscards }),
		counter("invalidations_total", "Guards whose floor was raised.",
			func(s Stats) uint64 { return s.Invalidations }),
		counter("evictions_total", "Entries evicted to make room.",
			func(s Stats) uint64 { return s.Evictions }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "utxo_cache_memory_cost_bytes",
			Help: "Cost (bytes plus per-entry overhead) of the entries the memory tier holds."},
			func() float64 { return float64(t.cache.MaxCost() - t.cache.RemainingCost()) }),
	}
	for i, c := range cs {
		if err := reg.Register(c); err != nil {
			for _, done := range cs[:i] {
				reg.Unregister(done)
			}
			return fmt.Errorf("memory: register metrics: %w", err)
		}
	}
	return nil
}

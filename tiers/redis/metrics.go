package redis

import (
	"fmt"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Operations, as the op label of utxo_cache_redis_errors_total.
const (
	opGet        = "get"
	opSet        = "set"
	opInvalidate = "invalidate"
	opProbe      = "probe"
	opPing       = "ping"
)

var ops = [...]string{opGet, opSet, opInvalidate, opProbe, opPing}

// Stats are the tier's counters since New. Every field only grows.
type Stats struct {
	Hits          uint64 // Gets answered with an entry
	Misses        uint64 // Gets answered without one (absent, stale, degraded, failed)
	StaleDiscards uint64 // Gets that found an entry below its floor (counted in Misses too)
	Fills         uint64 // Sets that stored an entry
	FillsRefused  uint64 // Sets refused because the entry was below a floor
	Invalidations uint64 // guards whose floor was raised (delivered, not skipped)
	Outages       uint64 // transitions from healthy to degraded
	Coalesced     uint64 // Gets queued for a shared MGET (every slot was busy)
	FillsDropped  uint64 // SetAsync fills dropped because the queue was full
	// Rewinds counts the times the tier found Redis behind this node: the
	// sequence marker below the node's published seq or below what the tier
	// last saw it reach (Redis restored from an older snapshot, failed over
	// to a lagging replica, or not reached by the writer's invalidations).
	Rewinds uint64
	// Restarts counts the changes of Redis's run_id the prober saw: a
	// restarted or replaced server.
	Restarts uint64
	Errors   map[string]uint64
}

// counters are the atomics behind Stats and the Prometheus figures.
type counters struct {
	hits, misses, staleDiscards      atomic.Uint64
	fills, fillsRefused              atomic.Uint64
	invalidations, outages           atomic.Uint64
	coalesced, fillsDropped          atomic.Uint64
	rewinds, restarts                atomic.Uint64
	errGet, errSet, errInv, errProbe atomic.Uint64
	errPing                          atomic.Uint64
}

func (c *counters) errorsOf(op string) *atomic.Uint64 {
	switch op {
	case opGet:
		return &c.errGet
	case opSet:
		return &c.errSet
	case opInvalidate:
		return &c.errInv
	case opProbe:
		return &c.errProbe
	default:
		return &c.errPing
	}
}

func (c *counters) stats() Stats {
	s := Stats{
		Hits: c.hits.Load(), Misses: c.misses.Load(), StaleDiscards: c.staleDiscards.Load(),
		Fills: c.fills.Load(), FillsRefused: c.fillsRefused.Load(),
		Invalidations: c.invalidations.Load(), Outages: c.outages.Load(), Coalesced: c.coalesced.Load(),
		FillsDropped: c.fillsDropped.Load(), Rewinds: c.rewinds.Load(), Restarts: c.restarts.Load(),
		Errors: make(map[string]uint64, len(ops)),
	}
	for _, op := range ops {
		s.Errors[op] = c.errorsOf(op).Load()
	}
	return s
}

// register exposes the counters and the up gauge on reg, read at scrape time.
func (t *Tier) register(reg prometheus.Registerer) error {
	c := &t.counters
	counter := func(name, help string, v *atomic.Uint64, labels prometheus.Labels) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels},
			func() float64 { return float64(v.Load()) })
	}
	cs := []prometheus.Collector{
		counter("utxo_cache_redis_hits_total", "Redis tier reads answered with an entry.", &c.hits, nil),
		counter("utxo_cache_redis_misses_total", "Redis tier reads answered without an entry (absent, stale, degraded or failed).", &c.misses, nil),
		counter("utxo_cache_redis_stale_discards_total", "Redis tier entries found below their guard's floor and not served.", &c.staleDiscards, nil),
		counter("utxo_cache_redis_fills_total", "Entries stored in the Redis tier.", &c.fills, nil),
		counter("utxo_cache_redis_fills_refused_stale_total", "Redis tier fills refused because the entry was below its floor.", &c.fillsRefused, nil),
		counter("utxo_cache_redis_invalidations_total", "Guard floors raised in the Redis tier.", &c.invalidations, nil),
		counter("utxo_cache_redis_fills_dropped_total", "Redis tier fills dropped because the fill queue was full.", &c.fillsDropped, nil),
		counter("utxo_cache_redis_coalesced_gets_total", "Redis tier reads that shared one MGET with others because every connection slot was busy.", &c.coalesced, nil),
		counter("utxo_cache_redis_outages_total", "Transitions of the Redis tier from healthy to degraded.", &c.outages, nil),
		counter("utxo_cache_redis_rewinds_total", "Times the Redis tier found Redis behind this node (its sequence marker below what the node published or last saw): a restore from an older snapshot, a failover, or invalidations that did not reach it.", &c.rewinds, nil),
		counter("utxo_cache_redis_restarts_total", "Changes of the Redis server's run_id seen by the Redis tier's prober (a restarted or replaced server).", &c.restarts, nil),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "utxo_cache_redis_up",
			Help: "1 while the Redis tier is healthy and serving, 0 while degraded (reads miss, fills are dropped).",
		}, func() float64 {
			if t.Healthy() {
				return 1
			}
			return 0
		}),
	}
	for _, op := range ops {
		cs = append(cs, counter("utxo_cache_redis_errors_total", "Failed Redis tier calls by operation.",
			c.errorsOf(op), prometheus.Labels{"op": op}))
	}
	for i, col := range cs {
		if err := reg.Register(col); err != nil {
			for _, done := range cs[:i] {
				reg.Unregister(done)
			}
			return fmt.Errorf("redis: register metrics: %w", err)
		}
	}
	return nil
}

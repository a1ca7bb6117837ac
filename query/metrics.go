package query

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/utxo-cache/utxo-cache/chain"
)

// Metrics are the read path's Prometheus figures; a nil *Metrics records
// nothing. Create with NewMetrics on the caller's registry.
type Metrics struct {
	lookups   *prometheus.CounterVec
	skipped   *prometheus.CounterVec
	threshold *prometheus.GaugeVec
	diskReads prometheus.Counter
	guards    prometheus.Counter
	warms     prometheus.Counter
	fromCS    prometheus.Counter
	kept      prometheus.Counter
	patched   prometheus.Counter
	tipHeight prometheus.Gauge
}

// NewMetrics registers the read path's metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		lookups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "utxo_cache_tier_lookups_total",
			Help: "Cache lookups by tier and result (hit, miss).",
		}, []string{"tier", "result"}),
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "utxo_cache_tier_skipped_total",
			Help: "Reads a remote tier was not asked for: the answer costs the store less than a round trip to the tier (cost-based admission).",
		}, []string{"tier"}),
		threshold: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "utxo_cache_tier_admission_threshold_seconds",
			Help: "Least time computing an answer from the store must take for a remote tier to be asked for and filled with it (cost-based admission).",
		}, []string{"tier"}),
		diskReads: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "utxo_cache_disk_reads_total",
			Help: "Answers computed from a disk snapshot (after singleflight collapsing).",
		}),
		guards: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "utxo_cache_invalidated_guards_total",
			Help: "Addresses and outpoints invalidated after acknowledged changes.",
		}),
		warms: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "utxo_cache_hot_rewarms_total",
			Help: "Hot addresses re-warmed after a change.",
		}),
		fromCS: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "utxo_cache_balances_from_changes_total",
			Help: "Balance answers cached straight from a change set (hot addresses, and addresses whose balance was cached), with no disk read.",
		}),
		kept: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "utxo_cache_pages_kept_total",
			Help: "Cached first pages a change left as they were, offered to the memory tier again at its state with no disk read.",
		}),
		patched: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "utxo_cache_pages_patched_total",
			Help: "Cached complete first pages (all of an address's outputs) rebuilt from a change's added and removed outputs and offered to the memory tier at its state, with no disk read.",
		}),
		tipHeight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "utxo_cache_served_tip_height",
			Help: "Height of the tip reads are answered from.",
		}),
	}
	reg.MustRegister(m.lookups, m.skipped, m.threshold, m.diskReads, m.guards, m.warms, m.fromCS, m.kept, m.patched, m.tipHeight)
	return m
}

// tierCounters are one tier's lookup counters, and for a remote tier its
// skipped reads and admission threshold; the zero value counts nothing.
type tierCounters struct {
	hit, miss, skip prometheus.Counter
	threshold       prometheus.Gauge
}

func (m *Metrics) forTier(tier string, remote bool) tierCounters {
	if m == nil {
		return tierCounters{}
	}
	c := tierCounters{hit: m.lookups.WithLabelValues(tier, "hit"), miss: m.lookups.WithLabelValues(tier, "miss")}
	if remote {
		c.skip, c.threshold = m.skipped.WithLabelValues(tier), m.threshold.WithLabelValues(tier)
	}
	return c
}

func (c tierCounters) skipped() {
	if c.skip != nil {
		c.skip.Inc()
	}
}

// skippedN counts n skipped reads (the outpoints of a batch).
func (c tierCounters) skippedN(n int) {
	if c.skip != nil && n > 0 {
		c.skip.Add(float64(n))
	}
}

// countN counts the hits and misses of a batch.
func (c tierCounters) countN(hits, misses int) {
	if c.hit != nil {
		c.hit.Add(float64(hits))
		c.miss.Add(float64(misses))
	}
}

func (c tierCounters) setThreshold(ns int64) {
	if c.threshold != nil {
		c.threshold.Set(float64(ns) / 1e9)
	}
}

func (c tierCounters) count(hit bool) {
	switch {
	case c.hit == nil:
	case hit:
		c.hit.Inc()
	default:
		c.miss.Inc()
	}
}

func (m *Metrics) diskRead() {
	if m != nil {
		m.diskReads.Inc()
	}
}

func (m *Metrics) invalidated(n int) {
	if m != nil {
		m.guards.Add(float64(n))
	}
}

func (m *Metrics) warmed() {
	if m != nil {
		m.warms.Inc()
	}
}

func (m *Metrics) warmedFromChange() {
	if m != nil {
		m.fromCS.Inc()
	}
}

func (m *Metrics) keptPages(kept, patched int) {
	if m != nil {
		m.kept.Add(float64(kept))
		m.patched.Add(float64(patched))
	}
}

func (m *Metrics) tip(t chain.Tip) {
	if m != nil {
		m.tipHeight.Set(float64(t.Height))
	}
}

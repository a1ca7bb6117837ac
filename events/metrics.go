package events

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the event streams' Prometheus figures. Create them with
// NewMetrics on a registry of the caller's; a nil *Metrics records nothing.
type Metrics struct {
	delivery  prometheus.Histogram
	streams   prometheus.Gauge
	overflows prometheus.Counter
}

// NewMetrics registers the event streams' metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		delivery: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "utxo_cache_event_delivery_seconds",
			// Fine around the 50 ms a live stream should stay under.
			Buckets: []float64{0.001, 0.002, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 1, 2, 5},
			Help:    "Time from a change's publish on this node to its event written and flushed to a live stream's connection, per stream and event (events a resuming stream reads from the log are not counted).",
		}),
		streams: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "utxo_cache_event_streams",
			Help: "Event streams open.",
		}),
		overflows: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "utxo_cache_event_overflows_total",
			Help: "Live event streams ended because their client fell more than the queue behind.",
		}),
	}
	reg.MustRegister(m.delivery, m.streams, m.overflows)
	return m
}

func (m *Metrics) delivered(d time.Duration) {
	if m != nil {
		m.delivery.Observe(d.Seconds())
	}
}

func (m *Metrics) opened(n float64) {
	if m != nil {
		m.streams.Add(n)
	}
}

func (m *Metrics) overflowed() {
	if m != nil {
		m.overflows.Inc()
	}
}

// publishRing remembers when the latest seqs were published (a ring of
// the last 1024): what a live event's delivery time is measured from.
type publishRing struct {
	mu   sync.Mutex
	ring [1024]struct {
		seq uint64
		at  time.Time
	}
}

func (p *publishRing) mark(seq uint64, at time.Time) {
	p.mu.Lock()
	e := &p.ring[seq%uint64(len(p.ring))]
	e.seq, e.at = seq, at
	p.mu.Unlock()
}

// at returns when seq was published, zero when it is not remembered.
func (p *publishRing) at(seq uint64) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e := &p.ring[seq%uint64(len(p.ring))]; e.seq == seq {
		return e.at
	}
	return time.Time{}
}

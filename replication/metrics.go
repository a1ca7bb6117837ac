package replication

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TailMetrics are a replica's figures (utxo_cache_replica_*), kept
// across the stores a replica goes through: make them once, and give them to
// every Tail. With no registry they are kept but not exported.
type TailMetrics struct {
	applied, writerSeq, lagBlocks, lastContact prometheus.Gauge
	lagSeconds                                 prometheus.Gauge
	divergences, contactErrors, bytes          prometheus.Counter
	// Bootstraps counts verified stores installed from a checkpoint.
	Bootstraps prometheus.Counter
	// bootstrapFailures counts checkpoint downloads that failed, by reason.
	bootstrapFailures *prometheus.CounterVec
	applySeconds      prometheus.Histogram
	// The apply priority (ApplyGate): how long held reads waited, and the
	// holds that opened by their bound before the change was published.
	gateWaitSeconds prometheus.Histogram
	gateExpired     prometheus.Counter
	// Catch-up (Tail's ApplyBlocks runs): windows committed and the
	// block changes they applied.
	catchUpWindows, catchUpBlocks prometheus.Counter
}

// NewTailMetrics registers a replica's figures with reg (may be nil).
func NewTailMetrics(reg prometheus.Registerer) *TailMetrics {
	m := &TailMetrics{
		Bootstraps: prometheus.NewCounter(prometheus.CounterOpts{Name: "utxo_cache_replica_bootstraps_total", Help: "Stores installed from a verified checkpoint of the writer."}),
		bootstrapFailures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "utxo_cache_replica_bootstrap_failures_total",
			Help: "Checkpoint downloads that failed, by reason: bad_archive (refused: not what the writer declared), insufficient_storage (no room for it), stalled (nothing received for --checkpoint-idle-timeout), mismatch (not the announced state), error (the writer unreachable or refusing)."},
			[]string{"reason"}),
		applied:       prometheus.NewGauge(prometheus.GaugeOpts{Name: "utxo_cache_replica_applied_seq", Help: "Commit sequence the replica has applied and published."}),
		writerSeq:     prometheus.NewGauge(prometheus.GaugeOpts{Name: "utxo_cache_replica_writer_seq", Help: "Commit sequence of the writer, as last heard."}),
		lagBlocks:     prometheus.NewGauge(prometheus.GaugeOpts{Name: "utxo_cache_replica_lag_blocks", Help: "Blocks the replica's tip is behind the writer's, as last heard."}),
		lagSeconds:    prometheus.NewGauge(prometheus.GaugeOpts{Name: "utxo_cache_replica_lag_seconds", Help: "How long the replica has been behind the writer's seq, as last heard (0: caught up)."}),
		lastContact:   prometheus.NewGauge(prometheus.GaugeOpts{Name: "utxo_cache_replica_last_contact_timestamp_seconds", Help: "Unix time of the writer's last answer."}),
		divergences:   prometheus.NewCounter(prometheus.CounterOpts{Name: "utxo_cache_replica_divergences_total", Help: "Times the replica found its store no longer matched the writer's."}),
		contactErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "utxo_cache_replica_contact_errors_total", Help: "Failed reads of the writer's changes (from the writer, or from its relay)."}),
		bytes:         prometheus.NewCounter(prometheus.CounterOpts{Name: "utxo_cache_replica_log_bytes_total", Help: "Change-log bytes received from the writer."}),
		applySeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "utxo_cache_replica_apply_seconds",
			Help: "Time to apply and verify one change.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}),
		gateWaitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "utxo_cache_replica_apply_priority_wait_seconds",
			Help:    "Time a read held for a change being applied (--apply-priority-wait) waited until it ran again; the count is the reads held.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 12)}),
		gateExpired: prometheus.NewCounter(prometheus.CounterOpts{Name: "utxo_cache_replica_apply_priority_expired_total",
			Help: "Changes whose hold on new reads ended at --apply-priority-wait, before the change was published."}),
		catchUpWindows: prometheus.NewCounter(prometheus.CounterOpts{Name: "utxo_cache_replica_catch_up_windows_total",
			Help: "Catch-up windows the replica committed: runs of block changes far below the writer's tip, each verified block by block before one synced commit."}),
		catchUpBlocks: prometheus.NewCounter(prometheus.CounterOpts{Name: "utxo_cache_replica_catch_up_blocks_total",
			Help: "Block changes the replica applied in catch-up windows."}),
	}
	if reg != nil {
		reg.MustRegister(m.applied, m.writerSeq, m.lagBlocks, m.lastContact, m.divergences, m.contactErrors, m.bytes, m.applySeconds, m.Bootstraps, m.lagSeconds,
			m.gateWaitSeconds, m.gateExpired, m.catchUpWindows, m.catchUpBlocks, m.bootstrapFailures)
	}
	for _, reason := range []string{"bad_archive", "insufficient_storage", "stalled", "mismatch", "error"} {
		m.bootstrapFailures.WithLabelValues(reason)
	}
	return m
}

func (m *TailMetrics) observe(s Status) {
	m.applied.Set(float64(s.Seq))
	m.lagBlocks.Set(float64(s.LagBlocks))
	m.lagSeconds.Set(s.LagSeconds)
	if s.LastContact >= 0 {
		m.lastContact.Set(float64(time.Now().Add(-s.LastContact).UnixNano()) / 1e9)
	}
}

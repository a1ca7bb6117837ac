package follow

import "github.com/prometheus/client_golang/prometheus"

// metrics are the follower's Prometheus figures, registered on
// Options.Metrics (or on a private registry when that is nil).
type metrics struct {
	nodeHeight  prometheus.Gauge
	tipHeight   prometheus.Gauge
	lag         prometheus.Gauge
	applied     prometheus.Counter
	windows     prometheus.Counter
	reorgs      prometheus.Counter
	rolledBack  prometheus.Counter
	errors      *prometheus.CounterVec
	lastSuccess prometheus.Gauge

	// The mempool mirror's (Options.Mempool).
	mempoolMirrored  prometheus.Gauge
	mempoolDeferred  prometheus.Gauge
	mempoolPosted    prometheus.Counter
	mempoolWithdrawn prometheus.Counter
	mempoolFull      prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) *metrics {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	m := &metrics{
		nodeHeight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "utxo_cache_follow_node_height",
			Help: "Height of the node's best block at the last poll.",
		}),
		tipHeight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "utxo_cache_follow_tip_height",
			Help: "Height of the store's tip as the follower last saw it.",
		}),
		lag: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "utxo_cache_follow_lag_blocks",
			Help: "Blocks the store is behind the node (0 when caught up or ahead).",
		}),
		applied: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "utxo_cache_follow_blocks_applied_total",
			Help: "Blocks the follower applied (not counting ones the store already had).",
		}),
		windows: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "utxo_cache_follow_catchup_windows_total",
			Help: "Catch-up windows the follower's batches were applied in (blocks far below the node's tip, one synced commit each).",
		}),
		reorgs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "utxo_cache_follow_reorgs_total",
			Help: "Chain reorganisations followed (rollbacks to a fork point).",
		}),
		rolledBack: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "utxo_cache_follow_rolled_back_blocks_total",
			Help: "Blocks removed by the rollbacks of reorganisations.",
		}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "utxo_cache_follow_errors_total",
			Help: "Failed polls by kind: network, http, decode, config, rejected, fork_too_deep, writer; and mempool: transactions of the node's mempool the pending set refused.",
		}, []string{"kind"}),
		lastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "utxo_cache_follow_last_success_timestamp_seconds",
			Help: "Unix time of the last poll that left the store at the node's tip, or of the last applied block.",
		}),
		mempoolMirrored: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "utxo_cache_follow_mempool_txs",
			Help: "Transactions of the node's mempool the mirror has posted to the pending set and not withdrawn.",
		}),
		mempoolDeferred: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "utxo_cache_follow_mempool_deferred_txs",
			Help: "Transactions of the node's mempool waiting to be posted: an input is not live yet (its parent or its block has not arrived).",
		}),
		mempoolPosted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "utxo_cache_follow_mempool_posted_total",
			Help: "Transactions of the node's mempool the mirror posted to the pending set.",
		}),
		mempoolFull: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "utxo_cache_follow_mempool_full",
			Help: "1 while the pending set refuses the mirror's posts for its bounds (--pending-max-txs, --pending-max-bytes), else 0.",
		}),
		mempoolWithdrawn: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "utxo_cache_follow_mempool_withdrawn_total",
			Help: "Pending transactions the mirror withdrew because they left the node's mempool without a block settling them.",
		}),
	}
	for _, k := range []string{KindNetwork, KindHTTP, KindDecode, KindConfig, KindRejected, KindForkTooDeep, KindWriter, KindMempool} {
		m.errors.WithLabelValues(k) // export every kind from the start, at 0
	}
	reg.MustRegister(m.nodeHeight, m.tipHeight, m.lag, m.applied, m.windows, m.reorgs, m.rolledBack, m.errors, m.lastSuccess,
		m.mempoolMirrored, m.mempoolDeferred, m.mempoolPosted, m.mempoolWithdrawn, m.mempoolFull)
	return m
}

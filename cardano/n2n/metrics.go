package n2n

import "github.com/prometheus/client_golang/prometheus"

// Reasons of errors_total (every one is exported from the start, at 0).
const (
	// ReasonNetwork: the connection could not be made, or dropped.
	ReasonNetwork = "network"
	// ReasonProtocol: the node broke the protocol or sent bytes that do not
	// decode (garbage, a block that is not the one announced, a fetch that
	// timed out).
	ReasonProtocol = "protocol"
	// ReasonNotLinked: a block that does not follow the store's tip.
	ReasonNotLinked = "not_linked"
	// ReasonRejected: the writer refused a block (an unknown input, a
	// double spend): the node's chain and the store disagree.
	ReasonRejected = "rejected"
	// ReasonRollbackTooDeep: the node rolled back, or forked, further than
	// the store can follow exactly. The follower stops applying (Ready).
	ReasonRollbackTooDeep = "rollback_too_deep"
	// ReasonWriter: the writer failed (or someone else moved the tip).
	ReasonWriter = "writer"
)

var reasons = []string{ReasonNetwork, ReasonProtocol, ReasonNotLinked, ReasonRejected, ReasonRollbackTooDeep, ReasonWriter}

// metrics are the follower's Prometheus figures, registered on
// Options.Metrics (or on a private registry when that is nil).
type metrics struct {
	nodeHeight, nodeSlot prometheus.Gauge
	tipHeight, tipSlot   prometheus.Gauge
	applied              prometheus.Counter
	windows              prometheus.Counter
	rollbacks            prometheus.Counter
	rolledBack           prometheus.Counter
	reconnects           prometheus.Counter
	errors               *prometheus.CounterVec
	halted               prometheus.Gauge
	lastSuccess          prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) *metrics {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	g := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Name: "utxo_cache_cardano_follow_" + name, Help: help})
	}
	c := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: "utxo_cache_cardano_follow_" + name, Help: help})
	}
	m := &metrics{
		nodeHeight: g("node_tip_height", "Block number of the node's tip, as it last announced it."),
		nodeSlot:   g("node_tip_slot", "Slot of the node's tip, as it last announced it."),
		tipHeight:  g("tip_height", "Height of the store's tip as the follower last saw it."),
		tipSlot:    g("tip_slot", "Slot of the store's tip as the follower last saw it (0 before its first block)."),
		applied:    c("blocks_applied_total", "Blocks the follower applied (not counting ones the store already had)."),
		windows:    c("catchup_windows_total", "Catch-up windows the follower's batches were applied in."),
		rollbacks:  c("rollbacks_total", "Roll-backwards of the node followed by a rollback of the store."),
		rolledBack: c("rolled_back_blocks_total", "Blocks removed by those rollbacks."),
		reconnects: c("reconnects_total", "Connections to the node after the first one."),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "utxo_cache_cardano_follow_errors_total",
			Help: "Failed sessions with the node by reason: network, protocol, not_linked, rejected, rollback_too_deep, writer.",
		}, []string{"reason"}),
		halted:      g("halted", "1 while the follower applies nothing because the node's chain leaves the store's deeper than its rollback window."),
		lastSuccess: g("last_success_timestamp_seconds", "Unix time of the last block applied or rollback followed."),
	}
	for _, r := range reasons {
		m.errors.WithLabelValues(r)
	}
	reg.MustRegister(m.nodeHeight, m.nodeSlot, m.tipHeight, m.tipSlot, m.applied, m.windows, m.rollbacks,
		m.rolledBack, m.reconnects, m.errors, m.halted, m.lastSuccess)
	return m
}

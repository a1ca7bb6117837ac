package writer

import (
	"errors"
	"math"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/changeset"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

// Metrics are the writer's and the store's Prometheus figures. Create them
// with NewMetrics on a registry of the caller's (never the global one); a nil
// *Metrics records nothing.
type Metrics struct {
	reg             prometheus.Registerer
	applySeconds    *prometheus.HistogramVec
	rollbackSeconds prometheus.Histogram
	blocks          *prometheus.CounterVec
	changes         *prometheus.CounterVec
	skipped         prometheus.Counter
	refusedWrites   *prometheus.CounterVec
}

// NewMetrics registers the writer's metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	buckets := prometheus.ExponentialBuckets(0.0005, 2, 16) // 0.5 ms .. 16 s
	m := &Metrics{
		reg: reg,
		applySeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "utxo_cache_writer_apply_seconds", Buckets: buckets,
			Help: "Time to validate and commit one block, by outcome (applied, noop, rejected, refused, error), or one catch-up window of blocks (window).",
		}, []string{"outcome"}),
		rollbackSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "utxo_cache_writer_rollback_seconds", Buckets: buckets,
			Help: "Time to complete one rollback request.",
		}),
		blocks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "utxo_cache_writer_blocks_total",
			Help: "Blocks by what happened to them: applied, rolled_back, rejected by reason.",
		}, []string{"event"}),
		changes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "utxo_cache_writer_utxo_changes_total",
			Help: "Live outputs created and removed (spent, or reverted) by committed changes.",
		}, []string{"kind"}),
		skipped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "utxo_cache_writer_inputs_skipped_total",
			Help: "Unknown inputs skipped because skipping is enabled.",
		}),
		refusedWrites: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "utxo_cache_writes_refused_total",
			Help: "Writes (blocks, rollbacks, checkpoints) refused with nothing changed, by reason (insufficient_storage: the free-space guard).",
		}, []string{"reason"}),
	}
	m.refusedWrites.WithLabelValues("insufficient_storage")
	reg.MustRegister(m.applySeconds, m.rollbackSeconds, m.blocks, m.changes, m.skipped, m.refusedWrites)
	return m
}

// observeStore registers gauges read from the store at scrape time.
func (m *Metrics) observeStore(s *disk.Store) {
	gauge := func(name, help string, f func(disk.Health, disk.State) float64) {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help},
			func() float64 { return f(s.Health(), s.State()) }))
	}
	counter := func(name, help string, f func(disk.Health) float64) {
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help},
			func() float64 { return f(s.Health()) }))
	}
	gauge("utxo_cache_store_utxo_count", "Live UTXOs at the tip.",
		func(_ disk.Health, st disk.State) float64 { return float64(st.UtxoCount) })
	gauge("utxo_cache_store_tip_height", "Height of the tip (0 for an empty store).",
		func(_ disk.Health, st disk.State) float64 { return float64(st.Tip.Height) })
	gauge("utxo_cache_store_disk_bytes", "On-disk size of the Pebble store.",
		func(h disk.Health, _ disk.State) float64 { return float64(h.DiskBytes) })
	gauge("utxo_cache_store_read_amplification", "Pebble read amplification (sublevels a read may visit).",
		func(h disk.Health, _ disk.State) float64 { return float64(h.ReadAmplification) })
	gauge("utxo_cache_store_l0_files", "Pebble L0 sstables.",
		func(h disk.Health, _ disk.State) float64 { return float64(h.L0Files) })
	gauge("utxo_cache_store_compaction_debt_bytes", "Bytes Pebble estimates it must compact to bring the LSM into shape (0: none owed).",
		func(h disk.Health, _ disk.State) float64 { return float64(h.CompactionDebt) })
	gauge("utxo_cache_store_compactions_running", "Pebble compactions in progress.",
		func(h disk.Health, _ disk.State) float64 { return float64(h.CompactionsRunning) })
	gauge("utxo_cache_store_memtable_bytes", "Pebble memtable bytes.",
		func(h disk.Health, _ disk.State) float64 { return float64(h.MemTableBytes) })
	gauge("utxo_cache_store_memtables", "Pebble memtables: the mutable one and those queued for flushing.",
		func(h disk.Health, _ disk.State) float64 { return float64(h.MemTables) })
	gauge("utxo_cache_store_sstables", "Pebble live sstables, every level.",
		func(h disk.Health, _ disk.State) float64 { return float64(h.Sstables) })
	gauge("utxo_cache_store_zombie_sstables", "Pebble sstables no longer in the tree but still held by an iterator.",
		func(h disk.Health, _ disk.State) float64 { return float64(h.ZombieSstables) })
	gauge("utxo_cache_store_open_sstables", "Pebble sstables held open by its file cache (file descriptors).",
		func(h disk.Health, _ disk.State) float64 { return float64(h.OpenSstables) })
	gauge("utxo_cache_store_table_iterators", "Open Pebble sstable iterators.",
		func(h disk.Health, _ disk.State) float64 { return float64(h.TableIterators) })
	gauge("utxo_cache_store_snapshots", "Open Pebble snapshots.",
		func(h disk.Health, _ disk.State) float64 { return float64(h.Snapshots) })
	gauge("utxo_cache_store_block_cache_bytes", "Bytes in Pebble's block cache.",
		func(h disk.Health, _ disk.State) float64 { return float64(h.BlockCacheBytes) })
	counter("utxo_cache_store_compactions_total", "Pebble compactions.",
		func(h disk.Health) float64 { return float64(h.Compactions) })
	counter("utxo_cache_store_flushes_total", "Pebble memtable flushes.",
		func(h disk.Health) float64 { return float64(h.Flushes) })
	counter("utxo_cache_store_block_cache_hits_total", "Pebble block cache hits.",
		func(h disk.Health) float64 { return float64(h.BlockCacheHits) })
	counter("utxo_cache_store_block_cache_misses_total", "Pebble block cache misses.",
		func(h disk.Health) float64 { return float64(h.BlockCacheMisses) })
	counter("utxo_cache_store_recent_view_hits_total", "Input lookups answered by the young-output view.",
		func(h disk.Health) float64 { return float64(h.RecentHits) })
	counter("utxo_cache_store_recent_view_misses_total", "Input and duplicate lookups that read Pebble.",
		func(h disk.Health) float64 { return float64(h.RecentMisses) })
	counter("utxo_cache_store_filter_skips_total", "Lookups the tx-hash filter answered without a Pebble read.",
		func(h disk.Health) float64 { return float64(h.FilterSkips) })
	counter("utxo_cache_store_filter_rebuilds_total", "Background rebuilds of the tx-hash filter (it grows with the store).",
		func(h disk.Health) float64 { return float64(h.FilterRebuilds) })
	counter("utxo_cache_store_background_errors_total", "Pebble background errors (failed flushes and compactions, which Pebble retries; logged at most every 30 s).",
		func(h disk.Health) float64 { return float64(h.BackgroundErrors) })
	counter("utxo_cache_store_pruned_spent_records_total", "Spent records pruned since start.",
		func(h disk.Health) float64 { return float64(h.PrunedSpentRecords) })
	counter("utxo_cache_store_pruned_undo_deltas_total", "Undo deltas pruned since start.",
		func(h disk.Health) float64 { return float64(h.PrunedUndoDeltas) })
}

// observeSpace registers the free-space guard's gauges, read at scrape
// time: the bytes available to the store, and the reserve below which
// every write is refused.
func (m *Metrics) observeSpace(check func(uint64) (spaceStatus, error), reserve uint64) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "utxo_cache_disk_free_bytes",
		Help: "Bytes available on the data directory's file system (statfs); NaN when unknown.",
	}, func() float64 {
		st, _ := check(0)
		if !st.known {
			return math.NaN()
		}
		return float64(st.available)
	}))
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "utxo_cache_disk_reserve_bytes",
		Help: "Free space the writer keeps: below it (plus each write's own estimate) writes are refused with insufficient_storage.",
	}, func() float64 { return float64(reserve) }))
}

func (m *Metrics) refused(reason string) {
	if m == nil {
		return
	}
	m.refusedWrites.WithLabelValues(reason).Inc()
}

func (m *Metrics) applyDone(d time.Duration, cs *changeset.Set, err error) {
	if m == nil {
		return
	}
	outcome := "applied"
	switch {
	case errors.Is(err, ErrInsufficientStorage):
		outcome = "refused"
	case err != nil && rejectReason(err) != "":
		outcome = "rejected"
		m.blocks.WithLabelValues("rejected_" + rejectReason(err)).Inc()
	case err != nil:
		outcome = "error"
	case cs == nil:
		outcome = "noop"
	default:
		m.blocks.WithLabelValues("applied").Inc()
		m.changes.WithLabelValues("created").Add(float64(cs.Created))
		m.changes.WithLabelValues("removed").Add(float64(cs.Spent))
		m.skipped.Add(float64(cs.Skipped))
	}
	m.applySeconds.WithLabelValues(outcome).Observe(d.Seconds())
}

// windowDone counts a catch-up window of n blocks as n applied blocks; its
// duration is observed once.
func (m *Metrics) windowDone(d time.Duration, n int, cs *changeset.Set) {
	if m == nil {
		return
	}
	m.blocks.WithLabelValues("applied").Add(float64(n))
	m.changes.WithLabelValues("created").Add(float64(cs.Created))
	m.changes.WithLabelValues("removed").Add(float64(cs.Spent))
	m.skipped.Add(float64(cs.Skipped))
	m.applySeconds.WithLabelValues("window").Observe(d.Seconds())
}

func (m *Metrics) rollbackDone(d time.Duration, cs *changeset.Set, err error) {
	if m == nil {
		return
	}
	m.rollbackSeconds.Observe(d.Seconds())
	if cs != nil {
		m.blocks.WithLabelValues("rolled_back").Add(float64(cs.OldTip.Height - cs.NewTip.Height))
		m.changes.WithLabelValues("created").Add(float64(cs.Created))
		m.changes.WithLabelValues("removed").Add(float64(cs.Spent))
	}
}

func rejectReason(err error) string {
	switch {
	case errors.Is(err, chain.ErrNotNextBlock):
		return "not_next_block"
	case errors.Is(err, chain.ErrUnknownInput):
		return "unknown_input"
	case errors.Is(err, chain.ErrDoubleSpend):
		return "double_spend"
	case errors.Is(err, chain.ErrDuplicateOutpoint):
		return "duplicate_outpoint"
	}
	return ""
}

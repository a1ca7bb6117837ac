package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/utxo-cache/utxo-cache/api"
	"github.com/utxo-cache/utxo-cache/cache"
	"github.com/utxo-cache/utxo-cache/events"
	"github.com/utxo-cache/utxo-cache/query"
	"github.com/utxo-cache/utxo-cache/replication"
	"github.com/utxo-cache/utxo-cache/replication/jetstream"
	"github.com/utxo-cache/utxo-cache/replication/storedir"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
	"github.com/utxo-cache/utxo-cache/tiers/memory"
	"github.com/utxo-cache/utxo-cache/tiers/redis"
	"github.com/utxo-cache/utxo-cache/writer"
)

// A replica's data directory holds its stores, one active at a time, and
// names the active one; replication/storedir owns that layout and its
// crash-safety rules. A store is named current only after it was verified
// against its writer's checkpoint (replication.Install), and before it
// serves; it stops being named as soon as it is found to have diverged from
// the writer. So a replica killed at any moment restarts on a verified store
// that is at least as new as anything it served, or bootstraps when it has
// none.

// contactTimeout is how long a replica stays ready without hearing from its
// writer (a long poll answers at least every 10 s).
const contactTimeout = 30 * time.Second

// MaxCheckpointBytes bounds a checkpoint download (and a restore) in all;
// the archive's manifest and the free space bound it further
// (replication.Install).
const MaxCheckpointBytes = 1 << 40

// nodeRef counts the requests a node is serving, so that a replaced node
// closes only after its last request.
type nodeRef struct {
	h       http.Handler
	mu      sync.Mutex
	n       int
	retired bool
	idle    chan struct{}
}

func newNodeRef(h http.Handler) *nodeRef { return &nodeRef{h: h, idle: make(chan struct{})} }

func (r *nodeRef) acquire() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.retired {
		return false
	}
	r.n++
	return true
}

func (r *nodeRef) release() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n--; r.n == 0 && r.retired {
		close(r.idle)
	}
}

// retire refuses new requests and waits for those in flight. It may be
// called again (a replaced node is retired when it is swapped out, and again
// by closeNode).
func (r *nodeRef) retire() {
	r.mu.Lock()
	if !r.retired {
		r.retired = true
		if r.n == 0 {
			close(r.idle)
		}
	}
	r.mu.Unlock()
	<-r.idle
}

// switchHandler serves with the current node's handler.
type switchHandler struct{ cur atomic.Pointer[nodeRef] }

func (s *switchHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	for {
		ref := s.cur.Load()
		if ref.acquire() {
			defer ref.release()
			ref.h.ServeHTTP(w, r)
			return
		}
	}
}

// replicaNode is one store of a replica and what serves it.
type replicaNode struct {
	name  string
	store *disk.Store
	reads *query.Server
	w     *writer.Writer
	f     *replication.Tail
	gate  *replication.ApplyGate // holds new reads while f applies a change
	reg   *prometheus.Registry   // this node's figures (writer, store, reads, HTTP)
	ref   *nodeRef
	hub   *events.Hub // nil: no change log
}

// replica is a running read replica.
type replica struct {
	cfg      Config
	dir      *storedir.Dir
	log      *slog.Logger
	base     *prometheus.Registry // figures that outlive a node: process, tiers, replication
	mem      *memory.Tier
	rt       *redis.Tier
	fm       *replication.TailMetrics
	src      *jetstream.Source // with a nats:// ReplicaOf; nil: the writer over HTTP
	sw       switchHandler
	node     atomic.Pointer[replicaNode]
	draining atomic.Bool
}

// startReplica starts a read replica of cfg.ReplicaOf: bootstrap a
// verified store when it has none, follow the writer's change log, and
// replace the store by a fresh verified one whenever it diverges or falls
// behind the writer's retention. Reads are served all along from the last
// verified, published state; nothing is served from a store that is not
// verified.
func (n *Node) startReplica() error {
	cfg, log := n.cfg, n.cfg.Logger
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	r := &replica{cfg: cfg, dir: storedir.New(storedir.OS(), cfg.DataDir), log: log.With("role", "replica"), base: prometheus.NewRegistry()}
	n.replica = r
	r.base.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	r.fm = replication.NewTailMetrics(r.base)
	if jetstream.IsURL(cfg.ReplicaOf) {
		src, err := jetstream.NewSource(jetstream.Options{URLs: cfg.ReplicaOf, Name: cfg.JetStreamName, Logger: r.log})
		if err != nil {
			return fmt.Errorf("jetstream: %w", err)
		}
		r.src = src
	}
	if cfg.MemoryCacheBytes > 0 {
		mem, err := memory.New(memory.Options{MaxBytes: cfg.MemoryCacheBytes, Metrics: r.base})
		if err != nil {
			return fmt.Errorf("memory tier: %w", err)
		}
		r.mem = mem
	}
	if cfg.redisOn() {
		// The writer's tier invalidates the shared namespace; this one only
		// reads and fills it, and serves only while Redis has seen the
		// writer's invalidations up to the current store's published seq.
		o := cfg.redisOptions()
		o.Logger, o.Metrics, o.Follower, o.PublishedSeq = log, r.base, true, r.publishedSeq
		rt, err := redis.New(o)
		if err != nil {
			return fmt.Errorf("redis tier: %w", err)
		}
		r.rt = rt
	}
	r.sw.cur.Store(newNodeRef(r.bootstrapping()))
	runCtx, cancel := context.WithCancel(context.Background())
	n.stopFollow = cancel
	go func() {
		defer close(n.followDone)
		if err := r.run(runCtx); err != nil {
			n.errc <- err
		}
	}()
	return nil
}

// close closes the replica's store and what serves it, then its tiers.
func (r *replica) close() {
	if n := r.node.Load(); n != nil {
		r.closeNode(n)
	}
	if r.rt != nil {
		r.rt.Close()
	}
	if r.mem != nil {
		r.mem.Close()
	}
	if r.src != nil {
		r.src.Close()
	}
}

// publishedSeq is the published seq of the store being served, 0 before
// the first: what the shared Redis tier must have seen invalidated.
func (r *replica) publishedSeq() uint64 {
	if n := r.node.Load(); n != nil {
		return n.store.Published().Seq
	}
	return 0
}

// removeStoresBut removes every store of the data directory (and
// interrupted install) but keep; what it cannot remove is logged and left
// for the next start.
func (r *replica) removeStoresBut(keep string) {
	if err := r.dir.RemoveAllBut(keep); err != nil {
		r.log.Warn("could not remove an old store", "err", err)
	}
}

// run bootstraps and follows until ctx ends.
func (r *replica) run(ctx context.Context) error {
	name, err := r.dir.Current()
	if err != nil {
		return err
	}
	r.removeStoresBut(name)
	for ctx.Err() == nil {
		var minSeq uint64
		cur := r.node.Load()
		if cur != nil {
			minSeq = cur.store.Published().Seq
		}
		if name == "" {
			if name, err = r.bootstrap(ctx, minSeq); err != nil {
				return nil // ctx ended
			}
		}
		n, err := r.openNode(ctx, name)
		if ctx.Err() != nil && errors.Is(err, context.Canceled) {
			return nil // a signal while the store opened: like a crash to it
		}
		if errors.Is(err, disk.ErrNoSpace) {
			// The store is likely sound and only needs room to flush its
			// log; a new bootstrap would need more room still, and the
			// abandoned open still owns the directory. Stop (exit status 1)
			// until an operator frees space (docs/disk-full.md).
			return fmt.Errorf("open the replica's store %s: %w: free space on its file system, then start the replica again", name, err)
		}
		if err != nil {
			r.log.Error("cannot open the replica's store: bootstrapping a new one", "store", name, "err", err)
			name = ""
			continue
		}
		// Named before it serves: once a reader has seen the new store's
		// state, a restart must not go back to the old one.
		if err := r.dir.SetCurrent(name); err != nil {
			r.closeNode(n)
			return fmt.Errorf("record the current store: %w", err)
		}
		if cur != nil && r.mem != nil {
			// Nothing computed from the replaced store may be served.
			r.mem.Fence(n.store.Published().Seq + 1)
		}
		r.node.Store(n)
		old := r.sw.cur.Swap(n.ref)
		old.retire()
		if cur != nil {
			r.closeNode(cur)
		}
		r.removeStoresBut(name)
		st := n.store.Published()
		r.log.Info("serving", "store", name, "seq", st.Seq, "tip", st.Tip.String(), "utxos", st.UtxoCount)

		err = n.f.Run(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, replication.ErrDiverged) {
			// The store is not the writer's, and may hold a committed change
			// that failed verification, which reopening it would publish:
			// a restart before its replacement is in place must bootstrap,
			// not serve it. (A store the writer's log merely left behind,
			// 410, stays named: it is the writer's, and a restart serves it.)
			if ferr := r.dir.Forget(); ferr != nil {
				return fmt.Errorf("forget the diverged store: %w", ferr)
			}
		}
		if errors.Is(err, replication.ErrNotWritersState) {
			// What it serves is not a state of the writer's: reads answer
			// 503 until the new store is in place.
			r.sw.cur.Swap(newNodeRef(r.bootstrapping())).retire()
		}
		// Diverged, or behind the writer's retention: keep serving the
		// last verified state (readyz says why) and bootstrap a new store.
		r.log.Warn("replacing the replica's store", "reason", err)
		name = ""
	}
	return nil
}

// bootstrap installs a verified checkpoint of the writer at a seq of at
// least minSeq (so answers never go back), retrying with backoff until it
// has one or ctx ends.
func (r *replica) bootstrap(ctx context.Context, minSeq uint64) (string, error) {
	backoff := 200 * time.Millisecond
	for {
		name := storedir.NewStoreName(time.Now())
		dir := r.dir.Path(name)
		start := time.Now()
		m, err := replication.Bootstrap(ctx, r.tailOptions(), dir, MaxCheckpointBytes, disk.Options{LogRetention: r.cfg.ReplicationRetention, Derivers: IndexDerivers()})
		switch {
		case err == nil && m.Seq < minSeq:
			err = fmt.Errorf("the writer's checkpoint is at seq %d, this replica already served %d: waiting for the writer", m.Seq, minSeq)
			_ = os.RemoveAll(dir)
			if r.src != nil {
				r.src.RequestCheckpoint(minSeq) // the bucket's newest is older
			}
		case err == nil:
			r.fm.Bootstraps.Inc()
			r.log.Info("bootstrapped from the writer's checkpoint", "store", name, "state", m.String(),
				"seconds", time.Since(start).Seconds())
			return name, nil
		}
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		if refusedCheckpoint(err) {
			// Not a writer's checkpoint that fits here: what it wrote is
			// already removed.
			r.log.Error("checkpoint refused, nothing of it kept: retrying", "err", err, "retry_in", backoff)
		} else {
			r.log.Warn("bootstrap failed: retrying", "err", err, "retry_in", backoff)
		}
		t := time.NewTimer(backoff + rand.N(backoff/2+1))
		select {
		case <-ctx.Done():
			t.Stop()
			return "", ctx.Err()
		case <-t.C:
		}
		backoff = min(2*backoff, 10*time.Second)
	}
}

// refusedCheckpoint reports whether a bootstrap failed on what the writer
// sent (or on the room for it), not on reaching the writer.
func refusedCheckpoint(err error) bool {
	return errors.Is(err, replication.ErrBadArchive) || errors.Is(err, replication.ErrNoRoom) ||
		errors.Is(err, replication.ErrStalled) || errors.Is(err, replication.ErrMismatch)
}

func (r *replica) tailOptions() replication.TailOptions {
	o := replication.TailOptions{URL: r.cfg.ReplicaOf, Token: r.cfg.ReplicationToken, Metrics: r.fm, Logger: r.log,
		BlockLimits: r.cfg.BlockLimits(), CheckpointIdleTimeout: r.cfg.CheckpointIdleTimeout}
	if r.src != nil {
		o.Source = r.src
	}
	return o
}

// openNode opens store name with its reads, writer and follower.
// It returns early when ctx ends (disk.OpenContext).
func (r *replica) openNode(ctx context.Context, name string) (*replicaNode, error) {
	store, err := disk.OpenContext(ctx, r.dir.Path(name), disk.Options{LogRetention: r.cfg.ReplicationRetention, CacheBytes: r.cfg.BlockCacheBytes, Logger: r.log, Derivers: IndexDerivers()})
	if err != nil {
		return nil, err
	}
	n := &replicaNode{name: name, store: store, reg: prometheus.NewRegistry()}
	var tiers, shared []cache.Tier
	if r.mem != nil {
		tiers = append(tiers, r.mem)
	}
	if r.rt != nil {
		shared = append(shared, r.rt)
	}
	n.reads = query.New(store, query.Options{Tiers: tiers, Shared: shared, Metrics: query.NewMetrics(n.reg), Logger: r.log, Now: r.cfg.Now,
		Admission: r.cfg.RedisAdmission,
		// n.f is set below, before the node serves any read.
		FillShared: func() bool { return n.f.Verified() }})
	n.w = writer.New(store, writer.Options{
		// The writer already decided which inputs to skip; the digest
		// check after each change catches any difference.
		SkipUnknownInputs: true,
		Metrics:           writer.NewMetrics(n.reg),
		Logger:            r.log,
		Verify:            func(st disk.State) error { return n.f.Verify(st) },
		// Leases expire by the writer's sweeps, applied from its log.
		LeaseSweep: -1,
	})
	n.w.Subscribe(n.reads)
	// The apply priority: new reads wait while a change is pending, and
	// go on once the writer has published it (or the bound has passed).
	// Subscribed after the reads, so the reads waiting for the change's
	// seq (min_seq) are woken before the held ones.
	n.gate = replication.NewApplyGate(r.cfg.ApplyPriorityWait, r.fm)
	n.w.Subscribe(n.gate)
	fo := r.tailOptions()
	fo.Gate = n.gate
	n.f, err = replication.NewTail(store, n.w, fo)
	if err != nil {
		r.closeNode(n)
		return nil, err
	}
	// The replica keeps a change log of its own (written by the same
	// code as the writer's), so its streams send the writer's events.
	if n.hub, err = newEventHub(store, n.reads, n.w, n.reg, r.cfg.MaxEventStreams, r.cfg.BlockLimits(), r.log); err != nil {
		r.closeNode(n)
		return nil, err
	}
	front, err := esploraFrontend(store, n.reads, r.cfg.EsploraUtxosLimit)
	if err != nil {
		r.closeNode(n)
		return nil, err
	}
	gather := prometheus.Gatherers{r.base, n.reg}
	h := api.New(n.reads, nil, api.Options{
		Blockfrost:    blockfrostOption(store, n.reads, r.cfg.BlockfrostProjectID),
		Esplora:       front,
		Events:        eventsOption(n.hub),
		ReadOnly:      true,
		WalletToken:   r.cfg.WalletToken, // lease reads only: a replica takes no writes
		ReadGate:      n.gate,
		MaxWait:       r.cfg.MaxWait,
		Registry:      n.reg,
		Gatherer:      gather,
		Logger:        r.log,
		ReplicaStatus: func() api.ReplicaStatus { return replicaStatus(n.f.Status()) },
		Ready:         func() error { return r.ready(n) },
	})
	n.ref = newNodeRef(h)
	return n, nil
}

func replicaStatus(st replication.Status) api.ReplicaStatus {
	return api.ReplicaStatus{Seq: st.Seq, WriterSeq: st.WriterSeq, LagBlocks: st.LagBlocks, LastContact: st.LastContact}
}

// ready is the replica's /readyz: heard from the writer recently, within
// Config.MaxLagBlocks of it, following (not diverged), not shutting down.
func (r *replica) ready(n *replicaNode) error {
	st := n.f.Status()
	switch {
	case r.draining.Load():
		return errors.New("shutting down")
	case st.Failed != nil:
		return fmt.Errorf("not following the writer (%v): bootstrapping a new store", st.Failed)
	case st.LastContact < 0:
		return errors.New("has not heard from the writer yet")
	case st.LastContact > contactTimeout:
		return fmt.Errorf("has not heard from the writer for %s", st.LastContact.Round(time.Second))
	case st.LagBlocks > r.cfg.MaxLagBlocks:
		return fmt.Errorf("%d blocks behind the writer (at most %d)", st.LagBlocks, r.cfg.MaxLagBlocks)
	}
	return nil
}

func (r *replica) closeNode(n *replicaNode) {
	if n.ref != nil {
		n.ref.retire()
	}
	if n.hub != nil {
		n.hub.Close()
	}
	_ = n.w.Close()
	n.reads.Close()
	if err := n.store.Close(); err != nil {
		r.log.Warn("closing a store", "store", n.name, "err", err)
	}
}

// bootstrapping serves while the replica has no verified store: /healthz
// answers (the process is up), everything else 503.
func (r *replica) bootstrapping() http.Handler {
	metrics := promhttp.HandlerFor(r.base, promhttp.HandlerOpts{})
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		switch req.URL.Path {
		case "/healthz":
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"status":"ok"}`))
			return
		case "/metrics":
			metrics.ServeHTTP(w, req)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if isWrite(req) {
			// No retry makes a replica take a write: say so, as it will
			// once it serves (api's read_only).
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`{"error":{"code":"read_only","message":"this server is a read-only replica: writes go to its writer"}}`))
			return
		}
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"tip":null,"error":{"code":"unavailable","message":"the replica is bootstrapping from its writer"}}`))
	})
}

// isWrite reports whether req is one of the API's writes, which a replica
// answers 403 read_only whatever its state: blocks, rollbacks and freezes.
func isWrite(req *http.Request) bool {
	switch req.URL.Path {
	case "/v1/blocks", "/v1/rollback":
		return req.Method == http.MethodPost
	case "/v1/frozen":
		return req.Method == http.MethodPost || req.Method == http.MethodDelete
	}
	return false
}

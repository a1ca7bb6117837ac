// Package node assembles a utxo-cache node in process: the store, the
// cache tiers, the reads, the single writer, the follower of a Bitcoin or
// Cardano node, the replication source and the HTTP API, in the order their
// dependencies need, and takes them down in the reverse order on Close. Config holds
// every setting as a plain value; the command line (cmd/utxo-cache) and
// every in-process test start a node through Start.
//
// A node does not listen: Handler is served by the caller, on its own
// listener, with NewHTTPServer's settings. Shutting down is the caller's
// too, in three steps that keep every request answered: Drain (the
// follower stops after its block in flight, long polls answer), then the
// caller's http.Server.Shutdown (requests in flight finish, POST
// /v1/blocks included), then Close (the writer, the tiers, the store).
package node

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/utxo-cache/utxo-cache/api"
	"github.com/utxo-cache/utxo-cache/bitcoin"
	"github.com/utxo-cache/utxo-cache/cache"
	"github.com/utxo-cache/utxo-cache/cardano"
	"github.com/utxo-cache/utxo-cache/cardano/n2n"
	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/events"
	"github.com/utxo-cache/utxo-cache/follow"
	"github.com/utxo-cache/utxo-cache/internal/threadprio"
	"github.com/utxo-cache/utxo-cache/query"
	"github.com/utxo-cache/utxo-cache/replication"
	"github.com/utxo-cache/utxo-cache/replication/jetstream"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
	"github.com/utxo-cache/utxo-cache/tiers/memory"
	"github.com/utxo-cache/utxo-cache/tiers/redis"
	"github.com/utxo-cache/utxo-cache/writer"
)

// CheckpointStaging is where the writer stages checkpoints, inside its
// data directory (on the store's file system, so Pebble hard-links its
// files; Pebble ignores a directory it did not create).
const CheckpointStaging = "checkpoints.staging"

// Node is a running node. Start one; it is safe for concurrent use.
//
// Its parts are owned by it: the caller serves Handler and may read
// through Store and apply through Writer (a test does), but closes none of
// them; Close does, in order.
type Node struct {
	cfg   Config
	store *disk.Store
	mem   *memory.Tier
	rt    *redis.Tier
	reads *query.Server
	w     *writer.Writer
	api   *api.API
	hub   *events.Hub          // the event streams; nil: no change log
	pub   *jetstream.Publisher // with Config.JetStream

	cardano    *n2n.Follower // with Config.FollowCardano: its halt makes the node not ready
	draining   atomic.Bool
	stopFollow context.CancelFunc
	followDone chan struct{}
	errc       chan error

	drainOnce, closeOnce sync.Once
	closeErr             error

	replica *replica // with Config.ReplicaOf; the fields above it are nil then
}

// Start opens the store and starts every part of the node. What can be
// refused (the settings, a tier's options) is checked before the store is
// opened: a refused start leaves no new store behind. ctx bounds the start
// only (a signal while the store opens: an error matching
// context.Canceled, and to the store it is like a crash, its log replays on
// the next start); it does not stop the node once started.
func Start(ctx context.Context, cfg Config) (*Node, error) {
	cfg = cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, followDone: make(chan struct{}), errc: make(chan error, 1), stopFollow: func() {}}
	if cfg.ReplicaOf != "" {
		if err := n.startReplica(); err != nil {
			if n.replica != nil {
				n.replica.close()
			}
			return nil, err
		}
		return n, nil
	}
	if err := n.start(ctx); err != nil {
		_ = n.closeParts()
		return nil, err
	}
	return n, nil
}

func (n *Node) start(ctx context.Context) error {
	cfg, log := n.cfg, n.cfg.Logger
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	if cfg.MemoryCacheBytes > 0 {
		mem, err := memory.New(memory.Options{MaxBytes: cfg.MemoryCacheBytes, Metrics: reg})
		if err != nil {
			return fmt.Errorf("memory tier: %w", err)
		}
		n.mem = mem
	}
	redisOpts := cfg.redisOptions()
	redisOpts.Logger, redisOpts.Metrics = log, reg
	if cfg.redisOn() {
		if err := redis.CheckOptions(redisOpts); err != nil {
			return fmt.Errorf("redis tier: %w", err)
		}
	}

	// A disk too full to open the store stops start-up here, at once, with
	// one line (docs/disk-full.md); so does ctx ending while the store opens.
	if err := checkStartSpace(cfg.DataDir, cfg.DiskReserve, log); err != nil {
		return err
	}
	opts, err := WithIndexes(disk.Options{
		PruneDepth: cfg.PruneDepth, RollbackWindow: cfg.RollbackWindow, Logger: log,
		LogRetention: cfg.ReplicationRetention, MemTableBytes: cfg.MemTableBytes, CacheBytes: cfg.BlockCacheBytes, Chain: cfg.Chain, ChainIfNone: cfg.ChainIfNone,
		Pending: cfg.Pending,
	}, cfg.Indexes, cmp.Or(cfg.Chain, cfg.ChainIfNone))
	if err != nil {
		return err
	}
	store, err := openStore(ctx, cfg.DataDir, opts)
	if err != nil {
		return err
	}
	n.store = store
	keepBallast(cfg.DataDir, cfg.BallastBytes, cfg.DiskReserve, log)
	var tiers []cache.Tier
	if n.mem != nil {
		tiers = append(tiers, n.mem)
	}
	if cfg.redisOn() {
		// The tier discards what Redis holds from before the store's state
		// (a writer killed between a commit and its invalidation), and
		// serves nothing while Redis is behind the published state (a
		// Redis restored from an older snapshot).
		redisOpts.StartSeq = store.Published().Seq
		redisOpts.PublishedSeq = func() uint64 { return store.Published().Seq }
		rt, err := redis.New(redisOpts)
		if err != nil {
			return fmt.Errorf("redis tier: %w", err)
		}
		n.rt = rt
		tiers = append(tiers, rt)
	}

	n.reads = query.New(store, query.Options{Tiers: tiers, Metrics: query.NewMetrics(reg), Logger: log, Now: cfg.Now,
		Admission: cfg.RedisAdmission})
	space, reserve := writerSpace(cfg.DataDir, cfg.DiskReserve)
	if cfg.WriterNice > 0 {
		// The lowered writer's thread needs a P of its own while the
		// readers keep one per CPU (package threadprio).
		if procs, changed := threadprio.ExtraP(); changed {
			log.Info("one P more than the CPUs, for the lowered writer", "gomaxprocs", procs)
		}
	}
	n.w = writer.New(store, writer.Options{
		SkipUnknownInputs: cfg.SkipUnknownInputs, Metrics: writer.NewMetrics(reg), Logger: log,
		Space: space, Reserve: reserve, Now: cfg.Now, LeaseSweep: cfg.LeaseSweep, Nice: max(cfg.WriterNice, 0),
	})
	var writesRefused func() error
	if space != nil {
		writesRefused = n.w.WritesRefused
	}
	n.w.Subscribe(n.reads)

	var source api.Replication
	staging := filepath.Join(cfg.DataDir, CheckpointStaging)
	if cfg.ReplicationToken != "" || cfg.JetStream != "" {
		_ = os.RemoveAll(staging) // checkpoints a killed writer left behind
	}
	if cfg.ReplicationToken != "" {
		source = replication.NewSourceWith(store, n.w, replication.SourceOptions{
			Staging: staging, MaxChangeStreams: cfg.MaxChangeStreams})
	}
	if cfg.JetStream != "" {
		// The writer only signals the publisher; its own goroutines read the
		// change log and checkpoints, so NATS never holds the writer back.
		if store.Options().LogRetention == 0 {
			return errors.New("node: --jetstream needs the change log (a retention above 0)")
		}
		pub, err := jetstream.NewPublisher(store, n.w, staging, cfg.BlockLimits(), jetstream.Options{
			URLs: cfg.JetStream, Name: cfg.JetStreamName, Replicas: cfg.JetStreamReplicas,
			Retention: store.Options().LogRetention, CheckpointInterval: cfg.JetStreamCheckpointInterval, Logger: log,
		}, jetstream.NewPublisherMetrics(reg))
		if err != nil {
			return fmt.Errorf("jetstream: %w", err)
		}
		n.pub = pub
		n.w.Subscribe(pub)
	}
	// The follower of a node, if any; it starts once the API is built.
	var follower func(context.Context) error
	var followerName string
	switch {
	case cfg.FollowBitcoinREST != "":
		opts := follow.Options{
			URL: cfg.FollowBitcoinREST, Network: cfg.BitcoinNetwork, MaxReorgDepth: store.Options().RollbackWindow,
			Writer: n.w, Hashes: store, Metrics: reg, Logger: log,
		}
		if cfg.FollowMempool {
			opts.Mempool = n.w
		}
		f := follow.New(opts)
		follower, followerName = f.Run, "bitcoin follower"
	case cfg.FollowCardano != "":
		f := n2n.New(n2n.Options{
			Address: cfg.FollowCardano, Magic: cfg.CardanoMagic, Start: cfg.CardanoStart, Genesis: cfg.CardanoGenesis,
			Writer: n.w, Points: store, Metrics: reg, Logger: log,
		})
		follower, followerName = f.Run, "cardano follower"
		n.cardano = f
	}
	if n.hub, err = newEventHub(store, n.reads, n.w, reg, cfg.MaxEventStreams, cfg.BlockLimits(), log); err != nil {
		return err
	}
	front, err := esploraFrontend(n.store, n.reads, cfg.EsploraUtxosLimit)
	if err != nil {
		return err
	}
	n.api = api.New(n.reads, n.w, api.Options{
		Blockfrost:       blockfrostOption(store, n.reads, cfg.BlockfrostProjectID),
		Esplora:          front,
		Events:           eventsOption(n.hub),
		ReplicationToken: cfg.ReplicationToken,
		Replication:      source,
		StallTimeout:     cfg.StallTimeout,
		AdminToken:       cfg.AdminToken,
		WalletToken:      cfg.WalletToken,
		RawTx:            rawTxFunc(store.Chain(), cfg.BitcoinNetwork),
		MaxBlockBytes:    cfg.MaxBlockBytes,
		BlockLimits:      cfg.BlockLimits(),
		MaxWait:          cfg.MaxWait,
		Registry:         reg,
		Gatherer:         reg,
		Logger:           log,
		Ready: func() error {
			if n.draining.Load() {
				return errors.New("shutting down")
			}
			if n.cardano != nil {
				return n.cardano.Ready() // nil unless it halted, with its reason
			}
			return nil
		},
		WritesRefused: writesRefused,
	})

	if follower == nil {
		close(n.followDone)
		return nil
	}
	followCtx, stop := context.WithCancel(context.Background())
	n.stopFollow = stop
	go func() {
		defer close(n.followDone)
		if err := follower(followCtx); err != nil {
			n.errc <- fmt.Errorf("%s: %w", followerName, err)
		}
	}()
	return nil
}

// Handler is the node's HTTP API (docs/api.md).
func (n *Node) Handler() http.Handler {
	if n.replica != nil {
		return &n.replica.sw // the active store's, switched when it is replaced
	}
	return n.api
}

// Err delivers the error that stopped a background part of the node (the
// Bitcoin follower; on a replica, what follows its writer), at most once.
// The node still serves reads; the caller decides whether to stop it. A
// writer whose store failed is not reported here, as serve never stopped
// for one: it refuses every write with writer.ErrFailed (until restarted)
// and its reads keep the last published state.
func (n *Node) Err() <-chan error { return n.errc }

// Store is the writer node's store, for reading its state (nil on a
// replica, whose store changes). The node closes it.
func (n *Node) Store() *disk.Store { return n.store }

// Writer is the writer node's writer (nil on a replica): an in-process
// caller may apply blocks through it as POST /v1/blocks does. The node
// closes it.
func (n *Node) Writer() *writer.Writer { return n.w }

// Drain begins shutting down without closing anything: /readyz answers
// 503, the follower (a replica's, of its writer) finishes its block or
// change in flight and stops (before the writer does), and the API's long
// polls answer now, or an http.Server.Shutdown would wait for them. ctx
// bounds the wait for the follower. Drain may be called more than once;
// Close calls it.
func (n *Node) Drain(ctx context.Context) error {
	n.drainOnce.Do(func() {
		n.draining.Store(true)
		if n.replica != nil {
			n.replica.draining.Store(true)
		}
		n.stopFollow()
	})
	select {
	case <-n.followDone:
	case <-ctx.Done():
		return ctx.Err()
	}
	if n.api != nil {
		n.api.Drain()
	}
	return nil
}

// Close shuts the node down in order: Drain, then the writer (the block in
// flight finishes, queued ones are refused), the reads, the Redis tier, the
// store, and the memory tier (it holds no file). The caller stops serving
// Handler between Drain and Close (http.Server.Shutdown); a request that
// reaches Handler after Close may fail. ctx bounds the wait for the
// follower: when it ends first, Close returns its error and closes nothing
// (the follower may still use the store), and may be called again. A
// replica closes its store and what serves it, then its tiers.
func (n *Node) Close(ctx context.Context) error {
	if err := n.Drain(ctx); err != nil {
		return err
	}
	n.closeOnce.Do(func() {
		if n.replica != nil {
			n.replica.close()
			return
		}
		if n.pub != nil {
			n.pub.Close() // before the writer it takes checkpoints from
		}
		_ = n.w.Close()
		n.cfg.Logger.Info("stopped", "tip", n.store.State().Tip.String())
		n.closeErr = n.closeParts()
	})
	return n.closeErr
}

// closeParts closes what is open, dependents first.
func (n *Node) closeParts() error {
	if n.pub != nil {
		n.pub.Close()
	}
	if n.hub != nil {
		n.hub.Close()
	}
	if n.reads != nil {
		n.reads.Close()
	}
	if n.rt != nil {
		n.rt.Close()
	}
	var err error
	if n.store != nil {
		err = n.store.Close()
	}
	if n.mem != nil {
		n.mem.Close()
	}
	return err
}

// rawTxFunc returns the reader of the chain's raw transactions for POST
// /v1/pending (application/octet-stream): Bitcoin's serialized transaction
// on a Bitcoin store, the transaction CBOR on a Cardano store; nil (415) on
// a generic store, whose transactions are posted in the block format.
func rawTxFunc(c disk.Chain, network bitcoin.Network) api.RawTxFunc {
	switch c {
	case "bitcoin":
		a, err := bitcoin.NewAdapter(bitcoin.Options{Network: network})
		if err != nil {
			return nil
		}
		return func(raw []byte) (chain.Tx, error) {
			mtx, err := bitcoin.DecodeTx(raw)
			if err != nil {
				return chain.Tx{}, err
			}
			tx, err := a.ConvertTx(mtx)
			if err != nil {
				return chain.Tx{}, err
			}
			return *tx, nil
		}
	case "cardano":
		a, err := cardano.NewAdapter(cardano.Options{})
		if err != nil {
			return nil
		}
		return func(raw []byte) (chain.Tx, error) {
			tx, err := a.ConvertTx(raw)
			if err != nil {
				return chain.Tx{}, err
			}
			return *tx, nil
		}
	}
	return nil
}

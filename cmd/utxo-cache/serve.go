package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/utxo-cache/utxo-cache/api"
	"github.com/utxo-cache/utxo-cache/bitcoin"
	"github.com/utxo-cache/utxo-cache/cardano/n2n"
	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/internal/diskspace"
	"github.com/utxo-cache/utxo-cache/internal/threadprio"
	"github.com/utxo-cache/utxo-cache/node"
	"github.com/utxo-cache/utxo-cache/replication"
	"github.com/utxo-cache/utxo-cache/replication/jetstream"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
	"github.com/utxo-cache/utxo-cache/writer"
)

const serveAbout = `
Runs the single writer and the HTTP API (docs/api.md) over one store: reads go
through the memory tier, then Redis (when --redis-url is set), then the store.
Settings come from flags, then UTXO_CACHE_* environment variables, then the
optional YAML file of --config (keys are flag names: "listen: 127.0.0.1:8080"),
then the defaults below. SIGINT or SIGTERM stop it cleanly: no new requests,
in-flight requests and the block being applied finish, the store is closed.`

// serveSettings are serve's resolved settings.
type serveSettings struct {
	dataDir, listen, adminToken, redisURL, memoryBytes string
	replicationTokenFile                               string
	adminTokenFile                                     string
	walletToken, walletTokenFile                       string
	blockfrostProjectID                                string
	adminListen, logLevel, logFormat, config           string
	pruneDepth, rollbackWindow                         uint64 // 0: the store's recorded values
	indexes                                            string // --indexes: node.Config.Indexes
	skipUnknown                                        bool
	maxBlockBytes                                      int64
	maxBlockMemory                                     string
	blockMemory                                        int // parsed --max-block-memory
	redisTTL, redisTimeout, shutdownTimeout, maxWait   time.Duration
	redisAdmission                                     string
	redisMinCost                                       time.Duration
	stallTimeout                                       time.Duration
	maxChangeStreams                                   int
	maxEventStreams                                    int
	esploraUtxosLimit                                  int
	applyPriorityWait, checkpointIdleTimeout           time.Duration
	followURL, bitcoinNetwork                          string
	followMempool                                      bool
	followCardano, cardanoNetwork, cardanoStart        string
	byronGenesis, shelleyGenesis                       string
	genesis                                            []chain.Tx // read from the genesis files by runServe
	replicaOf, replicationToken                        string
	jetStream, jetStreamName                           string
	jetStreamReplicas                                  int
	jetStreamCheckpointInterval                        time.Duration
	replicationRetention, maxLagBlocks                 uint64
	disk                                               diskFlags
	reserve                                            uint64 // parsed --disk-reserve-bytes
	memtable                                           string
	blockCache                                         string
	blockCacheBytes                                    int64
	memtableBytes                                      uint64
	redis                                              redisFlags
	pendingTTL                                         time.Duration
	pendingMaxTxs                                      int
	pendingMaxBytes                                    string
	writerNice                                         int
}

func runServe(e *env, args []string) error {
	cl := newCommandLine("serve", "serve [flags]", serveAbout)
	fs := cl.fs
	var s serveSettings
	fs.StringVar(&s.config, "config", "", "optional YAML `FILE` of settings (keys are flag names)")
	fs.StringVar(&s.dataDir, "data-dir", "./data", "`DIR` holding the Pebble store (created if missing)")
	fs.StringVar(&s.listen, "listen", "127.0.0.1:8080", "HTTP `ADDRESS` of the API")
	fs.StringVar(&s.adminToken, "admin-token", "", "bearer `TOKEN` that enables POST /v1/blocks and /v1/rollback (none: writes answer 403);\n"+
		"prefer --admin-token-file: a command line is visible to every local user")
	fs.StringVar(&s.adminTokenFile, "admin-token-file", "", "`FILE` holding the admin token (a trailing newline is ignored); not with --admin-token")
	fs.StringVar(&s.walletToken, "wallet-token", "", "bearer `TOKEN` that enables the wallet writes (pending transactions, leases; none: they answer 403);\n"+
		"distinct from the admin token; prefer --wallet-token-file")
	fs.StringVar(&s.walletTokenFile, "wallet-token-file", "", "`FILE` holding the wallet token (a trailing newline is ignored); not with --wallet-token")
	fs.DurationVar(&s.pendingTTL, "pending-ttl", chain.DefaultPendingTTL*time.Second, "how long a posted pending transaction stays pending before it expires (`DURATION`)")
	fs.IntVar(&s.pendingMaxTxs, "pending-max-txs", disk.DefaultPendingMaxTxs, "most pending transactions the writer keeps; a post beyond answers 507 insufficient_storage (`N`)")
	fs.StringVar(&s.pendingMaxBytes, "pending-max-bytes", "256MiB", "most bytes of stored pending transactions; a post beyond answers 507 insufficient_storage (`SIZE`)")
	fs.StringVar(&s.blockfrostProjectID, "blockfrost-project-id", "", "`TOKEN` every request to the Blockfrost front end (/api/v0, Cardano stores) must send in its\n"+
		"project_id header (none: the header is accepted and not checked)")
	fs.Uint64Var(&s.pruneDepth, "prune-depth", storeDefaults.PruneDepth, pruneDepthUsage)
	fs.Uint64Var(&s.rollbackWindow, "rollback-window", storeDefaults.RollbackWindow, rollbackWindowUsage)
	fs.StringVar(&s.indexes, "indexes", "", indexesUsage)
	fs.DurationVar(&s.maxWait, "max-wait", 2*time.Second, "longest a read waits for its min_seq / min_height before answering 503 behind, or a long-poll (If-None-Match with wait) for a change before answering 304 (0: never waits)")
	fs.StringVar(&s.redisURL, "redis-url", "", "shared Redis tier `URL` (redis://host:port/db); none: tier off")
	fs.StringVar(&s.memoryBytes, "memory-cache-bytes", "256MiB", "in-process cache budget (`SIZE`: bytes, or with KiB/MiB/GiB; 0 turns the tier off)")
	fs.BoolVar(&s.skipUnknown, "skip-unknown-inputs", false, "skip and count inputs that are not live outputs (stores that start mid-chain)")
	fs.Int64Var(&s.maxBlockBytes, "max-block-bytes", int64(chain.Limits{}.EnsureDefaults().MaxBlockBytes), "largest accepted POST /v1/blocks body, in `BYTES`")
	maxBlockMemoryFlag(fs, &s.maxBlockMemory)
	s.redis.register(fs)
	fs.DurationVar(&s.redisTTL, "redis-ttl", 10*time.Minute, "lifetime of a Redis cache entry")
	fs.StringVar(&s.redisAdmission, "redis-admission", "cost", "which answers the Redis tier is asked for and filled with (`RULE`): cost (those that took the store\n"+
		"longer to compute than --redis-min-cost and twice the tier's measured round trip, computed twice on this node) or all")
	fs.DurationVar(&s.redisMinCost, "redis-min-cost", 0, "with --redis-admission cost: the least time computing an answer must take for it to go to Redis (`DURATION`)")
	fs.DurationVar(&s.redisTimeout, "redis-timeout", 50*time.Millisecond, "timeout of every Redis call; slower means the tier is skipped")
	fs.StringVar(&s.adminListen, "admin-listen", "", "`ADDRESS` for pprof (/debug/pprof/); none: off")
	fs.StringVar(&s.logLevel, "log-level", "info", "`LEVEL`: debug, info, warn or error")
	fs.StringVar(&s.logFormat, "log-format", "text", "`FORMAT`: text or json")
	fs.DurationVar(&s.shutdownTimeout, "shutdown-timeout", 15*time.Second, "how long to drain requests on shutdown")
	fs.StringVar(&s.followURL, "follow-bitcoin-rest", "", "follow a Bitcoin Core node's REST interface at `URL` (e.g. http://127.0.0.1:8332; the node runs with -rest); none: off")
	fs.BoolVar(&s.followMempool, "follow-mempool", true, "with --follow-bitcoin-rest: mirror the node's mempool into the pending set (false: confirmed state only)")
	fs.StringVar(&s.bitcoinNetwork, "bitcoin-network", "mainnet", "`NETWORK` of the followed node: mainnet, testnet, signet or regtest")
	fs.StringVar(&s.followCardano, "follow-cardano", "", "follow a Cardano node's node-to-node endpoint at `HOST:PORT` (ChainSync and BlockFetch); none: off")
	fs.StringVar(&s.cardanoNetwork, "cardano-network", "mainnet", "`NETWORK` of the followed Cardano node: mainnet, preprod, preview, or its magic number")
	fs.StringVar(&s.byronGenesis, "byron-genesis", "", "Byron genesis `FILE` (JSON): with --follow-cardano, an empty store that follows the chain from its origin is seeded with its balances, as a block at height 0 before the chain's first block; none: not seeded")
	fs.StringVar(&s.shelleyGenesis, "shelley-genesis", "", "Shelley genesis `FILE` (JSON): its initialFunds join --byron-genesis's outputs")
	fs.StringVar(&s.cardanoStart, "cardano-start-point", "", "`SLOT.HASH`: the chain point an empty store joins the Cardano chain at (the blocks after it are applied; needs --skip-unknown-inputs); none: the origin")
	fs.StringVar(&s.replicaOf, "replica-of", "", "the writer's base `URL` (http://host:port): run as a read replica of it; or NATS servers (nats://host:port,…):\n"+
		"run as a read replica of the writer that publishes to them (--jetstream); none: run as the writer")
	fs.StringVar(&s.jetStream, "jetstream", "", "on the writer, NATS `URLS` (nats://host:port, comma separated) to also publish the change log and checkpoints to (JetStream),\n"+
		"for replicas started with --replica-of nats://…; none: off")
	fs.StringVar(&s.jetStreamName, "jetstream-name", jetstream.DefaultName, "`NAME` of the JetStream stream, subjects and checkpoint bucket (letters, digits, _ and -); a writer and its replicas use the same")
	fs.IntVar(&s.jetStreamReplicas, "jetstream-replicas", 1, "on the writer, how many NATS servers keep the stream and the checkpoints (`N`, 1 to 5; 3 on a cluster survives losing a server)")
	fs.DurationVar(&s.jetStreamCheckpointInterval, "jetstream-checkpoint-interval", 10*time.Minute, "on the writer, how often a checkpoint is put in the JetStream object store while the store changes\n"+
		"(also when there is none, when the newest is half the retention behind, and when a replica asks for a newer one)")
	fs.StringVar(&s.replicationToken, "replication-token", "", "bearer `TOKEN` of the replication endpoints: on the writer it enables them, on a replica it is sent to the writer (none: replication off);\n"+
		"prefer --replication-token-file")
	fs.StringVar(&s.replicationTokenFile, "replication-token-file", "", "`FILE` holding the replication token (a trailing newline is ignored); not with --replication-token")
	fs.Uint64Var(&s.replicationRetention, "replication-retention", 0, "changes the writer keeps in its change log for replicas, in `BLOCKS` (each applied block is one change); default: the rollback window")
	fs.DurationVar(&s.stallTimeout, "stall-timeout", api.DefaultStallTimeout, "on the writer, longest a checkpoint or change-log answer waits for its reader to take the next 64KiB;\n"+
		"a reader that stops reading is dropped after it, and its slot and staged files freed")
	fs.IntVar(&s.maxChangeStreams, "max-change-streams", replication.DefaultMaxChangeStreams, "on the writer, change-log answers written at once; more answer 429 (replicas retry)")
	fs.IntVar(&s.maxEventStreams, "max-event-streams", node.DefaultMaxEventStreams, "event streams (GET/POST /v1/events) served at once; more answer 503")
	fs.IntVar(&s.esploraUtxosLimit, "esplora-utxos-limit", 0, "most outputs an unpaged Esplora UTXO listing (/api/address/:address/utxo) answers; more answer 400 as Esplora does (0: no limit)")
	fs.Uint64Var(&s.maxLagBlocks, "max-lag-blocks", 10, "a replica further behind its writer than this many `BLOCKS` is not ready (/readyz 503)")
	fs.DurationVar(&s.applyPriorityWait, "apply-priority-wait", replication.DefaultApplyPriorityWait, "on a replica, longest a new read waits for a change being applied before it goes on (the change goes first on the CPU);\n"+
		"0: reads never wait")
	fs.DurationVar(&s.checkpointIdleTimeout, "checkpoint-idle-timeout", replication.DefaultCheckpointIdleTimeout,
		"on a replica, how long a checkpoint download may receive nothing before it is abandoned (and retried)")
	fs.IntVar(&s.writerNice, "writer-nice", node.DefaultWriterNice, "how much lower than the readers' the writer's OS thread runs (`N`, 1 to 19; 0: the same): reads preempt\n"+
		"a block's CPU burst; the process then runs one P more than its CPUs (GOMAXPROCS, unless set). Not on a replica")
	fs.StringVar(&s.memtable, "memtable-bytes", diskspace.FormatSize(storeDefaults.MemTableBytes), "Pebble's memtable size (`SIZE`): writes buffered in memory, and in the log, before a flush to an sstable;\n"+
		"the default --disk-reserve-bytes is twice this plus 64MiB")
	blockCacheFlag(fs, &s.blockCache)
	s.disk.registerReserve(fs)
	s.disk.registerBallast(fs)
	if err := cl.parse(e, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("serve takes no arguments, got %q", fs.Args())
	}
	if err := applyConfigFile(cl, s.config); err != nil {
		return err
	}
	if err := checkBlocks(cl, "prune-depth", s.pruneDepth); err != nil {
		return err
	}
	if err := checkBlocks(cl, "rollback-window", s.rollbackWindow); err != nil {
		return err
	}
	if s.maxWait < 0 {
		return usagef("--max-wait %s: must not be negative", s.maxWait)
	}
	if s.maxWait == 0 {
		s.maxWait = -1 // api.Options: no waiting
	}
	if s.stallTimeout <= 0 {
		return usagef("--stall-timeout %s: must be positive", s.stallTimeout)
	}
	if s.esploraUtxosLimit < 0 {
		return usagef("--esplora-utxos-limit %d: must not be negative", s.esploraUtxosLimit)
	}
	if s.maxEventStreams <= 0 {
		return usagef("--max-event-streams %d: must be positive", s.maxEventStreams)
	}
	if s.maxChangeStreams <= 0 {
		return usagef("--max-change-streams %d: must be positive", s.maxChangeStreams)
	}
	if s.applyPriorityWait < 0 {
		return usagef("--apply-priority-wait %s: must not be negative", s.applyPriorityWait)
	}
	if s.checkpointIdleTimeout <= 0 {
		return usagef("--checkpoint-idle-timeout %s: must be positive", s.checkpointIdleTimeout)
	}
	token, err := resolveSecret("admin-token", s.adminToken, s.adminTokenFile)
	if err != nil {
		return err
	}
	s.adminToken, s.adminTokenFile = token, ""
	wtoken, err := resolveSecret("wallet-token", s.walletToken, s.walletTokenFile)
	if err != nil {
		return err
	}
	s.walletToken, s.walletTokenFile = wtoken, ""
	if wtoken != "" && wtoken == s.adminToken {
		return usagef("--wallet-token is the admin token: give wallet backends a token of their own, which cannot post blocks")
	}
	rtoken, err := resolveSecret("replication-token", s.replicationToken, s.replicationTokenFile)
	if err != nil {
		return err
	}
	s.replicationToken, s.replicationTokenFile = rtoken, ""
	if err := s.redis.check(s.redisURL); err != nil {
		return err
	}
	if s.blockMemory, err = blockMemoryBytes(s.maxBlockMemory); err != nil {
		return err
	}
	if n, err := parseSize(s.pendingMaxBytes); err != nil || n < 1 {
		return usagef("--pending-max-bytes %q: want a positive size", s.pendingMaxBytes)
	}
	if s.pendingMaxTxs < 1 || s.pendingTTL < time.Second {
		return usagef("--pending-max-txs must be positive and --pending-ttl at least 1s")
	}
	memBytes, err := parseSize(s.memoryBytes)
	if err != nil {
		return usagef("--memory-cache-bytes: %v", err)
	}
	if s.writerNice < 0 || s.writerNice > threadprio.MaxNice {
		return usagef("--writer-nice: %d: want 0 to %d", s.writerNice, threadprio.MaxNice)
	}
	mt, err := parseSize(s.memtable)
	if err != nil || mt < 1<<20 {
		return usagef("--memtable-bytes: %q: want a size of at least 1MiB", s.memtable)
	}
	s.memtableBytes = uint64(mt)
	if s.blockCacheBytes, err = blockCacheBytes(s.blockCache); err != nil {
		return err
	}
	if s.reserve, err = s.disk.reserveBytes(); err != nil {
		return err
	}
	if !cl.given("disk-reserve-bytes") {
		s.reserve = writer.DefaultReserve(s.memtableBytes)
	}
	if _, err := parseBallastFlag(s.disk.ballast); err != nil {
		return err
	}
	if _, err := bitcoin.ParseNetwork(s.bitcoinNetwork); err != nil {
		return usagef("--bitcoin-network: %v", err)
	}
	if _, err := n2n.ParseNetwork(s.cardanoNetwork); err != nil {
		return usagef("--cardano-network: %v", err)
	}
	if s.cardanoStart != "" {
		if _, err := n2n.ParsePoint(s.cardanoStart); err != nil {
			return usagef("--cardano-start-point: %v", err)
		}
	}
	if s.followCardano != "" {
		if _, _, err := net.SplitHostPort(s.followCardano); err != nil {
			return usagef("--follow-cardano %q: want HOST:PORT", s.followCardano)
		}
		if s.followURL != "" {
			return usagef("--follow-cardano and --follow-bitcoin-rest: a writer follows one node")
		}
	}
	if s.byronGenesis != "" || s.shelleyGenesis != "" {
		switch {
		case s.followCardano == "":
			return usagef("--byron-genesis and --shelley-genesis seed a store that --follow-cardano follows from the origin")
		case s.byronGenesis == "":
			return usagef("--shelley-genesis goes with --byron-genesis (the genesis block is named by the Byron genesis hash)")
		case s.cardanoStart != "":
			return usagef("--byron-genesis: a store that starts at --cardano-start-point starts mid-chain, not at the origin")
		}
		txs, err := readGenesis(s.byronGenesis, s.shelleyGenesis)
		if err != nil {
			return usagef("%v", err)
		}
		s.genesis = slices.Concat(txs...)
	}
	logger, err := newLogger(e, s.logLevel, s.logFormat)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if _, _, err := node.ParseIndexes(s.indexes); err != nil {
		return usagef("--indexes: %v", err)
	}
	if _, err := s.admission(); err != nil {
		return err
	}
	if (cl.given("redis-admission") || cl.given("redis-min-cost")) && s.redis.deployments(s.redisURL) == 0 {
		return usagef("--redis-admission and --redis-min-cost need a Redis tier (--redis-url, --redis-cluster or --redis-sentinel-master)")
	}
	// Not given: 0, the values the store recorded.
	s.pruneDepth = storeDepth(cl, "prune-depth", s.pruneDepth)
	s.rollbackWindow = storeDepth(cl, "rollback-window", s.rollbackWindow)
	if s.replicaOf != "" {
		switch {
		case s.replicationToken == "" && !jetstream.IsURL(s.replicaOf):
			return usagef("--replica-of needs --replication-token (the writer's replication token)")
		case s.adminToken != "":
			return usagef("--admin-token: a replica takes no writes")
		case s.jetStream != "":
			return usagef("--jetstream: a replica publishes nothing (its writer does)")
		case s.followURL != "":
			return usagef("--follow-bitcoin-rest: a replica follows its writer, not a node")
		case s.followCardano != "":
			return usagef("--follow-cardano: a replica follows its writer, not a node")
		case cl.given("prune-depth") || cl.given("rollback-window"):
			return usagef("--prune-depth and --rollback-window: a replica keeps its writer's, from the checkpoint")
		case cl.given("indexes"):
			return usagef("--indexes: a replica keeps its writer's, from the checkpoint")
		case cl.given("disk-reserve-bytes") || cl.given("ballast-bytes"):
			return usagef("--disk-reserve-bytes and --ballast-bytes: the free-space guard and the ballast are the writer's (docs/disk-full.md)")
		}
	}
	return serve(ctx, e, s, memBytes, logger)
}

// admission is the Redis tier's admission rule of --redis-admission and
// --redis-min-cost.
func (s serveSettings) admission() (node.Admission, error) {
	a, err := node.ParseAdmission(s.redisAdmission, s.redisMinCost)
	if err != nil {
		return a, usagef("%v", err)
	}
	return a, nil
}

// nodeConfig is the node.Config of settings s.
func (s serveSettings) nodeConfig(memBytes int64, log *slog.Logger) node.Config {
	admission, _ := s.admission()                        // checked by runServe
	network, _ := bitcoin.ParseNetwork(s.bitcoinNetwork) // checked by runServe
	magic, _ := n2n.ParseNetwork(s.cardanoNetwork)       // checked by runServe
	var start *n2n.Point
	if s.cardanoStart != "" {
		p, _ := n2n.ParsePoint(s.cardanoStart) // checked by runServe
		start = &p
	}
	ballast, _ := parseBallastFlag(s.disk.ballast) // checked by runServe
	cfg := node.Config{
		DataDir: s.dataDir,
		Logger:  log,

		PruneDepth:           s.pruneDepth,
		RollbackWindow:       s.rollbackWindow,
		ReplicationRetention: s.replicationRetention,
		MemTableBytes:        s.memtableBytes,
		BlockCacheBytes:      s.blockCacheBytes,
		Indexes:              s.indexes,
		DiskReserve:          s.reserve,
		BallastBytes:         ballast,

		MemoryCacheBytes: memBytes,
		RedisURL:         s.redisURL,
		RedisTTL:         s.redisTTL,
		RedisTimeout:     s.redisTimeout,
		RedisDeployment:  s.redis.deployment(),
		RedisAdmission:   admission,

		AdminToken:          s.adminToken,
		WalletToken:         s.walletToken,
		BlockfrostProjectID: s.blockfrostProjectID,
		Pending: disk.PendingOptions{
			MaxTxs: s.pendingMaxTxs, MaxBytes: s.pendingBytes(), TTL: uint64(s.pendingTTL / time.Second),
		},
		SkipUnknownInputs: s.skipUnknown,
		WriterNice:        s.writerNiceness(),
		MaxBlockBytes:     s.maxBlockBytes,
		MaxBlockMemory:    s.blockMemory,
		MaxWait:           s.maxWait,

		ReplicationToken:  s.replicationToken,
		StallTimeout:      s.stallTimeout,
		MaxChangeStreams:  s.maxChangeStreams,
		MaxEventStreams:   s.maxEventStreams,
		EsploraUtxosLimit: s.esploraUtxosLimit,

		FollowBitcoinREST: s.followURL,
		FollowMempool:     s.followMempool,
		BitcoinNetwork:    network,
		FollowCardano:     s.followCardano,
		CardanoMagic:      magic,
		CardanoStart:      start,
		CardanoGenesis:    s.genesis,
		Chain:             s.chain(),
		ChainIfNone:       s.chainIfNone(),

		ReplicaOf: s.replicaOf,

		JetStream:                   s.jetStream,
		JetStreamName:               s.jetStreamName,
		JetStreamReplicas:           s.jetStreamReplicas,
		JetStreamCheckpointInterval: s.jetStreamCheckpointInterval,
		MaxLagBlocks:                s.maxLagBlocks,
		ApplyPriorityWait:           s.applyPriorityWait,
		CheckpointIdleTimeout:       s.checkpointIdleTimeout,
	}
	return cfg
}

// writerNiceness is Config.WriterNice of --writer-nice: 0 there means the
// readers' priority, which the config spells negative.
func (s serveSettings) writerNiceness() int {
	if s.writerNice == 0 {
		return -1
	}
	return s.writerNice
}

// pendingBytes is --pending-max-bytes, which runServe checked.
func (s serveSettings) pendingBytes() int64 {
	n, _ := parseSize(s.pendingMaxBytes)
	return n
}

// chain is the chain serve feeds its store (chainname.go): its follower's,
// or none. A replica's store is its writer's. Blocks POSTed without a
// follower (--admin-token) are checked only by linking to the tip, so such
// a node serves a store of any chain; a store it creates records generic
// (chainIfNone).
func (s serveSettings) chain() disk.Chain {
	switch {
	case s.replicaOf != "":
		return ""
	case s.followURL != "":
		return chainBitcoin
	case s.followCardano != "":
		return chainCardano
	}
	return ""
}

// chainIfNone is the chain a new store records when serve feeds it no
// chain of its own: generic, when it takes POSTed blocks.
func (s serveSettings) chainIfNone() disk.Chain {
	if s.replicaOf == "" && s.followURL == "" && s.followCardano == "" && s.adminToken != "" {
		return chainGeneric
	}
	return ""
}

// serve runs the node of settings s, the writer or a read replica, until
// ctx is cancelled, then shuts down in order: stop the follower (the
// Bitcoin node's, or the replica's of its writer) after its block in
// flight, answer the long polls, stop taking requests and drain them (a
// POST /v1/blocks in flight completes), stop the writer (the block in
// flight finishes, queued ones are refused), close the tiers and the store.
func serve(ctx context.Context, e *env, s serveSettings, memBytes int64, log *slog.Logger) error {
	// The listeners are opened before the node starts: a refused serve
	// leaves no new store behind.
	ln, err := net.Listen("tcp", s.listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", s.listen, err)
	}
	defer ln.Close() // srv.Serve owns it once serving; a second Close is harmless
	var adminLn net.Listener
	if s.adminListen != "" {
		if adminLn, err = net.Listen("tcp", s.adminListen); err != nil {
			return fmt.Errorf("admin listen on %s: %w", s.adminListen, err)
		}
		defer adminLn.Close()
	}

	n, err := node.Start(ctx, s.nodeConfig(memBytes, log))
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		// Like a crash to the store: its log replays on the next start.
		log.Info("stopped by a signal while opening the store")
		return nil
	}
	if err != nil {
		return chainRefused("serve", s.dataDir, "", err)
	}
	srv := node.NewHTTPServer(n.Handler(), log)
	errc := make(chan error, 2)
	go func() { errc <- srv.Serve(ln) }()
	var admin *http.Server
	if adminLn != nil {
		admin = startAdmin(adminLn, errc)
	}
	stopped := "server failed" // what a background part's error is logged as
	if s.replicaOf != "" {
		stopped = "replica stopped"
		fmt.Fprintf(e.stderr, "utxo-cache: serving on http://%s (replica of %s)\n", ln.Addr(), s.replicaOf)
	} else {
		if adminLn != nil {
			fmt.Fprintf(e.stderr, "utxo-cache: pprof on http://%s/debug/pprof/ (no authentication: keep it private)\n", adminLn.Addr())
		}
		store := n.Store()
		st := store.Published()
		log.Info("serving", "listen", ln.Addr().String(), "data_dir", s.dataDir, "tip", st.Tip.String(), "seq", st.Seq,
			"prune_depth", store.Options().PruneDepth, "rollback_window", store.Options().RollbackWindow,
			"utxos", st.UtxoCount, "memory_tier_bytes", memBytes, "redis", s.redisURL != "" || s.redis.cluster != "" || s.redis.sentinelMaster != "", "writes", s.adminToken != "")
		fmt.Fprintf(e.stderr, "utxo-cache: serving on http://%s (tip %s)\n", ln.Addr(), st.Tip)
	}

	var runErr error
	select {
	case <-ctx.Done():
		log.Info("shutting down")
	case runErr = <-errc:
		log.Error("server failed", "err", runErr)
	case runErr = <-n.Err():
		log.Error(stopped, "err", runErr)
	}
	_ = n.Drain(context.Background()) // the follower, then the long polls
	sctx, cancel := context.WithTimeout(context.Background(), s.shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("drain incomplete", "err", err)
	}
	if admin != nil {
		_ = admin.Shutdown(sctx)
	}
	if err := n.Close(context.Background()); err != nil {
		log.Warn("closing the store", "err", err)
	}
	if runErr != nil && !errors.Is(runErr, http.ErrServerClosed) {
		return runErr
	}
	return nil
}

// startAdmin serves pprof on ln. The handlers are registered one by one,
// and never pprof.Cmdline: the admin listener has no authentication, and the
// command line may hold a secret (--admin-token). A request for
// /debug/pprof/cmdline reaches pprof.Index, which answers 404 "Unknown
// profile".
func startAdmin(ln net.Listener, errc chan<- error) *http.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { errc <- srv.Serve(ln) }()
	return srv
}

// applyConfigFile sets, from the YAML file at path, every flag that neither
// the command line nor the environment gave. Unknown keys are an error, so a
// typo does not silently fall back to a default.
func applyConfigFile(cl *commandLine, path string) error {
	if path == "" {
		return nil
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config file: %w", err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(raw, &m); err != nil {
		return usagef("config file %s: %v", path, err)
	}
	for k, v := range m {
		f := cl.fs.Lookup(k)
		if f == nil || k == "config" {
			return usagef("config file %s: unknown setting %q", path, k)
		}
		if cl.given(k) {
			continue
		}
		if err := f.Value.Set(fmt.Sprint(v)); err != nil {
			return usagef("config file %s: %s: %v", path, k, err)
		}
		if cl.fromConfig == nil {
			cl.fromConfig = make(map[string]bool)
		}
		cl.fromConfig[k] = true
	}
	return nil
}

// parseSize parses a byte count with an optional binary unit suffix.
func parseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("%q is not a size (e.g. 268435456, 256MiB, 1GiB)", s)
	}
	return n * mult, nil
}

func newLogger(e *env, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, usagef("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(e.stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(e.stderr, opts)), nil
	}
	return nil, usagef("--log-format %q: want text or json", format)
}

package node

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/utxo-cache/utxo-cache/api"
	"github.com/utxo-cache/utxo-cache/bitcoin"
	"github.com/utxo-cache/utxo-cache/cardano/n2n"
	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/internal/threadprio"
	"github.com/utxo-cache/utxo-cache/query"
	"github.com/utxo-cache/utxo-cache/replication"
	"github.com/utxo-cache/utxo-cache/replication/jetstream"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
	"github.com/utxo-cache/utxo-cache/tiers/redis"
)

// DefaultWriterNice is Config.WriterNice's default: the writer's thread
// gets about a quarter of a CPU the readers keep busy (the kernel's weights
// of niceness 5 and 0 are 335 and 1024), more than a live chain's blocks
// need (a 300-transaction block every 100 ms takes 15%), and yields it to
// a reader's thread at once.
const DefaultWriterNice = 5

// Config is everything a node needs, as plain values: the command line
// (cmd/utxo-cache) turns flags, environment and the YAML file into one, and
// an in-process test writes one out. The zero value of a field is its
// default unless its comment says otherwise; EnsureDefaults fills them in.
type Config struct {
	// DataDir holds the store (the writer), or the replica's stores.
	// Created if missing. Required.
	DataDir string
	// Logger receives the node's log. Default: discard.
	Logger *slog.Logger

	// PruneDepth and RollbackWindow are the store's, in blocks; 0 keeps
	// what the store recorded (a new store takes disk.Options' defaults).
	PruneDepth, RollbackWindow uint64
	// ReplicationRetention is how many changes the writer keeps in its
	// change log for replicas; 0: the rollback window.
	ReplicationRetention uint64
	// MemTableBytes is Pebble's memtable size; 0: the store's default.
	MemTableBytes uint64
	// BlockCacheBytes is the size of the store's block cache (each of a
	// replica's stores has its own); 0: the store's default.
	BlockCacheBytes int64
	// Indexes is the store's index set beyond addresses (indexes.go): ""
	// keeps what the store recorded (a new store takes its chain's
	// default), "none" or a list of payment, stake, policy, asset, script, datum must
	// match what an existing store recorded. Not for a replica: it keeps
	// its writer's, from the checkpoint.
	Indexes string
	// Chain names the chain the writer feeds the store (disk.Options.Chain):
	// a store that holds another chain's blocks is refused at start, before
	// anything is applied. "": no check (a node that only serves reads).
	// The writer's only; a replica keeps its writer's store as it is.
	Chain disk.Chain
	// ChainIfNone is recorded, when Chain is "", by a new store
	// (disk.Options.ChainIfNone): a writer that takes POSTed blocks without
	// a follower serves any chain's store, and a store it created holds its
	// chain. The writer's only.
	ChainIfNone disk.Chain
	// DiskReserve is the free space, in bytes, the writer keeps on the
	// data directory's file system (its free-space guard refuses writes
	// below it, 507); 0 turns the guard off, and so the start-up check.
	DiskReserve uint64
	// BallastBytes is the size of the ballast file kept in the data
	// directory; BallastAuto: 1% of the file system, at most 1 GiB; 0: none.
	BallastBytes int64

	// MemoryCacheBytes is the in-process cache tier's budget; 0: no tier.
	MemoryCacheBytes int64
	// RedisURL is the shared Redis tier (redis://host:port/db); "": none.
	// RedisTTL and RedisTimeout are its entries' lifetime and its calls'
	// timeout (redis.Options' defaults when 0).
	RedisURL               string
	RedisTTL, RedisTimeout time.Duration
	// RedisDeployment is the shared Redis tier on a Redis Cluster or behind
	// Sentinels (exclusive with RedisURL), and the credentials and TLS of
	// any deployment.
	RedisDeployment RedisDeployment
	// RedisAdmission decides which answers the Redis tier is asked for and
	// filled with (ParseAdmission). Default: by cost.
	RedisAdmission Admission

	// AdminToken enables POST /v1/blocks and /v1/rollback; "": writes 403.
	AdminToken string
	// WalletToken enables the wallet writes (pending transactions, leases:
	// docs/wallet-state.md); "": they answer 403 wallet_writes_disabled. It
	// must differ from AdminToken: a wallet backend must not post blocks. On
	// a replica, which takes no writes, it authorizes GET /v1/leases/{id}.
	WalletToken string
	// Pending bounds the writer's pending set and sets the expiry of a
	// posted transaction (disk.Options.Pending); zero fields: defaults.
	Pending disk.PendingOptions
	// BlockfrostProjectID, when set, is the project_id header every request
	// to the Blockfrost front end must carry (blockfrost.Options.ProjectID;
	// the front end is mounted under /api/v0 for a Cardano store only).
	// "": the header is accepted and not checked.
	BlockfrostProjectID string
	// Now is the node's clock, which decides lease expiries (the writer's
	// grants and sweeps, every node's reads). Default time.Now; tests set
	// it to a clock they move.
	Now func() time.Time
	// LeaseSweep is how often a writer ends the leases its clock has
	// expired (writer.Options.LeaseSweep): 0 is its default, negative
	// never (tests that expire leases with Writer.ExpireLeases).
	LeaseSweep time.Duration
	// SkipUnknownInputs skips and counts inputs that are not live outputs.
	SkipUnknownInputs bool
	// WriterNice is how much lower than the readers' the writer's OS
	// thread runs (writer.Options.Nice, 1..19): the readers' threads
	// preempt a block's CPU burst. 0: DefaultWriterNice; negative: the
	// writer runs at the readers' priority. The writer's only: a replica
	// gives its changes the CPU first (ApplyPriorityWait). A node whose
	// writer is lowered gives the process one P more than its CPUs, once
	// (threadprio.ExtraP).
	WriterNice int
	// MaxBlockBytes bounds a POST /v1/blocks body and MaxBlockMemory the heap
	// one block may take; 0: chain.Limits' defaults.
	MaxBlockBytes  int64
	MaxBlockMemory int
	// MaxWait bounds how long a read waits for its min_seq / min_height:
	// 0 is api.Options' default (2s), negative never waits.
	MaxWait time.Duration

	// ReplicationToken, on the writer, enables the replication endpoints;
	// on a replica, it is sent to the writer. "": replication off.
	ReplicationToken string
	// StallTimeout bounds how long the writer's streamed answer waits for
	// its reader to take the next 64 KiB. Default api.DefaultStallTimeout.
	StallTimeout time.Duration
	// MaxChangeStreams is how many change-log answers the writer writes at
	// once. Default replication.DefaultMaxChangeStreams.
	MaxChangeStreams int
	// MaxEventStreams bounds the event streams (GET/POST /v1/events) a node
	// serves at once; more answer 503. Default 1000.
	MaxEventStreams int
	// EsploraUtxosLimit is the most outputs the Esplora front end's unpaged
	// UTXO listing answers (a Bitcoin store's /api/): more answer 400 as
	// Esplora's --utxos-limit does. 0: no limit.
	EsploraUtxosLimit int

	// FollowBitcoinREST is a Bitcoin Core node's REST interface the writer
	// follows, on BitcoinNetwork (default bitcoin.Mainnet); "": none.
	FollowBitcoinREST string
	BitcoinNetwork    bitcoin.Network
	// FollowMempool makes the follower of FollowBitcoinREST mirror the
	// node's mempool into the pending set (follow.Options.Mempool).
	FollowMempool bool

	// FollowCardano is a Cardano node's node-to-node endpoint, HOST:PORT,
	// the writer follows (package cardano/n2n), on the network of magic
	// CardanoMagic (default n2n.MagicMainnet); "": none. CardanoStart is
	// where an empty store joins the chain (nil: the origin); a store that
	// starts mid-chain also needs SkipUnknownInputs.
	FollowCardano string
	CardanoMagic  uint32
	CardanoStart  *n2n.Point
	// CardanoGenesis are the chain's genesis outputs the follower seeds an
	// empty store with before the chain's first block (n2n.Options.Genesis);
	// nil: none. Not with CardanoStart.
	CardanoGenesis []chain.Tx

	// ReplicaOf is the writer's base URL: the node is a read replica of it
	// ("": the node is the writer). A replica keeps its stores in DataDir
	// (replication/storedir: which one is active survives a crash). NATS
	// servers (nats://host:port, comma separated) instead make it follow
	// the stream and checkpoints its writer publishes there (JetStream).
	ReplicaOf string

	// JetStream, on the writer, is the NATS servers (nats://host:port, comma
	// separated) it also publishes its change log and checkpoints to, for
	// replicas started with ReplicaOf naming them (replication/jetstream);
	// "": none.
	JetStream string
	// JetStreamName names the stream, subjects and checkpoint bucket; a
	// writer and its replicas use the same. Default jetstream.DefaultName.
	JetStreamName string
	// JetStreamReplicas is how many NATS servers keep the stream and the
	// checkpoints (the writer creates them). Default 1.
	JetStreamReplicas int
	// JetStreamCheckpointInterval is how often the writer puts a checkpoint
	// in the object store while it changes. Default 10 minutes.
	JetStreamCheckpointInterval time.Duration
	// MaxLagBlocks: a replica further behind its writer is not ready.
	MaxLagBlocks uint64
	// ApplyPriorityWait is how long a replica's new read waits for a change
	// being applied; 0: reads never wait.
	ApplyPriorityWait time.Duration
	// CheckpointIdleTimeout is how long a replica's checkpoint download may
	// receive nothing. Default replication.DefaultCheckpointIdleTimeout.
	CheckpointIdleTimeout time.Duration
}

// BallastAuto is Config.BallastBytes for a ballast sized from the file
// system.
const BallastAuto = -1

// EnsureDefaults returns a copy of c with every unset default filled in.
func (c Config) EnsureDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	lim := c.BlockLimits()
	c.MaxBlockBytes, c.MaxBlockMemory = int64(lim.MaxBlockBytes), lim.MaxBlockMemory
	if c.StallTimeout == 0 {
		c.StallTimeout = api.DefaultStallTimeout
	}
	if c.MaxChangeStreams == 0 {
		c.MaxChangeStreams = replication.DefaultMaxChangeStreams
	}
	if c.MaxEventStreams == 0 {
		c.MaxEventStreams = DefaultMaxEventStreams
	}
	if c.WriterNice == 0 {
		c.WriterNice = DefaultWriterNice
	}
	if c.BitcoinNetwork == "" {
		c.BitcoinNetwork = bitcoin.Mainnet
	}
	if c.CardanoMagic == 0 {
		c.CardanoMagic = n2n.MagicMainnet
	}
	if c.CheckpointIdleTimeout == 0 {
		c.CheckpointIdleTimeout = replication.DefaultCheckpointIdleTimeout
	}
	return c
}

// BlockLimits are the limits blocks are decoded with.
func (c Config) BlockLimits() chain.Limits {
	return chain.Limits{MaxBlockBytes: int(c.MaxBlockBytes), MaxBlockMemory: c.MaxBlockMemory}.EnsureDefaults()
}

// Validate reports the first setting that cannot work, or a combination
// that contradicts itself.
func (c Config) Validate() error {
	switch {
	case c.DataDir == "":
		return errors.New("node: no data directory")
	case c.MemoryCacheBytes < 0:
		return fmt.Errorf("node: memory cache bytes %d: must not be negative", c.MemoryCacheBytes)
	case c.BallastBytes < BallastAuto:
		return fmt.Errorf("node: ballast bytes %d: a size, or BallastAuto", c.BallastBytes)
	case c.StallTimeout < 0:
		return fmt.Errorf("node: stall timeout %s: must be positive", c.StallTimeout)
	case c.MaxChangeStreams < 0:
		return fmt.Errorf("node: max change streams %d: must be positive", c.MaxChangeStreams)
	case c.EsploraUtxosLimit < 0:
		return fmt.Errorf("node: esplora utxos limit %d: must not be negative", c.EsploraUtxosLimit)
	case c.WriterNice > threadprio.MaxNice:
		return fmt.Errorf("node: writer niceness %d: at most %d", c.WriterNice, threadprio.MaxNice)
	case c.MaxEventStreams < 0:
		return fmt.Errorf("node: max event streams %d: must be positive", c.MaxEventStreams)
	case c.ApplyPriorityWait < 0:
		return fmt.Errorf("node: apply priority wait %s: must not be negative", c.ApplyPriorityWait)
	case c.CheckpointIdleTimeout < 0:
		return fmt.Errorf("node: checkpoint idle timeout %s: must be positive", c.CheckpointIdleTimeout)
	case c.JetStreamReplicas < 0 || c.JetStreamReplicas > 5:
		return fmt.Errorf("node: JetStream replicas %d: 1 to 5", c.JetStreamReplicas)
	case c.JetStreamCheckpointInterval < 0:
		return fmt.Errorf("node: JetStream checkpoint interval %s: must be positive", c.JetStreamCheckpointInterval)
	case c.FollowBitcoinREST != "" && c.FollowCardano != "":
		return errors.New("node: a writer follows one node: a Bitcoin node or a Cardano node, not both")
	case c.WalletToken != "" && c.WalletToken == c.AdminToken:
		return errors.New("node: the wallet token is the admin token: a wallet backend must not post blocks")
	}
	if _, _, err := ParseIndexes(c.Indexes); err != nil {
		return err
	}
	if c.JetStream != "" {
		if err := jetstream.ValidURLs(c.JetStream); err != nil {
			return fmt.Errorf("node: --jetstream: %w", err)
		}
	}
	if c.JetStream != "" || jetstream.IsURL(c.ReplicaOf) {
		o := jetstream.Options{URLs: "nats://h:1", Name: c.JetStreamName}.EnsureDefaults()
		if err := o.Validate(); err != nil {
			return fmt.Errorf("node: %w", err)
		}
	}
	if c.ReplicaOf == "" {
		return nil
	}
	viaNATS := jetstream.IsURL(c.ReplicaOf)
	if viaNATS {
		if err := jetstream.ValidURLs(c.ReplicaOf); err != nil {
			return fmt.Errorf("node: --replica-of: %w", err)
		}
	}
	switch {
	case c.JetStream != "":
		return errors.New("node: a replica publishes nothing to JetStream (its writer does)")
	case c.ReplicationToken == "" && !viaNATS:
		return errors.New("node: a replica needs the writer's replication token")
	case c.AdminToken != "":
		return errors.New("node: a replica takes no writes (admin token)")
	case c.Indexes != "":
		return errors.New("node: a replica keeps its writer's indexes, from the checkpoint (indexes)")
	case c.FollowBitcoinREST != "":
		return errors.New("node: a replica follows its writer, not a Bitcoin node")
	case c.FollowCardano != "":
		return errors.New("node: a replica follows its writer, not a Cardano node")
	case c.Chain != "" || c.ChainIfNone != "":
		return errors.New("node: a replica keeps its writer's chain")
	}
	return nil
}

// RedisDeployment selects a Redis Cluster or a Sentinel set for the shared
// Redis tier, and the credentials and TLS of its connections: the fields of
// redis.Options of the same names.
type RedisDeployment struct {
	ClusterAddrs       []string
	ClusterURL         string
	SentinelMaster     string
	SentinelAddrs      []string
	Username, Password string
	TLS                bool
	CAFile             string
}

// redisOn reports whether the configuration has a Redis tier.
func (c Config) redisOn() bool {
	d := c.RedisDeployment
	return c.RedisURL != "" || len(d.ClusterAddrs) > 0 || d.ClusterURL != "" || d.SentinelMaster != "" || len(d.SentinelAddrs) > 0
}

// redisOptions are the Redis tier's options of the configuration, for the
// writer's tier or a replica's (the caller sets the rest).
func (c Config) redisOptions() redis.Options {
	d := c.RedisDeployment
	return redis.Options{URL: c.RedisURL, TTL: c.RedisTTL, CallTimeout: c.RedisTimeout,
		ClusterAddrs: d.ClusterAddrs, ClusterURL: d.ClusterURL, SentinelMaster: d.SentinelMaster, SentinelAddrs: d.SentinelAddrs,
		Username: d.Username, Password: d.Password, TLS: d.TLS, CAFile: d.CAFile}
}

// Admission is the Redis tier's admission rule (query.Admission).
type Admission = query.Admission

// ParseAdmission returns the admission rule of --redis-admission (cost or
// all) and --redis-min-cost (at least 0; with cost only).
func ParseAdmission(rule string, minCost time.Duration) (Admission, error) {
	if minCost < 0 {
		return Admission{}, fmt.Errorf("--redis-min-cost %v: want a duration of 0 or more", minCost)
	}
	switch rule {
	case "cost":
		return Admission{MinCost: minCost}, nil
	case "all":
		if minCost > 0 {
			return Admission{}, errors.New("--redis-min-cost applies to --redis-admission cost, not all")
		}
		return Admission{All: true}, nil
	}
	return Admission{}, fmt.Errorf("--redis-admission %q: want cost or all", rule)
}

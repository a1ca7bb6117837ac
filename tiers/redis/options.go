package redis

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Defaults of Options. A zero field takes its default in EnsureDefaults.
const (
	DefaultNamespace     = "utxo-cache"
	DefaultTTL           = 10 * time.Minute
	DefaultCallTimeout   = 50 * time.Millisecond
	DefaultProbeInterval = time.Second
)

// DefaultFloorTTL is the guard-floor lifetime for an entry lifetime of ttl:
// 2×ttl + 1m. A floor must outlive every entry it guards (see Tier, "Floor
// lifetime"): an entry stored just before its floor was raised lives ttl
// more, and the time past ttl is what the prober has to carry the floor into
// the global floor before the guard's floor key expires.
func DefaultFloorTTL(ttl time.Duration) time.Duration { return 2*ttl + time.Minute }

// Options configure a Tier. The zero value of every field but URL means its
// default; New applies EnsureDefaults and Validate to a copy.
type Options struct {
	// URL locates a single Redis server: redis://[user:password@]host:port/db
	// (rediss:// for TLS), or a primary behind a proxy. Exactly one of URL,
	// a cluster (ClusterAddrs or ClusterURL) and a Sentinel set
	// (SentinelMaster with SentinelAddrs) is required.
	URL string
	// ClusterAddrs are seed nodes (host:port) of a Redis Cluster; the tier
	// learns the others and follows slot moves and failovers (see Tier,
	// "Cluster").
	ClusterAddrs []string
	// ClusterURL is a Redis Cluster in go-redis's URL form:
	// redis[s]://[user:password@]host:port?addr=host:port&addr=host:port.
	ClusterURL string
	// SentinelMaster names the master that SentinelAddrs (host:port of the
	// Sentinels) watch: the tier asks them for the current primary, and
	// follows a failover.
	SentinelMaster string
	SentinelAddrs  []string
	// Username and Password authenticate (ACL) with every node; for a URL
	// they may be given in the URL instead, not both.
	Username, Password string
	// TLS dials every node with TLS (for a URL: the rediss:// scheme, and
	// TLS must then be false); CAFile, a PEM file of the certificates that
	// sign the servers', replaces the system's roots.
	TLS    bool
	CAFile string
	// Namespace prefixes every key the tier writes, so several deployments
	// (or a writer and its tests) can share one Redis. Default "utxo-cache".
	Namespace string
	// TTL is the lifetime of a cached entry. Default 10m.
	TTL time.Duration
	// FloorTTL is the lifetime of a guard's floor, renewed by every
	// invalidation of the guard. It must exceed TTL; the default is
	// DefaultFloorTTL(TTL), and Validate demands enough slack past TTL for
	// the prober (see Tier, "Floor lifetime").
	FloorTTL time.Duration
	// CallTimeout bounds every call to Redis, dialing and waiting for a
	// pooled connection included. Default 50ms.
	CallTimeout time.Duration
	// ProbeInterval is the prober's period: how often a degraded tier tries
	// to recover, and a healthy one advances the global floor and checks
	// that Redis still holds its keys. Default 1s.
	ProbeInterval time.Duration
	// Logger receives one line per health transition. Default slog.Default().
	Logger *slog.Logger
	// Metrics, when set, receives the tier's figures (utxo_cache_redis_*).
	// Register one Tier per registry.
	Metrics prometheus.Registerer
	// StartSeq is the commit sequence of the writer's store when the writer
	// starts: the first fencing raises the global floor to it, so no entry
	// computed below it is ever served. A writer killed between a commit and
	// its invalidation restarts with a store ahead of the floors in Redis;
	// the entries of the last published state (computed at StartSeq, whose
	// floors were raised before it was published) stay. Only the writer sets
	// it; 0 fences nothing. A follower must leave it 0.
	StartSeq uint64
	// PublishedSeq returns the commit sequence this node has published: the
	// writer's store's, or a replica's current store's. It is called before
	// every Get, fill and probe, from any goroutine, and must be cheap and
	// never decrease. The tier serves an entry only while the sequence
	// marker in Redis is at least its value (see Tier, "Rewinds"), and a
	// lower marker degrades the tier. Nil on the writer is 0: the writer's
	// tier also checks the marker against what it wrote itself, which is
	// never below its published seq. A follower requires it.
	PublishedSeq func() uint64
	// Follower makes the tier a replica's: it reads and fills the namespace
	// of a writer's tier but never invalidates (Invalidate records nothing
	// and returns nil), and never creates or raises the global floor or the
	// marker. After Redis loses its data or goes back in time, it serves
	// nothing until the writer's tier has fenced Redis at or above this
	// node's PublishedSeq. Default false: the writer's tier.
	Follower bool
}

// EnsureDefaults returns o with every zero field set to its default.
func (o Options) EnsureDefaults() Options {
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.TTL == 0 {
		o.TTL = DefaultTTL
	}
	if o.FloorTTL == 0 {
		o.FloorTTL = DefaultFloorTTL(o.TTL)
	}
	if o.CallTimeout == 0 {
		o.CallTimeout = DefaultCallTimeout
	}
	if o.ProbeInterval == 0 {
		o.ProbeInterval = DefaultProbeInterval
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Validate reports options that cannot keep the guard invariant. It expects
// defaults to be applied.
func (o Options) Validate() error {
	if err := o.validateDeployment(); err != nil {
		return err
	}
	switch {
	case o.TTL < time.Millisecond:
		return fmt.Errorf("redis: options: TTL %v is below 1ms", o.TTL)
	case o.CallTimeout <= 0:
		return fmt.Errorf("redis: options: CallTimeout %v is not positive", o.CallTimeout)
	case o.ProbeInterval <= 0:
		return fmt.Errorf("redis: options: ProbeInterval %v is not positive", o.ProbeInterval)
	case o.FloorTTL <= o.TTL:
		return fmt.Errorf("redis: options: FloorTTL %v must exceed TTL %v", o.FloorTTL, o.TTL)
	case o.Follower && o.PublishedSeq == nil:
		return errors.New("redis: options: a Follower needs PublishedSeq: it serves only what the writer's invalidations cover")
	case o.Follower && o.StartSeq != 0:
		return errors.New("redis: options: a Follower does not fence: StartSeq must be 0")
	}
	// The prober advances the global floor to what was invalidated
	// horizon() ago; it needs two periods (one to sample, one to act) and a
	// call to do so before the guard floors of that time expire.
	if need := 2*o.ProbeInterval + o.CallTimeout; o.FloorTTL-o.horizon() < need {
		return fmt.Errorf("redis: options: FloorTTL %v is too close to TTL %v: (FloorTTL-TTL)/2 must be at least 2×ProbeInterval + CallTimeout = %v",
			o.FloorTTL, o.TTL, need)
	}
	return nil
}

// horizon is how far the global floor lags the invalidations: a seq
// invalidated at time r joins the global floor at about r + horizon. It is
// halfway between TTL and FloorTTL: late enough that the global floor
// refuses only fills from disk reads older than horizon-TTL (an entry alive
// now was stored within TTL), early enough that it covers the guard floors
// written at r before they expire at r + FloorTTL.
func (o Options) horizon() time.Duration { return o.TTL + (o.FloorTTL-o.TTL)/2 }

// CheckOptions reports the error New would return for o, without
// connecting: a caller can refuse bad settings before it does anything else.
func CheckOptions(o Options) error {
	o = o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return err
	}
	_, err := o.connect()
	return err
}

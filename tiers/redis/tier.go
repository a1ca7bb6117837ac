package redis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/utxo-cache/utxo-cache/cache"
)

// ErrClosed is returned by Invalidate and Ping after Close.
var ErrClosed = errors.New("redis: closed")

// errUnfenced reports a missing global floor: Redis lost the tier's keys.
var errUnfenced = errors.New("redis: global floor missing: Redis lost its data")

// errBehind reports a sequence marker below what this node knows it reached.
var errBehind = errors.New("redis: sequence marker behind this node: Redis went back in time (restored from an older snapshot, failed over, lost writes) or the writer's invalidations have not reached it")

// errIncomplete reports an invalidation whose earlier chunks did not all run.
var errIncomplete = errors.New("redis: an invalidation's earlier chunks did not all run")

// errRestarted reports a new run_id: Redis restarted or was replaced.
var errRestarted = errors.New("redis: server restarted or replaced (new run_id)")

// errDegraded answers queued calls the tier stopped serving.
var errDegraded = errors.New("redis: tier degraded")

// errShortReply is an MGET reply with fewer values than keys.
var errShortReply = errors.New("redis: MGET answered fewer values than keys")

// maxKeysPerScript bounds one raiseFloorsScript call, so that a block that
// touches a million addresses does not stall Redis in one script.
const maxKeysPerScript = 5000

// maxScriptsPerRoundTrip bounds the chunks of one invalidation that travel
// in one pipeline, one round trip within one CallTimeout: an invalidation
// of up to 15,000 guards (every everyday block's) is one round trip, a
// larger one goes in several, one after the other, each with its own
// CallTimeout (see Tier, "Large invalidations").
const maxScriptsPerRoundTrip = 3

// Tier is the shared cache tier, an implementation of cache.Tier over one
// Redis server, a primary found through Sentinels, or a Redis Cluster (see
// Cluster). It is safe for concurrent use. New starts a prober goroutine
// that Close stops; after Close, Get misses, Set does nothing, and
// Invalidate and Ping return ErrClosed.
//
// # Keys
//
// With ns the Namespace, on one server (on a cluster, the same keys per
// bucket: see Cluster):
//
//	key             value                                     lifetime
//	ns:e:{key}      entry, appendEntry bytes (v1)             TTL
//	ns:f:{guard}    the guard's floor, decimal seq            FloorTTL, renewed by each raise
//	ns:F            the global floor, decimal seq: a floor    none
//	                under every guard
//	ns:S            the sequence marker, decimal seq: every   none
//	                invalidation up to it reached Redis
//
// An entry of guard g may be served only if entry.Seq >= max(ns:f:g, ns:F),
// a missing guard floor counting as 0, and only to a node whose published
// seq is at most ns:S (see Rewinds). A missing ns:F or ns:S means the
// namespace is not fenced (a fresh Redis, or one that lost its data to a
// restart, FLUSHALL or eviction): nothing is served or stored until the
// writer's prober has recreated them (see Outages).
//
// # Why a stale fill is never served
//
// Each operation is one round trip (a large Invalidate several), and each
// call is atomic on the server:
//
//   - Get is MGET ns:e:key ns:f:guard ns:F ns:S, so the entry and the floors
//     and marker it is judged by are read at one instant.
//   - Set is setScript: read both floors and the marker, write the entry (PX
//     TTL) only if its Seq is not below the floors nor above the marker.
//   - Invalidate(seq, guards) is raiseFloorsScript over chunks of 5000 guards,
//     up to 3 chunks in one pipeline (more guards: several, in order; see
//     Large invalidations): each floor becomes max(floor, seq), FloorTTL;
//     then the last chunk raises the marker to max(marker, seq).
//
// Floors only rise, so a timed-out Invalidate that the server runs late, after
// a newer one, lowers nothing. Once Invalidate returns, every guard floor is
// at least seq; an entry of the guard stored earlier is discarded by Get, and
// one arriving later is refused by Set. For example, a reader reads the disk
// at seq 7 and is slow; the writer commits seq 8, which spends an output of
// address A, and invalidates A at 8; the reader's Set(A's listing, Seq 7)
// then finds floor 8 and writes nothing, and an entry of A stored at 7 before
// the commit is found below floor 8 by every Get. (A Get sent before
// Invalidate returned may still see the older entry, as with any cache: the
// caller judges it against the state published when the Get began.)
//
// Invalidation deletes no entry: the entries of a guard are spread over keys
// we cannot enumerate (page limits, cursors, orders), the floor hides them
// all at once, and they expire by their TTL or are overwritten by the next
// fill. A Get that finds a stale entry does not delete it either: that would
// cost a second round trip, and could delete a fresh fill that just
// replaced it.
//
// # Large invalidations
//
// A change that touches more guards than one round trip carries (a block
// of a million outputs: a million addresses and outpoints) is invalidated
// in round trips of up to 3 chunks, sent one after the other, each bounded
// by its own CallTimeout, so that its size alone never times it out and
// degrades the tier (which would discard every entry of every node). It is
// still one invalidation, exact and complete before the change is
// published: Invalidate returns only after the last round trip, and the
// writer publishes only then. Nothing above changes: every chunk raises
// floors only, the marker is raised by the last chunk of the last round
// trip alone, after it checked the witness of every earlier chunk,
// whichever round trip carried it; so ns:S at seq still means that every
// floor of the change was raised, even if Redis lost a round trip's writes
// in between. While the round trips run, some guards have their new floor
// and others not, as between the scripts of one pipeline: readers see the
// previous published state either way, the raised guards only miss. Any
// round trip that fails degrades the tier as before.
//
// # Floor lifetime
//
// Floors expire, or Redis would keep a key for every address ever touched.
// A floor must outlive every entry it guards: an entry stored before the
// floor was raised at time t expires by t+TTL, before t+FloorTTL. That
// leaves a fill that arrives after the floor expired, from a reader whose
// disk read is older than the floor. The global floor covers it: every
// ProbeInterval the prober advances ns:F to the highest seq invalidated at
// least horizon = TTL + (FloorTTL-TTL)/2 ago, which is before any floor
// written back then expires (Validate checks the slack). A fill whose disk
// read is older than horizon-TTL is thereby refused, which is the point, and
// no other: a live entry was stored within TTL, from a read younger than
// horizon. The default FloorTTL, 2×TTL+1m, gives both margins 5.5 minutes.
//
// # Outages
//
// Every call is bounded by CallTimeout. The tier degrades when an Invalidate
// fails in any way (its floors may not be raised), when any call fails by the
// network (timeout, refused, reset), when it finds ns:F or ns:S missing, and
// when it finds Redis behind or restarted (see Rewinds). A degraded tier does
// not touch the network but for the prober: Get misses and Set returns, so
// reads fall through to memory and disk and clients see no error; Invalidate
// records its seq and returns nil, which is what cache.Tier asks of a tier
// that cannot hold the invariant: to serve nothing stored before the failure
// until it can. The tier remembers the highest seq ever passed to Invalidate
// (maxSeen). Every ProbeInterval the prober tries to fence: raise ns:F and
// ns:S to maxSeen, creating them if missing, and only when that succeeded
// and no Invalidate recorded a higher seq meanwhile, become healthy again. Any
// entry in Redis then, stored before the outage or by a Set the server ran late,
// whose guard was invalidated at some seq v, either received that floor or
// has Seq < v <= maxSeen <= ns:F: it is never served. The price is that
// every entry below maxSeen goes with the stale ones: after an outage the
// tier refills from the disk. A worked example:
//
//	event                                    Redis                 tier
//	Set(k, g, Seq 5)                         e:k = Seq 5           healthy
//	Redis stops answering
//	Invalidate(8, [g]) times out             (f:g may rise later)  degraded, maxSeen 8
//	Get(k, g)                                (not asked)           miss, at once
//	Invalidate(9, [h])                       (not asked)           maxSeen 9, returns nil
//	Redis answers; the prober fences         F = 9, S = 9          healthy
//	Get(k, g): Seq 5 < max(f:g, F) = 9                             miss (stale discard)
//	Set(k, g, Seq 8)                         refused: 8 < F        (reader older than the outage)
//	Set(k, g, Seq 9)                         e:k = Seq 9           hit from now on
//
// testdata/outage.txt replays this example, and a restart, against a real
// redis-server; testdata/guard.txt does the same for the guard invariant.
//
// # Rewinds
//
// A Redis that restarts from a snapshot (RDB, saved by default) or an AOF,
// or fails over to a replica that lagged, comes back with its keys as they
// were at an earlier moment: entries whose guards were invalidated since come
// back with their older floors, and ns:F is there, so nothing above notices.
// The sequence marker ns:S does. Only the writer's tier writes it: the last
// call of each Invalidate raises it to seq after the floors (also for a
// change that touched no guard), and fencing raises it with ns:F; it only
// rises. The writer publishes a change only after its Invalidate returned,
// and a replica has a change only after the writer published it, so while
// Redis is intact and the writer's tier healthy, ns:S is at least every
// node's published seq. Every call checks it against need, read before the
// call is sent: the node's published
// seq (Options.PublishedSeq) and, on the writer, the marker its tier last saw
// Redis acknowledge. Both are values an intact Redis had reached by then, so
// a lower marker means lost writes:
//
//   - Get serves nothing when ns:S < need.
//   - setScript refuses an entry whose Seq is above ns:S: a node never
//     stores into a Redis that has not seen the invalidations up to the
//     state it read.
//   - Invalidate raises ns:S only where it is at least the marker the tier
//     last wrote: raising it over a rewound Redis would hide the rewind.
//   - The prober's periodic check requires ns:S >= need too, and compares
//     Redis's run_id (INFO server) with the last one it saw: a restarted or
//     replaced server degrades the tier whatever ns:S says (counted in
//     Stats.Restarts), so the writer's tier fences it; a follower's heals at
//     its next round if ns:S covers its node.
//
// Any of these finding Redis behind degrades the tier (logged once per
// outage, counted in Stats.Rewinds). The writer's tier then fences as after
// any outage, which hides every entry from before it. A follower (a replica's
// tier, Options.Follower) writes neither key: it stays degraded, its prober
// only reading whether ns:S has reached the node's published seq, and heals
// once the writer's tier has fenced. A follower also degrades when the
// writer's tier is the one cut off from Redis: the changes it published
// meanwhile never reached Redis's floors, and ns:S shows it.
//
// Why ns:S >= P means the floors of every change up to P are there: a
// restored Redis holds a prefix of the writes it executed (a snapshot is
// taken between two commands; a replica applies its primary's stream in
// order); the writer sends an Invalidate only after the previous one
// returned; the marker is raised at the end of an Invalidate's last call,
// which first checks that each earlier chunk ran (one witness per chunk: its
// last floor, which the chunk's script raises after the others); and an
// Invalidate that failed degraded the tier, so the next marker it writes is
// the fence's, with ns:F covering that seq. A node at P <= ns:S
// thus reads floors holding every invalidation up to P: the guard invariant
// Server relies on. The worked example of the defect it fixes (a writer's
// tier at published seq W and a replica's at 8 share one Redis):
//
//	event                                  Redis                        writer      replica (8)
//	Invalidate(5, [g]); Set(k, g, Seq 5)   f:g 5, S 5, e:k Seq 5        healthy     healthy
//	SAVE                                   the dump holds the above
//	Invalidate(6..10, [g]); W = 10         f:g 10, S 10
//	Set(k, g, Seq 10)                      e:k Seq 10
//	kill -9; restart from the dump         f:g 5, S 5, e:k Seq 5
//	writer Get(k, g): S 5 < 10                                          miss, degraded
//	replica Get(k, g): S 5 < 8                                                      miss, degraded
//	replica's prober: S 5 < 8                                                       still degraded
//	writer's prober fences                 F 10, S 10                   healthy
//	replica's prober: S 10 >= 8                                                     healthy
//	Get(k, g): Seq 5 < F 10                                             miss        miss
//	Set(k, g, Seq 8) from the replica      refused: 8 < F
//	Set(k, g, Seq 10) from the writer      e:k Seq 10                   hit 10      hit 10
//
// (The replica's Server serves that last hit only once it has published 10:
// an entry above its state is from its future.) Without the marker, every
// Get answered Seq 5, a balance five changes old, with the tip of 10 until
// the entry expired. testdata/rewind.txt replays this example.
//
// # Cluster
//
// On a Redis Cluster a script or an MGET may touch only keys of one hash
// slot, and one slot lives on one master. A single {ns} tag on every key
// would put the whole cache on one master; instead the keyspace is cut into
// clusterBuckets (64) buckets. A guard's bucket is FNV-1a(guard) mod 64;
// bucket N's keys carry the hash tag {ns:64.N}, so they share one slot, and
// the 64 slots spread over the masters:
//
//	key                     value
//	{ns:64.N}:e:{key}       entry of a guard of bucket N (an entry lives in its guard's bucket)
//	{ns:64.N}:f:{guard}     floor of a guard of bucket N
//	{ns:64.N}:F             bucket N's copy of the global floor
//	{ns:64.N}:S             bucket N's copy of the marker
//
// Every call of a Get, a fill, or a chunk of an invalidation touches one
// entry or floors of one guard's bucket plus that bucket's F and S: one
// slot, one atomic command on one master, judged exactly as on one server
// (the rules above, with F and S read as the bucket's). The bucket count is
// in the tag, so tiers built with different counts share no key (a
// follower would find no F and never heal), and the single-server layout
// (ns:e:…, one bucket) is a different keyspace: no key written by one is
// read by the other.
//
// What raised one global key now raises 64: Invalidate sends, for every
// bucket, the chunks of its guards, the last raising the bucket's marker
// after checking the witnesses of the bucket's earlier chunks (so S_N at
// seq means every floor of bucket N of that change is raised); a bucket
// without guards gets a call that raises its marker alone. Fencing raises
// F and S in every bucket, the healthy prober advances F and checks S in
// every bucket, and a follower heals only when every bucket's S covers its
// node. The calls go in one pipeline, which go-redis splits by master and
// sends to all of them at once: one round trip on each master. Concurrent
// Gets are grouped into one MGET per bucket, in one pipeline.
//
// Why a failover cannot serve a stale answer: replication is asynchronous,
// so a promoted replica holds a prefix of its master's writes, possibly
// without the last floor raises. A bucket is one slot on one master, and
// its S is raised after its floors in the same stream, so the prefix
// property holds per bucket: S_N >= P means bucket N holds every floor of
// every change up to P. A node at published seq P judges every Get against
// its bucket's S_N, read in the same MGET: a promoted replica that lacks a
// floor raise of a change at v <= P also lacks S_N >= v, so every node that
// needs it serves nothing from that bucket and degrades; the writer's
// tier, which checks every bucket's S against the highest marker it wrote
// every ProbeInterval (and fails on the dead master's connections at once),
// fences all buckets to maxSeen, which hides every entry from before. This
// is the restored-snapshot case of Rewinds, bucket by bucket; no WAIT is
// needed. A node below v does not need the lost floors: what it may be
// served is right for its state. The run_id check is not made on a cluster
// (INFO goes to one node); the per-bucket markers are what catch a lost
// write, as they do on one server.
//
// Why a slot migration cannot: MIGRATE moves a key atomically, and while a
// slot migrates Redis answers a multi-key command (MGET, a script's
// declared keys) on either node only if all its keys are there: otherwise
// ASK (go-redis follows it, within CallTimeout) or TRYAGAIN. No call
// judges an entry without its floor, F and S, or raises floors it cannot
// see. A TRYAGAIN is a miss for a Get or a fill, and degrades the tier for
// an Invalidate, as any failed invalidation does (the tier fences and
// heals once the slot has moved): the price of a migration is misses, not
// stale answers. After a master dies, the client dials its address until
// it reloads the slot map; the tier asks for a reload on every failure.
//
// # Assumptions
//
//   - One invalidating writer per namespace, which calls Invalidate for its
//     changes in order, one at a time, and publishes each after its
//     Invalidate returned (query.Server does, on the writer goroutine).
//     Every other process using the namespace is a Follower whose store
//     follows that writer's sequence (a replica), so all entries carry seqs
//     of one sequence; maxSeen and the marker are that writer's knowledge.
//   - After a restart or a failover, Redis holds a prefix of the writes it
//     acknowledged: all, none, or all up to some moment, never a later write
//     without an earlier one (RDB, AOF and replication all give that).
//   - Floors are never evicted: maxmemory-policy noeviction, the default (a
//     full Redis refuses writes, which degrades the tier, never loses a
//     floor). The volatile-* policies evict floors, which have a lifetime,
//     and nothing detects a single evicted floor (deploy/redis.conf).
//     Persistence is not needed: a Redis that comes back with old data, or
//     none, is fenced like any other. Reads go to the primary (the masters),
//     not a replica.
//   - Lifetimes are measured by Redis and the horizon by this process; their
//     clocks need only tick at about the same rate.
type Tier struct {
	opts Options
	rdb  goredis.UniversalClient
	log  *slog.Logger
	// cluster is a Redis Cluster: a call's keys must share a slot, so
	// batches are split by bucket.
	cluster bool

	// buckets are the keyspace's buckets (see "Cluster"): one on a single
	// server or a Sentinel's primary, clusterBuckets on a cluster.
	buckets                   []bucket
	ttlMillis, floorTTLMillis int64

	// marker is the highest sequence marker this tier wrote and saw
	// acknowledged (the writer's; 0 on a follower): an intact Redis holds at
	// least that. Raised by Invalidate and fence, read by every call.
	marker atomic.Uint64

	// up mirrors "open and not degraded" for the hot path; written under mu.
	up atomic.Bool

	mu struct {
		sync.Mutex
		closed   bool
		degraded bool
		since    time.Time // start of the current outage
		// maxSeen is the highest seq passed to Invalidate, delivered or not:
		// what fencing raises the global floor to.
		maxSeen uint64
		// undelivered is the highest seq of this outage whose floors were not
		// raised (for the recovery log line).
		undelivered uint64
	}

	// prober state, owned by the prober goroutine.
	samples  []sample // (time, maxSeen) as observed, seq increasing
	advanced uint64   // the global floor as this tier last raised it
	runID    string   // Redis's run_id when last probed; "" before, or if INFO is refused

	ctx    context.Context // canceled by Close, to end the prober's calls
	cancel context.CancelFunc
	done   chan struct{} // closed when the prober has returned

	gets  chan *getCall // queued Gets (getbatch.go)
	slots chan struct{} // MGETs in flight (getbatch.go)
	fills chan fillCall // queued fills (fillbatch.go)
	// fillBytes is the body bytes of the fills queued or being batched.
	fillBytes atomic.Int64
	pipes     sync.WaitGroup // the Get and fill pipelines
	close     sync.Once

	counters counters
}

// sample is an observation of maxSeen by the prober.
type sample struct {
	at  time.Time
	seq uint64
}

// New connects a tier to opts.URL. It fails only on bad options; an
// unreachable Redis gives a tier that starts degraded and recovers when Redis
// answers. New tries the first fencing itself, bounded by CallTimeout, so a
// tier whose Redis is up is healthy when New returns.
func New(opts Options) (*Tier, error) {
	opts = opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	dep, err := opts.connect()
	if err != nil {
		return nil, err
	}

	t := &Tier{
		opts:           opts,
		rdb:            dep.newClient(),
		cluster:        dep.kind == deployCluster,
		log:            opts.Logger.With("tier", "redis"),
		buckets:        bucketsOf(opts.Namespace, dep.kind == deployCluster),
		ttlMillis:      opts.TTL.Milliseconds(),
		floorTTLMillis: opts.FloorTTL.Milliseconds(),
		done:           make(chan struct{}),
	}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	// A new tier has not fenced its namespace yet: it starts degraded.
	t.mu.degraded = true
	t.mu.since = time.Now()
	t.mu.maxSeen = opts.StartSeq
	if opts.Metrics != nil {
		if err := t.register(opts.Metrics); err != nil {
			t.cancel()
			_ = t.rdb.Close()
			return nil, err
		}
	}
	goredisLog.Do(func() { goredis.SetLogger(goredisLogger{t.log}) })
	if !t.fence() {
		if opts.Follower {
			t.log.Warn("redis tier starting degraded: reads miss and fills are dropped until Redis answers and the writer's tier has fenced it",
				"redis", dep.kind, "addr", dep.addr)
		} else {
			t.log.Warn("redis tier starting degraded: reads miss and fills are dropped until Redis answers",
				"redis", dep.kind, "addr", dep.addr)
		}
	}
	t.startGetPipelines()
	t.startFillPipelines()
	go t.probeLoop()
	return t, nil
}

// Name implements cache.Tier.
func (t *Tier) Name() string { return "redis" }

// Remote reports that every Get is a network round trip: the query server
// asks the tier only for answers that cost the store more (its admission).
func (t *Tier) Remote() bool { return true }

// Healthy reports whether the tier is serving: open, and not degraded.
func (t *Tier) Healthy() bool { return t.up.Load() }

// Stats returns the tier's counters.
func (t *Tier) Stats() Stats { return t.counters.stats() }

// Ping asks Redis for a PONG within CallTimeout, whatever the tier's state;
// a network failure degrades the tier like any other call's.
func (t *Tier) Ping(ctx context.Context) error {
	if t.isClosed() {
		return ErrClosed
	}
	cctx, cancel := context.WithTimeout(ctx, t.opts.CallTimeout)
	defer cancel()
	if err := t.rdb.Ping(cctx).Err(); err != nil {
		t.failed(ctx, opPing, err)
		return fmt.Errorf("redis: ping: %w", err)
	}
	return nil
}

// Get implements cache.Tier: the entry, its guard's floor and the global
// floor from one MGET (shared with concurrent Gets: getbatch.go), judged
// against both floors.
func (t *Tier) Get(ctx context.Context, key, guard string) (cache.Entry, bool) {
	if !t.up.Load() {
		t.counters.misses.Add(1)
		return cache.Entry{}, false
	}
	e, ok := t.coalescedGet(ctx, key, guard)
	if !ok {
		t.counters.misses.Add(1)
		return cache.Entry{}, false
	}
	t.counters.hits.Add(1)
	return e, true
}

// judge returns the entry of an MGET of (entry, guard floor, global floor,
// marker) if it may be served to a node that needed the marker at need
// when the MGET was sent.
func (t *Tier) judge(vals []any, need uint64) (cache.Entry, bool) {
	if len(vals) != 4 {
		t.counters.errorsOf(opGet).Add(1)
		return cache.Entry{}, false
	}
	if vals[2] == nil || vals[3] == nil {
		t.degrade(opGet, 0, errUnfenced)
		return cache.Entry{}, false
	}
	marker, merr := parseSeq(vals[3])
	if merr != nil {
		t.counters.errorsOf(opGet).Add(1)
		return cache.Entry{}, false
	}
	if marker < need {
		t.behind(opGet, fmt.Errorf("%w: marker %d, this node at %d", errBehind, marker, need))
		return cache.Entry{}, false
	}
	raw, ok := vals[0].(string)
	if !ok { // absent
		return cache.Entry{}, false
	}
	e, err := decodeEntry([]byte(raw))
	floor, ferr := parseSeq(vals[1])
	global, gerr := parseSeq(vals[2])
	if err != nil || ferr != nil || gerr != nil {
		t.counters.errorsOf(opGet).Add(1)
		return cache.Entry{}, false
	}
	if e.Seq < max(floor, global) {
		t.counters.staleDiscards.Add(1)
		return cache.Entry{}, false
	}
	return e, true
}

// need is the marker a call sent now must find in Redis: the highest this
// tier saw acknowledged, and this node's published seq. Read before the
// call is sent, it is a value Redis had reached by then, so an intact Redis
// never answers below it (see Tier, "Rewinds").
func (t *Tier) need() uint64 {
	n := t.marker.Load()
	if f := t.opts.PublishedSeq; f != nil {
		n = max(n, f())
	}
	return n
}

// raiseMarker notes that Redis acknowledged a marker of at least seq.
func (t *Tier) raiseMarker(seq uint64) {
	for {
		cur := t.marker.Load()
		if cur >= seq || t.marker.CompareAndSwap(cur, seq) {
			return
		}
	}
}

// behind counts a rewind and degrades the tier with cause.
func (t *Tier) behind(op string, cause error) {
	t.counters.rewinds.Add(1)
	t.degrade(op, 0, cause)
}

// parseSeq parses a floor as MGET returns it; nil (no floor) is 0.
func parseSeq(v any) (uint64, error) {
	switch v := v.(type) {
	case nil:
		return 0, nil
	case string:
		return strconv.ParseUint(v, 10, 64)
	default:
		return 0, fmt.Errorf("redis: floor of type %T", v)
	}
}

// Set implements cache.Tier: one setScript call, which writes nothing if
// e.Seq is below either floor or above the marker.
func (t *Tier) Set(ctx context.Context, key, guard string, e cache.Entry) {
	t.set(ctx, key, guard, &e)
}

// entryHeaderMax bounds the bytes appendEntry writes besides the ETag
// and the body (62 in version 1), to size the buffer in one allocation.
const entryHeaderMax = 64

// fillOutcome is what became of a Set.
type fillOutcome int

const (
	fillSkipped fillOutcome = iota // degraded or closed: Redis not asked
	fillStored
	fillRefused // below a floor
	fillFailed  // the call failed, the namespace is not fenced, or Redis is behind
)

func (t *Tier) set(ctx context.Context, key, guard string, e *cache.Entry) fillOutcome {
	if !t.up.Load() {
		return fillSkipped
	}
	buf := appendEntry(make([]byte, 0, entryHeaderMax+len(e.ETag)+len(e.Body)), e)
	cctx, cancel := context.WithTimeout(ctx, t.opts.CallTimeout)
	res, err := setScript.Run(cctx, t.rdb, t.fillKeys(key, guard),
		strconv.FormatUint(e.Seq, 10), buf, t.ttlMillis).Int64()
	cancel()
	if err != nil {
		t.failed(ctx, opSet, err)
		return fillFailed
	}
	return t.filled(res, e.Seq)
}

// fillKeys are setScript's keys for key of guard.
func (t *Tier) fillKeys(key, guard string) []string {
	b := &t.buckets[t.bucketOf(guard)]
	return []string{b.entry + key, b.floor + guard, b.global, b.marker}
}

// filled counts a setScript result for an entry at seq, degrading the tier
// on a missing key or a marker below seq.
func (t *Tier) filled(res int64, seq uint64) fillOutcome {
	switch res {
	case scriptStored:
		t.counters.fills.Add(1)
		return fillStored
	case scriptRefused:
		t.counters.fillsRefused.Add(1)
		return fillRefused
	case scriptBehind:
		// The entry was computed at seq, which its filler had published:
		// an intact Redis has seen the invalidations up to it.
		t.behind(opSet, fmt.Errorf("%w: marker below a fill at %d", errBehind, seq))
		return fillFailed
	default:
		t.degrade(opSet, 0, errUnfenced)
		return fillFailed
	}
}

// Invalidate implements cache.Tier: one round trip (more for more than
// 15,000 guards: see Tier, "Large invalidations") raises every guard's floor
// to seq, then the marker. It returns nil whenever the guard invariant holds,
// which is always while the tier is open: a call that fails degrades the tier
// before returning, and a degraded tier records seq for the prober's fencing
// and serves nothing until then. Failures are logged (once per outage) and
// counted. The caller's cancellation is ignored: a half-delivered
// invalidation would only degrade the tier. A change that touched no guard
// still raises the marker. On a follower it does nothing: the writer's tier
// invalidates.
func (t *Tier) Invalidate(ctx context.Context, seq uint64, guards []string) error {
	if t.opts.Follower {
		if t.isClosed() {
			return ErrClosed
		}
		return nil
	}
	degraded, closed := t.record(seq)
	switch {
	case closed:
		return ErrClosed
	case degraded:
		return nil
	}
	expected := t.marker.Load()
	if err := t.raiseFloors(context.WithoutCancel(ctx), seq, expected, guards); err != nil {
		t.counters.errorsOf(opInvalidate).Add(1)
		if errors.Is(err, errBehind) {
			t.counters.rewinds.Add(1)
		}
		t.degrade(opInvalidate, seq, err)
		return nil
	}
	t.raiseMarker(seq)
	t.counters.invalidations.Add(uint64(len(guards)))
	return nil
}

// raiseFloors runs raiseFloorsScript over guards, bucket by bucket, in
// chunks of a bucket's guards (every bucket has at least one call, which
// raises its marker), pipelined by up to maxScriptsPerRoundTrip chunks'
// worth of guards, each round trip within CallTimeout, the last chunk of
// each bucket raising the bucket's marker to seq if it holds at least
// expected. Each
// round trip builds its own keys, so a large invalidation holds one round
// trip's at a time. After a Redis restart (NOSCRIPT) a round trip is sent
// again with the script text.
func (t *Tier) raiseFloors(ctx context.Context, seq, expected uint64, guards []string) error {
	seqArg := strconv.FormatUint(seq, 10)
	var calls []scriptCall
	inTrip := 0 // guard keys in calls
	var witnesses []string
	for bi, group := range t.groupGuards(guards) {
		b := &t.buckets[bi]
		n := max(1, (len(group)+maxKeysPerScript-1)/maxKeysPerScript)
		witnesses = witnesses[:0]
		for i := range n {
			chunk := group[i*len(group)/n : (i+1)*len(group)/n]
			if len(calls) > 0 && inTrip+len(chunk) > maxScriptsPerRoundTrip*maxKeysPerScript {
				if err := t.raiseFloorsRoundTrip(ctx, expected, calls); err != nil {
					return err
				}
				calls, inTrip = nil, 0
			}
			last := i == n-1
			keys := make([]string, 0, 2+len(chunk)+len(witnesses))
			keys = append(keys, b.global, b.marker)
			args := []any{seqArg, t.floorTTLMillis, "-"}
			if last {
				keys = append(keys, witnesses...)
				args = []any{seqArg, t.floorTTLMillis, len(witnesses), strconv.FormatUint(expected, 10)}
			}
			for _, g := range chunk {
				keys = append(keys, b.floor+g)
			}
			if !last {
				witnesses = append(witnesses, keys[len(keys)-1])
			}
			calls = append(calls, scriptCall{keys: keys, args: args})
			inTrip += len(chunk)
		}
	}
	return t.raiseFloorsRoundTrip(ctx, expected, calls)
}

// raiseFloorsRoundTrip sends calls of raiseFloorsScript in one pipeline,
// within CallTimeout, and checks their answers.
func (t *Tier) raiseFloorsRoundTrip(ctx context.Context, expected uint64, calls []scriptCall) error {
	cctx, cancel := context.WithTimeout(ctx, t.opts.CallTimeout)
	defer cancel()
	cmds, err := t.runPipelined(cctx, raiseFloorsScript, calls)
	if err != nil {
		return fmt.Errorf("raise floors: %w", err)
	}
	for _, cmd := range cmds {
		switch n, err := cmd.Int64(); {
		case err != nil:
			return fmt.Errorf("raise floors: %w", err)
		case n == scriptUnfenced:
			return errUnfenced
		case n == scriptBehind:
			return fmt.Errorf("%w: marker below %d, the last this tier wrote", errBehind, expected)
		case n == scriptIncomplete:
			return errIncomplete
		}
	}
	return nil
}

// Close stops the prober and closes the connections. It is safe to call
// more than once; calls in flight finish or fail within CallTimeout.
func (t *Tier) Close() error {
	var err error
	t.close.Do(func() {
		t.mu.Lock()
		t.mu.closed = true
		t.up.Store(false)
		t.mu.Unlock()
		t.cancel()
		<-t.done
		t.pipes.Wait()
		err = t.rdb.Close()
	})
	return err
}

func (t *Tier) isClosed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mu.closed
}

var _ cache.Tier = (*Tier)(nil)

// goredisLog sends go-redis's own log lines (a line per failed dial, for
// one) to the first tier's logger at debug level: the tier reports an
// outage itself, once, and go-redis has one logger per process, which is
// ours to set since this is its only importer.
var goredisLog sync.Once

type goredisLogger struct{ log *slog.Logger }

func (l goredisLogger) Printf(ctx context.Context, format string, v ...any) {
	if l.log.Enabled(ctx, slog.LevelDebug) {
		l.log.DebugContext(ctx, "go-redis: "+fmt.Sprintf(format, v...))
	}
}

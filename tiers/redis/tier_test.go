package redis

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/utxo-cache/utxo-cache/cache"
	"github.com/utxo-cache/utxo-cache/chain"
)

const testNS = "test"

// testOptions are options for a tier on s with a fast prober. The call
// timeout is generous: tests that are not about timeouts must not degrade
// on a loaded machine (under -race, beside other builds); the outage tests
// set their own.
func testOptions(t testing.TB, s *redisServer) Options {
	return Options{
		URL:           s.URL(),
		Namespace:     testNS,
		CallTimeout:   time.Second,
		ProbeInterval: 20 * time.Millisecond,
		Logger:        slog.New(slog.NewTextHandler(t.Output(), nil)),
	}
}

// openTier opens a tier with o and closes it on cleanup.
func openTier(t testing.TB, o Options) *Tier {
	t.Helper()
	tier, err := New(o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = tier.Close() })
	return tier
}

// newTier opens a healthy tier on s, edited by edit.
func newTier(t testing.TB, s *redisServer, edit func(*Options)) *Tier {
	t.Helper()
	o := testOptions(t, s)
	if edit != nil {
		edit(&o)
	}
	tier := openTier(t, o)
	// New fences once within CallTimeout; on a loaded machine (the race
	// detector, parallel packages) that first call may time out, and the
	// prober fences on its next tick. A test that stops the prober (a long
	// ProbeInterval) fences here itself: no prober tick races with it.
	if !tier.Healthy() && o.ProbeInterval >= time.Minute {
		tier.fence()
	}
	waitFor(t, 10*time.Second, "a tier on a running Redis healthy after New", tier.Healthy)
	return tier
}

// publish does what the writer does for a change at seq that touched no
// guard: Invalidate with none, which raises the marker to seq. A fill above
// the marker is refused (see Tier, "Rewinds"): an entry at seq exists only
// once the writer has published seq, so a test that fills at seq publishes it
// first.
func publish(t testing.TB, tier *Tier, seq uint64) {
	t.Helper()
	if err := tier.Invalidate(context.Background(), seq, nil); err != nil {
		t.Fatalf("Invalidate(%d): %v", seq, err)
	}
}

func entryAt(seq uint64) cache.Entry {
	return cache.Entry{Seq: seq, Status: 200, ETag: fmt.Sprintf(`W/"%d"`, seq),
		Body: fmt.Appendf(nil, `"seq":%d}`, seq)}
}

// waitFor polls cond until it holds, or fails the test after d.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// rawGet reads a key behind the tier's back; "<nil>" when missing.
func rawGet(t testing.TB, c *goredis.Client, key string) string {
	t.Helper()
	v, err := c.Get(context.Background(), key).Result()
	if errors.Is(err, goredis.Nil) {
		return "<nil>"
	}
	if err != nil {
		t.Fatalf("GET %s: %v", key, err)
	}
	return v
}

func TestSetGetRoundTrip(t *testing.T) {
	s := startRedis(t)
	tier := newTier(t, s, nil)
	ctx := context.Background()

	publish(t, tier, 42)
	want := cache.Entry{Seq: 42, Tip: chain.Tip{Height: 812345, Hash: chain.Hash{0xaa, 31: 0xbb}},
		Status: 404, ETag: `W/"abc"`, Body: []byte(`"error":{"code":"not_found"}}`)}
	if got := tier.set(ctx, "utxo/aa:0", "aa:0", &want); got != fillStored {
		t.Fatalf("set: %v, want stored", got)
	}
	got, ok := tier.Get(ctx, "utxo/aa:0", "aa:0")
	if !ok || got.Seq != want.Seq || got.Tip != want.Tip || got.Status != want.Status || got.ETag != want.ETag || !bytes.Equal(got.Body, want.Body) {
		t.Fatalf("Get = %+v, %v; want %+v", got, ok, want)
	}
	if _, ok := tier.Get(ctx, "utxo/bb:0", "bb:0"); ok {
		t.Fatal("Get of a key never set hit")
	}

	// The layout of Tier's doc comment: ns:e:key with PX TTL.
	raw := s.Client()
	ttl, err := raw.PTTL(ctx, testNS+":e:utxo/aa:0").Result()
	if err != nil || ttl <= 0 || ttl > DefaultTTL {
		t.Fatalf("entry PTTL = %v, %v; want in (0, %v]", ttl, err, DefaultTTL)
	}
	if v := rawGet(t, raw, testNS+":e:utxo/aa:0"); v != string(appendEntry(nil, &want)) {
		t.Fatalf("entry bytes %x", v)
	}
	if v := rawGet(t, raw, testNS+":F"); v != "0" {
		t.Fatalf("global floor of a fresh namespace = %s, want 0", v)
	}
	if v := rawGet(t, raw, testNS+":S"); v != "42" {
		t.Fatalf("marker = %s, want 42 (the last Invalidate)", v)
	}
	st := tier.Stats()
	if st.Hits != 1 || st.Misses != 1 || st.Fills != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestInvalidateHidesOlderEntries(t *testing.T) {
	s := startRedis(t)
	tier := newTier(t, s, nil)
	ctx := context.Background()
	raw := s.Client()
	publish(t, tier, 5)

	for _, k := range []string{"addr/A?limit=10", "addr/A?limit=100", "bal/A"} { // variants of one guard
		tier.Set(ctx, k, "A", entryAt(5))
	}
	tier.Set(ctx, "bal/B", "B", entryAt(5))
	if err := tier.Invalidate(ctx, 6, []string{"A"}); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"addr/A?limit=10", "addr/A?limit=100", "bal/A"} {
		if e, ok := tier.Get(ctx, k, "A"); ok {
			t.Fatalf("%s: Seq %d served above floor 6", k, e.Seq)
		}
	}
	if _, ok := tier.Get(ctx, "bal/B", "B"); !ok {
		t.Fatal("an entry of another guard was hidden")
	}
	if st := tier.Stats(); st.StaleDiscards != 3 || st.Invalidations != 1 {
		t.Fatalf("stats %+v", st)
	}
	// An entry at the floor is current: the floor's change is in it.
	tier.Set(ctx, "bal/A", "A", entryAt(6))
	if e, ok := tier.Get(ctx, "bal/A", "A"); !ok || e.Seq != 6 {
		t.Fatalf("entry at the floor: %+v, %v", e, ok)
	}

	// Floors only rise, and each raise renews their lifetime.
	if err := tier.Invalidate(ctx, 3, []string{"A"}); err != nil {
		t.Fatal(err)
	}
	if v := rawGet(t, raw, testNS+":f:A"); v != "6" {
		t.Fatalf("floor after a late lower invalidation = %s, want 6", v)
	}
	if ttl := raw.PTTL(ctx, testNS+":f:A").Val(); ttl <= DefaultTTL || ttl > DefaultFloorTTL(DefaultTTL) {
		t.Fatalf("floor PTTL %v, want in (TTL, FloorTTL]", ttl)
	}
	if _, ok := tier.Get(ctx, "bal/A", "A"); !ok {
		t.Fatal("a lower invalidation hid a current entry")
	}
}

// TestSetRefusedBelowFloor is the race the floors exist for: a reader reads
// the disk before a commit, the commit invalidates, and the reader's fill
// arrives afterwards.
func TestSetRefusedBelowFloor(t *testing.T) {
	s := startRedis(t)
	tier := newTier(t, s, nil)
	ctx := context.Background()
	raw := s.Client()

	readerSeq := uint64(9)                                          // the reader's snapshot
	if err := tier.Invalidate(ctx, 10, []string{"A"}); err != nil { // the commit's invalidation
		t.Fatal(err)
	}
	e := entryAt(readerSeq)
	if got := tier.set(ctx, "addr/A", "A", &e); got != fillRefused {
		t.Fatalf("late fill: %v, want refused", got)
	}
	if n := raw.Exists(ctx, testNS+":e:addr/A").Val(); n != 0 {
		t.Fatal("a refused fill was written")
	}
	if _, ok := tier.Get(ctx, "addr/A", "A"); ok {
		t.Fatal("Get served a refused fill")
	}
	if st := tier.Stats(); st.FillsRefused != 1 || st.Fills != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestSeqComparisonBoundaries checks the scripts' decimal comparison where a
// Lua number or a string comparison would go wrong: decimal length changes,
// 2^53 (where doubles stop being exact) and the top of uint64.
func TestSeqComparisonBoundaries(t *testing.T) {
	s := startRedis(t)
	tier := newTier(t, s, nil)
	ctx := context.Background()
	publish(t, tier, math.MaxUint64) // the marker covers every fill below
	for i, c := range []struct {
		floor, seq uint64
		stored     bool
	}{
		{0, 0, true},
		{9, 10, true},
		{10, 9, false},
		{99, 100, true},
		{100, 99, false},
		{19, 100, true}, // "19" > "100" as strings
		{1 << 53, 1<<53 + 1, true},
		{1<<53 + 1, 1 << 53, false}, // equal as doubles
		{math.MaxUint64 - 1, math.MaxUint64, true},
		{math.MaxUint64, math.MaxUint64 - 1, false},
		{math.MaxUint64, math.MaxUint64, true},
	} {
		guard := "g" + strconv.Itoa(i)
		if err := tier.Invalidate(ctx, c.floor, []string{guard}); err != nil {
			t.Fatal(err)
		}
		e := entryAt(c.seq)
		got := tier.set(ctx, "k"+guard, guard, &e)
		if (got == fillStored) != c.stored {
			t.Errorf("floor %d, seq %d: %v, want stored=%v", c.floor, c.seq, got, c.stored)
		}
		if _, ok := tier.Get(ctx, "k"+guard, guard); ok != c.stored {
			t.Errorf("floor %d, seq %d: Get hit=%v", c.floor, c.seq, ok)
		}
	}
	// The guard floors of a lower invalidation stay put at the top too.
	if err := tier.Invalidate(ctx, 1<<53, []string{"g8"}); err != nil {
		t.Fatal(err)
	}
	if v := rawGet(t, s.Client(), testNS+":f:g8"); v != strconv.FormatUint(math.MaxUint64-1, 10) {
		t.Fatalf("floor g8 = %s", v)
	}
}

// roundTrips counts the commands and pipelines a client sends, but for a
// new connection's handshake (HELLO).
type roundTrips struct{ process, pipelines, pipelinedCmds atomic.Int64 }

func (h *roundTrips) DialHook(next goredis.DialHook) goredis.DialHook { return next }
func (h *roundTrips) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		if cmd.Name() != "hello" {
			h.process.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (h *roundTrips) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		h.pipelines.Add(1)
		h.pipelinedCmds.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}
func (h *roundTrips) take() (process, pipelines, cmds int64) {
	return h.process.Swap(0), h.pipelines.Swap(0), h.pipelinedCmds.Swap(0)
}

func TestOneRoundTripPerCall(t *testing.T) {
	s := startRedis(t)
	tier := newTier(t, s, func(o *Options) {
		o.ProbeInterval = 2 * time.Minute // no probes in the count
		o.CallTimeout = 5 * time.Second   // a 10,001-guard invalidation on a loaded machine
	})
	ctx := context.Background()
	publish(t, tier, 1)
	h := &roundTrips{}
	tier.rdb.AddHook(h)

	tier.Set(ctx, "k", "g", entryAt(1))
	if p, pl, _ := h.take(); p != 1 || pl != 0 {
		t.Fatalf("Set: %d commands, %d pipelines", p, pl)
	}
	tier.Get(ctx, "k", "g")
	if p, pl, _ := h.take(); p != 1 || pl != 0 {
		t.Fatalf("Get: %d commands, %d pipelines", p, pl)
	}
	guards := make([]string, 2*maxKeysPerScript+1)
	for i := range guards {
		guards[i] = "addr" + strconv.Itoa(i)
	}
	if err := tier.Invalidate(ctx, 7, guards); err != nil {
		t.Fatal(err)
	}
	if p, pl, cmds := h.take(); p != 0 || pl != 1 || cmds != 3 {
		t.Fatalf("Invalidate of %d guards: %d commands, %d pipelines of %d scripts; want one pipeline of 3",
			len(guards), p, pl, cmds)
	}
	raw := s.Client()
	for _, g := range []string{guards[0], guards[maxKeysPerScript], guards[len(guards)-1]} {
		if v := rawGet(t, raw, testNS+":f:"+g); v != "7" {
			t.Fatalf("floor of %s = %s", g, v)
		}
	}
	if v := rawGet(t, raw, testNS+":S"); v != "7" {
		t.Fatalf("marker = %s after the three chunks, want 7", v)
	}
	// A change that touched no guard is one call too: the marker follows.
	publish(t, tier, 8)
	if p, pl, cmds := h.take(); p != 0 || pl != 1 || cmds != 1 {
		t.Fatalf("Invalidate of no guard: %d commands, %d pipelines of %d scripts; want one of 1", p, pl, cmds)
	}
	if v := rawGet(t, raw, testNS+":S"); v != "8" {
		t.Fatalf("marker = %s after an Invalidate of no guard, want 8", v)
	}
	if st := tier.Stats(); st.Invalidations != uint64(len(guards)) {
		t.Fatalf("invalidations %d", st.Invalidations)
	}

	// A Redis that forgot the scripts (restart, SCRIPT FLUSH) costs one more
	// round trip, and works.
	if err := raw.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := tier.Invalidate(ctx, 8, guards[:3]); err != nil {
		t.Fatal(err)
	}
	if _, pl, _ := h.take(); pl != 2 {
		t.Fatalf("Invalidate after SCRIPT FLUSH: %d pipelines, want 2", pl)
	}
	if v := rawGet(t, raw, testNS+":f:"+guards[2]); v != "8" {
		t.Fatalf("floor after SCRIPT FLUSH = %s", v)
	}
	if err := raw.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	e := entryAt(8)
	if got := tier.set(ctx, "k", "g", &e); got != fillStored {
		t.Fatalf("Set after SCRIPT FLUSH: %v", got)
	}
	if !tier.Healthy() {
		t.Fatal("NOSCRIPT degraded the tier")
	}
}

func TestCallerCancelDoesNotDegrade(t *testing.T) {
	s := startRedis(t)
	tier := newTier(t, s, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, ok := tier.Get(ctx, "k", "g"); ok {
		t.Fatal("hit with a canceled context")
	}
	tier.Set(ctx, "k", "g", entryAt(1))
	// Invalidate ignores the caller's cancellation: it must be delivered.
	if err := tier.Invalidate(ctx, 5, []string{"g"}); err != nil {
		t.Fatal(err)
	}
	if !tier.Healthy() {
		t.Fatal("a caller's cancellation degraded the tier")
	}
	if v := rawGet(t, s.Client(), testNS+":f:g"); v != "5" {
		t.Fatalf("floor = %s: Invalidate with a canceled context was not delivered", v)
	}
}

func TestOptions(t *testing.T) {
	o := Options{URL: "redis://127.0.0.1:1/0"}.EnsureDefaults()
	if o.Namespace != "utxo-cache" || o.TTL != 10*time.Minute || o.FloorTTL != 21*time.Minute ||
		o.CallTimeout != 50*time.Millisecond || o.ProbeInterval != time.Second || o.Logger == nil {
		t.Fatalf("defaults: %+v", o)
	}
	if err := o.Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
	if h := o.horizon(); h != 15*time.Minute+30*time.Second {
		t.Fatalf("default horizon %v", h)
	}
	for _, c := range []struct {
		name string
		edit func(*Options)
		want string
	}{
		{"no deployment", func(o *Options) { o.URL = "" }, "a Redis deployment is required"},
		{"URL and cluster", func(o *Options) { o.ClusterAddrs = []string{"127.0.0.1:7000"} }, "exclusive"},
		{"URL and sentinel", func(o *Options) { o.SentinelMaster, o.SentinelAddrs = "m", []string{"127.0.0.1:26379"} }, "exclusive"},
		{"two cluster forms", func(o *Options) {
			o.URL, o.ClusterAddrs, o.ClusterURL = "", []string{"127.0.0.1:7000"}, "redis://127.0.0.1:7001"
		}, "not both"},
		{"sentinels without a master", func(o *Options) { o.URL, o.SentinelAddrs = "", []string{"127.0.0.1:26379"} }, "need SentinelMaster"},
		{"master without sentinels", func(o *Options) { o.URL, o.SentinelMaster = "", "m" }, "needs SentinelAddrs"},
		{"bad cluster address", func(o *Options) { o.URL, o.ClusterAddrs = "", []string{"127.0.0.1"} }, "not host:port"},
		{"user without password", func(o *Options) { o.Username = "u" }, "needs a Password"},
		{"floor below TTL", func(o *Options) { o.FloorTTL = o.TTL }, "must exceed TTL"},
		{"no slack", func(o *Options) { o.FloorTTL = o.TTL + 3*time.Second }, "too close to TTL"},
		{"negative timeout", func(o *Options) { o.CallTimeout = -1 }, "CallTimeout"},
		{"sub-ms TTL", func(o *Options) { o.TTL = time.Microsecond }, "below 1ms"},
		{"follower without its seq", func(o *Options) { o.Follower = true }, "needs PublishedSeq"},
		{"follower fencing", func(o *Options) {
			o.Follower, o.PublishedSeq, o.StartSeq = true, func() uint64 { return 0 }, 3
		}, "StartSeq must be 0"},
	} {
		o := Options{URL: "redis://127.0.0.1:1/0"}.EnsureDefaults()
		c.edit(&o)
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	_, err := New(Options{URL: "redis://user:s3cret@[::1"})
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("bad URL: %v (must fail without echoing the password)", err)
	}
	if _, err := New(Options{URL: "http://127.0.0.1:6379"}); err == nil {
		t.Fatal("an http URL was accepted")
	}
	// Contradictions between a URL and the TLS and credential options,
	// found by CheckOptions before anything is dialed.
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		o    Options
		want string
	}{
		{"TLS with redis://", Options{URL: "redis://127.0.0.1:1/0", TLS: true}, "use rediss://"},
		{"TLS twice", Options{URL: "rediss://127.0.0.1:1/0", TLS: true}, "implied by rediss://"},
		{"CA without TLS", Options{URL: "redis://127.0.0.1:1/0", CAFile: ca}, "CAFile without TLS"},
		{"CA not PEM", Options{ClusterAddrs: []string{"127.0.0.1:1"}, TLS: true, CAFile: ca}, "no PEM certificate"},
		{"CA missing", Options{ClusterAddrs: []string{"127.0.0.1:1"}, TLS: true, CAFile: ca + ".none"}, "CA file"},
		{"password twice", Options{URL: "redis://u:p@127.0.0.1:1/0", Password: "q"}, "give them once"},
		{"cluster URL password twice", Options{ClusterURL: "redis://u:p@127.0.0.1:1?addr=127.0.0.1:2", Password: "q"}, "give them once"},
		{"cluster URL scheme", Options{ClusterURL: "http://127.0.0.1:1"}, "ClusterURL"},
	} {
		if err := CheckOptions(c.o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	for _, o := range []Options{
		{ClusterAddrs: []string{"127.0.0.1:7000", "127.0.0.1:7001"}, Username: "u", Password: "p", TLS: true},
		{ClusterURL: "rediss://u:p@127.0.0.1:7000?addr=127.0.0.1:7001"},
		{SentinelMaster: "mymaster", SentinelAddrs: []string{"127.0.0.1:26379"}, Password: "p"},
		{URL: "redis://127.0.0.1:1/0", Username: "u", Password: "p"},
	} {
		if err := CheckOptions(o); err != nil {
			t.Errorf("%+v: %v", o, err)
		}
	}
}

// TestNewWithRedisDown: New succeeds, degraded, and the tier heals when
// Redis comes, fencing what it was asked to invalidate meanwhile.
func TestNewWithRedisDown(t *testing.T) {
	s := startRedis(t)
	s.Kill()
	start := time.Now()
	tier := openTier(t, testOptions(t, s))
	if d := time.Since(start); d > time.Second {
		t.Fatalf("New took %v with Redis down", d)
	}
	ctx := context.Background()
	if tier.Healthy() {
		t.Fatal("healthy without Redis")
	}
	if _, ok := tier.Get(ctx, "k", "g"); ok {
		t.Fatal("hit without Redis")
	}
	if err := tier.Invalidate(ctx, 12, []string{"g"}); err != nil {
		t.Fatalf("Invalidate while degraded: %v", err)
	}
	if err := tier.Ping(ctx); err == nil {
		t.Fatal("Ping succeeded without Redis")
	}
	s.Restart()
	waitFor(t, 5*time.Second, "healthy after Redis started", tier.Healthy)
	if v := rawGet(t, s.Client(), testNS+":F"); v != "12" {
		t.Fatalf("global floor %s, want 12", v)
	}
	if err := tier.Ping(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestMetrics(t *testing.T) {
	s := startRedis(t)
	reg := prometheus.NewRegistry()
	tier := newTier(t, s, func(o *Options) { o.Metrics = reg })
	ctx := context.Background()
	publish(t, tier, 3)
	tier.Set(ctx, "k", "g", entryAt(3))
	tier.Get(ctx, "k", "g")
	if err := tier.Invalidate(ctx, 4, []string{"g"}); err != nil {
		t.Fatal(err)
	}
	tier.Get(ctx, "k", "g")
	tier.Set(ctx, "k", "g", entryAt(3))

	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			name := mf.GetName()
			for _, l := range m.GetLabel() {
				name += "{" + l.GetName() + "=" + l.GetValue() + "}"
			}
			got[name] = m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	for name, want := range map[string]float64{
		"utxo_cache_redis_hits_total":                  1,
		"utxo_cache_redis_misses_total":                1,
		"utxo_cache_redis_stale_discards_total":        1,
		"utxo_cache_redis_fills_total":                 1,
		"utxo_cache_redis_fills_refused_stale_total":   1,
		"utxo_cache_redis_invalidations_total":         1,
		"utxo_cache_redis_outages_total":               0,
		"utxo_cache_redis_up":                          1,
		"utxo_cache_redis_errors_total{op=get}":        0,
		"utxo_cache_redis_errors_total{op=invalidate}": 0,
	} {
		if v, ok := got[name]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", name, v, ok, want)
		}
	}
	// A second tier on the same registry is refused, cleanly.
	if _, err := New(Options{URL: s.URL(), Metrics: reg}); err == nil {
		t.Fatal("a second tier registered on the same registry")
	}
}

func TestCloseStopsEverything(t *testing.T) {
	s := startRedis(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	tier, err := New(testOptions(t, s))
	if err != nil {
		t.Fatal(err)
	}
	defer tier.Close()
	ctx := context.Background()
	waitFor(t, 10*time.Second, "healthy", tier.Healthy)
	publish(t, tier, 1)
	tier.Set(ctx, "k", "g", entryAt(1))
	if _, ok := tier.Get(ctx, "k", "g"); !ok {
		t.Fatal("miss before Close")
	}
	if err := tier.Close(); err != nil {
		t.Fatal(err)
	}
	if err := tier.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, ok := tier.Get(ctx, "k", "g"); ok {
		t.Fatal("hit after Close")
	}
	tier.Set(ctx, "k", "g", entryAt(2))
	if err := tier.Invalidate(ctx, 2, []string{"g"}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Invalidate after Close: %v", err)
	}
	if err := tier.Ping(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("Ping after Close: %v", err)
	}
	if tier.Healthy() {
		t.Fatal("healthy after Close")
	}
}

// TestLargeInvalidationInRoundTrips invalidates a change of 50,001 guards,
// over three times what one round trip carries (a giant block's addresses and
// outpoints), against a real redis-server: it goes in round trips of at
// most maxScriptsPerRoundTrip chunks, each with a deadline of its own, the
// tier stays healthy (its entries of other guards keep being served: no
// fence discards them), every floor is raised and the marker follows. An
// entry of a touched guard stored before is discarded; an untouched one is
// still served.
func TestLargeInvalidationInRoundTrips(t *testing.T) {
	s := startRedis(t)
	tier := newTier(t, s, func(o *Options) {
		o.ProbeInterval = 2 * time.Minute // no probes in the count
		o.CallTimeout = 5 * time.Second   // a round trip of 15,000 guards on a loaded machine
	})
	ctx := context.Background()
	publish(t, tier, 1)
	tier.Set(ctx, "touched", "addr7", entryAt(1))
	tier.Set(ctx, "kept", "other", entryAt(1))
	if _, ok := tier.Get(ctx, "kept", "other"); !ok {
		t.Fatal("the entry of an untouched guard is not served before the invalidation")
	}
	h := &deadlines{}
	tier.rdb.AddHook(h)
	guards := make([]string, 10*maxKeysPerScript+1)
	for i := range guards {
		guards[i] = "addr" + strconv.Itoa(i)
	}
	if err := tier.Invalidate(ctx, 2, guards); err != nil {
		t.Fatal(err)
	}
	n := (len(guards) + maxKeysPerScript - 1) / maxKeysPerScript
	want := (n + maxScriptsPerRoundTrip - 1) / maxScriptsPerRoundTrip
	rounds := h.take()
	if len(rounds) != want {
		t.Fatalf("an invalidation of %d guards in %d round trips, want %d of at most %d scripts", len(guards), len(rounds), want, maxScriptsPerRoundTrip)
	}
	for i, r := range rounds {
		if r.cmds > maxScriptsPerRoundTrip {
			t.Fatalf("round trip %d carried %d scripts, more than %d", i, r.cmds, maxScriptsPerRoundTrip)
		}
		if i > 0 && !r.deadline.After(rounds[i-1].deadline) {
			t.Fatalf("round trip %d has the deadline of the one before (%v): the whole invalidation shares one CallTimeout", i, r.deadline)
		}
	}
	if !tier.Healthy() {
		t.Fatal("the tier degraded on a large invalidation")
	}
	raw := s.Client()
	for _, g := range []string{guards[0], guards[len(guards)/2], guards[len(guards)-1]} {
		if v := rawGet(t, raw, testNS+":f:"+g); v != "2" {
			t.Fatalf("floor of %s = %s, want 2", g, v)
		}
	}
	if v := rawGet(t, raw, testNS+":S"); v != "2" {
		t.Fatalf("marker %s after the invalidation, want 2", v)
	}
	if _, ok := tier.Get(ctx, "touched", "addr7"); ok {
		t.Fatal("an entry of an invalidated guard is served")
	}
	if _, ok := tier.Get(ctx, "kept", "other"); !ok {
		t.Fatal("the entry of an untouched guard is gone: the invalidation discarded the tier")
	}
}

// deadlines records each pipeline's size and context deadline.
type deadlines struct {
	mu     sync.Mutex
	rounds []round
}

type round struct {
	cmds     int
	deadline time.Time
}

func (h *deadlines) DialHook(next goredis.DialHook) goredis.DialHook { return next }
func (h *deadlines) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return next
}
func (h *deadlines) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		d, _ := ctx.Deadline()
		h.mu.Lock()
		h.rounds = append(h.rounds, round{len(cmds), d})
		h.mu.Unlock()
		return next(ctx, cmds)
	}
}
func (h *deadlines) take() []round {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.rounds
	h.rounds = nil
	return r
}

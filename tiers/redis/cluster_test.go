package redis

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/utxo-cache/utxo-cache/cache"
	"github.com/utxo-cache/utxo-cache/internal/testredis"
)

// clusterOptions are testOptions for a tier on the cluster c.
func clusterOptions(t testing.TB, c *testredis.Cluster) Options {
	return Options{
		ClusterAddrs:  c.Addrs(),
		Namespace:     testNS,
		CallTimeout:   time.Second,
		ProbeInterval: 20 * time.Millisecond,
		Logger:        slog.New(slog.NewTextHandler(t.Output(), nil)),
	}
}

// newClusterTier opens a healthy tier on c, edited by edit.
func newClusterTier(t testing.TB, c *testredis.Cluster, edit func(*Options)) *Tier {
	t.Helper()
	o := clusterOptions(t, c)
	if edit != nil {
		edit(&o)
	}
	tier := openTier(t, o)
	waitFor(t, 10*time.Second, "a tier on a running cluster healthy after New", tier.Healthy)
	return tier
}

// clusterGet reads key from the master that serves it; "<nil>" when
// missing.
func clusterGet(t testing.TB, c *testredis.Cluster, key string) string {
	t.Helper()
	v, err := c.MasterOf(c.Slot(key)).Do(5*time.Second, "GET", key)
	if err != nil {
		t.Fatalf("GET %s: %v", key, err)
	}
	if v == nil {
		return "<nil>"
	}
	return v.(string)
}

// guardIn finds a guard of bucket b.
func guardIn(tier *Tier, b int) string {
	for i := 0; ; i++ {
		if g := "addr" + strconv.Itoa(i); tier.bucketOf(g) == b {
			return g
		}
	}
}

// TestClusterKeyspace checks the layout of Tier's doc comment on a
// cluster: every bucket's keys share its slot, the buckets spread over
// all three masters, an invalidation raises every bucket's marker and the
// floors of its guards in their buckets, and a fill is served and then
// hidden by its guard's invalidation, as on one server.
func TestClusterKeyspace(t *testing.T) {
	c := testredis.StartCluster(t)
	tier := newClusterTier(t, c, nil)
	ctx := context.Background()
	if len(tier.buckets) != clusterBuckets {
		t.Fatalf("%d buckets", len(tier.buckets))
	}
	masters := map[*testredis.Server]bool{}
	for i, b := range tier.buckets {
		slot := c.Slot(b.global)
		g := guardIn(tier, i)
		for _, k := range []string{b.marker, b.entry + "k", b.floor + g} {
			if s := c.Slot(k); s != slot {
				t.Fatalf("bucket %d: %s in slot %d, its global floor in %d", i, k, s, slot)
			}
		}
		masters[c.MasterOf(slot)] = true
	}
	if len(masters) != 3 {
		t.Fatalf("the buckets are on %d masters, want 3", len(masters))
	}

	guards := []string{guardIn(tier, 0), guardIn(tier, 1), guardIn(tier, 33)}
	if err := tier.Invalidate(ctx, 7, guards); err != nil || !tier.Healthy() {
		t.Fatalf("Invalidate: %v, healthy %v", err, tier.Healthy())
	}
	for i, b := range tier.buckets {
		if v := clusterGet(t, c, b.marker); v != "7" {
			t.Fatalf("bucket %d: marker %s, want 7", i, v)
		}
		if v := clusterGet(t, c, b.global); v != "0" {
			t.Fatalf("bucket %d: global floor %s, want 0", i, v)
		}
	}
	for _, g := range guards {
		if v := clusterGet(t, c, tier.buckets[tier.bucketOf(g)].floor+g); v != "7" {
			t.Fatalf("floor of %s: %s, want 7", g, v)
		}
	}
	for _, g := range guards {
		tier.Set(ctx, "k/"+g, g, entryAt(7))
		if e, ok := tier.Get(ctx, "k/"+g, g); !ok || e.Seq != 7 {
			t.Fatalf("Get %s: %v %v, want the fill at 7", g, e.Seq, ok)
		}
	}
	if err := tier.Invalidate(ctx, 8, guards[:1]); err != nil {
		t.Fatal(err)
	}
	if _, ok := tier.Get(ctx, "k/"+guards[0], guards[0]); ok {
		t.Fatal("an entry below its guard's floor was served")
	}
	if e, ok := tier.Get(ctx, "k/"+guards[1], guards[1]); !ok || e.Seq != 7 {
		t.Fatalf("an entry of a guard not invalidated: %v %v", e.Seq, ok)
	}
	// A batch Get over three buckets and three masters: one MGET per
	// bucket, each entry judged against its own floor.
	keys := []string{"k/" + guards[0], "k/" + guards[1], "k/" + guards[2], "k/none"}
	out, hit := make([]cache.Entry, len(keys)), make([]bool, len(keys))
	tier.GetMany(ctx, keys, append(guards[:3:3], guardIn(tier, 5)), out, hit)
	for i, want := range []bool{false, true, true, false} {
		if hit[i] != want || (want && out[i].Seq != 7) {
			t.Fatalf("GetMany %s: hit %v seq %d, want hit %v at 7", keys[i], hit[i], out[i].Seq, want)
		}
	}
	// A large invalidation: chunks per bucket, witnesses within a bucket.
	many := make([]string, 3*maxKeysPerScript+17)
	for i := range many {
		many[i] = "big" + strconv.Itoa(i)
	}
	if err := tier.Invalidate(ctx, 9, many); err != nil || !tier.Healthy() {
		t.Fatalf("large Invalidate: %v, healthy %v", err, tier.Healthy())
	}
	for _, g := range []string{many[0], many[len(many)/2], many[len(many)-1]} {
		if v := clusterGet(t, c, tier.buckets[tier.bucketOf(g)].floor+g); v != "9" {
			t.Fatalf("floor of %s: %s, want 9", g, v)
		}
	}
	if st := tier.Stats(); st.Outages != 0 {
		t.Fatalf("%d outages", st.Outages)
	}
}

// TestClusterLaggingReplicaPromoted is the failover that loses writes: the
// replica of a bucket's master misses an invalidation (it is cut off the
// replication stream while the invalidation runs), the master crashes, and
// the replica is promoted without it. Its bucket then holds the entry with
// its old floor and an old marker. A tier that meets the promoted replica
// without any error (a follower started after the failover, at the
// writer's seq) finds the marker behind and serves nothing; a follower at
// the older seq may serve the entry, which is right for its state; the
// writer's fencing then hides every entry from before, for both.
func TestClusterLaggingReplicaPromoted(t *testing.T) {
	c := testredis.StartCluster(t)
	var published atomic.Uint64
	// The writer's prober does not tick by itself: the test fences.
	writer := newClusterTier(t, c, func(o *Options) { o.PublishedSeq, o.ProbeInterval = published.Load, 2*time.Minute })
	ctx := context.Background()
	g := guardIn(writer, 5)
	b := writer.buckets[5]
	if err := writer.Invalidate(ctx, 5, []string{g}); err != nil {
		t.Fatal(err)
	}
	published.Store(5)
	writer.Set(ctx, "k", g, entryAt(5))
	if e, ok := writer.Get(ctx, "k", g); !ok || e.Seq != 5 {
		t.Fatalf("Get before: %v %v", e.Seq, ok)
	}
	master := c.MasterOf(c.Slot(b.global))
	c.WaitReplicated(master)
	replica := c.ReplicaOf(master)
	c.CutReplica(replica)
	if err := writer.Invalidate(ctx, 6, []string{g}); err != nil || !writer.Healthy() {
		t.Fatalf("Invalidate(6): %v, healthy %v", err, writer.Healthy())
	}
	published.Store(6)
	if _, ok := writer.Get(ctx, "k", g); ok {
		t.Fatal("served below the floor before the crash")
	}
	if v := clusterGet(t, c, b.floor+g); v != "6" {
		t.Fatalf("floor on the master: %s", v)
	}
	master.Kill()
	c.WaitMaster(replica)
	// The promoted replica lacks the floor and the marker of 6.
	if v, m := clusterGet(t, c, b.floor+g), clusterGet(t, c, b.marker); v != "5" || m != "5" {
		t.Fatalf("the promoted replica has floor %s, marker %s: it did not lose the invalidation of 6", v, m)
	}
	follower := func(seq uint64) *Tier {
		return openTier(t, Options{ClusterAddrs: c.Addrs(), Namespace: testNS, CallTimeout: time.Second,
			ProbeInterval: 2 * time.Minute, Follower: true, PublishedSeq: func() uint64 { return seq },
			Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	}
	at6, at5 := follower(6), follower(5)
	for range 3 {
		if at6.fence() {
			t.Fatal("a follower at 6 healed on a cluster whose bucket lost the marker of 6")
		}
	}
	if e, ok := at6.Get(ctx, "k", g); ok {
		t.Fatalf("a follower at 6 served Seq %d", e.Seq)
	}
	if !at5.Healthy() {
		t.Fatal("a follower at 5 is not healthy: every marker is at least 5")
	}
	if e, ok := at5.Get(ctx, "k", g); !ok || e.Seq != 5 {
		t.Fatalf("a follower at 5: %v %v, want its state's entry", e.Seq, ok)
	}
	if e, ok := writer.Get(ctx, "k", g); ok {
		t.Fatalf("the writer served Seq %d", e.Seq)
	}
	waitFor(t, 10*time.Second, "writer fenced", func() bool { return writer.fence() })
	if v := clusterGet(t, c, b.global); v != "6" {
		t.Fatalf("global floor after fencing: %s, want 6", v)
	}
	if !at6.fence() {
		t.Fatal("a follower at 6 does not heal after the writer fenced")
	}
	for _, tier := range []*Tier{at6, at5, writer} {
		if e, ok := tier.Get(ctx, "k", g); ok {
			t.Fatalf("served Seq %d after fencing", e.Seq)
		}
	}
	at6.Set(ctx, "k", g, entryAt(6))
	if e, ok := writer.Get(ctx, "k", g); !ok || e.Seq != 6 {
		t.Fatalf("a fresh fill: %v %v", e.Seq, ok)
	}
	t.Logf("writer %+v", writer.Stats())
}

// TestClusterStressThroughFailovers runs the stress load (stress_test.go:
// racing fills, invalidations and checked reads) on a cluster while a
// bucket's master is failed over (CLUSTER FAILOVER), its slot is moved to
// another master (checked reads run while its keys are on both), and
// another master is killed and its replica promoted. No stale entry is
// served; every call returns within CallTimeout (plus scheduling); the tier
// is healthy after each disturbance.
func TestClusterStressThroughFailovers(t *testing.T) {
	c := testredis.StartCluster(t)
	tier := newClusterTier(t, c, func(o *Options) { o.CallTimeout = outageCallTimeout })
	phase := *stressTime / 4
	var moved, killed string
	rep := runStress(t, tier, 0, func() {
		_, guard := stressKey(0, 0)
		b := tier.buckets[tier.bucketOf(guard)]
		slot := c.Slot(b.global)
		time.Sleep(phase)
		c.Failover(c.MasterOf(slot))
		waitFor(t, 10*time.Second, "healthy after the failover", tier.Healthy)
		time.Sleep(phase)
		var to *testredis.Server
		for _, m := range c.Masters() {
			if m != c.MasterOf(slot) {
				to = m
			}
		}
		c.MoveSlot(slot, to, func() {
			// Let reads and fills run while the slot's keys are on two
			// nodes.
			before := tier.Stats()
			waitFor(t, 10*time.Second, "calls during the migration", func() bool {
				st := tier.Stats()
				return st.Hits+st.Misses > before.Hits+before.Misses+200
			})
		})
		moved = fmt.Sprintf("slot %d to %s", slot, to.Addr())
		waitFor(t, 10*time.Second, "healthy after the move", tier.Healthy)
		time.Sleep(phase)
		_, other := stressKey(1, 0)
		victim := c.MasterOf(c.Slot(tier.buckets[tier.bucketOf(other)].global))
		killed = victim.Addr()
		c.KillMaster(victim)
		waitFor(t, 20*time.Second, "healthy after the crash", tier.Healthy)
		time.Sleep(phase)
	})
	t.Logf("moved %s, killed %s", moved, killed)
	for op, name := range []string{"Get", "Set", "Invalidate"} {
		if d := time.Duration(rep.slowest[op].Load()); d > outageCallTimeout+latencyMargin {
			t.Errorf("slowest %s took %v, more than CallTimeout %v + %v", name, d, outageCallTimeout, latencyMargin)
		}
	}
	if rep.hits.Load() == 0 {
		t.Fatal("no hits")
	}
	if !tier.Healthy() {
		t.Fatal("not healthy at the end")
	}
}

// TestSentinelStressThroughFailover runs the stress load on a primary found
// through Sentinels while they fail it over to its replica: no stale
// entry, bounded calls, healthy again after.
func TestSentinelStressThroughFailover(t *testing.T) {
	st := testredis.StartSentinel(t)
	tier := newSentinelTier(t, st, func(o *Options) { o.CallTimeout = outageCallTimeout })
	phase := *stressTime / 2
	rep := runStress(t, tier, 0, func() {
		time.Sleep(phase)
		st.Failover()
		waitFor(t, 20*time.Second, "healthy after the failover", tier.Healthy)
		time.Sleep(phase)
	})
	for op, name := range []string{"Get", "Set", "Invalidate"} {
		if d := time.Duration(rep.slowest[op].Load()); d > outageCallTimeout+latencyMargin {
			t.Errorf("slowest %s took %v, more than CallTimeout %v + %v", name, d, outageCallTimeout, latencyMargin)
		}
	}
	if rep.hits.Load() == 0 || !tier.Healthy() {
		t.Fatalf("%d hits, healthy %v", rep.hits.Load(), tier.Healthy())
	}
	// The tier talks to the new primary: its marker is there.
	if v, err := st.Primary().Do(5*time.Second, "GET", testNS+":S"); err != nil || v == nil || strings.TrimSpace(v.(string)) == "" {
		t.Fatalf("marker on the new primary: %v %v", v, err)
	}
}

// newSentinelTier opens a healthy tier on the Sentinel set st.
func newSentinelTier(t testing.TB, st *testredis.Sentinel, edit func(*Options)) *Tier {
	t.Helper()
	o := Options{
		SentinelMaster: testredis.SentinelMaster,
		SentinelAddrs:  st.Addrs(),
		Namespace:      testNS,
		CallTimeout:    time.Second,
		ProbeInterval:  20 * time.Millisecond,
		Logger:         slog.New(slog.NewTextHandler(t.Output(), nil)),
	}
	if edit != nil {
		edit(&o)
	}
	tier := openTier(t, o)
	waitFor(t, 10*time.Second, "a tier on a Sentinel set healthy after New", tier.Healthy)
	return tier
}

// TestACLCredentials: with an ACL user, the tier authenticates with
// Username and Password and is healthy, without an ACL LOG entry; with a
// wrong password it stays degraded (reads miss, nothing is served), and
// Redis logs the failed AUTH. The default
// user stays on for the helper's PING.
func TestACLCredentials(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "acl.conf")
	if err := os.WriteFile(conf, []byte("user cache on >s3cret ~* &* +@all\nsave \"\"\nappendonly no\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := testredis.StartConfig(t, conf)
	o := Options{URL: "redis://" + s.Addr() + "/0", Namespace: testNS, CallTimeout: time.Second, ProbeInterval: 20 * time.Millisecond,
		Username: "cache", Password: "s3cret", Logger: slog.New(slog.NewTextHandler(t.Output(), nil))}
	tier := openTier(t, o)
	waitFor(t, 10*time.Second, "healthy with the ACL user", tier.Healthy)
	ctx := context.Background()
	publish(t, tier, 3)
	tier.Set(ctx, "k", "g", entryAt(3))
	if e, ok := tier.Get(ctx, "k", "g"); !ok || e.Seq != 3 {
		t.Fatalf("Get: %v %v", e.Seq, ok)
	}
	if v, err := s.Do(5*time.Second, "ACL", "LOG"); err != nil || len(v.([]any)) != 0 {
		t.Fatalf("ACL LOG after the good user: %v %v", v, err)
	}
	o.Password = "wrong"
	bad := openTier(t, o)
	for range 3 {
		if bad.fence() {
			t.Fatal("healthy with a wrong password")
		}
	}
	if _, ok := bad.Get(ctx, "k", "g"); ok {
		t.Fatal("served with a wrong password")
	}
	if v, err := s.Do(5*time.Second, "ACL", "LOG"); err != nil || len(v.([]any)) == 0 {
		t.Fatalf("ACL LOG after the wrong password: %v %v, want the failed AUTH", v, err)
	}
}

package redis

import (
	"bytes"
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The rewind tests restore Redis from an older snapshot (see Tier,
// "Rewinds"). Their tiers' probers do not tick by themselves (a long
// ProbeInterval): a prober that happened to probe while redis-server was
// down would degrade the tier for the outage and hide what the tests are
// about, which is a Redis that comes back between two probes, as a real one
// usually does. The tests run the prober's rounds themselves (probe).

// lockedBuffer collects a tier's log lines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.b.String(), s)
}

// rewindNode is a tier and the published seq of its node.
type rewindNode struct {
	tier *Tier
	seq  atomic.Uint64
	logs *lockedBuffer
}

// writerNode opens the writer's tier on s, its node at published seq 0.
func writerNode(t *testing.T, s *redisServer) *rewindNode {
	n := &rewindNode{logs: &lockedBuffer{}}
	n.tier = newTier(t, s, func(o *Options) {
		o.ProbeInterval = 2 * time.Minute
		o.PublishedSeq = n.seq.Load
		o.Logger = slog.New(slog.NewTextHandler(n.logs, nil))
	})
	return n
}

// replicaNode opens a replica's tier (a Follower) on s, its node at seq.
func replicaNode(t *testing.T, s *redisServer, seq uint64) *rewindNode {
	n := &rewindNode{logs: &lockedBuffer{}}
	n.seq.Store(seq)
	o := testOptions(t, s)
	o.ProbeInterval = 2 * time.Minute
	o.Follower, o.PublishedSeq = true, n.seq.Load
	o.Logger = slog.New(slog.NewTextHandler(n.logs, nil))
	n.tier = openTier(t, o)
	return n
}

// change is the writer's change seq touching guards: invalidate, publish.
func (n *rewindNode) change(t *testing.T, seq uint64, guards ...string) {
	t.Helper()
	if err := n.tier.Invalidate(context.Background(), seq, guards); err != nil {
		t.Fatalf("Invalidate(%d): %v", seq, err)
	}
	n.seq.Store(seq)
}

// fill stores the answer computed at seq and reports the outcome.
func (n *rewindNode) fill(seq uint64) fillOutcome {
	e := entryAt(seq)
	return n.tier.set(context.Background(), "k", "g", &e)
}

// get reads k, and fails t if it serves an entry from before want: a
// change after it touched g.
func (n *rewindNode) get(t *testing.T, want uint64) (uint64, bool) {
	t.Helper()
	e, ok := n.tier.Get(context.Background(), "k", "g")
	if ok && e.Seq < want {
		t.Fatalf("served the entry at %d; g changed at %d, before the read", e.Seq, want)
	}
	return e.Seq, ok
}

// restoreScenario is the scenario up to the restore: the writer
// invalidates g at 5 and fills k at 5, Redis saves, the writer invalidates
// g at 6..10 (the replica, if any, follows to 8) and fills k at 10; then
// redis-server is killed and restarts from the snapshot, holding the entry
// at 5 under a floor of 5.
func restoreScenario(t *testing.T, s *redisServer, w, replica *rewindNode) {
	t.Helper()
	w.change(t, 5, "g")
	if got := w.fill(5); got != fillStored {
		t.Fatalf("fill at 5: %v", got)
	}
	s.Save()
	for seq := uint64(6); seq <= 10; seq++ {
		w.change(t, seq, "g")
		if seq == 8 && replica != nil {
			replica.seq.Store(8)
		}
	}
	if got := w.fill(10); got != fillStored {
		t.Fatalf("fill at 10: %v", got)
	}
	if seq, ok := w.get(t, 10); !ok || seq != 10 {
		t.Fatalf("before the restore: hit %v at %d, want the entry at 10", ok, seq)
	}
	s.RestartFromDump()
	raw := s.Client()
	if got := rawGet(t, raw, testNS+":e:k"); got == "<nil>" || got[1:9] != string([]byte{0, 0, 0, 0, 0, 0, 0, 5}) {
		t.Fatal("Redis did not come back with the entry at 5: the test proves nothing")
	}
	if got := rawGet(t, raw, testNS+":f:g"); got != "5" {
		t.Fatalf("Redis came back with floor %s, want 5", got)
	}
}

// TestRedisRestoredWriterMissesUntilFenced is issue 12 §2 on the writer's tier:
// Redis restarted from an older snapshot holds an entry five changes old,
// under its old floor. Before the marker, every Get served it until it
// expired. Now the first Get finds the marker at 5, below the node's 10,
// misses and degrades the tier; the prober fences; then a fill at 10 is
// stored and served.
func TestRedisRestoredWriterMissesUntilFenced(t *testing.T) {
	s := startRedis(t)
	w := writerNode(t, s)
	restoreScenario(t, s, w, nil)

	for range 3 {
		if seq, ok := w.get(t, 10); ok {
			t.Fatalf("hit at %d after the restore, before the fence", seq)
		}
	}
	if w.tier.Healthy() {
		t.Fatal("a Get found the marker behind and the tier stayed healthy")
	}
	if st := w.tier.Stats(); st.Rewinds != 1 || st.Outages != 1 {
		t.Fatalf("rewinds %d, outages %d; want 1, 1", st.Rewinds, st.Outages)
	}
	if got := w.fill(10); got != fillSkipped {
		t.Fatalf("fill while degraded: %v", got)
	}
	if n := w.logs.count("redis tier degraded"); n != 1 {
		t.Fatalf("%d degraded lines, want 1", n)
	}

	if !w.tier.fence() {
		t.Fatal("the writer's fence failed")
	}
	raw := s.Client()
	if f, m := rawGet(t, raw, testNS+":F"), rawGet(t, raw, testNS+":S"); f != "10" || m != "10" {
		t.Fatalf("after the fence: global floor %s, marker %s; want 10, 10", f, m)
	}
	if seq, ok := w.get(t, 10); ok {
		t.Fatalf("hit at %d after the fence: the entry at 5 is below the global floor", seq)
	}
	if got := w.fill(10); got != fillStored {
		t.Fatalf("fill at 10 after the fence: %v", got)
	}
	if seq, ok := w.get(t, 10); !ok || seq != 10 {
		t.Fatalf("after the refill: hit %v at %d, want 10", ok, seq)
	}
	// The next change goes through as usual: the marker follows.
	w.change(t, 11, "g")
	if m := rawGet(t, raw, testNS+":S"); m != "11" || !w.tier.Healthy() {
		t.Fatalf("after change 11: marker %s, healthy %v", m, w.tier.Healthy())
	}
}

// TestRedisRestoredReplicaNeverServes: a replica's tier at seq 8 shares the Redis.
// After the restore it never serves the rewound entry either; it writes
// neither the global floor nor the marker, waits quietly (one log line)
// for the writer's fence, and then serves again.
func TestRedisRestoredReplicaNeverServes(t *testing.T) {
	s := startRedis(t)
	w := writerNode(t, s)
	w.change(t, 4) // the writer's tier fenced the namespace, and is at 4
	replica := replicaNode(t, s, 4)
	waitFor(t, 10*time.Second, "the replica's tier healthy", func() bool {
		probe(replica.tier)
		return replica.tier.Healthy()
	})
	restoreScenario(t, s, w, replica)
	raw := s.Client()
	healthyLines := replica.logs.count("redis tier healthy")

	if seq, ok := replica.get(t, 8); ok {
		t.Fatalf("the replica at 8 served the entry at %d after the restore", seq)
	}
	if replica.tier.Healthy() {
		t.Fatal("the replica's tier found the marker behind and stayed healthy")
	}
	if st := replica.tier.Stats(); st.Rewinds != 1 {
		t.Fatalf("replica rewinds %d, want 1", st.Rewinds)
	}
	for range 5 { // prober rounds while the writer has not noticed
		probe(replica.tier)
		if replica.tier.Healthy() {
			t.Fatal("the replica's tier healed before the writer fenced")
		}
		if seq, ok := replica.get(t, 8); ok {
			t.Fatalf("the replica served the entry at %d before the writer fenced", seq)
		}
	}
	if f, m := rawGet(t, raw, testNS+":F"), rawGet(t, raw, testNS+":S"); f != "0" || m != "5" {
		t.Fatalf("the replica wrote: global floor %s, marker %s; want 0, 5 as restored", f, m)
	}
	if n := replica.logs.count("redis tier degraded"); n != 1 {
		t.Fatalf("the replica logged %d degraded lines for one outage, want 1:\n%s", n, &replica.logs.b)
	}

	// The writer notices (here at its next prober round) and fences.
	probe(w.tier)
	if w.tier.Healthy() || w.tier.Stats().Rewinds != 1 {
		t.Fatalf("the writer's prober did not notice: healthy %v, rewinds %d", w.tier.Healthy(), w.tier.Stats().Rewinds)
	}
	probe(w.tier)
	if !w.tier.Healthy() {
		t.Fatal("the writer's tier did not fence")
	}
	probe(replica.tier)
	if !replica.tier.Healthy() {
		t.Fatal("the replica's tier did not heal after the writer's fence")
	}
	if n := replica.logs.count("redis tier healthy"); n != healthyLines+1 {
		t.Fatalf("the replica logged %d healthy lines, want %d", n, healthyLines+1)
	}
	if seq, ok := replica.get(t, 8); ok {
		t.Fatalf("the replica served the entry at %d after the fence", seq)
	}
	if got := replica.fill(8); got != fillRefused {
		t.Fatalf("the replica's fill at 8, below the fence at 10: %v", got)
	}
	if got := w.fill(10); got != fillStored {
		t.Fatalf("the writer's fill at 10: %v", got)
	}
	replica.seq.Store(10)
	if seq, ok := replica.get(t, 10); !ok || seq != 10 {
		t.Fatalf("the replica at 10: hit %v at %d, want 10", ok, seq)
	}
}

// TestRedisRestoredDetectedByEveryCall: whichever call meets the rewound Redis
// first notices: a fill (it refuses to store above the marker), the
// writer's next invalidation (it raises the floors but not the marker,
// which would hide the rewind), or the prober's check.
func TestRedisRestoredDetectedByEveryCall(t *testing.T) {
	for _, c := range []struct {
		name   string
		notice func(t *testing.T, w *rewindNode)
	}{
		{"fill", func(t *testing.T, w *rewindNode) {
			if got := w.fill(10); got != fillFailed {
				t.Fatalf("fill at 10 on a Redis at 5: %v", got)
			}
		}},
		{"invalidate", func(t *testing.T, w *rewindNode) { w.change(t, 11, "h") }},
		{"prober", func(t *testing.T, w *rewindNode) { w.tier.advance(time.Now()) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := startRedis(t)
			w := writerNode(t, s)
			restoreScenario(t, s, w, nil)
			c.notice(t, w)
			if w.tier.Healthy() || w.tier.Stats().Rewinds != 1 {
				t.Fatalf("not noticed: healthy %v, rewinds %d", w.tier.Healthy(), w.tier.Stats().Rewinds)
			}
			raw := s.Client()
			if m := rawGet(t, raw, testNS+":S"); m != "5" {
				t.Fatalf("marker %s after the rewind was noticed, want 5: raised over a rewound Redis", m)
			}
			if e := rawGet(t, raw, testNS+":e:k"); e[1:9] != string([]byte{0, 0, 0, 0, 0, 0, 0, 5}) {
				t.Fatal("the entry at 5 was overwritten: a fill reached a rewound Redis")
			}
			if !w.tier.fence() {
				t.Fatal("fence failed")
			}
			if seq, ok := w.get(t, 10); ok {
				t.Fatalf("hit at %d after the fence", seq)
			}
		})
	}
}

// TestRedisRestartDetectedByRunID: a snapshot taken just before the crash loses
// nothing, so the marker is current; the prober sees the new run_id and
// distrusts the server all the same: the writer fences (keeping what is at
// the fence), a replica heals once the marker covers it.
func TestRedisRestartDetectedByRunID(t *testing.T) {
	s := startRedis(t)
	w := writerNode(t, s)
	w.change(t, 3, "g")
	replica := replicaNode(t, s, 3)
	w.change(t, 4, "h")
	if got := w.fill(3); got != fillStored {
		t.Fatalf("fill at 3: %v", got)
	}
	s.Save()
	s.RestartFromDump()

	if seq, ok := w.get(t, 3); !ok || seq != 3 {
		t.Fatalf("after a lossless restore: hit %v at %d; the marker is current, the entry too", ok, seq)
	}
	for _, n := range []*rewindNode{w, replica} {
		n.tier.advance(time.Now())
		if n.tier.Healthy() || n.tier.Stats().Restarts != 1 {
			t.Fatalf("the new run_id went unnoticed: healthy %v, restarts %d", n.tier.Healthy(), n.tier.Stats().Restarts)
		}
	}
	if n := w.logs.count("restarted or replaced"); n != 1 {
		t.Fatalf("%d restart lines, want 1", n)
	}
	probe(replica.tier)
	probe(w.tier)
	if !w.tier.Healthy() {
		t.Fatal("the writer did not fence")
	}
	if v := rawGet(t, s.Client(), testNS+":F"); v != "4" {
		t.Fatalf("global floor %s, want 4", v)
	}
	probe(replica.tier)
	if !replica.tier.Healthy() {
		t.Fatal("the replica did not heal")
	}
	if seq, ok := w.get(t, 3); ok {
		t.Fatalf("hit at %d below the fence at 4", seq)
	}
}

// TestRedisFollowerWritesNothing: a replica's tier on a Redis no writer has
// fenced (empty: a fresh one, or one that lost its data) creates neither
// key and serves nothing; it heals when the writer's tier has fenced at or
// above its seq, and degrades again if its node moves past what the
// writer's invalidations reached (a writer cut off from Redis).
func TestRedisFollowerWritesNothing(t *testing.T) {
	s := startRedis(t)
	replica := replicaNode(t, s, 7)
	raw := s.Client()
	for range 3 {
		probe(replica.tier)
	}
	if replica.tier.Healthy() {
		t.Fatal("a follower healthy on an unfenced Redis")
	}
	if f, m := rawGet(t, raw, testNS+":F"), rawGet(t, raw, testNS+":S"); f != "<nil>" || m != "<nil>" {
		t.Fatalf("a follower wrote the global floor %s, the marker %s", f, m)
	}
	if err := replica.tier.Invalidate(context.Background(), 8, []string{"g"}); err != nil {
		t.Fatalf("a follower's Invalidate: %v", err)
	}
	if v := rawGet(t, raw, testNS+":f:g"); v != "<nil>" {
		t.Fatalf("a follower's Invalidate wrote floor %s", v)
	}

	w := writerNode(t, s) // fences at 0
	probe(replica.tier)
	if replica.tier.Healthy() {
		t.Fatal("healed with the marker at 0, below the replica's 7")
	}
	w.change(t, 7, "g")
	probe(replica.tier)
	if !replica.tier.Healthy() {
		t.Fatal("not healed with the marker at 7")
	}
	if got := replica.fill(7); got != fillStored {
		t.Fatalf("fill at 7: %v", got)
	}
	if seq, ok := replica.get(t, 7); !ok || seq != 7 {
		t.Fatalf("hit %v at %d, want 7", ok, seq)
	}
	// The writer publishes 8 without reaching Redis; the replica follows.
	replica.seq.Store(8)
	if seq, ok := replica.get(t, 8); ok {
		t.Fatalf("served the entry at %d with the marker at 7, below the replica's 8", seq)
	}
	if replica.tier.Healthy() {
		t.Fatal("still healthy with the marker below the node")
	}
}

// TestRedisMarkerWaitsForEveryChunk: the last call of an invalidation raises the
// marker only if every earlier chunk ran (their witness floors are at seq),
// so that a snapshot or a failed chunk never leaves a marker above floors
// that were not raised. Driven through the script itself: a failed chunk
// cannot be provoked on a healthy server.
func TestRedisMarkerWaitsForEveryChunk(t *testing.T) {
	s := startRedis(t)
	w := writerNode(t, s)
	w.change(t, 4)
	ctx := context.Background()
	raw := s.Client()
	run := func(witnessFloor string) int64 {
		if witnessFloor != "" {
			raw.Set(ctx, testNS+":f:w", witnessFloor, time.Minute)
		}
		keys := []string{testNS + ":F", testNS + ":S", testNS + ":f:w", testNS + ":f:last"}
		res, err := raiseFloorsScript.Run(ctx, raw, keys, "5", DefaultFloorTTL(DefaultTTL).Milliseconds(), 1, "4").Int64()
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := run("4"); res != scriptIncomplete {
		t.Fatalf("an earlier chunk below seq: %d, want scriptIncomplete", res)
	}
	if m := rawGet(t, raw, testNS+":S"); m != "4" {
		t.Fatalf("marker %s after an incomplete invalidation, want 4", m)
	}
	if v := rawGet(t, raw, testNS+":f:last"); v != "5" {
		t.Fatalf("the last chunk's floor %s: floors are raised whatever the marker", v)
	}
	if res := run("5"); res != 1 {
		t.Fatalf("every chunk ran: %d, want 1 floor raised", res)
	}
	if m := rawGet(t, raw, testNS+":S"); m != "5" {
		t.Fatalf("marker %s after a complete invalidation, want 5", m)
	}

	// Through the tier: three chunks in one pipeline, the marker at the end.
	guards := make([]string, 2*maxKeysPerScript+1)
	for i := range guards {
		guards[i] = "addr" + strconv.Itoa(i)
	}
	w.change(t, 6, guards...)
	if m := rawGet(t, raw, testNS+":S"); m != "6" {
		t.Fatalf("marker %s after a three-chunk invalidation, want 6", m)
	}
}

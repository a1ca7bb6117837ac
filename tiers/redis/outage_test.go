package redis

import (
	"context"
	"testing"
	"time"
)

// The outage tests use a short call timeout and check that every call
// returns within it plus latencyMargin, which absorbs scheduling on a loaded
// machine under -race. Without the timeouts a call to a paused server would
// not return at all.
const (
	outageCallTimeout = 250 * time.Millisecond
	latencyMargin     = 500 * time.Millisecond
)

func outageTier(t *testing.T, s *redisServer) *Tier {
	return newTier(t, s, func(o *Options) { o.CallTimeout = outageCallTimeout })
}

// quick runs f and fails the test if it takes longer than a call may.
func quick(t *testing.T, what string, f func()) {
	t.Helper()
	start := time.Now()
	f()
	if d := time.Since(start); d > outageCallTimeout+latencyMargin {
		t.Errorf("%s took %v, more than CallTimeout %v + %v", what, d, outageCallTimeout, latencyMargin)
	}
}

func (t *Tier) maxSeen() (maxSeen, undelivered uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mu.maxSeen, t.mu.undelivered
}

// TestOutageKilledAndRestarted: Redis dies, the calls fail fast and the tier
// degrades; it comes back empty, and the tier fences the global floor above
// every invalidation it was asked for.
func TestOutageKilledAndRestarted(t *testing.T) {
	s := startRedis(t)
	tier := outageTier(t, s)
	ctx := context.Background()
	publish(t, tier, 5)
	tier.Set(ctx, "k", "g", entryAt(5))
	if _, ok := tier.Get(ctx, "k", "g"); !ok {
		t.Fatal("miss before the outage")
	}

	s.Kill()
	quick(t, "Get", func() {
		if _, ok := tier.Get(ctx, "k", "g"); ok {
			t.Error("hit from a dead Redis")
		}
	})
	quick(t, "Set", func() { tier.Set(ctx, "k", "g", entryAt(6)) })
	quick(t, "Invalidate", func() {
		if err := tier.Invalidate(ctx, 8, []string{"g"}); err != nil {
			t.Errorf("Invalidate: %v", err)
		}
	})
	if tier.Healthy() {
		t.Fatal("healthy with Redis dead")
	}
	quick(t, "Invalidate while degraded", func() {
		if err := tier.Invalidate(ctx, 9, []string{"h"}); err != nil {
			t.Errorf("Invalidate: %v", err)
		}
	})
	if seen, undelivered := tier.maxSeen(); seen != 9 || undelivered != 9 {
		t.Fatalf("remembered maxSeen %d, undelivered %d; want 9, 9", seen, undelivered)
	}
	if st := tier.Stats(); st.Outages != 1 {
		t.Fatalf("outages %d", st.Outages)
	}

	s.Restart()
	waitFor(t, 5*time.Second, "healthy after restart", tier.Healthy)
	if v := rawGet(t, s.Client(), testNS+":F"); v != "9" {
		t.Fatalf("global floor %s, want 9", v)
	}
	// A reader that read before the outage fills in vain.
	e := entryAt(8)
	if got := tier.set(ctx, "k", "g", &e); got != fillRefused {
		t.Fatalf("fill at 8 after fencing at 9: %v", got)
	}
	if _, ok := tier.Get(ctx, "k", "g"); ok {
		t.Fatal("hit after a restart that lost the data")
	}
	e = entryAt(9)
	if got := tier.set(ctx, "k", "g", &e); got != fillStored {
		t.Fatalf("fill at 9: %v", got)
	}
	if _, ok := tier.Get(ctx, "k", "g"); !ok {
		t.Fatal("miss after recovery")
	}
}

// TestOutagePausedNotRestarted: Redis stops answering but keeps its data
// (SIGSTOP). An invalidation that reached it only in the tier's memory must
// still hide the old entries when it answers again.
func TestOutagePausedNotRestarted(t *testing.T) {
	s := startRedis(t)
	tier := outageTier(t, s)
	ctx := context.Background()
	publish(t, tier, 5)
	for _, g := range []string{"g", "h", "other"} {
		tier.Set(ctx, "k"+g, g, entryAt(5))
	}

	s.Pause()
	quick(t, "Invalidate on a paused server", func() {
		if err := tier.Invalidate(ctx, 8, []string{"g"}); err != nil {
			t.Errorf("Invalidate: %v", err)
		}
	})
	waitFor(t, time.Second, "degraded", func() bool { return !tier.Healthy() })
	quick(t, "Invalidate while degraded", func() {
		if err := tier.Invalidate(ctx, 9, []string{"h"}); err != nil { // never reaches Redis
			t.Errorf("Invalidate: %v", err)
		}
	})
	for _, g := range []string{"g", "h", "other"} {
		quick(t, "Get while degraded", func() {
			if _, ok := tier.Get(ctx, "k"+g, g); ok {
				t.Errorf("%s: hit while degraded", g)
			}
		})
	}
	quick(t, "Set while degraded", func() { tier.Set(ctx, "kh", "h", entryAt(9)) })

	s.Resume()
	waitFor(t, 5*time.Second, "healthy after resume", tier.Healthy)
	raw := s.Client()
	if v := rawGet(t, raw, testNS+":F"); v != "9" {
		t.Fatalf("global floor %s, want 9", v)
	}
	if v := rawGet(t, raw, testNS+":f:h"); v != "<nil>" {
		t.Fatalf("floor of h = %s: the invalidation at 9 was never sent", v)
	}
	before := tier.Stats().StaleDiscards
	for _, g := range []string{"g", "h", "other"} {
		if n := raw.Exists(ctx, testNS+":e:k"+g).Val(); n != 1 {
			t.Fatalf("%s: the entry from before the outage is gone; the test proves nothing", g)
		}
		if e, ok := tier.Get(ctx, "k"+g, g); ok {
			t.Fatalf("%s: entry at %d served after an outage that remembered 9", g, e.Seq)
		}
	}
	if d := tier.Stats().StaleDiscards - before; d != 3 {
		t.Fatalf("stale discards %d, want 3", d)
	}
	tier.Set(ctx, "kh", "h", entryAt(9))
	if e, ok := tier.Get(ctx, "kh", "h"); !ok || e.Seq != 9 {
		t.Fatalf("after refill: %+v, %v", e, ok)
	}
}

// TestSlowServerTimesOut: a server that is alive but slow (DEBUG SLEEP)
// costs one CallTimeout, then the tier stops asking it until it is fast.
func TestSlowServerTimesOut(t *testing.T) {
	s := startRedis(t)
	tier := outageTier(t, s)
	ctx := context.Background()
	publish(t, tier, 1)
	tier.Set(ctx, "k", "g", entryAt(1))

	slept := make(chan error, 1)
	go func() { slept <- s.Client().Do(ctx, "DEBUG", "SLEEP", "1").Err() }()
	waitFor(t, 2*time.Second, "server asleep", func() bool { return s.ping(20*time.Millisecond) != nil })
	quick(t, "Get on a sleeping server", func() {
		if _, ok := tier.Get(ctx, "k", "g"); ok {
			t.Error("hit from a sleeping server")
		}
	})
	if tier.Healthy() {
		t.Fatal("healthy while the server sleeps")
	}
	if err := <-slept; err != nil {
		t.Fatalf("DEBUG SLEEP: %v", err)
	}
	waitFor(t, 5*time.Second, "healthy after the sleep", tier.Healthy)
	if _, ok := tier.Get(ctx, "k", "g"); !ok {
		t.Fatal("miss after recovery: nothing was invalidated, the entry is current")
	}
}

// TestDataLossDetected: Redis loses its keys without any call failing
// (FLUSHALL). Get, Set and the prober notice the missing global floor.
func TestDataLossDetected(t *testing.T) {
	s := startRedis(t)
	// No prober ticks: the test drives fence and advance itself.
	tier := newTier(t, s, func(o *Options) { o.ProbeInterval = 2 * time.Minute })
	ctx := context.Background()
	raw := s.Client()
	if err := tier.Invalidate(ctx, 7, []string{"g"}); err != nil {
		t.Fatal(err)
	}
	tier.Set(ctx, "k", "g", entryAt(7))

	for _, c := range []struct {
		name   string
		notice func()
	}{
		{"Get", func() { tier.Get(ctx, "k", "g") }},
		{"Set", func() { tier.Set(ctx, "k", "g", entryAt(7)) }},
		{"Invalidate", func() { _ = tier.Invalidate(ctx, 7, []string{"x"}) }},
		{"prober", func() { tier.advance(time.Now()) }},
	} {
		if err := raw.FlushAll(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		c.notice()
		if tier.Healthy() {
			t.Fatalf("%s did not notice the data loss", c.name)
		}
		if !tier.fence() {
			t.Fatalf("fencing after %s failed", c.name)
		}
		if v := rawGet(t, raw, testNS+":F"); v != "7" {
			t.Fatalf("global floor %s, want 7", v)
		}
		e := entryAt(6) // a reader from before the loss, whose floor was lost
		if got := tier.set(ctx, "k", "g", &e); got != fillRefused {
			t.Fatalf("after %s: stale fill %v", c.name, got)
		}
	}
}

// TestExpiredFloorCoveredByGlobalFloor: a fill arriving after its guard's
// floor expired is refused by the global floor that the prober advanced.
func TestExpiredFloorCoveredByGlobalFloor(t *testing.T) {
	s := startRedis(t)
	tier := newTier(t, s, func(o *Options) {
		o.TTL, o.FloorTTL = 300*time.Millisecond, time.Second // horizon 650ms
		o.CallTimeout = 200 * time.Millisecond
	})
	ctx := context.Background()
	raw := s.Client()
	start := time.Now()
	if err := tier.Invalidate(ctx, 10, []string{"g"}); err != nil {
		t.Fatal(err)
	}
	if v := rawGet(t, raw, testNS+":F"); v != "0" && time.Since(start) < 300*time.Millisecond {
		t.Fatalf("global floor %s before the horizon: live entries would be discarded", v)
	}
	waitFor(t, 5*time.Second, "floor expired", func() bool { return raw.Exists(ctx, testNS+":f:g").Val() == 0 })
	if v := rawGet(t, raw, testNS+":F"); v != "10" {
		t.Fatalf("global floor %s when the guard floor expired, want 10", v)
	}
	e := entryAt(9) // a reader older than the floor, very slow
	if got := tier.set(ctx, "k", "g", &e); got != fillRefused {
		t.Fatalf("fill below an expired floor: %v", got)
	}
	e = entryAt(10)
	if got := tier.set(ctx, "k", "g", &e); got != fillStored {
		t.Fatalf("current fill: %v", got)
	}
	if !tier.Healthy() {
		t.Fatal("degraded")
	}
}

// TestStartSeqFencesAWriterRestart: a writer killed between a commit (seq 8)
// and its invalidation left Redis with an entry at 7 whose guard 8 touched
// and a floor of 7. The restarted writer's tier, started at the store's seq
// 8, serves nothing below it, and keeps serving fills at 8.
func TestStartSeqFencesAWriterRestart(t *testing.T) {
	s := startRedis(t)
	ctx := context.Background()
	before := newTier(t, s, func(o *Options) { o.ProbeInterval = 2 * time.Minute })
	if err := before.Invalidate(ctx, 7, []string{"g"}); err != nil {
		t.Fatal(err)
	}
	e := entryAt(7)
	if got := before.set(ctx, "k", "g", &e); got != fillStored {
		t.Fatalf("fill at 7: %v", got)
	}
	if _, ok := before.Get(ctx, "k", "g"); !ok {
		t.Fatal("the entry at 7 is not served before the restart")
	}
	_ = before.Close() // the writer dies; commit 8 touched g, never invalidated

	after := newTier(t, s, func(o *Options) { o.ProbeInterval = 2 * time.Minute; o.StartSeq = 8 })
	if !after.Healthy() {
		t.Fatal("the restarted tier is not healthy")
	}
	if e, ok := after.Get(ctx, "k", "g"); ok {
		t.Fatalf("served the entry at %d after a restart at seq 8", e.Seq)
	}
	if v := rawGet(t, s.Client(), testNS+":F"); v != "8" {
		t.Fatalf("global floor %s, want 8", v)
	}
	e = entryAt(8)
	if got := after.set(ctx, "k", "g", &e); got != fillStored {
		t.Fatalf("fill at 8 after the restart: %v", got)
	}
	if e, ok := after.Get(ctx, "k", "g"); !ok || e.Seq != 8 {
		t.Fatalf("the fill at 8 is not served: %v %d", ok, e.Seq)
	}
}

package redis

import (
	"bytes"
	"context"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/utxo-cache/utxo-cache/cache"
)

var _ cache.AsyncSetter = (*Tier)(nil)

// gateFills holds every pipeline of setScript calls at a gate until it
// opens, and counts them; other pipelines (invalidations) pass.
type gateFills struct {
	gate    chan struct{}
	entered atomic.Int64
}

func (h *gateFills) DialHook(next goredis.DialHook) goredis.DialHook          { return next }
func (h *gateFills) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook { return next }
func (h *gateFills) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		if args := cmds[0].Args(); len(args) > 1 && (args[1] == setScript.Hash() || args[1] == setLua) {
			h.entered.Add(1)
			<-h.gate
		}
		return next(ctx, cmds)
	}
}

// TestSetAsyncLateFillRefused: a fill queued before an invalidation of its
// guard and stored after it is refused by the floor check in Redis, so the
// old answer is never served; a fill with a current Seq is stored.
func TestSetAsyncLateFillRefused(t *testing.T) {
	s := startRedis(t)
	tier := newTier(t, s, func(o *Options) { o.ProbeInterval = 2 * time.Minute })
	ctx := context.Background()
	h := &gateFills{gate: make(chan struct{})}
	tier.rdb.AddHook(h)

	publish(t, tier, 5)
	tier.SetAsync("k", "g", entryAt(5)) // a reader's answer at seq 5
	for h.entered.Load() < 1 {
		runtime.Gosched()
	}
	if err := tier.Invalidate(ctx, 8, []string{"g"}); err != nil { // commit 8 touches g
		t.Fatal(err)
	}
	close(h.gate)
	for tier.Stats().FillsRefused < 1 {
		runtime.Gosched()
	}
	if e, ok := tier.Get(ctx, "k", "g"); ok {
		t.Fatalf("served the late fill of seq %d after the invalidation at 8", e.Seq)
	}

	publish(t, tier, 9)
	tier.SetAsync("k", "g", entryAt(9))
	waitFor(t, 10*time.Second, "the fill of seq 9", func() bool {
		e, ok := tier.Get(ctx, "k", "g")
		return ok && e.Seq == 9
	})
	// Redis stores the entry before the pipeline counts it.
	waitFor(t, 10*time.Second, "the fill counted", func() bool { return tier.Stats().Fills == 1 })
	if st := tier.Stats(); st.Fills != 1 || st.FillsRefused != 1 || st.FillsDropped != 0 {
		t.Fatalf("fills %d, refused %d, dropped %d; want 1, 1, 0", st.Fills, st.FillsRefused, st.FillsDropped)
	}
}

// TestSetAsyncAfterScriptFlush: a Redis that forgot the script (restart,
// SCRIPT FLUSH) still takes queued fills, with the script text.
func TestSetAsyncAfterScriptFlush(t *testing.T) {
	s := startRedis(t)
	tier := newTier(t, s, func(o *Options) { o.ProbeInterval = 2 * time.Minute })
	ctx := context.Background()
	publish(t, tier, 3)
	if err := s.Client().ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	tier.SetAsync("k", "g", entryAt(3))
	waitFor(t, 10*time.Second, "the fill after SCRIPT FLUSH", func() bool {
		_, ok := tier.Get(ctx, "k", "g")
		return ok
	})
	if !tier.Healthy() {
		t.Fatal("NOSCRIPT degraded the tier")
	}
}

// TestSetAsyncLargeEntries: large pages are batched by bytes, so a burst of
// them neither degrades the tier nor leaves bytes counted in the queue.
func TestSetAsyncLargeEntries(t *testing.T) {
	s := startRedis(t)
	// The test is about batching by bytes, not timeouts: a generous
	// CallTimeout keeps a loaded machine (the race detector, parallel
	// packages) from timing out a 1.5 MB pipeline and degrading the tier.
	tier := newTier(t, s, func(o *Options) {
		o.ProbeInterval = 2 * time.Minute
		o.CallTimeout = 5 * time.Second
	})
	ctx := context.Background()
	const n = 20
	publish(t, tier, 10+n)
	body := bytes.Repeat([]byte("x"), 300<<10)
	for i := range n {
		e := entryAt(uint64(10 + i))
		e.Body = body
		tier.SetAsync("big"+strconv.Itoa(i), "g"+strconv.Itoa(i), e)
	}
	waitFor(t, 20*time.Second, "every large fill", func() bool { return tier.Stats().Fills == n })
	if !tier.Healthy() || tier.Stats().Outages != 0 {
		t.Fatalf("healthy %v, outages %d after a burst of large fills", tier.Healthy(), tier.Stats().Outages)
	}
	waitFor(t, 5*time.Second, "the queue's byte count back to zero", func() bool { return tier.fillBytes.Load() == 0 })
	if e, ok := tier.Get(ctx, "big7", "g7"); !ok || len(e.Body) != len(body) {
		t.Fatalf("big7: hit %v, %d bytes", ok, len(e.Body))
	}
}

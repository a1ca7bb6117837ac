package redis

import (
	"context"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/utxo-cache/utxo-cache/cache"
)

// gateMGETs holds every MGET at a gate until it opens, and counts them.
type gateMGETs struct {
	gate  chan struct{}
	mgets atomic.Int64
}

func (h *gateMGETs) DialHook(next goredis.DialHook) goredis.DialHook { return next }
func (h *gateMGETs) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		if cmd.Name() == "mget" {
			h.mgets.Add(1)
			<-h.gate
		}
		return next(ctx, cmd)
	}
}
func (h *gateMGETs) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return next
}

// TestConcurrentGetsShareRoundTrips: Gets that arrive while the pipelines
// are busy go out together, one MGET for many, and each still gets its own
// entry judged against its own floor.
func TestConcurrentGetsShareRoundTrips(t *testing.T) {
	s := startRedis(t)
	tier := newTier(t, s, func(o *Options) { o.ProbeInterval = 2 * time.Minute })
	ctx := context.Background()
	const n = 300
	publish(t, tier, n+10)
	for i := range n {
		tier.Set(ctx, "k"+strconv.Itoa(i), "g"+strconv.Itoa(i), entryAt(uint64(i+10)))
	}
	// Guard g7's floor passes its entry: that Get must miss, whatever batch
	// it rides in.
	if err := tier.Invalidate(ctx, 1000, []string{"g7"}); err != nil {
		t.Fatal(err)
	}
	h := &gateMGETs{gate: make(chan struct{})}
	tier.rdb.AddHook(h)

	var wg sync.WaitGroup
	hits := make([]bool, n)
	seqs := make([]uint64, n)
	get := func(i int) {
		wg.Go(func() {
			e, ok := tier.Get(ctx, "k"+strconv.Itoa(i), "g"+strconv.Itoa(i))
			hits[i], seqs[i] = ok, e.Seq
		})
	}
	// One call at a time until every slot holds a lone MGET at the gate;
	// then the rest queue behind them.
	for i := range getPipelines {
		get(i)
		for h.mgets.Load() < int64(i+1) {
			runtime.Gosched()
		}
	}
	for i := getPipelines; i < n; i++ {
		get(i)
	}
	for tier.Stats().Coalesced < n-getPipelines {
		runtime.Gosched()
	}
	close(h.gate)
	wg.Wait()
	for i := range n {
		if want := i != 7; hits[i] != want || (want && seqs[i] != uint64(i+10)) {
			t.Fatalf("Get k%d: hit %v seq %d, want hit %v seq %d", i, hits[i], seqs[i], want, i+10)
		}
	}
	// getPipelines lone calls, then the queue in batches of up to
	// maxGetBatch (a pipeline may send one short batch as the queue drains).
	most := int64(getPipelines + (n-getPipelines+maxGetBatch-1)/maxGetBatch + getPipelines)
	if got := h.mgets.Load(); got > most {
		t.Fatalf("%d Gets took %d MGETs, want at most %d", n, got, most)
	}
	if st := tier.Stats(); st.StaleDiscards != 1 {
		t.Fatalf("stale discards %d, want 1 (g7)", st.StaleDiscards)
	}
}

// TestGetManyJudgesEachKey: a batch Get answers every key as a Get would,
// in one MGET: each entry against its own guard's floor, a key never set
// a miss.
func TestGetManyJudgesEachKey(t *testing.T) {
	s := startRedis(t)
	tier := newTier(t, s, func(o *Options) { o.ProbeInterval = 2 * time.Minute })
	ctx := context.Background()
	const n = 10
	publish(t, tier, 100)
	keys, guards := make([]string, n+1), make([]string, n+1)
	for i := range n + 1 {
		keys[i], guards[i] = "k"+strconv.Itoa(i), "g"+strconv.Itoa(i)
		if i < n { // the last key is never set
			tier.Set(ctx, keys[i], guards[i], entryAt(uint64(i+10)))
		}
	}
	if err := tier.Invalidate(ctx, 1000, []string{"g3"}); err != nil {
		t.Fatal(err)
	}
	h := &gateMGETs{gate: make(chan struct{})}
	close(h.gate)
	tier.rdb.AddHook(h)
	before := tier.Stats()
	out, hit := make([]cache.Entry, n+1), make([]bool, n+1)
	tier.GetMany(ctx, keys, guards, out, hit)
	for i := range n + 1 {
		if want := i != 3 && i != n; hit[i] != want || (want && out[i].Seq != uint64(i+10)) {
			t.Fatalf("GetMany %s: hit %v seq %d, want hit %v seq %d", keys[i], hit[i], out[i].Seq, want, i+10)
		}
	}
	if got := h.mgets.Load(); got != 1 {
		t.Fatalf("%d MGETs for one batch, want 1", got)
	}
	st := tier.Stats()
	if hits, misses := st.Hits-before.Hits, st.Misses-before.Misses; hits != n-1 || misses != 2 {
		t.Fatalf("counted %d hits and %d misses, want %d and 2", hits, misses, n-1)
	}
}

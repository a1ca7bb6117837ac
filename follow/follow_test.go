package follow

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Fixtures: mainnet 0..4 and the branch 3A-4A-5A on block 2.
func reorgFixtures(t *testing.T) (main, branch []*nodeBlock) {
	main = loadBlocks(t, "blk_0_to_4.dat.bz2", 0, 5)
	branch = chainOf(loadBlocks(t, "blk_3A.dat.bz2", 3, 1), loadBlocks(t, "blk_4A.dat.bz2", 4, 1), loadBlocks(t, "blk_5A.dat.bz2", 5, 1))
	return main, branch
}

// running is a follower started by start.
type running struct {
	cancel context.CancelFunc
	done   chan error
	reg    *prometheus.Registry
}

// start runs a follower of srvURL over st and w with fast test timings;
// adjust may change its options. The follower is stopped by cleanup.
func start(t *testing.T, srvURL string, st *disk.Store, w Writer, adjust func(*Options)) *running {
	t.Helper()
	r := &running{done: make(chan error, 1), reg: prometheus.NewRegistry()}
	opts := Options{
		URL:          srvURL,
		PollInterval: 5 * time.Millisecond,
		BackoffMin:   time.Millisecond,
		BackoffMax:   20 * time.Millisecond,
		HTTPTimeout:  5 * time.Second,
		Writer:       w,
		Hashes:       st,
		Metrics:      r.reg,
	}
	if adjust != nil {
		adjust(&opts)
	}
	f := New(opts)
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- f.Run(ctx) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// stop cancels the follower and waits for Run to return nil.
func (r *running) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	select {
	case err, ok := <-r.done:
		if ok && err != nil {
			t.Errorf("Run returned %v", err)
		}
		if ok {
			close(r.done)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return within 10 s of cancel")
	}
}

// metric returns the value of a counter or gauge, with labels as name=value
// pairs.
func (r *running) metric(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := r.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, lp := range m.GetLabel() {
					found = found || (lp.GetName() == labels[i] && lp.GetValue() == labels[i+1])
				}
				if !found {
					continue next
				}
			}
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s%v", name, labels)
	return 0
}

// waitFor polls cond until it holds or 20 s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func tipIs(st *disk.Store, b *nodeBlock) func() bool {
	return func() bool {
		tip := st.State().Tip
		return !tip.Empty && tip.Height == b.height && tip.Hash == b.hash()
	}
}

func wantSameState(t *testing.T, got, want disk.State) {
	t.Helper()
	if got.Tip != want.Tip || got.UtxoCount != want.UtxoCount || got.Digest != want.Digest {
		t.Fatalf("store at %s with %d UTXOs, digest %s;\nwant %s with %d UTXOs, digest %s",
			got.Tip, got.UtxoCount, got.Digest, want.Tip, want.UtxoCount, want.Digest)
	}
}

// wantApplies checks the follower's writer calls against want, written as
// "apply H" (applied) and "rollback H".
func wantCalls(t *testing.T, got []call, want []call) {
	t.Helper()
	same := len(got) == len(want)
	for i := 0; same && i < len(got); i++ {
		g, w := got[i], want[i]
		same = g.rollback == w.rollback && g.height == w.height && g.err == nil &&
			(g.rollback || (g.hash == w.hash && g.applied))
	}
	if !same {
		t.Fatalf("writer calls:\n got %v\nwant %v", got, want)
	}
}

func applies(blocks ...*nodeBlock) []call {
	out := make([]call, len(blocks))
	for i, b := range blocks {
		out[i] = call{height: b.height, hash: b.hash(), applied: true}
	}
	return out
}

// TestFollowReorg follows 0..4 from an empty store, then the node switches
// to the branch 3A-4A-5A (2 blocks out, 3 in). The store ends at 5A with the
// state of a fresh store fed 0,1,2,3A,4A,5A directly. Two ways in: the node
// jumps straight to 5A (found by 5A's parent not being our tip), or first
// shows 4A at our own height (found by its hash at our tip's height).
func TestFollowReorg(t *testing.T) {
	main, branch := reorgFixtures(t)
	final := chainOf(main[:3], branch)
	want := directState(t, final)
	for _, tc := range []struct {
		name  string
		steps [][]*nodeBlock // chains the node serves in turn, each waited for
	}{
		{"longer branch at once", [][]*nodeBlock{final}},
		{"same height first", [][]*nodeBlock{final[:5], final}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node, srv := newFakeNode(t, main)
			st, w := newStore(t, disk.Options{})
			f := start(t, srv.URL, st, w, nil)
			waitFor(t, "tip 4", tipIs(st, main[4]))
			for _, c := range tc.steps {
				node.setChain(c)
				waitFor(t, "the node's tip", tipIs(st, c[len(c)-1]))
			}
			f.stop(t)

			wantSameState(t, st.State(), want)
			wantCalls(t, w.history(), slices.Concat(applies(main...),
				[]call{{rollback: true, height: 2}}, applies(branch...)))
			if got := f.metric(t, "utxo_cache_follow_reorgs_total"); got != 1 {
				t.Errorf("reorgs_total %v, want 1", got)
			}
			if got := f.metric(t, "utxo_cache_follow_rolled_back_blocks_total"); got != 2 {
				t.Errorf("rolled_back_blocks_total %v, want 2", got)
			}
			if got := f.metric(t, "utxo_cache_follow_blocks_applied_total"); got != 8 {
				t.Errorf("blocks_applied_total %v, want 8", got)
			}
			if got := f.metric(t, "utxo_cache_follow_node_height"); got != 5 {
				t.Errorf("node_height %v, want 5", got)
			}
			if got := f.metric(t, "utxo_cache_follow_lag_blocks"); got != 0 {
				t.Errorf("lag_blocks %v, want 0", got)
			}
			if got := f.metric(t, "utxo_cache_follow_last_success_timestamp_seconds"); got < float64(time.Now().Add(-time.Minute).Unix()) {
				t.Errorf("last_success_timestamp %v", got)
			}
		})
	}
}

// TestFollowCatchUp follows 1,200 real blocks from an empty store in
// batches of at most 500: the blocks far below the node's tip go in catch-up
// windows, the last ones alone, and the store ends exactly where applying
// every block one by one does, with every height handed to the writer once,
// in order. The node then grows by one block, which is applied alone.
func TestFollowCatchUp(t *testing.T) {
	blocks := loadBlocks(t, "blk_0_to_14131.dat.bz2", 0, 1201)
	want := directState(t, blocks[:1200])
	node, srv := newFakeNode(t, blocks[:1200])
	st, w := newStore(t, disk.Options{})
	f := start(t, srv.URL, st, w, func(o *Options) { o.BatchBlocks = 500 })
	waitFor(t, "tip 1199", tipIs(st, blocks[1199]))
	wantSameState(t, st.State(), want)
	node.setChain(blocks)
	waitFor(t, "tip 1200", tipIs(st, blocks[1200]))
	f.stop(t)

	wantCalls(t, w.history(), applies(blocks...))
	var windows int
	for _, b := range w.batches {
		if b.Done > 500 {
			t.Errorf("a batch of %d blocks, want at most 500", b.Done)
		}
		windows += b.Windows
	}
	if windows == 0 {
		t.Error("no catch-up window: every block went alone")
	}
	if got := f.metric(t, "utxo_cache_follow_catchup_windows_total"); got != float64(windows) {
		t.Errorf("catchup_windows_total %v, want %d", got, windows)
	}
	if got := f.metric(t, "utxo_cache_follow_blocks_applied_total"); got != 1201 {
		t.Errorf("blocks_applied_total %v, want 1201", got)
	}
	if got := f.metric(t, "utxo_cache_follow_lag_blocks"); got != 0 {
		t.Errorf("lag_blocks %v, want 0", got)
	}
}

// TestFollowBatchBytes follows 300 real blocks with BatchBytes far below
// their total size: the fetch of a batch stops once its blocks, as the node
// serves them, reach BatchBytes, so a batch exceeds it by at most its last
// block, and the bound, not BatchBlocks, cuts the batches.
func TestFollowBatchBytes(t *testing.T) {
	const batchBytes = 16 << 10
	blocks := loadBlocks(t, "blk_0_to_14131.dat.bz2", 0, 300)
	want := directState(t, blocks)
	_, srv := newFakeNode(t, blocks)
	st, w := newStore(t, disk.Options{})
	f := start(t, srv.URL, st, w, func(o *Options) { o.BatchBytes = batchBytes })
	waitFor(t, "tip 299", tipIs(st, blocks[299]))
	f.stop(t)

	wantSameState(t, st.State(), want)
	wantCalls(t, w.history(), applies(blocks...))
	cut := 0
	for _, hs := range w.batchHeights {
		var size int
		for _, h := range hs[:len(hs)-1] {
			size += len(blocks[h].raw)
		}
		if size >= batchBytes {
			t.Errorf("a batch of heights %d..%d holds %d bytes before its last block, want under %d", hs[0], hs[len(hs)-1], size, batchBytes)
		}
		if size+len(blocks[hs[len(hs)-1]].raw) >= batchBytes {
			cut++
		}
	}
	if cut < 2 {
		t.Errorf("%d batches cut by BatchBytes in %d, want at least 2", cut, len(w.batchHeights))
	}
}

// TestFollowNodeBehind: a node that falls back to an earlier height of our
// own chain (restarted, reindexing) is waited for, not followed down.
func TestFollowNodeBehind(t *testing.T) {
	main, _ := reorgFixtures(t)
	node, srv := newFakeNode(t, main)
	st, w := newStore(t, disk.Options{})
	f := start(t, srv.URL, st, w, nil)
	waitFor(t, "tip 4", tipIs(st, main[4]))
	node.setChain(main[:3])
	n := node.requestCount()
	waitFor(t, "more polls", func() bool { return node.requestCount() > n+20 })
	node.setChain(main)
	f.stop(t)
	wantCalls(t, w.history(), applies(main...))
	if got := f.metric(t, "utxo_cache_follow_reorgs_total"); got != 0 {
		t.Errorf("reorgs_total %v", got)
	}
}

// TestFollowFaults follows 300 real blocks from a node that, for its first
// 800 requests, answers 503, drops connections, cuts block bodies short,
// serves the wrong block or broken JSON at random (seeded, logged), goes down
// altogether for a while (connection refused), and grows its chain
// meanwhile. The store ends exactly where a direct import does, and the
// writer saw every height once, in order: nothing skipped, nothing twice.
func TestFollowFaults(t *testing.T) {
	blocks := loadBlocks(t, "blk_0_to_14131.dat.bz2", 0, 301)
	want := directState(t, blocks)
	node, srv := newFakeNode(t, blocks[:120])

	const faulty = 800
	seed := uint64(time.Now().UnixNano())
	t.Logf("fault seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	schedule := make([]int, faulty)
	for i := range schedule {
		schedule[i] = rng.IntN(8) // 0..3 a fault, 4..7 a good answer
	}
	node.setFault(func(n int, w http.ResponseWriter, r *http.Request) bool {
		if n >= faulty {
			return false
		}
		isBlock := strings.HasPrefix(r.URL.Path, "/rest/block/")
		switch schedule[n] {
		case 0:
			http.Error(w, "Service temporarily unavailable", http.StatusServiceUnavailable)
			return true
		case 1:
			// Drop the connection without an answer. (On a reused
			// connection Go's transport retries such a GET by itself.)
			if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
				conn.Close()
			}
			return true
		case 2:
			if !isBlock {
				return false
			}
			// A body cut short: the connection dies mid-answer.
			b := blocks[n%len(blocks)]
			w.Header().Set("Content-Length", strconv.Itoa(len(b.raw)))
			w.Write(b.raw[:len(b.raw)/2])
			panic(http.ErrAbortHandler)
		case 3:
			if isBlock {
				w.Write(blocks[n%len(blocks)].raw) // another block than the one asked for
			} else {
				w.Write([]byte(`{"blocks": `))
			}
			return true
		}
		return false
	})
	st, w := newStore(t, disk.Options{})
	f := start(t, srv.URL, st, w, nil)
	waitFor(t, "tip 119", tipIs(st, blocks[119]))

	// The node goes away, and comes back at the same address with more blocks.
	addr := srv.Listener.Addr().String()
	srv.Close()
	refused := f.metric(t, "utxo_cache_follow_errors_total", "kind", KindNetwork)
	waitFor(t, "connection refused twice", func() bool {
		return f.metric(t, "utxo_cache_follow_errors_total", "kind", KindNetwork) >= refused+2
	})
	node.setChain(blocks)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv2 := &httptest.Server{Listener: ln, Config: &http.Server{Handler: node}}
	srv2.Start()
	t.Cleanup(srv2.Close)
	waitFor(t, "tip 300", tipIs(st, blocks[300]))
	f.stop(t)

	if node.requestCount() < faulty {
		t.Errorf("only %d requests: not every fault of the schedule was served", node.requestCount())
	}
	wantSameState(t, st.State(), want)
	wantCalls(t, w.history(), applies(blocks...))
	for _, kind := range []string{KindHTTP, KindNetwork, KindDecode} {
		if got := f.metric(t, "utxo_cache_follow_errors_total", "kind", kind); got == 0 {
			t.Errorf("seed %d: no %s errors counted", seed, kind)
		}
	}
	if got := f.metric(t, "utxo_cache_follow_errors_total", "kind", KindRejected); got != 0 {
		t.Errorf("%v blocks rejected", got)
	}
}

// TestFollowForkTooDeep: a reorganisation deeper than the follower may look
// back, or than the store can roll back, is reported and retried; the store
// stays at its tip and nothing of the other branch is applied.
func TestFollowForkTooDeep(t *testing.T) {
	main, branch := reorgFixtures(t)
	for _, tc := range []struct {
		name   string
		store  disk.Options
		adjust func(*Options)
	}{
		{"max reorg depth", disk.Options{}, func(o *Options) { o.MaxReorgDepth = 1 }},
		{"store rollback window", disk.Options{RollbackWindow: 1}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node, srv := newFakeNode(t, main)
			st, w := newStore(t, tc.store)
			f := start(t, srv.URL, st, w, tc.adjust)
			waitFor(t, "tip 4", tipIs(st, main[4]))
			node.setChain(chainOf(main[:3], branch))
			waitFor(t, "three fork_too_deep errors", func() bool {
				return f.metric(t, "utxo_cache_follow_errors_total", "kind", KindForkTooDeep) >= 3
			})
			f.stop(t)
			if !tipIs(st, main[4])() {
				t.Fatalf("tip moved to %s", st.State().Tip)
			}
			for _, c := range w.history()[len(main):] {
				if !c.rollback || !errors.Is(c.err, chain.ErrRollbackTooDeep) {
					t.Fatalf("after 0..4 the follower called %v", c)
				}
			}
		})
	}
}

// TestFollowWrongNetwork: a testnet node is refused before any block.
func TestFollowWrongNetwork(t *testing.T) {
	main, _ := reorgFixtures(t)
	node, srv := newFakeNode(t, main)
	node.mu.Lock()
	node.chainTag = "test"
	node.mu.Unlock()
	st, w := newStore(t, disk.Options{})
	f := start(t, srv.URL, st, w, nil)
	waitFor(t, "config errors", func() bool { return f.metric(t, "utxo_cache_follow_errors_total", "kind", KindConfig) >= 2 })
	f.stop(t)
	if len(w.history()) != 0 || !st.State().Tip.Empty {
		t.Fatalf("applied %v", w.history())
	}
}

// TestFollowStopsOnCancel cancels a follower that waits between polls and
// one blocked in a request the node does not answer: Run returns nil at
// once and leaves no goroutine behind.
func TestFollowStopsOnCancel(t *testing.T) {
	main, _ := reorgFixtures(t)
	before := goleak.IgnoreCurrent()
	for _, hang := range []bool{false, true} {
		t.Run(fmt.Sprintf("hang=%v", hang), func(t *testing.T) {
			node, srv := newFakeNode(t, main)
			st, w := newStore(t, disk.Options{})
			if hang {
				node.setFault(func(n int, w http.ResponseWriter, r *http.Request) bool {
					if n == 3 {
						<-r.Context().Done()
						return true
					}
					return false
				})
			}
			f := start(t, srv.URL, st, w, func(o *Options) { o.PollInterval = time.Hour })
			if hang {
				waitFor(t, "the hanging request", func() bool { return node.requestCount() > 3 })
			} else {
				waitFor(t, "tip 4", tipIs(st, main[4]))
			}
			began := time.Now()
			f.stop(t)
			if d := time.Since(began); d > time.Second {
				t.Errorf("Run took %s to return", d)
			}
		})
	}
	// The subtests' servers, writers and stores are closed by now.
	goleak.VerifyNone(t, before)
}

func TestOptions(t *testing.T) {
	st, w := newStore(t, disk.Options{})
	for _, o := range []Options{
		{URL: "", Writer: w, Hashes: st},
		{URL: "127.0.0.1:8332", Writer: w, Hashes: st},
		{URL: "http://127.0.0.1:8332"},
		{URL: "http://127.0.0.1:8332", Writer: w, Hashes: st, Network: "litecoin"},
	} {
		if err := New(o).Run(context.Background()); err == nil {
			t.Errorf("Run with %+v: no error", o)
		}
	}
	o := Options{}.EnsureDefaults()
	if o.PollInterval != 2*time.Second || o.BackoffMin != 500*time.Millisecond || o.BackoffMax != 30*time.Second ||
		o.HTTPTimeout != 30*time.Second || o.MaxReorgDepth != 4320 || o.Network != "mainnet" {
		t.Errorf("defaults %+v", o)
	}
}

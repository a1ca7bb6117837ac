package replication

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/changeset"
	"github.com/utxo-cache/utxo-cache/internal/model"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
	"github.com/utxo-cache/utxo-cache/writer"
)

// catchUpStoreOptions are the writer's and the replicas' store options: a
// change log that keeps every change of the test.
var catchUpStoreOptions = disk.Options{PruneDepth: 3, RollbackWindow: 6, LogRetention: 100_000}

// catchUpWriter is a writer fed a random chain, with the states it
// published by seq, serving its change log as the writer's API does
// (GET /v1/replication/changes: a CBOR sequence of at most maxBytes, with
// X-Commit-Seq and X-Tip-Height of the state it was read at). tamper, when
// set, may change a decoded change before it is served again.
type catchUpWriter struct {
	t     testing.TB
	store *disk.Store
	w     *writer.Writer
	src   *Source
	m     *model.Model
	g     *model.Gen
	hist  map[uint64]disk.State
	srv   *httptest.Server

	maxBytes int
	mu       sync.Mutex
	tamper   func(c *chain.Change) // under mu
}

func newCatchUpWriter(t testing.TB, seed uint64, gen model.GenOptions) *catchUpWriter {
	t.Helper()
	dir := t.TempDir()
	s, err := disk.Open(filepath.Join(dir, "store"), catchUpStoreOptions)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	cw := &catchUpWriter{t: t, store: s, w: writer.New(s, writer.Options{}),
		m: model.New(catchUpStoreOptions.PruneDepth, catchUpStoreOptions.RollbackWindow), g: model.NewGen(seed, gen),
		hist: map[uint64]disk.State{0: s.Published()}, maxBytes: 64 << 10}
	t.Cleanup(func() { _ = cw.w.Close() })
	cw.src = NewSource(s, cw.w, filepath.Join(dir, "staging"), 1)
	cw.srv = httptest.NewServer(http.HandlerFunc(cw.serveChanges))
	t.Cleanup(cw.srv.Close)
	return cw
}

func (cw *catchUpWriter) serveChanges(rw http.ResponseWriter, r *http.Request) {
	after, err := strconv.ParseUint(r.URL.Query().Get("after"), 10, 64)
	if err != nil {
		http.Error(rw, err.Error(), http.StatusBadRequest)
		return
	}
	data, _, seq, tip, err := cw.src.Changes(after, cw.maxBytes)
	switch {
	case errors.Is(err, ErrLogTruncated):
		http.Error(rw, err.Error(), http.StatusGone)
		return
	case err != nil:
		http.Error(rw, err.Error(), http.StatusInternalServerError)
		return
	}
	cw.mu.Lock()
	tamper := cw.tamper
	cw.mu.Unlock()
	if tamper != nil {
		var out []byte
		for rest := data; len(rest) > 0; {
			var c *chain.Change
			if c, rest, err = chain.DecodeChangeCBOR(rest, chain.Limits{}); err != nil {
				http.Error(rw, err.Error(), http.StatusInternalServerError)
				return
			}
			tamper(c)
			if out, err = chain.AppendChangeCBOR(out, c); err != nil {
				http.Error(rw, err.Error(), http.StatusInternalServerError)
				return
			}
		}
		data = out
	}
	rw.Header().Set("X-Commit-Seq", strconv.FormatUint(seq, 10))
	if !tip.Empty {
		rw.Header().Set("X-Tip-Height", strconv.FormatUint(tip.Height, 10))
	}
	_, _ = rw.Write(data)
}

// steps feeds the writer n blocks, with a rollback of one to three blocks
// now and then, and records each published state.
func (cw *catchUpWriter) steps(n int) {
	cw.t.Helper()
	ctx := context.Background()
	for i := 0; i < n; i++ {
		tip := cw.m.Tip()
		if !tip.Empty && tip.Height > 3 && cw.g.Rand().IntN(20) == 0 {
			target := tip.Height - 1 - uint64(cw.g.Rand().IntN(3))
			if cw.m.CheckRollback(target) == nil {
				if err := cw.m.Rollback(target); err != nil {
					cw.t.Fatal(err)
				}
				if _, err := cw.w.Rollback(ctx, target); err != nil {
					cw.t.Fatalf("rollback to %d: %v", target, err)
				}
				cw.record()
				continue
			}
		}
		b := cw.g.Block(cw.m)
		if _, err := cw.m.Apply(b, false); err != nil {
			cw.t.Fatal(err)
		}
		if _, err := cw.w.Apply(ctx, b); err != nil {
			cw.t.Fatalf("block %d: %v", b.Height, err)
		}
		cw.record()
	}
}

func (cw *catchUpWriter) record() {
	st := cw.store.Published()
	cw.hist[st.Seq] = st
}

// catchUpReplica is a replica store, its writer and follower. Every state
// it publishes is checked (AfterPublish, on its writer goroutine): the
// change must have been verified, and the state must be the writer's at
// that seq.
type catchUpReplica struct {
	t     testing.TB
	cw    *catchUpWriter
	store *disk.Store
	w     *writer.Writer
	f     *Tail
	m     *TailMetrics
	reg   *prometheus.Registry // m's

	mu        sync.Mutex
	first     uint64          // the store's seq when it was opened
	verified  map[uint64]bool // seqs whose change passed Verify
	published []uint64
	bad       []string // published states that were not the writer's, or unverified
	// onPublish, when set, hears of each published seq (under mu).
	onPublish func(seq uint64)
}

// liveMargin is the follower's TailOptions.LiveMargin (0: the default).
func newCatchUpReplica(t testing.TB, cw *catchUpWriter, dir string, liveMargin uint64) *catchUpReplica {
	t.Helper()
	s, err := disk.Open(dir, catchUpStoreOptions)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	reg := prometheus.NewRegistry()
	rp := &catchUpReplica{t: t, cw: cw, store: s, reg: reg, m: NewTailMetrics(reg), first: s.Published().Seq, verified: map[uint64]bool{}}
	rp.w = writer.New(s, writer.Options{SkipUnknownInputs: true, Verify: func(st disk.State) error {
		err := rp.f.Verify(st)
		if err == nil {
			rp.mu.Lock()
			rp.verified[st.Seq] = true
			rp.mu.Unlock()
		}
		return err
	}})
	t.Cleanup(func() { _ = rp.w.Close() })
	rp.w.Subscribe(rp)
	if rp.f, err = NewTail(s, rp.w, TailOptions{URL: cw.srv.URL, Token: "t", Metrics: rp.m, LiveMargin: liveMargin}); err != nil {
		t.Fatal(err)
	}
	return rp
}

func (rp *catchUpReplica) Changed(*changeset.Set) {}

// metric returns the value of the replica's metric name (a counter or
// gauge), or a histogram's count.
func (rp *catchUpReplica) metric(name string) float64 {
	rp.t.Helper()
	mfs, err := rp.reg.Gather()
	if err != nil {
		rp.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		m := mf.GetMetric()[0]
		switch {
		case m.GetCounter() != nil:
			return m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			return m.GetGauge().GetValue()
		case m.GetHistogram() != nil:
			return float64(m.GetHistogram().GetSampleCount())
		}
	}
	rp.t.Fatalf("no metric %s", name)
	return 0
}

func (rp *catchUpReplica) AfterPublish(cs *changeset.Set) {
	st := rp.store.Published()
	rp.mu.Lock()
	defer rp.mu.Unlock()
	rp.published = append(rp.published, st.Seq)
	if rp.onPublish != nil {
		rp.onPublish(st.Seq)
	}
	want, ok := rp.cw.hist[st.Seq]
	switch {
	case !rp.verified[st.Seq]:
		rp.bad = append(rp.bad, fmt.Sprintf("seq %d published unverified", st.Seq))
	case !ok || want.Tip != st.Tip || want.UtxoCount != st.UtxoCount || want.Digest != st.Digest:
		rp.bad = append(rp.bad, fmt.Sprintf("seq %d published at %s %d %s, writer %s %d %s", st.Seq, st.Tip, st.UtxoCount, st.Digest, want.Tip, want.UtxoCount, want.Digest))
	}
}

// catchUp polls until the replica is at the writer's seq.
func (rp *catchUpReplica) catchUp() {
	rp.t.Helper()
	want := rp.cw.store.Published()
	for polls := 0; rp.store.Published().Seq < want.Seq; polls++ {
		if polls > 10_000 {
			rp.t.Fatalf("replica at seq %d after %d polls, writer at %d", rp.store.Published().Seq, polls, want.Seq)
		}
		if err := rp.f.poll(context.Background()); err != nil {
			rp.t.Fatalf("poll at seq %d: %v", rp.store.Published().Seq, err)
		}
	}
	got := rp.store.Published()
	if got.Seq != want.Seq || got.Tip != want.Tip || got.UtxoCount != want.UtxoCount || got.Digest != want.Digest {
		rp.t.Fatalf("replica at seq %d %s %d %s, writer at seq %d %s %d %s", got.Seq, got.Tip, got.UtxoCount, got.Digest,
			want.Seq, want.Tip, want.UtxoCount, want.Digest)
	}
	rp.check(want.Seq)
}

// check asserts that every published state was verified and the writer's,
// and that every change from the replica's first seq to seq passed Verify.
func (rp *catchUpReplica) check(seq uint64) {
	rp.t.Helper()
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if len(rp.bad) > 0 {
		rp.t.Fatalf("%d bad publishes, first: %s", len(rp.bad), rp.bad[0])
	}
	for s := rp.first + 1; s <= seq; s++ {
		if !rp.verified[s] {
			rp.t.Fatalf("change %d was never verified", s)
		}
	}
}

// TestReplicaCatchUpWindows: a replica bootstrapped early (the empty store)
// while the writer took 320 changes of a random chain with rollbacks
// catches up in windows: it ends at the writer's seq with its tip, count and
// digest, every change passed Verify before it was published, and every
// published state is the writer's at its seq. Then it keeps up with a few
// more blocks one at a time, as a live replica.
func TestReplicaCatchUpWindows(t *testing.T) {
	cw := newCatchUpWriter(t, 31, model.GenOptions{})
	rp := newCatchUpReplica(t, cw, filepath.Join(t.TempDir(), "replica"), 0)
	cw.steps(320)
	rp.catchUp()
	windows, blocks := rp.metric("utxo_cache_replica_catch_up_windows_total"), rp.metric("utxo_cache_replica_catch_up_blocks_total")
	if windows == 0 || blocks < 200 {
		t.Fatalf("caught up %d changes with %v windows of %v blocks in all: want windows", cw.store.Published().Seq, windows, blocks)
	}
	if got := len(rp.published); got >= int(cw.store.Published().Seq) {
		t.Fatalf("%d publishes for %d changes: windows publish once", got, cw.store.Published().Seq)
	}
	if got, want := rp.metric("utxo_cache_replica_apply_seconds"), float64(cw.store.Published().Seq); got != want {
		t.Fatalf("apply seconds observed %v changes, want %v", got, want)
	}
	if got, want := rp.metric("utxo_cache_replica_applied_seq"), float64(cw.store.Published().Seq); got != want {
		t.Fatalf("applied seq metric %v, want %v", got, want)
	}

	// Live: a block at a time is within the live margin, never a window.
	for range 5 {
		cw.steps(1)
		rp.catchUp()
	}
	if got := rp.metric("utxo_cache_replica_catch_up_windows_total"); got != windows {
		t.Fatalf("live changes went in windows: %v windows, %v before", got, windows)
	}
}

// TestReplicaCatchUpTampered: a change in the middle of a catch-up run whose
// after digest is not the one its block leaves (the log the replica reads,
// tampered with on the way) is found: Run stops with ErrDiverged, the
// replica never published a state at or beyond the bad change, its writer
// takes no more changes, and the changes before it are applied, verified and
// published. A new store from a checkpoint of the writer (what a replica
// does after a divergence) then catches up in windows.
func TestReplicaCatchUpTampered(t *testing.T) {
	cw := newCatchUpWriter(t, 47, model.GenOptions{})
	rp := newCatchUpReplica(t, cw, filepath.Join(t.TempDir(), "replica"), 0)
	cw.steps(200)
	rp.catchUp() // the first 200 in windows

	cw.steps(150)
	// The bad change: a block change in the middle of the run, far below
	// the writer's tip, with block changes on both sides.
	final := cw.store.Published()
	var bad uint64
	for s := rp.store.Published().Seq + 60; s < final.Seq; s++ {
		if cw.hist[s-1].Tip.Height+1 == cw.hist[s].Tip.Height && cw.hist[s].Tip.Height+1 == cw.hist[s+1].Tip.Height &&
			cw.hist[s].Tip.Height+20 < final.Tip.Height {
			bad = s
			break
		}
	}
	if bad == 0 {
		t.Fatal("no block change to tamper with")
	}
	cw.mu.Lock()
	cw.tamper = func(c *chain.Change) {
		if c.Seq == bad {
			c.After.Digest.AddTerm(chain.UtxoTerm(&chain.Utxo{Output: chain.Output{Address: "mallory", Value: 1}}))
		}
	}
	cw.mu.Unlock()
	windows := rp.metric("utxo_cache_replica_catch_up_windows_total")
	// Should the bad change go through, Run ends when the replica reaches
	// the writer's seq, and the checks below fail.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rp.mu.Lock()
	rp.onPublish = func(seq uint64) {
		if seq >= final.Seq {
			cancel()
		}
	}
	rp.mu.Unlock()
	err := rp.f.Run(ctx)
	if !errors.Is(err, ErrDiverged) || errors.Is(err, ErrNotWritersState) {
		t.Fatalf("Run with change %d tampered with: %v, want ErrDiverged", bad, err)
	}
	if st := rp.f.Status(); !errors.Is(st.Failed, ErrDiverged) {
		t.Fatalf("status after the divergence: %+v", st)
	}
	if got := rp.metric("utxo_cache_replica_divergences_total"); got != 1 {
		t.Fatalf("%v divergences counted", got)
	}
	if got := rp.store.Published(); got.Seq != bad-1 || got.Digest != cw.hist[bad-1].Digest {
		t.Fatalf("replica published seq %d %s after the bad change %d, want the writer's state %d %s", got.Seq, got.Digest, bad, bad-1, cw.hist[bad-1].Digest)
	}
	if rp.w.Failed() == nil {
		t.Fatal("the replica's writer takes changes after a divergence")
	}
	rp.mu.Lock()
	for _, s := range rp.published {
		if s >= bad {
			t.Errorf("the replica published seq %d, at or beyond the bad change %d", s, bad)
		}
	}
	rp.mu.Unlock()
	rp.check(bad - 1)
	if got := rp.metric("utxo_cache_replica_catch_up_windows_total"); got <= windows {
		t.Fatalf("%v windows before the bad change, %v before the run: the test needs windows on the way", got, windows)
	}

	// Recovery: a checkpoint of the writer, installed, and the log after it.
	cw.mu.Lock()
	cw.tamper = nil
	cw.mu.Unlock()
	cp, err := cw.src.Checkpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := cp.Stream(&buf); err != nil {
		t.Fatal(err)
	}
	_ = cp.Close()
	dir := filepath.Join(t.TempDir(), "replica2")
	if _, err := Install(&buf, dir, &cp.Manifest, 1<<30, catchUpStoreOptions, nil); err != nil {
		t.Fatal(err)
	}
	cw.steps(120)
	rp2 := newCatchUpReplica(t, cw, dir, 0)
	rp2.catchUp()
	if rp2.metric("utxo_cache_replica_catch_up_windows_total") == 0 {
		t.Fatal("the recovered replica caught up without windows")
	}
}

// BenchmarkReplicaCatchUp: an empty replica catches up with a writer
// -catchup-blocks changes ahead (blocks of up to 100 transactions over 2,000
// addresses, rollbacks now and then), in windows (the follower's default)
// and one change at a time (a live margin above every block: the follower
// before catch-up windows). Stores on the temporary directory's file system,
// synced commits. Reports blocks/s and the process CPU time per block.
func BenchmarkReplicaCatchUp(b *testing.B) {
	cw := newCatchUpWriter(b, 7, model.GenOptions{Addresses: 2000, MaxTxs: 100})
	cw.maxBytes = 4 << 20 // the writer API's bound
	cw.steps(*catchUpBlocks)
	for _, mode := range []struct {
		name   string
		margin uint64
	}{{"windows", 0}, {"one-by-one", 1 << 62}} {
		b.Run(mode.name, func(b *testing.B) {
			var cpu time.Duration
			for i := 0; b.Loop(); i++ {
				b.StopTimer()
				rp := newCatchUpReplica(b, cw, filepath.Join(b.TempDir(), fmt.Sprint("replica", i)), mode.margin)
				before := cpuTime(b)
				b.StartTimer()
				rp.catchUp()
				b.StopTimer()
				cpu += cpuTime(b) - before
				_ = rp.w.Close()
				_ = rp.store.Close()
				b.StartTimer()
			}
			n := float64(b.N) * float64(cw.store.Published().Seq)
			b.ReportMetric(n/b.Elapsed().Seconds(), "changes/s")
			b.ReportMetric(float64(cpu.Microseconds())/n, "cpu-µs/change")
		})
	}
}

var catchUpBlocks = flag.Int("catchup-blocks", 1000, "changes the writer is ahead in BenchmarkReplicaCatchUp")

// cpuTime is the process's user and system CPU time so far.
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

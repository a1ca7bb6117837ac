package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/internal/testredis"
)

// The replica tests run a writer and two read replicas as an operator would
// (`serve --replication-token` and `serve --replica-of`, real binaries on
// loopback, one replica sharing the writer's real redis-server), feed the
// writer the e2e tests' generated chain (blocks, rollbacks, re-posts, bad
// blocks), and after every few steps wait for each replica to reach the
// writer's seq (a read with min_seq) and compare every read on it with the
// model at that seq. Meanwhile they break things: a replica stopped while the
// writer moves past its change-log retention (410: it must bootstrap again by
// itself), replicas killed with SIGKILL while they apply and while they
// bootstrap, the writer stopped and restarted, replica stores tampered with
// offline (the replica must find the divergence and recover). One reader per
// replica polls GET /v1/tip all along, through restarts: its X-Commit-Seq
// never decreases, and every state it is shown is the writer's state at that
// seq.

const (
	replToken     = "repl-token"
	replRetention = 8 // the writer's --replication-retention, in changes
	// replDeadline bounds every wait for a condition (a replica catching
	// up, a metric rising): far above what it takes, so that only a real
	// hang fails.
	replDeadline = 45 * time.Second
)

// replicaTest is a writer, its replicas and the model of the chain fed to it.
type replicaTest struct {
	t        *testing.T
	r        *e2eRun // r.p is the writer
	wdir     string
	wextra   []string
	faults   *rand.Rand // fault timing; apart from the chain's generator
	hist     map[uint64]e2eState
	replicas []*testReplica
}

// testReplica is one replica: its data directory survives its processes.
type testReplica struct {
	name  string
	dir   string
	extra []string
	p     *serveProc // the current process
	watch *seqWatch
}

// sample is a quick check of the writer's reads (every balance, one page of
// each address, every outpoint): it also fills the shared Redis tier.
func (rt *replicaTest) sample() { rt.r.checkOn(e2eNode{p: rt.r.p, firstPages: true}) }

// record notes the writer's state at the model's seq (after every change).
func (rt *replicaTest) record() {
	m := rt.r.m
	rt.hist[rt.r.seq] = e2eState{Tip: tipOf(m.Tip()), UtxoCount: m.Count(), UtxoDigest: m.Digest().String()}
}

// steps takes n random steps on the writer.
func (rt *replicaTest) steps(n int) {
	for range n {
		rt.r.randomStep()
		rt.record()
	}
}

// blocks applies n valid blocks on the writer: n changes.
func (rt *replicaTest) blocks(n int) {
	for range n {
		rt.r.step++
		rt.r.kinds["block"]++
		rt.r.applyBlock()
		rt.record()
	}
}

func (rt *replicaTest) startWriter(extra ...string) {
	rt.r.p = startServe(rt.t, rt.wdir, append(append([]string(nil), rt.wextra...), extra...)...)
}

// launch starts a process of rp on a free port (its reader follows it) and
// returns once it printed its address: it may still be bootstrapping.
func (rt *replicaTest) launch(rp *testReplica) {
	rt.t.Helper()
	args := append([]string{"serve", "--replica-of", rt.r.p.base, "--replication-token", replToken,
		"--data-dir", rp.dir, "--listen", "127.0.0.1:0", "--shutdown-timeout", e2eShutdownTimeout.String(),
		"--log-level", "info"}, rp.extra...)
	rp.p = launchServe(rt.t, args)
	rp.watch.follow(rp.p.base)
}

func (rt *replicaTest) start(rp *testReplica) {
	rt.t.Helper()
	rt.launch(rp)
	rp.p.waitReady(time.Now().Add(replDeadline))
}

// kill sends SIGKILL to rp and waits for the process to go.
func (rt *replicaTest) kill(rp *testReplica) {
	rt.t.Helper()
	_ = rp.p.cmd.Process.Kill()
	<-rp.p.exited
}

// converge waits until rp answers a read with min_seq = the writer's seq,
// which must then be answered at exactly that seq (the writer is idle).
func (rt *replicaTest) converge(rp *testReplica) {
	rt.t.Helper()
	path := fmt.Sprintf("/v1/tip?min_seq=%d&wait=1", rt.r.seq)
	deadline := time.Now().Add(replDeadline)
	for {
		res, err := rp.p.try(http.MethodGet, path)
		if err == nil && res.code == http.StatusOK {
			if got := res.hdr.Get("X-Commit-Seq"); got != strconv.FormatUint(rt.r.seq, 10) {
				rt.t.Fatalf("%s: %s answered at X-Commit-Seq %s, want %d", rp.name, path, got, rt.r.seq)
			}
			return
		}
		if err == nil && res.code != http.StatusServiceUnavailable {
			rt.t.Fatalf("%s: %s: %s", rp.name, path, res)
		}
		select {
		case <-rp.p.exited:
			rt.t.Fatalf("%s exited: %v", rp.name, rp.p.err)
		default:
		}
		if time.Now().After(deadline) {
			rt.t.Fatalf("%s did not reach seq %d within %v: %v %v", rp.name, rt.r.seq, replDeadline, res, err)
		}
		if err != nil {
			time.Sleep(10 * time.Millisecond) // not up: min_seq's own wait does not apply
		}
	}
}

// waitLog waits until rp's output holds s.
func (rt *replicaTest) waitLog(rp *testReplica, s string) {
	rt.t.Helper()
	deadline := time.Now().Add(replDeadline)
	for !strings.Contains(rp.p.stderr.String(), s) {
		select {
		case <-rp.p.exited:
			rt.t.Fatalf("%s exited: %v", rp.name, rp.p.err)
		default:
		}
		if time.Now().After(deadline) {
			rt.t.Fatalf("%s did not log %q within %v", rp.name, s, replDeadline)
		}
		time.Sleep(time.Millisecond)
	}
}

// waitSeq polls GET /v1/tip on rp (503 while it bootstraps) until it
// answers at a seq of at least min, and returns that seq.
func (rt *replicaTest) waitSeq(rp *testReplica, min uint64) uint64 {
	rt.t.Helper()
	deadline := time.Now().Add(replDeadline)
	for {
		res, err := rp.p.try(http.MethodGet, "/v1/tip")
		if err != nil || res.code != http.StatusOK && res.code != http.StatusServiceUnavailable {
			rt.t.Fatalf("%s: GET /v1/tip: %v %v", rp.name, res, err)
		}
		if res.code == http.StatusOK {
			seq, err := strconv.ParseUint(res.hdr.Get("X-Commit-Seq"), 10, 64)
			if err != nil {
				rt.t.Fatalf("%s: GET /v1/tip: X-Commit-Seq %q", rp.name, res.hdr.Get("X-Commit-Seq"))
			}
			if seq >= min {
				return seq
			}
		}
		if time.Now().After(deadline) {
			rt.t.Fatalf("%s did not answer at seq %d within %v: %v", rp.name, min, replDeadline, res)
		}
		time.Sleep(time.Millisecond)
	}
}

// converged waits for every running replica to reach the writer's seq and
// compares its reads with the model: all of them when full, else a sample
// (every balance, one page of each address, every outpoint).
func (rt *replicaTest) converged(full bool) {
	rt.t.Helper()
	for _, rp := range rt.replicas {
		if rp.p == nil {
			continue
		}
		select {
		case <-rp.p.exited:
			continue // stopped on purpose
		default:
		}
		rt.converge(rp)
		rt.r.checkOn(e2eNode{p: rp.p, replica: true, firstPages: !full})
		rp.watch.failIfViolated(rt.t)
	}
}

// try sends a request and returns the answer, or the transport error,
// without judging it.
func (p *serveProc) try(method, path string) (httpResult, error) {
	req, err := http.NewRequest(method, p.base+path, nil)
	if err != nil {
		return httpResult{}, err
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return httpResult{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return httpResult{code: resp.StatusCode, hdr: resp.Header, body: b}, err
}

// metric reads an unlabelled sample from /metrics (0 when absent).
func (p *serveProc) metric(name string) float64 {
	p.t.Helper()
	res, err := p.try(http.MethodGet, "/metrics")
	if err != nil || res.code != 200 {
		p.t.Fatalf("GET /metrics: %v %v", res, err)
	}
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindSubmatch(res.body)
	if m == nil {
		return 0
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		p.t.Fatalf("metric %s: %q", name, m[1])
	}
	return v
}

// waitMetric polls name on p until it reaches at least want.
func (p *serveProc) waitMetric(name string, want float64) {
	p.t.Helper()
	deadline := time.Now().Add(replDeadline)
	for p.metric(name) < want {
		if time.Now().After(deadline) {
			p.t.Fatalf("%s on %s stayed below %v for %v", name, p.base, want, replDeadline)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// currentStore is the directory of rp's active store (named in CURRENT).
func (rp *testReplica) currentStore(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(rp.dir, "CURRENT"))
	if err != nil {
		t.Fatalf("%s: %v", rp.name, err)
	}
	return filepath.Join(rp.dir, strings.TrimSpace(string(raw)))
}

// seqWatch is one reader of a replica: it polls GET /v1/tip on whichever
// process of the replica runs, tolerating connection errors while none
// does, and checks what it is shown: X-Commit-Seq never decreases, the body
// and the replication member agree with it, and one seq always shows one
// state (compared with the writer's history at the end). While exempt (a
// store tampered with offline, whose states are not the writer's) states are
// not collected; monotonicity is checked all the same.
type seqWatch struct {
	name   string
	client *http.Client
	base   atomic.Pointer[string]
	exempt atomic.Bool
	stop   chan struct{}
	done   chan struct{}

	mu struct {
		sync.Mutex
		last                  uint64
		seen                  map[uint64]e2eState
		violations            []string
		ok, unavailable, down int
	}
}

func newSeqWatch(t *testing.T, name string) *seqWatch {
	return newSeqWatchClient(t, name, &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 1}})
}

// newSeqWatchClient is newSeqWatch polling through client (which it
// closes the idle connections of when done).
func newSeqWatchClient(t *testing.T, name string, client *http.Client) *seqWatch {
	w := &seqWatch{name: name, client: client, stop: make(chan struct{}), done: make(chan struct{})}
	w.mu.seen = map[uint64]e2eState{}
	go w.run()
	t.Cleanup(w.close)
	return w
}

func (w *seqWatch) follow(base string) { w.base.Store(&base) }

func (w *seqWatch) close() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}

func (w *seqWatch) violate(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.mu.violations = append(w.mu.violations, fmt.Sprintf(format, args...))
}

func (w *seqWatch) run() {
	defer close(w.done)
	client := w.client
	defer client.CloseIdleConnections()
	pause := time.NewTicker(10 * time.Millisecond) // pacing, so the replicas are not starved on two cores
	defer pause.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-pause.C:
		}
		base := w.base.Load()
		if base == nil {
			continue
		}
		exempt := w.exempt.Load()
		resp, err := client.Get(*base + "/v1/tip")
		if err != nil {
			w.mu.Lock()
			w.mu.down++
			w.mu.Unlock()
			continue
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			w.mu.Lock()
			w.mu.down++
			w.mu.Unlock()
			continue
		}
		w.observe(resp.StatusCode, resp.Header, body, exempt || w.exempt.Load())
	}
}

func (w *seqWatch) observe(code int, hdr http.Header, body []byte, exempt bool) {
	switch code {
	case http.StatusOK:
	case http.StatusServiceUnavailable:
		// Only a replica with no verified store yet answers a plain read
		// 503; it says so, with no state.
		var e struct {
			Tip   *e2eTip `json:"tip"`
			Error struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(body, &e); err != nil || e.Tip != nil || e.Error.Code != "unavailable" || hdr.Get("X-Commit-Seq") != "" {
			w.violate("GET /v1/tip: 503 %s (X-Commit-Seq %q)", body, hdr.Get("X-Commit-Seq"))
		}
		w.mu.Lock()
		w.mu.unavailable++
		w.mu.Unlock()
		return
	default:
		w.violate("GET /v1/tip: %d %s", code, body)
		return
	}
	seq, err := strconv.ParseUint(hdr.Get("X-Commit-Seq"), 10, 64)
	if err != nil {
		w.violate("GET /v1/tip: X-Commit-Seq %q", hdr.Get("X-Commit-Seq"))
		return
	}
	var st struct {
		e2eState
		Replication e2eReplication `json:"replication"`
	}
	d := json.NewDecoder(bytes.NewReader(body))
	d.DisallowUnknownFields()
	if err := d.Decode(&st); err != nil {
		w.violate("GET /v1/tip: %v: %s", err, body)
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.mu.ok++
	if seq < w.mu.last {
		w.mu.violations = append(w.mu.violations, fmt.Sprintf("X-Commit-Seq went back from %d to %d (%s)", w.mu.last, seq, body))
	}
	w.mu.last = max(w.mu.last, seq)
	if st.Replication.Seq < seq || st.Replication.WriterSeq < st.Replication.Seq {
		w.mu.violations = append(w.mu.violations, fmt.Sprintf("answer at seq %d with replication %s", seq, jsonOf(st.Replication)))
	}
	if exempt {
		return
	}
	if prev, ok := w.mu.seen[seq]; ok && jsonOf(prev) != jsonOf(st.e2eState) {
		w.mu.violations = append(w.mu.violations, fmt.Sprintf("seq %d shown as %s and as %s", seq, jsonOf(prev), jsonOf(st.e2eState)))
	}
	w.mu.seen[seq] = st.e2eState
}

func (w *seqWatch) failIfViolated(t *testing.T) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.mu.violations) > 0 {
		t.Fatalf("reader of %s:\n%s", w.name, strings.Join(w.mu.violations, "\n"))
	}
}

// checkHistory compares every state the reader was shown with the writer's
// state at that seq.
func (w *seqWatch) checkHistory(t *testing.T, hist map[uint64]e2eState) {
	t.Helper()
	w.failIfViolated(t)
	w.mu.Lock()
	defer w.mu.Unlock()
	for seq, st := range w.mu.seen {
		want, ok := hist[seq]
		if !ok || jsonOf(want) != jsonOf(st) {
			t.Fatalf("reader of %s was shown %s at seq %d; the writer had %s", w.name, jsonOf(st), seq, jsonOf(want))
		}
	}
	t.Logf("reader of %s: %d answers at %d distinct seqs (up to %d), %d 503 bootstrapping, %d while down",
		w.name, w.mu.ok, len(w.mu.seen), w.mu.last, w.mu.unavailable, w.mu.down)
	if w.mu.ok == 0 {
		t.Fatalf("reader of %s never got an answer", w.name)
	}
}

// tamperWithBlock stops nothing: rp must be stopped. It applies to rp's store
// an empty block extending its tip with a hash the writer never had.
func (rt *replicaTest) tamperWithBlock(rp *testReplica) {
	rt.t.Helper()
	tip := rt.r.m.Tip()
	b := &chain.Block{Height: tip.Height + 1, Hash: rt.r.gen.Hash(), PrevHash: tip.Hash, Txs: []chain.Tx{}}
	if tip.Empty {
		b.Height, b.PrevHash = 0, chain.Hash{}
	}
	file := filepath.Join(rt.t.TempDir(), "tamper.jsonl")
	if err := os.WriteFile(file, append(chain.AppendBlockJSON(nil, b), '\n'), 0o644); err != nil {
		rt.t.Fatal(err)
	}
	mustCLI(rt.t, "ingest", "--data-dir", rp.currentStore(rt.t), file)
}

// tamperWithRollback rolls rp's store (stopped) back by one block.
func (rt *replicaTest) tamperWithRollback(rp *testReplica) {
	rt.t.Helper()
	tip := rt.r.m.Tip()
	if tip.Empty || tip.Height == 0 || rt.r.m.CheckRollback(tip.Height-1) != nil {
		rt.t.Fatalf("tamperWithRollback at tip %s: %v", tip, rt.r.m.CheckRollback(tip.Height-1))
	}
	mustCLI(rt.t, "rollback", "--data-dir", rp.currentStore(rt.t), "--height", strconv.FormatUint(tip.Height-1, 10))
}

// TestReplicas: a writer and two replicas through a randomized chain and
// every fault the contract says a replica survives (see the file comment).
func TestReplicas(t *testing.T) {
	t.Parallel()
	seed := e2eSeedFor(t)
	rs := testredis.Start(t)
	rt := &replicaTest{
		t: t, r: newE2ERun(t, seed), wdir: filepath.Join(t.TempDir(), "writer"),
		wextra: []string{"--replication-token", replToken, "--replication-retention", strconv.Itoa(replRetention),
			"--redis-url", rs.URL(), "--redis-timeout", "250ms", "--redis-admission", "all", "--memory-cache-bytes", "16MiB"},
		faults: rand.New(rand.NewPCG(seed, 0xfa)),
		hist:   map[uint64]e2eState{},
	}
	rt.record()
	rt.startWriter()
	// Replica a shares the writer's Redis and has no memory tier, so its
	// reads go to the shared tier; replica b has its own memory tier only.
	a := &testReplica{name: "replica a", dir: filepath.Join(t.TempDir(), "a"),
		extra: []string{"--redis-url", rs.URL(), "--redis-timeout", "250ms", "--redis-admission", "all", "--memory-cache-bytes", "0"}}
	b := &testReplica{name: "replica b", dir: filepath.Join(t.TempDir(), "b"), extra: []string{"--memory-cache-bytes", "16MiB"}}
	for _, rp := range []*testReplica{a, b} {
		rp.watch = newSeqWatch(t, rp.name)
		rt.replicas = append(rt.replicas, rp)
	}
	began := time.Now()
	phase := func(name string) {
		t.Logf("%4.1fs %s: seq %d, tip %s", time.Since(began).Seconds(), name, rt.r.seq, rt.r.m.Tip())
	}

	// The chain, replicated: a from the start (it bootstraps the empty
	// store), then b, bootstrapped from a store with history.
	phase("chain")
	rt.start(a)
	rt.converged(true)
	for range 6 {
		rt.steps(1 + rt.faults.IntN(4))
		rt.sample()
		rt.converged(false)
	}

	// b's first bootstrap, killed at a random moment after it printed its
	// address: until it has a verified store its reads and /readyz are 503
	// (its reader checks that it never shows another state than the
	// writer's), and after a restart it bootstraps again.
	phase("bootstrap killed")
	rt.launch(b)
	time.Sleep(time.Duration(rt.faults.IntN(40)) * time.Millisecond) // the fault's random moment
	ready, err1 := b.p.try(http.MethodGet, "/readyz")
	tip, err2 := b.p.try(http.MethodGet, "/v1/tip")
	if err1 != nil || err2 != nil {
		t.Fatalf("replica b: %v %v", err1, err2)
	}
	if ready.code == 200 && tip.code != 200 || tip.code != 200 && (tip.code != 503 || ready.code != 503) {
		t.Fatalf("replica b while it bootstraps: /readyz %s, then /v1/tip %s", ready, tip)
	}
	rt.kill(b)
	rt.start(b)
	rt.converged(true)
	for range 4 {
		rt.steps(1 + rt.faults.IntN(4))
		rt.converged(false)
	}

	// A replica left behind the writer's change-log retention (stopped
	// cleanly) bootstraps again by itself (410 log_truncated), from a
	// checkpoint at least as new as what it served.
	phase("past the retention")
	b.p.stop()
	rt.blocks(replRetention + 2)
	rt.converged(false)
	rt.start(b)
	rt.converge(b)
	if !strings.Contains(b.p.stderr.String(), "must bootstrap again") {
		t.Fatalf("replica b resumed past the writer's retention without bootstrapping again:\n%s", b.p.stderr)
	}
	if n := b.p.metric("utxo_cache_replica_bootstraps_total"); n != 1 {
		t.Fatalf("replica b: %v bootstraps after a 410, want 1", n)
	}
	rt.converged(false)

	// The same (killed), and killed again: at a random moment of its new
	// bootstrap, then the moment it serves its new store, after which a
	// restart must not go back to the old one.
	phase("re-bootstrap killed")
	rt.kill(b)
	for _, atSwap := range []bool{false, true} {
		rt.blocks(replRetention + 2)
		rt.launch(b)
		if atSwap {
			rt.waitSeq(b, rt.r.seq)
		} else {
			time.Sleep(time.Duration(rt.faults.IntN(60)) * time.Millisecond) // the fault's random moment
		}
		rt.kill(b)
	}
	rt.launch(b)
	if seq := rt.waitSeq(b, 0); seq < rt.r.seq {
		t.Fatalf("replica b served seq %d, then after a restart seq %d", rt.r.seq, seq)
	}
	b.p.waitReady(time.Now().Add(replDeadline))
	rt.converged(false)

	// Replicas killed at a random moment while they apply.
	phase("killed while applying")
	for _, rp := range rt.replicas {
		killed := make(chan struct{})
		delay := time.Duration(rt.faults.IntN(80)) * time.Millisecond
		go func() {
			defer close(killed)
			time.Sleep(delay) // the fault's random moment, while the writer takes steps
			_ = rp.p.cmd.Process.Kill()
		}()
		rt.steps(6 + rt.faults.IntN(4))
		<-killed
		<-rp.p.exited
		rt.start(rp)
		rt.converged(false)
	}

	// The writer stops for a while: the replicas keep answering from their
	// last state, and follow again once it is back (on the same address).
	phase("writer stopped")
	errs := map[*testReplica]float64{}
	for _, rp := range rt.replicas {
		errs[rp] = rp.p.metric("utxo_cache_replica_contact_errors_total")
	}
	waddr := strings.TrimPrefix(rt.r.p.base, "http://")
	rt.r.p.stop() // quickly: it ends the replicas' long polls
	for _, rp := range rt.replicas {
		rp.p.waitMetric("utxo_cache_replica_contact_errors_total", errs[rp]+1)
		rt.converge(rp) // 200 at the writer's last seq
		rt.r.checkOn(e2eNode{p: rp.p, replica: true, firstPages: true})
	}
	rt.startWriter("--listen", waddr)
	rt.steps(4)
	rt.sample()
	rt.converged(false)

	// Stores tampered with offline: one a block the writer never had, the
	// other a rollback the writer never made. Each replica finds that its
	// store is not the writer's, says so, stops serving it and replaces it;
	// killed meanwhile, it does not come back on it.
	phase("tampered")
	for i, rp := range rt.replicas {
		// A new block first: the store can roll its tip back (tip - 1 is
		// at or above the rollback floor).
		rt.blocks(1)
		rt.converged(false)
		rt.kill(rp)
		tampered := rp.currentStore(t)
		if i == 0 {
			rt.tamperWithBlock(rp)
		} else {
			rt.tamperWithRollback(rp)
		}
		rt.blocks(2) // the writer's next change differs from the tampered one
		// Until it compares its state with the writer's record of it, the
		// replica serves the tampered state (its reader does not collect it).
		rp.watch.exempt.Store(true)
		rt.launch(rp)
		rt.waitLog(rp, "replacing the replica's store")
		rp.watch.exempt.Store(false)
		if !strings.Contains(rp.p.stderr.String(), "diverged") || rp.p.metric("utxo_cache_replica_divergences_total") < 1 {
			t.Fatalf("%s: divergence not logged or counted:\n%s", rp.name, rp.p.stderr)
		}
		if i == 0 {
			rt.kill(rp)
			if cur, err := os.ReadFile(filepath.Join(rp.dir, "CURRENT")); err == nil && filepath.Join(rp.dir, strings.TrimSpace(string(cur))) == tampered {
				t.Fatalf("%s, killed while it replaces its diverged store, would restart on it", rp.name)
			}
			rt.launch(rp)
		}
		rp.p.waitReady(time.Now().Add(replDeadline))
		rt.converged(false)
	}

	phase("final")
	rt.steps(6)
	rt.sample()
	rt.converged(true)
	// Replica a's reads were answered from the shared tier, which the
	// writer's reads filled.
	deadline := time.Now().Add(replDeadline)
	for a.p.redisHits() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("replica a never read from the shared Redis tier")
		}
		rt.sample()
		rt.r.checkOn(e2eNode{p: a.p, replica: true, firstPages: true})
	}
	for _, rp := range rt.replicas {
		rp.p.stop()
		rp.watch.close()
		rp.watch.checkHistory(t, rt.hist)
	}
	rt.r.p.stop()
	phase("stopped")
}

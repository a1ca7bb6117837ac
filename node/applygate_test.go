package node

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/replication"
	"github.com/utxo-cache/utxo-cache/replication/storedir"
	"github.com/utxo-cache/utxo-cache/writer"
)

// gateRig is a writer node and one replica node in process, with real stores,
// writers, followers and APIs, where the test decides when the replica
// receives each change: the writer's change-log answers pass through a
// proxy that sends the headers of an answer holding changes (so the
// follower knows a change is coming) and keeps its body until deliver.
type gateRig struct {
	t      *testing.T
	w      *writer.Writer
	blocks int
	node   *replicaNode
	// announced gets the writer's seq of each answer with changes, once
	// its headers are sent; deliver lets one body go.
	announced chan uint64
	deliver   chan struct{}
}

func newGateRig(t *testing.T, wait time.Duration) *gateRig {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	wn, err := Start(ctx, Config{DataDir: t.TempDir(), MemTableBytes: 4 << 20, ReplicationToken: "repl"})
	if err != nil {
		t.Fatal(err)
	}
	w, writerAPI := wn.Writer(), wn.Handler()
	g := &gateRig{t: t, w: w, announced: make(chan uint64, 1), deliver: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
		rec := httptest.NewRecorder()
		writerAPI.ServeHTTP(rec, req)
		if req.URL.Path != "/v1/replication/changes" || rec.Body.Len() == 0 {
			for k, v := range rec.Header() {
				rw.Header()[k] = v
			}
			rw.WriteHeader(rec.Code)
			_, _ = rw.Write(rec.Body.Bytes())
			return
		}
		for k, v := range rec.Header() {
			rw.Header()[k] = v
		}
		rw.WriteHeader(rec.Code)
		rw.(http.Flusher).Flush()
		seq, _ := strconv.ParseUint(rec.Header().Get("X-Commit-Seq"), 10, 64)
		select {
		case g.announced <- seq:
		case <-req.Context().Done():
			return
		}
		select {
		case <-g.deliver:
			_, _ = rw.Write(rec.Body.Bytes())
		case <-req.Context().Done():
		}
	}))

	cfg := Config{DataDir: t.TempDir(), ReplicaOf: srv.URL, ReplicationToken: "repl",
		ApplyPriorityWait: wait, MaxWait: 2 * time.Second}.EnsureDefaults()
	r := &replica{
		cfg:  cfg,
		dir:  storedir.New(storedir.OS(), cfg.DataDir),
		log:  slog.New(slog.DiscardHandler),
		base: prometheus.NewRegistry(),
	}
	r.fm = replication.NewTailMetrics(r.base)
	n, err := r.openNode(ctx, "store-1")
	if err != nil {
		t.Fatal(err)
	}
	g.node = n
	done := make(chan error, 1)
	go func() { done <- n.f.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("follower: %v", err)
		}
		srv.Close()
		r.closeNode(n)
		if err := wn.Close(context.Background()); err != nil {
			t.Errorf("writer node: %v", err)
		}
	})
	return g
}

// apply applies the writer's next block, and waits until the proxy has
// announced it to the replica and the replica has taken the announcement
// (its gate holds, when it has a bound).
func (g *gateRig) apply() uint64 {
	g.t.Helper()
	g.blocks++
	h := sha256.Sum256(fmt.Append(nil, "gate block", g.blocks))
	b := &chain.Block{Height: uint64(g.blocks), Hash: h, Time: 1_700_000_000, Txs: []chain.Tx{{
		Hash: sha256.Sum256(fmt.Append(nil, "gate tx", g.blocks)), Outputs: []chain.Output{{Address: "addr", Value: 1}}}}}
	if g.blocks > 1 {
		b.PrevHash = sha256.Sum256(fmt.Append(nil, "gate block", g.blocks-1))
	}
	res, err := g.w.Apply(context.Background(), b)
	if err != nil || !res.Applied {
		g.t.Fatalf("writer: apply block %d: %+v, %v", g.blocks, res, err)
	}
	select {
	case seq := <-g.announced:
		if seq != res.Seq {
			g.t.Fatalf("announced seq %d, the writer applied %d", seq, res.Seq)
		}
	case <-time.After(10 * time.Second):
		g.t.Fatalf("the change of seq %d was not announced within 10s", res.Seq)
	}
	return res.Seq
}

// waitFor waits until cond holds, failing after 10s.
func (g *gateRig) waitFor(what string, cond func() bool) {
	g.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			g.t.Fatalf("not within 10s: %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

type gateAnswer struct {
	code int
	seq  string
}

// get sends a request to the replica; the answer comes on the channel.
func (g *gateRig) get(target string) <-chan gateAnswer {
	done := make(chan gateAnswer, 1)
	go func() {
		rec := httptest.NewRecorder()
		g.node.ref.h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
		done <- gateAnswer{rec.Code, rec.Header().Get("X-Commit-Seq")}
	}()
	return done
}

func (g *gateRig) answer(done <-chan gateAnswer, what string) gateAnswer {
	g.t.Helper()
	select {
	case a := <-done:
		return a
	case <-time.After(10 * time.Second):
		g.t.Fatalf("%s: no answer within 10s", what)
		return gateAnswer{}
	}
}

func (g *gateRig) published() uint64 { return g.node.store.Published().Seq }

// TestApplyPriorityHoldsReads: on a replica, a read arriving while a change
// is announced and not yet published waits for the publish, then answers
// from the new state; health, readiness and metrics never wait.
func TestApplyPriorityHoldsReads(t *testing.T) {
	g := newGateRig(t, time.Hour) // a bound that never passes in the test
	seq := g.apply()
	g.waitFor("the replica holds reads for the announced change", g.node.gate.Holding)

	var reads []<-chan gateAnswer
	for i, target := range []string{"/v1/tip", "/v1/addresses/addr/balance", "/v1/tip?min_seq=1"} {
		reads = append(reads, g.get(target))
		g.waitFor(target+" waits", func() bool { return g.node.gate.Waiting() == i+1 })
	}
	for _, target := range []string{"/healthz", "/readyz", "/metrics", "/openapi.yaml", "/v1/replication/changes?after=0"} {
		a := g.answer(g.get(target), target+" while a change is pending")
		if a.code == 0 {
			t.Fatalf("%s: no status", target)
		}
	}
	if p := g.published(); p != seq-1 || g.node.gate.Waiting() != len(reads) {
		t.Fatalf("before the delivery: published %d, %d reads waiting; want %d and %d", p, g.node.gate.Waiting(), seq-1, len(reads))
	}
	g.deliver <- struct{}{}
	for i, done := range reads {
		a := g.answer(done, fmt.Sprintf("read %d after the publish", i))
		if a.code != http.StatusOK || a.seq != strconv.FormatUint(seq, 10) {
			t.Fatalf("read %d: %d at seq %s, want 200 at the published seq %d", i, a.code, a.seq, seq)
		}
	}
	if g.node.gate.Holding() {
		t.Fatal("reads held after the publish")
	}
}

// TestApplyPriorityBound: a change that is not published within the bound
// holds reads no longer: they answer from the state before it.
func TestApplyPriorityBound(t *testing.T) {
	const bound = 300 * time.Millisecond
	g := newGateRig(t, bound)
	seq := g.apply()
	g.waitFor("the replica holds reads for the announced change", g.node.gate.Holding)
	start := time.Now()
	a := g.answer(g.get("/v1/tip"), "a read while the change is withheld")
	if a.code != http.StatusOK || a.seq != strconv.FormatUint(seq-1, 10) {
		t.Fatalf("%d at seq %s, want 200 at seq %d (the change is not delivered)", a.code, a.seq, seq-1)
	}
	// Only the bound opens the hold: the change cannot have been published.
	if g.node.gate.Holding() {
		t.Fatalf("the read went on after %s while reads are still held", time.Since(start))
	}
	g.deliver <- struct{}{}
	g.waitFor("the replica publishes the change", func() bool { return g.published() == seq })
	a = g.answer(g.get("/v1/tip"), "a read after the publish")
	if a.seq != strconv.FormatUint(seq, 10) {
		t.Fatalf("after the publish: seq %s, want %d", a.seq, seq)
	}
}

// TestApplyPriorityOff: with --apply-priority-wait 0 nothing is held.
func TestApplyPriorityOff(t *testing.T) {
	g := newGateRig(t, 0)
	seq := g.apply()
	for range 3 {
		a := g.answer(g.get("/v1/tip"), "a read while the change is withheld")
		if a.code != http.StatusOK || a.seq != strconv.FormatUint(seq-1, 10) {
			t.Fatalf("%d at seq %s, want 200 at seq %d", a.code, a.seq, seq-1)
		}
		if g.node.gate.Holding() {
			t.Fatal("holding with the apply priority off")
		}
	}
	g.deliver <- struct{}{}
	g.waitFor("the replica publishes the change", func() bool { return g.published() == seq })
}

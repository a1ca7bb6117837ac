package node_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/utxo-cache/utxo-cache/internal/model"
	"github.com/utxo-cache/utxo-cache/internal/testnats"
	"github.com/utxo-cache/utxo-cache/node"
)

// summary is the writer's state after one change, from the model.
type summary struct {
	height uint64
	empty  bool
	count  uint64
	digest string
}

// history is the model's state at every seq the writer reached.
type history struct {
	mu  sync.Mutex
	at  map[uint64]summary
	top uint64
}

func (h *history) put(seq uint64, m *model.Model) {
	h.mu.Lock()
	defer h.mu.Unlock()
	tip := m.Tip()
	h.at[seq] = summary{height: tip.Height, empty: tip.Empty, count: m.Count(), digest: m.Digest().String()}
	h.top = seq
}

func (h *history) get(seq uint64) (summary, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s, ok := h.at[seq]
	return s, ok
}

// tipAnswer is GET /v1/tip as the test reads it.
type tipAnswer struct {
	Tip *struct {
		Height uint64 `json:"height"`
	} `json:"tip"`
	UtxoCount  uint64 `json:"utxo_count"`
	UtxoDigest string `json:"utxo_digest"`
}

// readTip asks h for GET /v1/tip: its seq and figures (ok false: not
// serving yet).
func readTip(h http.Handler) (seq uint64, got summary, ok bool, err error) {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/tip", nil))
	if rec.Code == http.StatusServiceUnavailable {
		return 0, summary{}, false, nil
	}
	if rec.Code != http.StatusOK {
		return 0, summary{}, false, fmt.Errorf("GET /v1/tip: %d %s", rec.Code, rec.Body)
	}
	var a tipAnswer
	if err := json.Unmarshal(rec.Body.Bytes(), &a); err != nil {
		return 0, summary{}, false, err
	}
	seq, err = strconv.ParseUint(rec.Header().Get("X-Commit-Seq"), 10, 64)
	if err != nil {
		return 0, summary{}, false, fmt.Errorf("X-Commit-Seq %q", rec.Header().Get("X-Commit-Seq"))
	}
	got = summary{empty: a.Tip == nil, count: a.UtxoCount, digest: a.UtxoDigest}
	if a.Tip != nil {
		got.height = a.Tip.Height
	}
	return seq, got, true, nil
}

type testLogWriter struct{ t *testing.T }

func (w testLogWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// TestJetStreamReplicas: a writer publishes to a real three-node NATS
// cluster (the stream and the checkpoints on all three), and three replicas
// follow it through JetStream alone, while the writer applies a seeded chain
// with rollbacks and the test kills and restarts one NATS server, and
// restarts the writer, at random moments. Readers of every replica check
// each answer against the model at the seq it names (never a state the
// writer did not have) and that the seq never goes back; at the end every
// replica reaches the writer's seq with its tip, count and digest. Replicas
// start at different moments: one before the first change (it bootstraps
// from the writer's empty state), the others later, from checkpoints.
func TestJetStreamReplicas(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 26))
	cluster := testnats.StartCluster(t)
	ctx := context.Background()
	logger := slog.New(slog.NewTextHandler(testLogWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))

	wcfg := writerConfig(t.TempDir())
	wcfg.Logger = logger
	wcfg.JetStream, wcfg.JetStreamReplicas, wcfg.JetStreamCheckpointInterval = cluster.URLs(), 3, 2*time.Second
	wcfg.ReplicationRetention = 60
	wn, err := node.Start(ctx, wcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = wn.Close(ctx) }()

	o := wn.Store().Options()
	m := model.New(o.PruneDepth, o.RollbackWindow)
	g := model.NewGen(seed, model.GenOptions{Addresses: 6})
	hist := &history{at: map[uint64]summary{}}
	hist.put(0, m)

	var (
		mu       sync.Mutex
		replicas []*node.Node
		stop     = make(chan struct{})
		readers  sync.WaitGroup
		errs     = make(chan error, 16)
	)
	startReplica := func() {
		rn, err := node.Start(ctx, node.Config{DataDir: t.TempDir(), ReplicaOf: cluster.URLs(), MemoryCacheBytes: 1 << 20, Logger: logger})
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		replicas = append(replicas, rn)
		i := len(replicas)
		mu.Unlock()
		readers.Add(1)
		go func() {
			defer readers.Done()
			var last uint64
			for {
				select {
				case <-stop:
					return
				default:
				}
				seq, got, ok, err := readTip(rn.Handler())
				if err != nil {
					errs <- fmt.Errorf("replica %d: %w", i, err)
					return
				}
				if !ok {
					continue
				}
				if seq < last {
					errs <- fmt.Errorf("replica %d answered seq %d after %d", i, seq, last)
					return
				}
				last = seq
				want, known := hist.get(seq)
				if !known {
					errs <- fmt.Errorf("replica %d answered seq %d, which the writer never reached", i, seq)
					return
				}
				if got != want {
					errs <- fmt.Errorf("replica %d at seq %d answered %+v, the writer had %+v", i, seq, got, want)
					return
				}
			}
		}()
	}
	defer func() {
		close(stop)
		readers.Wait()
		for _, rn := range replicas {
			_ = rn.Close(ctx)
		}
	}()
	startReplica()

	seq := uint64(0)
	killed := -1
	const steps = 150
	for step := 0; step < steps; step++ {
		select {
		case err := <-errs:
			t.Fatal(err)
		default:
		}
		switch r := rng.IntN(100); {
		case r < 3 && killed < 0:
			killed = rng.IntN(len(cluster.Servers))
			t.Logf("step %d: killing NATS server %d", step, killed)
			cluster.Servers[killed].Kill()
		case r < 8 && killed >= 0:
			t.Logf("step %d: restarting NATS server %d", step, killed)
			cluster.Servers[killed].Start()
			killed = -1
		case r < 11:
			t.Logf("step %d: restarting the writer at seq %d", step, seq)
			if err := wn.Close(ctx); err != nil {
				t.Fatal(err)
			}
			if wn, err = node.Start(ctx, wcfg); err != nil {
				t.Fatal(err)
			}
		case r < 13 && len(replicas) < 3:
			t.Logf("step %d: starting a replica at seq %d", step, seq)
			startReplica()
		}
		if rng.IntN(10) == 0 && !m.Tip().Empty && m.Tip().Height >= 2 {
			target := m.Tip().Height - 1 - uint64(rng.IntN(2))
			if err := m.Rollback(target); err != nil {
				t.Fatal(err)
			}
			seq++
			hist.put(seq, m)
			if res, err := wn.Writer().Rollback(ctx, target); err != nil || res.Seq != seq {
				t.Fatalf("rollback to %d: seq %d (want %d), %v", target, res.Seq, seq, err)
			}
			continue
		}
		b := g.Block(m)
		if _, err := m.Apply(b, false); err != nil {
			t.Fatal(err)
		}
		seq++
		hist.put(seq, m)
		if res, err := wn.Writer().Apply(ctx, b); err != nil || res.Seq != seq {
			t.Fatalf("block %d: seq %d (want %d), %v", b.Height, res.Seq, seq, err)
		}
		if rng.IntN(4) == 0 {
			time.Sleep(time.Duration(rng.IntN(20)) * time.Millisecond) // the feed's pace, not a condition
		}
	}
	if killed >= 0 {
		cluster.Servers[killed].Start()
	}
	for len(replicas) < 3 {
		startReplica()
	}
	want, _ := hist.get(seq)
	deadline := time.Now().Add(120 * time.Second)
	for i, rn := range replicas {
		for {
			select {
			case err := <-errs:
				t.Fatal(err)
			default:
			}
			s, got, ok, err := readTip(rn.Handler())
			if err != nil {
				t.Fatal(err)
			}
			if ok && s == seq {
				if got != want {
					t.Fatalf("replica %d at the writer's seq %d: %+v, want %+v", i+1, seq, got, want)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("replica %d at seq %d, not the writer's %d within 120s", i+1, s, seq)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

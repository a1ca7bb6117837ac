package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/utxo-cache/utxo-cache/cache"
	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/internal/testredis"
	"github.com/utxo-cache/utxo-cache/query"
	"github.com/utxo-cache/utxo-cache/tiers/redis"
)

// TestMonotonicReadsUnderWrites is the concurrency test of the consistency
// promises (docs/consistency.md): while one client posts blocks and
// rollbacks, several readers, each on its own keep-alive connection, read
// every endpoint. Per reader, X-Commit-Seq never decreases; every answer's
// tip is a block that was posted, the same seq always comes with the same
// tip, and /v1/tip's count and digest are those the store had at that seq;
// every read sent after an acknowledgement reflects at least its seq, and a
// read with min_seq of the last acknowledgement is answered at or above it.
//
// Before reads used only published snapshots, a disk read that began after
// Pebble's commit but before the invalidation finished answered from the new
// block and the next read from the published, older one: this test catches
// that (a decreasing seq or a read behind its acknowledgement).
func TestMonotonicReadsUnderWrites(t *testing.T) {
	for _, c := range []struct {
		name          string
		memory, redis bool
		byCost        *query.Admission
	}{
		{"memory", true, false, nil},
		{"redis", false, true, nil},
		{"memory+redis", true, true, nil},
		// Every answer costs enough: each goes to Redis from its second
		// computation on (the admission's skips, marks and fills).
		{"redis-by-cost", false, true, &query.Admission{Factor: -1}},
		{"disk", false, false, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := stackConfig{noSpec: true, noMemory: !c.memory, byCost: c.byCost}
			var rt *redis.Tier
			if c.redis {
				rs := testredis.Start(t)
				var err error
				rt, err = redis.New(redis.Options{URL: rs.URL(), Namespace: "mono", Logger: slog.New(slog.DiscardHandler)})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = rt.Close() })
				cfg.tiers = []cache.Tier{rt}
			}
			runMonotonic(t, newStack(t, cfg), uint64(rand.Int64()))
			if rt != nil && !c.memory && rt.Stats().Hits == 0 {
				t.Fatalf("Redis answered no read (stats %+v): the run proves nothing of it", rt.Stats())
			}
		})
	}
}

// tipState is what GET /v1/tip must say at one seq.
type tipState struct {
	tip    string // the body's tip member
	count  uint64
	digest string
}

type monotonicRun struct {
	t      *testing.T
	base   string
	posted sync.Map      // block hash (string) → height: every block ever posted
	acked  atomic.Uint64 // highest seq acknowledged to the writing client
	truth  sync.Map      // seq → tipState, recorded at each acknowledgement
	seen   sync.Map      // seq → tip member first answered with it
	tips   sync.Map      // seq → tipState answered by GET /v1/tip (first one)
}

func runMonotonic(t *testing.T, s *stack, seed uint64) {
	t.Logf("seed %d", seed)
	srv := httptest.NewServer(s.h)
	t.Cleanup(srv.Close)
	r := &monotonicRun{t: t, base: srv.URL}
	st := s.store.Published()
	r.truth.Store(st.Seq, tipState{tip: "null", count: st.UtxoCount, digest: st.Digest.String()})

	done := make(chan struct{})
	var wg sync.WaitGroup
	const readers = 4
	var reads atomic.Int64
	for i := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			reads.Add(r.read(i, done))
		}()
	}
	r.write(s, rand.New(rand.NewPCG(seed, 1)))
	close(done)
	wg.Wait()

	// Every /v1/tip answer carried the figures of its seq.
	r.tips.Range(func(k, v any) bool {
		want, ok := r.truth.Load(k)
		if !ok {
			t.Errorf("seq %d answered, never acknowledged", k)
		} else if v != want {
			t.Errorf("seq %d: /v1/tip answered %+v, the store had %+v", k, v, want)
		}
		return true
	})
	t.Logf("%d reads, last seq %d", reads.Load(), r.acked.Load())
	if reads.Load() < readers {
		t.Fatalf("only %d reads", reads.Load())
	}
}

// write posts blocks, with a rollback now and then, each on a chain it
// builds: block h spends the previous block's first output.
func (r *monotonicRun) write(s *stack, rng *rand.Rand) {
	t := r.t
	client := &http.Client{}
	type link struct {
		b    *chain.Block
		txID string
	}
	var chainNow []link
	names := 0
	lastSeq := r.acked.Load()
	for step := range 150 {
		var res writeAnswer
		if len(chainNow) > 4 && rng.IntN(8) == 0 {
			k := 1 + rng.IntN(3)
			target := chainNow[len(chainNow)-1-k].b
			res = r.post(client, "/v1/rollback", fmt.Sprintf(`{"height":%d}`, target.Height), "application/json")
			chainNow = chainNow[:len(chainNow)-k]
		} else {
			names++
			id := fmt.Sprintf("m%d", names)
			txs := []chain.Tx{tx(id, nil, out("alice", uint64(names)), out("bob", 1), out("carol", 2))}
			b := &chain.Block{Height: 1, Hash: hx("mono", names)}
			if n := len(chainNow); n > 0 {
				prev := chainNow[n-1]
				b.Height, b.PrevHash = prev.b.Height+1, prev.b.Hash
				txs[0].Inputs = spends(op(prev.txID, 0))
			}
			b.Txs = txs
			r.posted.Store(b.Hash.String(), b.Height) // before: readers may see it before the answer
			res = r.post(client, "/v1/blocks", string(chain.AppendBlockJSON(nil, b)), "application/json")
			chainNow = append(chainNow, link{b: b, txID: id})
		}
		if res.Seq != lastSeq+1 {
			t.Fatalf("step %d: seq %d after %d: every change is one", step, res.Seq, lastSeq)
		}
		lastSeq = res.Seq
		st := s.store.Published()
		r.truth.Store(res.Seq, tipState{tip: string(res.Tip), count: st.UtxoCount, digest: st.Digest.String()})
		r.acked.Store(res.Seq)
	}
}

type writeAnswer struct {
	Tip json.RawMessage `json:"tip"`
	Seq uint64          `json:"seq"`
}

func (r *monotonicRun) post(c *http.Client, path, body, ctype string) writeAnswer {
	req, _ := http.NewRequest(http.MethodPost, r.base+path, bytes.NewBufferString(body))
	req.Header.Set("Content-Type", ctype)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := c.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		r.t.Fatalf("POST %s: %d %s", path, resp.StatusCode, raw)
	}
	var a writeAnswer
	if err := json.Unmarshal(raw, &a); err != nil {
		r.t.Fatalf("POST %s: %v: %s", path, err, raw)
	}
	return a
}

// read reads until done on one connection and checks every answer; it
// returns how many it read.
func (r *monotonicRun) read(id int, done <-chan struct{}) int64 {
	t := r.t
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1}}
	defer client.CloseIdleConnections()
	var last uint64
	var n int64
	for i := 0; ; i++ {
		select {
		case <-done:
			return n
		default:
		}
		ackBefore := r.acked.Load()
		var method, target, body string
		switch i % 6 {
		case 0:
			method, target = http.MethodGet, "/v1/tip"
		case 1:
			method, target = http.MethodGet, "/v1/addresses/alice/balance"
		case 2:
			method, target = http.MethodGet, "/v1/addresses/bob/utxos?limit=3&order=desc"
		case 3:
			method, target = http.MethodGet, fmt.Sprintf("/v1/utxos/%s/0", txh(fmt.Sprintf("m%d", 1+i%7)))
		case 4:
			method, target = http.MethodPost, "/v1/utxos/lookup"
			body = fmt.Sprintf(`{"outpoints":[{"tx_hash":"%s","index":0},{"tx_hash":"%s","index":1}]}`, txh("m1"), txh("m2"))
		case 5:
			method, target = http.MethodGet, "/v1/addresses/carol/balance?min_seq="+strconv.FormatUint(ackBefore, 10)
		}
		req, _ := http.NewRequest(method, r.base+target, bytes.NewBufferString(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Errorf("reader %d: %s: %v", id, target, err)
			return n
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		n++
		if resp.StatusCode != 200 && resp.StatusCode != 404 {
			t.Errorf("reader %d: %s %s: %d %s", id, method, target, resp.StatusCode, raw)
			return n
		}
		seq, err := strconv.ParseUint(resp.Header.Get("X-Commit-Seq"), 10, 64)
		if err != nil {
			t.Errorf("reader %d: %s: X-Commit-Seq %q", id, target, resp.Header.Get("X-Commit-Seq"))
			return n
		}
		if seq < last {
			t.Errorf("reader %d: %s answered at seq %d after this reader saw %d: not monotonic", id, target, seq, last)
			return n
		}
		last = seq
		if seq < ackBefore {
			t.Errorf("reader %d: %s sent after seq %d was acknowledged answered at seq %d", id, target, ackBefore, seq)
			return n
		}
		var a struct {
			Tip        json.RawMessage `json:"tip"`
			UtxoCount  uint64          `json:"utxo_count"`
			UtxoDigest string          `json:"utxo_digest"`
		}
		if err := json.Unmarshal(raw, &a); err != nil {
			t.Errorf("reader %d: %s: %v: %s", id, target, err, raw)
			return n
		}
		if !r.checkTip(id, target, seq, a.Tip, resp.Header) {
			return n
		}
		if i%6 == 0 {
			r.tips.LoadOrStore(seq, tipState{tip: string(a.Tip), count: a.UtxoCount, digest: a.UtxoDigest})
		}
	}
}

// checkTip checks an answer's tip against the posted blocks, its headers
// and every other answer at the same seq.
func (r *monotonicRun) checkTip(id int, target string, seq uint64, tip json.RawMessage, h http.Header) bool {
	t := r.t
	if first, loaded := r.seen.LoadOrStore(seq, string(tip)); loaded && first != string(tip) {
		t.Errorf("reader %d: %s: seq %d answered with tip %s and elsewhere with %s", id, target, seq, tip, first)
		return false
	}
	if string(tip) == "null" {
		if h.Get("X-Tip-Height") != "" {
			t.Errorf("reader %d: %s: tip null with X-Tip-Height %q", id, target, h.Get("X-Tip-Height"))
			return false
		}
		return true
	}
	var tp struct {
		Height uint64 `json:"height"`
		Hash   string `json:"hash"`
	}
	if err := json.Unmarshal(tip, &tp); err != nil {
		t.Errorf("reader %d: %s: tip %s: %v", id, target, tip, err)
		return false
	}
	height, ok := r.posted.Load(tp.Hash)
	if !ok || height != tp.Height {
		t.Errorf("reader %d: %s: tip %s was never posted", id, target, tip)
		return false
	}
	if h.Get("X-Tip-Hash") != tp.Hash || h.Get("X-Tip-Height") != strconv.FormatUint(tp.Height, 10) {
		t.Errorf("reader %d: %s: headers %s/%s, body tip %s", id, target, h.Get("X-Tip-Height"), h.Get("X-Tip-Hash"), tip)
		return false
	}
	return true
}

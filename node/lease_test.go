package node_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/internal/model"
	"github.com/utxo-cache/utxo-cache/node"
)

const nodeWalletToken = "wallet"

// testClock is a clock the test moves: every node of a test reads it.
type testClock struct{ sec atomic.Int64 }

func (c *testClock) now() time.Time { return time.Unix(c.sec.Load(), 0) }
func (c *testClock) unix() uint64   { return uint64(c.sec.Load()) }

func startLeaseWriter(t *testing.T, dir string, clock *testClock) (*node.Node, *httptest.Server) {
	t.Helper()
	cfg := writerConfig(dir)
	cfg.PruneDepth, cfg.RollbackWindow = walletPrune, walletWindow
	cfg.WalletToken, cfg.Now, cfg.LeaseSweep = nodeWalletToken, clock.now, -1
	wn, err := node.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return wn, httptest.NewServer(wn.Handler())
}

func startLeaseReplica(t *testing.T, dir, writerURL string, clock *testClock) (*node.Node, *httptest.Server) {
	t.Helper()
	rn, err := node.Start(context.Background(), node.Config{
		DataDir: dir, ReplicaOf: writerURL, ReplicationToken: "repl", MemoryCacheBytes: 8 << 20,
		WalletToken: nodeWalletToken, Now: clock.now,
	})
	if err != nil {
		t.Fatal(err)
	}
	return rn, httptest.NewServer(rn.Handler())
}

// leaseAnswer is a lease write's answer, or its error.
type leaseAnswer struct {
	LeaseID   string `json:"lease_id"`
	ExpiresAt uint64 `json:"expires_at"`
	Seq       uint64 `json:"seq"`
	Released  bool   `json:"released"`
	Error     struct {
		Code   string `json:"code"`
		Leased []struct {
			TxHash      string `json:"tx_hash"`
			Index       uint32 `json:"index"`
			LeasedUntil uint64 `json:"leased_until"`
		} `json:"leased"`
	} `json:"error"`
}

func leaseCall(t *testing.T, srv *httptest.Server, id string, ops []chain.OutPoint, ttl int) (int, leaseAnswer, string) {
	t.Helper()
	req := map[string]any{"outpoints": outPointsJSON(ops)}
	if id != "" {
		req["lease_id"] = id
	}
	if ttl != 0 {
		req["ttl_seconds"] = ttl
	}
	body, _ := json.Marshal(req)
	code, raw := do(t, srv, http.MethodPost, "/v1/leases", nodeWalletToken, body)
	var ans leaseAnswer
	if err := json.Unmarshal([]byte(raw), &ans); err != nil {
		t.Fatalf("POST /v1/leases: %v: %s", err, raw)
	}
	return code, ans, raw
}

// TestLeaseModel runs a writer and a replica, both on a clock the test
// moves, through random blocks (which spend leased outputs), rollbacks,
// freezes, lease grants, renewals and extensions, conflicting and bad
// lease requests, releases, clock moves and expiry sweeps. Each lease write
// answers what the model decides (its expiry and seq, or the 409 leased
// list, 409 frozen, 422, 400), and after each step every read with
// leased=exclude and leased=include on either node (listings followed
// through their cursors, outpoint answers, lookups) and every GET of a
// lease equal the model at the writer's seq and the clock.
func TestLeaseModel(t *testing.T) {
	defer goleak.VerifyNone(t)
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 2))
	g := model.NewGen(seed, model.GenOptions{Addresses: 4, MaxTxs: 3})
	m := model.New(walletPrune, walletWindow)
	clock := &testClock{}
	clock.sec.Store(1_800_000_000)

	wn, wsrv := startLeaseWriter(t, t.TempDir(), clock)
	rn, rsrv := startLeaseReplica(t, t.TempDir(), wsrv.URL, clock)
	defer closeNode(t, wn, wsrv)
	defer closeNode(t, rn, rsrv)
	ctx := context.Background()

	ids := []string{"w-0", "w-1", "w-2", "w_3"}
	var seq uint64
	counts := map[string]int{}
	pickLive := func(n int) []chain.OutPoint {
		live := m.Live()
		var out []chain.OutPoint
		for _, i := range rng.Perm(len(live))[:min(n, len(live))] {
			out = append(out, live[i].OutPoint)
		}
		return out
	}
	steps := 250
	if raceEnabled {
		steps /= 5 // see raceEnabled
	}
	for step := range steps {
		switch r := rng.IntN(20); {
		case r < 6 || m.Tip().Empty:
			b := g.Block(m)
			for _, tx := range b.Txs {
				for _, in := range tx.Inputs {
					if m.LeasedUntil(in, clock.unix()) != 0 {
						counts["leased output spent"]++
					}
				}
			}
			if _, err := m.Apply(b, false); err != nil {
				t.Fatalf("step %d: model refused a generated block: %v", step, err)
			}
			res, err := wn.Writer().Apply(ctx, b)
			if err != nil || !res.Applied {
				t.Fatalf("step %d: apply %d: %v", step, b.Height, err)
			}
			seq = res.Seq
			counts["block"]++
		case r < 7:
			first, _ := m.FirstHeight()
			lo := max(m.RollbackFloor(), first, m.Tip().Height-min(m.Tip().Height, 3))
			target := lo + rng.Uint64N(m.Tip().Height-lo+1)
			if err := m.Rollback(target); err != nil {
				t.Fatalf("step %d: model rollback: %v", step, err)
			}
			res, err := wn.Writer().Rollback(ctx, target)
			if err != nil {
				t.Fatalf("step %d: rollback to %d: %v", step, target, err)
			}
			seq = res.Seq
			counts["rollback"]++
		case r < 8:
			ops := pickLive(1)
			if len(ops) == 0 {
				continue
			}
			code, n, got, raw := freezeCall(t, wsrv, true, ops, "hold")
			changed, err := m.Freeze(chain.Freeze{OutPoints: ops, Reason: "hold"})
			if code != http.StatusOK || err != nil || n != len(changed) {
				t.Fatalf("step %d: freeze: %s (model %v)", step, raw, err)
			}
			if n > 0 {
				seq++
			}
			if got != seq {
				t.Fatalf("step %d: freeze at seq %d, want %d", step, got, seq)
			}
			counts["freeze"]++
		case r < 14:
			id := ids[rng.IntN(len(ids))]
			if rng.IntN(5) == 0 {
				id = "" // a generated id
			}
			ops := pickLive(1 + rng.IntN(3))
			// Overlap with what is leased now, often.
			for _, lid := range m.LeaseIDs() {
				if lops, _, ok := m.LeaseOf(lid, clock.unix()); ok && len(lops) > 0 && rng.IntN(3) == 0 {
					if o := lops[rng.IntN(len(lops))]; !slices.Contains(ops, o) {
						ops = append(ops, o)
					}
				}
			}
			ttl := []int{0, 5, 30, 120}[rng.IntN(4)]
			switch rng.IntN(12) {
			case 0:
				ops = append(ops, chain.OutPoint{TxHash: g.Hash()}) // unknown
			case 1:
				if spent := m.Spent(); len(spent) > 0 {
					ops = append(ops, spent[rng.IntN(len(spent))])
				}
			case 2:
				ttl = 86_401
			}
			if len(ops) == 0 {
				continue
			}
			code, ans, raw := leaseCall(t, wsrv, id, ops, ttl)
			mid := id
			if mid == "" {
				mid = ans.LeaseID
				if code == http.StatusOK && len(mid) != 22 {
					t.Fatalf("step %d: generated lease id %q", step, mid)
				}
				if mid == "" {
					mid = "never-granted"
				}
			}
			exp, err := m.Lease(mid, ops, uint32(ttl), clock.unix())
			var held *chain.LeasedError
			switch {
			case err == nil:
				seq++
				if code != http.StatusOK || ans.ExpiresAt != exp || ans.Seq != seq || ans.LeaseID != mid {
					t.Fatalf("step %d: lease %s: %d %s, want expiry %d at seq %d", step, mid, code, raw, exp, seq)
				}
				if id == "" {
					ids = append(ids, mid)
				}
				counts["granted"]++
			case errors.As(err, &held):
				if code != http.StatusConflict || ans.Error.Code != "leased" || len(ans.Error.Leased) != len(held.Held) {
					t.Fatalf("step %d: lease %s: %d %s, want 409 leased %v", step, mid, code, raw, held.Held)
				}
				for i, h := range held.Held {
					g := ans.Error.Leased[i]
					if g.TxHash != h.OutPoint.TxHash.String() || g.Index != h.OutPoint.Index || g.LeasedUntil != h.ExpiresAt {
						t.Fatalf("step %d: 409 lists %+v, want %v", step, ans.Error.Leased, held.Held)
					}
				}
				counts["leased"]++
			case errors.Is(err, chain.ErrFrozen):
				if code != http.StatusConflict || ans.Error.Code != "frozen" {
					t.Fatalf("step %d: lease of a frozen output: %d %s", step, code, raw)
				}
				counts["frozen"]++
			case errors.Is(err, chain.ErrUnknownInput):
				if code != http.StatusUnprocessableEntity || ans.Error.Code != "unknown_input" {
					t.Fatalf("step %d: lease of a dead output: %d %s", step, code, raw)
				}
				counts["unknown"]++
			case errors.Is(err, chain.ErrInvalidArgument):
				if code != http.StatusBadRequest || ans.Error.Code != "invalid_argument" {
					t.Fatalf("step %d: bad lease: %d %s", step, code, raw)
				}
				counts["invalid"]++
			default:
				t.Fatalf("step %d: model: %v", step, err)
			}
		case r < 16:
			id := ids[rng.IntN(len(ids))]
			code, raw := do(t, wsrv, http.MethodDelete, "/v1/leases/"+id, nodeWalletToken, nil)
			var ans leaseAnswer
			_ = json.Unmarshal([]byte(raw), &ans)
			released := m.Release(id)
			if released {
				seq++
			}
			if code != http.StatusOK || ans.Released != released || ans.Seq != seq {
				t.Fatalf("step %d: release %s: %d %s, want released %v at seq %d", step, id, code, raw, released, seq)
			}
			counts["release"]++
		case r < 18:
			clock.sec.Add(int64(rng.IntN(60)))
			counts["tick"]++
		default:
			res, err := wn.Writer().ExpireLeases(ctx)
			n := m.Expire(clock.unix())
			if err != nil || res.Applied != (n > 0) {
				t.Fatalf("step %d: expire: %+v %v, model expired %d", step, res, err, n)
			}
			seq = res.Seq
			counts["sweep"]++
		}
		now := clock.unix()
		addrs := g.Addresses()
		checkLeaseReads(t, "writer", wsrv, m, addrs, ids, rng, seq, now)
		checkLeaseReads(t, "replica", rsrv, m, addrs, ids, rng, seq, now)
	}
	t.Logf("steps: %v; seq %d", counts, seq)
}

// leasedExpected is expected() with the lease the model shows at now.
func leasedExpected(m *model.Model, u chain.Utxo, now uint64) listed {
	l := expected(m, u)
	if until := m.LeasedUntil(u.OutPoint, now); until != 0 {
		l.LeasedUntil = &until
	}
	return l
}

// checkLeaseReads compares every read with leased=… on srv at seq with the
// model at the clock now.
func checkLeaseReads(t *testing.T, who string, srv *httptest.Server, m *model.Model, addrs, ids []string, rng *rand.Rand, seq, now uint64) {
	t.Helper()
	for _, a := range addrs {
		for _, mode := range []string{"include", "exclude"} {
			desc := rng.IntN(2) == 0
			limit := []int{2, 5, 1000}[rng.IntN(3)]
			var want []listed
			for _, u := range m.List(a, desc) {
				l := leasedExpected(m, u, now)
				if mode == "exclude" {
					if l.LeasedUntil != nil {
						continue
					}
				}
				want = append(want, l)
			}
			got := listAll(t, srv, a, limit, desc, "&leased="+mode, seq)
			if !slices.Equal(fmtAll(got), fmtAll(want)) {
				t.Fatalf("%s at seq %d: %s leased=%s (limit %d, desc %v):\n got %v\nwant %v", who, seq, a, mode, limit, desc, got, want)
			}
		}
	}
	live := m.Live()
	var ops []chain.OutPoint
	for _, i := range rng.Perm(len(live))[:min(len(live), 10)] {
		ops = append(ops, live[i].OutPoint)
	}
	for _, op := range ops {
		u, _, _ := m.Utxo(op)
		want := leasedExpected(m, u, now)
		code, body := get(t, srv, fmt.Sprintf("/v1/utxos/%s/%d?leased=include", op.TxHash, op.Index), seq)
		var ans struct {
			Utxo listed `json:"utxo"`
		}
		if err := json.Unmarshal(body, &ans); code != http.StatusOK || err != nil || ans.Utxo.String() != want.String() {
			t.Fatalf("%s at seq %d: GET %s leased=include: %d %s, want %v", who, seq, op, code, body, want)
		}
		code, body = get(t, srv, fmt.Sprintf("/v1/utxos/%s/%d?leased=exclude", op.TxHash, op.Index), seq)
		if wantCode := map[bool]int{true: 404, false: 200}[want.LeasedUntil != nil]; code != wantCode {
			t.Fatalf("%s at seq %d: GET %s leased=exclude: %d %s, want %d", who, seq, op, code, body, wantCode)
		}
	}
	if len(ops) > 0 {
		body, _ := json.Marshal(map[string]any{"outpoints": outPointsJSON(ops)})
		code, raw := do(t, srv, http.MethodPost, fmt.Sprintf("/v1/utxos/lookup?leased=exclude&min_seq=%d", seq), "", body)
		var res struct {
			Results []struct {
				Utxo *listed `json:"utxo"`
			} `json:"results"`
		}
		if err := json.Unmarshal([]byte(raw), &res); code != http.StatusOK || err != nil || len(res.Results) != len(ops) {
			t.Fatalf("%s: lookup: %d %s", who, code, raw)
		}
		for i, op := range ops {
			leased := m.LeasedUntil(op, now) != 0
			if (res.Results[i].Utxo == nil) != leased {
				t.Fatalf("%s at seq %d: lookup leased=exclude of %s: %s (leased %v)", who, seq, op, raw, leased)
			}
		}
	}
	for _, id := range ids {
		sep := fmt.Sprintf("?min_seq=%d", seq)
		code, raw := doGetLease(t, srv, id+sep)
		wops, wexp, ok := m.LeaseOf(id, now)
		if !ok {
			if code != http.StatusNotFound {
				t.Fatalf("%s at seq %d: GET lease %s: %d %s, want 404", who, seq, id, code, raw)
			}
			continue
		}
		var ans struct {
			LeaseID   string `json:"lease_id"`
			ExpiresAt uint64 `json:"expires_at"`
			OutPoints []struct {
				TxHash string `json:"tx_hash"`
				Index  uint32 `json:"index"`
			} `json:"outpoints"`
		}
		if err := json.Unmarshal([]byte(raw), &ans); code != http.StatusOK || err != nil || ans.LeaseID != id || ans.ExpiresAt != wexp || len(ans.OutPoints) != len(wops) {
			t.Fatalf("%s at seq %d: GET lease %s: %d %s, want %v until %d", who, seq, id, code, raw, wops, wexp)
		}
		for i, o := range wops {
			if ans.OutPoints[i].TxHash != o.TxHash.String() || ans.OutPoints[i].Index != o.Index {
				t.Fatalf("%s at seq %d: GET lease %s: %s, want %v", who, seq, id, raw, wops)
			}
		}
	}
}

// doGetLease reads GET /v1/leases/{target} with the wallet token, retrying
// a 503 (a replica not there yet) for a while.
func doGetLease(t *testing.T, srv *httptest.Server, target string) (int, string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, raw := do(t, srv, http.MethodGet, "/v1/leases/"+target, nodeWalletToken, nil)
		if code != http.StatusServiceUnavailable || time.Now().After(deadline) {
			return code, raw
		}
	}
}

// TestLeaseSurvivesRestart: an acknowledged lease is on disk when its
// answer comes: it survives a restart of the writer (and still refuses an
// overlapping lease), a restarted replica resumes from its own store with
// it and follows the release and the new lease made while it was down.
func TestLeaseSurvivesRestart(t *testing.T) {
	defer goleak.VerifyNone(t)
	ctx := context.Background()
	clock := &testClock{}
	clock.sec.Store(1_800_000_000)
	wdir, rdir := t.TempDir(), t.TempDir()
	wn, wsrv := startLeaseWriter(t, wdir, clock)
	for h := range uint64(3) {
		if _, err := wn.Writer().Apply(ctx, block(h)); err != nil {
			t.Fatal(err)
		}
	}
	op0 := chain.OutPoint{TxHash: block(0).Txs[0].Hash}
	op1 := chain.OutPoint{TxHash: block(1).Txs[0].Hash}
	code, ans, raw := leaseCall(t, wsrv, "keep", []chain.OutPoint{op0, op1}, 300)
	if code != http.StatusOK || ans.Seq != 4 || ans.ExpiresAt != clock.unix()+300 {
		t.Fatalf("lease: %s", raw)
	}
	until := func(srv *httptest.Server, op chain.OutPoint, seq uint64) string {
		code, body := get(t, srv, fmt.Sprintf("/v1/utxos/%s/%d?leased=include", op.TxHash, op.Index), seq)
		var a struct {
			Utxo listed `json:"utxo"`
		}
		if err := json.Unmarshal(body, &a); code != http.StatusOK || err != nil {
			t.Fatalf("GET %s: %d %s", op, code, body)
		}
		if a.Utxo.LeasedUntil == nil {
			return "free"
		}
		return fmt.Sprint(*a.Utxo.LeasedUntil)
	}
	held := fmt.Sprint(ans.ExpiresAt)
	closeNode(t, wn, wsrv) // the answer came: the lease is durable

	wn, wsrv = startLeaseWriter(t, wdir, clock)
	if until(wsrv, op0, 4) != held || until(wsrv, op1, 4) != held {
		t.Fatal("the writer lost an acknowledged lease across a restart")
	}
	if code, _, raw := leaseCall(t, wsrv, "other", []chain.OutPoint{op1}, 0); code != http.StatusConflict {
		t.Fatalf("an overlapping lease after the restart: %s", raw)
	}
	rn, rsrv := startLeaseReplica(t, rdir, wsrv.URL, clock)
	if until(rsrv, op0, 4) != held || until(rsrv, op1, 4) != held {
		t.Fatal("the replica does not show the writer's lease")
	}
	closeNode(t, rn, rsrv)

	if code, raw := do(t, wsrv, http.MethodDelete, "/v1/leases/keep", nodeWalletToken, nil); code != http.StatusOK || !strings.Contains(raw, `"released":true,"seq":5`) {
		t.Fatalf("release: %d %s", code, raw)
	}
	code, ans, raw = leaseCall(t, wsrv, "next", []chain.OutPoint{op1}, 0)
	if code != http.StatusOK || ans.Seq != 6 {
		t.Fatalf("lease after the release: %s", raw)
	}
	rn, rsrv = startLeaseReplica(t, rdir, wsrv.URL, clock)
	if until(rsrv, op0, 6) != "free" || until(rsrv, op1, 6) != fmt.Sprint(ans.ExpiresAt) {
		t.Fatal("the restarted replica does not show the release and the lease made while it was down")
	}
	// Past the expiry, both nodes show op1 free before any sweep; the sweep
	// then removes the lease on both.
	clock.sec.Add(601)
	for _, srv := range []*httptest.Server{wsrv, rsrv} {
		if until(srv, op1, 6) != "free" {
			t.Fatal("an expired lease is shown as held")
		}
	}
	res, err := wn.Writer().ExpireLeases(ctx)
	if err != nil || !res.Applied || res.Seq != 7 {
		t.Fatalf("sweep: %+v %v", res, err)
	}
	if code, raw := doGetLease(t, rsrv, "next?min_seq=7"); code != http.StatusNotFound {
		t.Fatalf("the swept lease on the replica: %d %s", code, raw)
	}
	closeNode(t, rn, rsrv)
	closeNode(t, wn, wsrv)
}

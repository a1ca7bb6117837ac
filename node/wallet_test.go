package node_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/internal/model"
	"github.com/utxo-cache/utxo-cache/node"
)

var seedFlag = flag.Uint64("seed", 0, "seed of the randomized tests (0: a random one, printed)")

func testSeed(t *testing.T) uint64 {
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay: go test ./node -run '%s' -seed=%d)", seed, t.Name(), seed)
	return seed
}

const (
	walletPrune  = 4
	walletWindow = 8
)

func startWriter(t *testing.T, dir string) (*node.Node, *httptest.Server) {
	t.Helper()
	cfg := writerConfig(dir)
	cfg.PruneDepth, cfg.RollbackWindow = walletPrune, walletWindow
	wn, err := node.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return wn, httptest.NewServer(wn.Handler())
}

func startReplica(t *testing.T, dir, writerURL string) (*node.Node, *httptest.Server) {
	t.Helper()
	rn, err := node.Start(context.Background(), node.Config{
		DataDir: dir, ReplicaOf: writerURL, ReplicationToken: "repl", MemoryCacheBytes: 8 << 20,
	})
	if err != nil {
		t.Fatal(err)
	}
	return rn, httptest.NewServer(rn.Handler())
}

func closeNode(t *testing.T, n *node.Node, srv *httptest.Server) {
	t.Helper()
	if err := n.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv.Close()
	if err := n.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// listed is one item of a listing as the checks compare it.
type listed struct {
	TxHash      string  `json:"tx_hash"`
	Index       uint32  `json:"index"`
	Coinbase    bool    `json:"coinbase"`
	SpendableAt *uint64 `json:"spendable_at_height"`
	Frozen      bool    `json:"frozen"`
	LeasedUntil *uint64 `json:"leased_until"`
}

func (l listed) String() string {
	s := fmt.Sprintf("%s:%d", l.TxHash[:8], l.Index)
	if l.Frozen {
		s += " frozen"
	}
	if l.SpendableAt != nil {
		s += fmt.Sprintf(" spendable_at=%d", *l.SpendableAt)
	}
	if l.LeasedUntil != nil {
		s += fmt.Sprintf(" leased_until=%d", *l.LeasedUntil)
	}
	return s
}

// expected is what the model says an output looks like in an answer: the
// maturity written out here, independently of chain.CoinbaseMaturity.
func expected(m *model.Model, u chain.Utxo) listed {
	l := listed{TxHash: u.TxHash.String(), Index: u.Index}
	if u.Flags&chain.FlagCoinbase != 0 {
		at := u.Height + 100
		l.Coinbase, l.SpendableAt = true, &at
	}
	_, l.Frozen = m.Frozen(u.OutPoint)
	return l
}

// get reads target from srv at seq or later; a 503 (a replica not there
// yet) is retried for a while.
func get(t *testing.T, srv *httptest.Server, target string, seq uint64) (int, []byte) {
	t.Helper()
	sep := "?"
	if strings.Contains(target, "?") {
		sep = "&"
	}
	target += fmt.Sprintf("%smin_seq=%d", sep, seq)
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, body := do(t, srv, http.MethodGet, target, "", nil)
		if code != http.StatusServiceUnavailable || time.Now().After(deadline) {
			return code, []byte(body)
		}
	}
}

// listAll follows a listing's cursors to its end, at seq.
func listAll(t *testing.T, srv *httptest.Server, address string, limit int, desc bool, filters string, seq uint64) []listed {
	t.Helper()
	base := fmt.Sprintf("/v1/addresses/%s/utxos?limit=%d", url.PathEscape(address), limit)
	if desc {
		base += "&order=desc"
	}
	base += filters
	var all []listed
	cursor := ""
	for pages := 0; ; pages++ {
		target := base
		if cursor != "" {
			target += "&cursor=" + url.QueryEscape(cursor)
		}
		code, body := get(t, srv, target, seq)
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", target, code, body)
		}
		var page struct {
			Utxos      []listed `json:"utxos"`
			NextCursor *string  `json:"next_cursor"`
		}
		if err := json.Unmarshal(body, &page); err != nil {
			t.Fatalf("GET %s: %v: %s", target, err, body)
		}
		if len(page.Utxos) > limit {
			t.Fatalf("GET %s: %d items, limit %d", target, len(page.Utxos), limit)
		}
		all = append(all, page.Utxos...)
		if page.NextCursor == nil {
			return all
		}
		if pages > 10000 {
			t.Fatalf("GET %s: no end", base)
		}
		cursor = *page.NextCursor
	}
}

// checkReads compares every read of the wallet-state fields on srv, at
// seq, with the model: each address's listing unfiltered and with each
// filter, in both orders, followed through its cursors; each outpoint
// answer of the outputs the model knows; a batch lookup.
func checkReads(t *testing.T, who string, srv *httptest.Server, m *model.Model, addrs []string, rng *rand.Rand, seq uint64) {
	t.Helper()
	filters := []struct {
		q                    string
		excludeFrozen, matur bool
	}{{"", false, false}, {"&frozen=exclude", true, false}, {"&mature=only", false, true},
		{"&frozen=exclude&mature=only", true, true}, {"&frozen=include&mature=all", false, false}}
	for _, a := range addrs {
		for _, f := range filters {
			desc := rng.IntN(2) == 0
			limit := []int{2, 5, 1000}[rng.IntN(3)]
			if len(m.List(a, false)) > 40 {
				limit = []int{37, 1000}[rng.IntN(2)] // a long listing: fewer pages
			}
			var want []listed
			for _, u := range m.List(a, desc) {
				l := expected(m, u)
				if f.excludeFrozen && l.Frozen || f.matur && !m.Mature(&u) {
					continue
				}
				want = append(want, l)
			}
			got := listAll(t, srv, a, limit, desc, f.q, seq)
			if !slices.Equal(fmtAll(got), fmtAll(want)) {
				t.Fatalf("%s at seq %d: %s%s (limit %d, desc %v):\n got %v\nwant %v", who, seq, a, f.q, limit, desc, got, want)
			}
		}
		// Freezes leave the balance as the confirmed outputs make it.
		code, body := get(t, srv, "/v1/addresses/"+url.PathEscape(a)+"/balance", seq)
		var bal struct {
			Value string `json:"value"`
			Count uint64 `json:"utxo_count"`
		}
		if err := json.Unmarshal(body, &bal); code != http.StatusOK || err != nil {
			t.Fatalf("%s: balance of %s: %d %s", who, a, code, body)
		}
		if wb := m.Balance(a); bal.Value != wb.Value.String() || bal.Count != wb.Count {
			t.Fatalf("%s at seq %d: balance of %s: %s/%d, want %s/%d", who, seq, a, bal.Value, bal.Count, wb.Value, wb.Count)
		}
	}
	live := m.Live()
	var ops []chain.OutPoint
	for _, i := range rng.Perm(len(live))[:min(len(live), 12)] {
		ops = append(ops, live[i].OutPoint)
	}
	for _, op := range ops {
		code, body := get(t, srv, fmt.Sprintf("/v1/utxos/%s/%d", op.TxHash, op.Index), seq)
		var ans struct {
			Utxo listed `json:"utxo"`
		}
		if err := json.Unmarshal(body, &ans); code != http.StatusOK || err != nil {
			t.Fatalf("%s: GET %s: %d %s", who, op, code, body)
		}
		u, _, _ := m.Utxo(op)
		if want := expected(m, u); ans.Utxo.String() != want.String() {
			t.Fatalf("%s at seq %d: GET %s: %v, want %v", who, seq, op, ans.Utxo, want)
		}
	}
	if len(ops) == 0 {
		return
	}
	body, _ := json.Marshal(map[string]any{"outpoints": outPointsJSON(ops)})
	code, raw := do(t, srv, http.MethodPost, fmt.Sprintf("/v1/utxos/lookup?min_seq=%d", seq), "", body)
	var res struct {
		Results []struct {
			Utxo listed `json:"utxo"`
		} `json:"results"`
	}
	if err := json.Unmarshal([]byte(raw), &res); code != http.StatusOK || err != nil || len(res.Results) != len(ops) {
		t.Fatalf("%s: lookup: %d %s", who, code, raw)
	}
	for i, op := range ops {
		u, _, _ := m.Utxo(op)
		if want := expected(m, u); res.Results[i].Utxo.String() != want.String() {
			t.Fatalf("%s at seq %d: lookup %s: %v, want %v", who, seq, op, res.Results[i].Utxo, want)
		}
	}
}

func fmtAll(ls []listed) []string {
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = l.String()
	}
	return out
}

func outPointsJSON(ops []chain.OutPoint) []map[string]any {
	out := make([]map[string]any, len(ops))
	for i, op := range ops {
		out[i] = map[string]any{"tx_hash": op.TxHash.String(), "index": op.Index}
	}
	return out
}

// freezeCall posts a freeze (or deletes one) to the writer and returns the
// status, the count it reports and the seq of its answer.
func freezeCall(t *testing.T, srv *httptest.Server, freeze bool, ops []chain.OutPoint, reason string) (int, int, uint64, string) {
	t.Helper()
	req := map[string]any{"outpoints": outPointsJSON(ops)}
	method, member := http.MethodDelete, "unfrozen"
	if freeze {
		req["reason"] = reason
		method, member = http.MethodPost, "frozen"
	}
	body, _ := json.Marshal(req)
	code, raw := do(t, srv, method, "/v1/frozen", "admin", body)
	if code != http.StatusOK {
		return code, 0, 0, raw
	}
	var ans map[string]any
	d := json.NewDecoder(strings.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&ans); err != nil {
		t.Fatalf("%s /v1/frozen: %v: %s", method, err, raw)
	}
	n, _ := ans[member].(json.Number).Int64()
	seq, _ := ans["seq"].(json.Number).Int64()
	return code, int(n), uint64(seq), raw
}

// TestWalletStateModel runs a writer and a replica through random blocks,
// rollbacks, freezes, unfreezes and refused freezes; after each step every
// read of both nodes at the writer's seq (listings with and without
// frozen=exclude and mature=only, followed through their cursors;
// outpoint answers; batch lookups; balances) equals the reference model's.
// Each freeze answers the seq the model predicts (a freeze that changes
// nothing keeps it), and a refused one changes nothing on either node.
func TestWalletStateModel(t *testing.T) {
	defer goleak.VerifyNone(t)
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 1))
	g := model.NewGen(seed, model.GenOptions{Addresses: 5, MaxTxs: 4})
	m := model.New(walletPrune, walletWindow)

	wn, wsrv := startWriter(t, t.TempDir())
	rn, rsrv := startReplica(t, t.TempDir(), wsrv.URL)
	defer closeNode(t, wn, wsrv)
	defer closeNode(t, rn, rsrv)
	ctx := context.Background()

	var seq uint64
	matured := 0
	pick := func(n int, from []chain.OutPoint) []chain.OutPoint {
		var out []chain.OutPoint
		for _, i := range rng.Perm(len(from))[:min(n, len(from))] {
			out = append(out, from[i])
		}
		return out
	}
	liveOps := func() []chain.OutPoint {
		var ops []chain.OutPoint
		for _, u := range m.Live() {
			ops = append(ops, u.OutPoint)
		}
		return ops
	}
	// Enough blocks that coinbase outputs mature during the run (100
	// blocks after their own), each read checked at every tip on the way.
	steps, blocks, freezes, unfreezes, refused, rollbacks := 300, 0, 0, 0, 0, 0
	if raceEnabled {
		steps /= 5 // see raceEnabled; coinbase outputs mature in the run without it
	}
	for step := range steps {
		switch r := rng.IntN(20); {
		case r < 12 || m.Tip().Empty:
			b := minerBlock(g.Block(m), step)
			if _, err := m.Apply(b, false); err != nil {
				t.Fatalf("step %d: model refused a generated block: %v", step, err)
			}
			res, err := wn.Writer().Apply(ctx, b)
			if err != nil || !res.Applied {
				t.Fatalf("step %d: apply %d: %v", step, b.Height, err)
			}
			seq, blocks = res.Seq, blocks+1
		case r < 13 && rng.IntN(2) == 0:
			first, _ := m.FirstHeight()
			lo := max(m.RollbackFloor(), first, m.Tip().Height-min(m.Tip().Height, 3))
			target := lo + rng.Uint64N(m.Tip().Height-lo+1)
			if err := m.Rollback(target); err != nil {
				t.Fatalf("step %d: model rollback to %d: %v", step, target, err)
			}
			res, err := wn.Writer().Rollback(ctx, target)
			if err != nil {
				t.Fatalf("step %d: rollback to %d: %v", step, target, err)
			}
			seq, rollbacks = res.Seq, rollbacks+1
		case r < 18:
			ops := pick(1+rng.IntN(3), liveOps())
			bad := rng.IntN(5) == 0 || len(ops) == 0
			if bad {
				// Never existed, or spent: the whole request is refused.
				var op chain.OutPoint
				if spent := m.Spent(); len(spent) > 0 && rng.IntN(2) == 0 {
					op = spent[rng.IntN(len(spent))]
				} else {
					op = chain.OutPoint{TxHash: g.Hash(), Index: 0}
				}
				ops = append(ops, op)
			}
			reason := []string{"fraud report", "court order", "fraud report"}[rng.IntN(3)]
			code, n, got, raw := freezeCall(t, wsrv, true, ops, reason)
			changed, err := m.Freeze(chain.Freeze{OutPoints: ops, Reason: reason})
			switch {
			case bad:
				if code != http.StatusUnprocessableEntity || !strings.Contains(raw, `"unknown_input"`) || err == nil {
					t.Fatalf("step %d: freeze of a dead outpoint: %d %s (model: %v)", step, code, raw, err)
				}
				refused++
			case err != nil || code != http.StatusOK:
				t.Fatalf("step %d: freeze: %d %s (model: %v)", step, code, raw, err)
			default:
				if len(changed) > 0 {
					seq++
				}
				if n != len(changed) || got != seq {
					t.Fatalf("step %d: freeze answered %s, want %d changed at seq %d", step, raw, len(changed), seq)
				}
				freezes++
			}
		default:
			var frozen []chain.OutPoint
			for _, op := range liveOps() {
				if _, ok := m.Frozen(op); ok {
					frozen = append(frozen, op)
				}
			}
			var ops []chain.OutPoint
			for _, op := range append(pick(1+rng.IntN(2), frozen), pick(rng.IntN(2), liveOps())...) {
				if !slices.Contains(ops, op) {
					ops = append(ops, op)
				}
			}
			if len(ops) == 0 {
				continue
			}
			code, n, got, raw := freezeCall(t, wsrv, false, ops, "")
			changed, err := m.Unfreeze(chain.Freeze{OutPoints: ops})
			if err != nil || code != http.StatusOK {
				t.Fatalf("step %d: unfreeze: %d %s (model: %v)", step, code, raw, err)
			}
			if len(changed) > 0 {
				seq++
			}
			if n != len(changed) || got != seq {
				t.Fatalf("step %d: unfreeze answered %s, want %d changed at seq %d", step, raw, len(changed), seq)
			}
			unfreezes++
		}
		addrs := append(g.Addresses(), miner)
		n := 0
		for _, u := range m.Live() {
			if u.Flags&chain.FlagCoinbase != 0 && m.Mature(&u) {
				n++
			}
		}
		matured = max(matured, n)
		checkReads(t, "writer", wsrv, m, addrs, rng, seq)
		checkReads(t, "replica", rsrv, m, addrs, rng, seq)
	}
	t.Logf("%d blocks, %d rollbacks, %d freezes, %d unfreezes, %d refused freezes; %d frozen at the end, seq %d; at most %d mature coinbase outputs live at once",
		blocks, rollbacks, freezes, unfreezes, refused, m.FrozenCount(), seq, matured)
}

// miner is the address of the coinbase outputs minerBlock adds: nothing
// spends them, so they live long enough to mature.
const miner = "miner"

// minerBlock adds to b, a generated block, a coinbase transaction first
// paying miner (unless b has one already, which then pays as generated),
// and drops the inputs of b's transactions that spend miner's outputs
// (the generator picks inputs among every live output): so coinbase
// outputs of every height stay live and cross their maturity during the
// run, at every tip of it.
func minerBlock(b *chain.Block, step int) *chain.Block {
	isMiner := func(op chain.OutPoint) bool { return string(op.TxHash[:6]) == "miner|" }
	for i := range b.Txs {
		tx := &b.Txs[i]
		tx.Inputs = slices.DeleteFunc(tx.Inputs, isMiner)
		tx.CollateralInputs = slices.DeleteFunc(tx.CollateralInputs, isMiner)
	}
	if len(b.Txs) > 0 && b.Txs[0].Coinbase {
		return b
	}
	var h chain.Hash
	copy(h[:], fmt.Sprintf("miner|%08d|%d", step, b.Height))
	cb := chain.Tx{Hash: h, Coinbase: true, Outputs: []chain.Output{{Address: miner, Value: 50}}}
	b.Txs = append([]chain.Tx{cb}, b.Txs...)
	return b
}

// TestFreezeSurvivesRestart: an acknowledged freeze is on disk when its
// answer comes: it survives a restart of the writer, and a restarted
// replica resumes from its own store with the freeze and follows the
// unfreeze made while it was down.
func TestFreezeSurvivesRestart(t *testing.T) {
	defer goleak.VerifyNone(t)
	ctx := context.Background()
	wdir, rdir := t.TempDir(), t.TempDir()
	wn, wsrv := startWriter(t, wdir)
	for h := range uint64(3) {
		if _, err := wn.Writer().Apply(ctx, block(h)); err != nil {
			t.Fatal(err)
		}
	}
	op0 := chain.OutPoint{TxHash: block(0).Txs[0].Hash}
	op1 := chain.OutPoint{TxHash: block(1).Txs[0].Hash}
	code, n, seq, raw := freezeCall(t, wsrv, true, []chain.OutPoint{op0, op1}, "restart test")
	if code != http.StatusOK || n != 2 || seq != 4 {
		t.Fatalf("freeze: %s", raw)
	}
	frozenOn := func(srv *httptest.Server, op chain.OutPoint, seq uint64) bool {
		code, body := get(t, srv, fmt.Sprintf("/v1/utxos/%s/%d", op.TxHash, op.Index), seq)
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", op, code, body)
		}
		return strings.Contains(string(body), `"frozen":true`)
	}
	closeNode(t, wn, wsrv) // the answer came: the freeze is durable

	wn, wsrv = startWriter(t, wdir)
	if !frozenOn(wsrv, op0, seq) || !frozenOn(wsrv, op1, seq) {
		t.Fatal("the writer lost an acknowledged freeze across a restart")
	}
	rn, rsrv := startReplica(t, rdir, wsrv.URL)
	if !frozenOn(rsrv, op0, seq) || !frozenOn(rsrv, op1, seq) {
		t.Fatal("the replica does not show the writer's freeze")
	}
	closeNode(t, rn, rsrv)

	code, n, seq, raw = freezeCall(t, wsrv, false, []chain.OutPoint{op0}, "")
	if code != http.StatusOK || n != 1 || seq != 5 {
		t.Fatalf("unfreeze: %s", raw)
	}
	rn, rsrv = startReplica(t, rdir, wsrv.URL)
	if frozenOn(rsrv, op0, seq) || !frozenOn(rsrv, op1, seq) {
		t.Fatal("the restarted replica does not show the unfreeze made while it was down, or lost the freeze")
	}
	// Block 3 spends op1: the freeze lapses on both nodes.
	b := block(3)
	b.Txs[0].Inputs = []chain.OutPoint{op1}
	res, err := wn.Writer().Apply(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	code, body := get(t, rsrv, fmt.Sprintf("/v1/utxos/%s/%d", op1.TxHash, op1.Index), res.Seq)
	if code != http.StatusOK || strings.Contains(string(body), `"frozen"`) || !strings.Contains(string(body), `"spent":{`) {
		t.Fatalf("the replica after the block that spends a frozen output: %d %s", code, body)
	}
	// The rollback of that block brings op1 back live and unfrozen.
	res, err = wn.Writer().Rollback(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, srv := range []*httptest.Server{wsrv, rsrv} {
		code, body := get(t, srv, fmt.Sprintf("/v1/utxos/%s/%d", op1.TxHash, op1.Index), res.Seq)
		if code != http.StatusOK || strings.Contains(string(body), `"frozen"`) || !strings.Contains(string(body), `"spent":null`) {
			t.Fatalf("after the rollback of the spending block: %d %s", code, body)
		}
	}
	closeNode(t, rn, rsrv)
	closeNode(t, wn, wsrv)
}

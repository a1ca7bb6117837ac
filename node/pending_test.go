package node_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/internal/model"
	"github.com/utxo-cache/utxo-cache/node"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

const pendingTTL = 300 // seconds: the test's clock reaches it

// pendingItem is one item of a listing with pending=include as the checks
// compare it.
type pendingItem struct {
	TxHash         string `json:"tx_hash"`
	Index          uint32 `json:"index"`
	Value          string `json:"value"`
	Height         *uint64
	Confirmed      *bool   `json:"confirmed"`
	PendingSince   *uint64 `json:"pending_since"`
	PendingSpentBy *struct {
		TxHash string `json:"tx_hash"`
		Input  uint32 `json:"input"`
	} `json:"pending_spent_by"`
}

func (p pendingItem) String() string {
	s := fmt.Sprintf("%s:%d=%s", p.TxHash[:8], p.Index, p.Value)
	if p.Confirmed != nil {
		s += fmt.Sprintf(" confirmed=%v", *p.Confirmed)
	}
	if p.PendingSince != nil {
		s += fmt.Sprintf(" since=%d", *p.PendingSince)
	}
	if p.PendingSpentBy != nil {
		s += fmt.Sprintf(" spent_by=%s:%d", p.PendingSpentBy.TxHash[:8], p.PendingSpentBy.Input)
	}
	return s
}

// wantPending is the model's listing of address with pending=include.
func wantPending(m *model.Model, address string, desc bool) []string {
	var conf, unconf []string
	for _, u := range m.List(address, false) {
		p := pendingItem{TxHash: u.TxHash.String(), Index: u.Index, Value: fmt.Sprint(u.Value)}
		if h, in, ok := m.PendingSpender(u.OutPoint); ok {
			p.PendingSpentBy = &struct {
				TxHash string `json:"tx_hash"`
				Input  uint32 `json:"input"`
			}{h.String(), in}
		}
		conf = append(conf, p.String())
	}
	f := false
	for _, o := range m.PendingOutputs(address) {
		since := o.Since
		unconf = append(unconf, pendingItem{TxHash: o.Utxo.TxHash.String(), Index: o.Utxo.Index, Value: fmt.Sprint(o.Utxo.Value), Confirmed: &f, PendingSince: &since}.String())
	}
	if desc {
		slices.Reverse(conf)
		slices.Reverse(unconf)
		return append(unconf, conf...)
	}
	return append(conf, unconf...)
}

func listPending(t *testing.T, srv *httptest.Server, address string, limit int, desc bool, seq uint64) []string {
	t.Helper()
	base := fmt.Sprintf("/v1/addresses/%s/utxos?pending=include&limit=%d", url.PathEscape(address), limit)
	if desc {
		base += "&order=desc"
	}
	var all []string
	cursor := ""
	for pages := 0; ; pages++ {
		target := base
		if cursor != "" {
			target += "&cursor=" + url.QueryEscape(cursor)
		}
		code, body := get(t, srv, target, seq)
		var page struct {
			Utxos      []json.RawMessage `json:"utxos"`
			NextCursor *string           `json:"next_cursor"`
		}
		if err := json.Unmarshal(body, &page); code != http.StatusOK || err != nil || len(page.Utxos) > limit {
			t.Fatalf("GET %s: %d %s", target, code, body)
		}
		for _, raw := range page.Utxos {
			var p pendingItem
			_ = json.Unmarshal(raw, &p)
			var h struct {
				Height *uint64 `json:"height"`
			}
			_ = json.Unmarshal(raw, &h)
			if (h.Height == nil) != (p.Confirmed != nil) {
				t.Fatalf("GET %s: an item with height and confirmed:false, or neither: %s", target, raw)
			}
			all = append(all, p.String())
		}
		if page.NextCursor == nil {
			return all
		}
		if pages > 1000 {
			t.Fatalf("GET %s: no end", base)
		}
		cursor = *page.NextCursor
	}
}

// TestPendingModel runs a writer and a replica on a clock the test moves
// through random pending posts (from confirmed and unconfirmed outputs,
// double spends with and without replace, repeats, unknown inputs),
// withdrawals, blocks that confirm pending transactions or spend their
// inputs, rollbacks, clock moves and expiry sweeps. Each write answers
// what internal/model decides, and after each step every read with
// pending=include on either node (listings through their cursors in both
// orders, balances, outpoint answers, statuses) equals the model at the
// writer's seq.
func TestPendingModel(t *testing.T) {
	defer goleak.VerifyNone(t)
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 3))
	g := model.NewGen(seed, model.GenOptions{Addresses: 4, MaxTxs: 3})
	m := model.New(walletPrune, walletWindow)
	clock := &testClock{}
	clock.sec.Store(1_800_000_000)

	wdir := t.TempDir()
	w := startRestartable(t, wdir, clock)
	wsrv := w.srv
	rn, rsrv := startLeaseReplica(t, t.TempDir(), wsrv.URL, clock)
	defer w.close(t)
	defer closeNode(t, rn, rsrv)
	ctx := context.Background()

	var seq uint64
	var posted []chain.Hash
	counts := map[string]int{}
	spendables := func() []chain.OutPoint {
		var ops []chain.OutPoint
		for _, u := range m.Live() {
			ops = append(ops, u.OutPoint)
		}
		for _, tx := range m.PendingTxs() {
			for i := range tx.Outputs {
				ops = append(ops, chain.OutPoint{TxHash: tx.Hash, Index: uint32(i)})
			}
		}
		return ops
	}
	addrs := g.Addresses()
	steps := 300
	if raceEnabled {
		steps /= 5 // see raceEnabled
	}
	for step := range steps {
		switch r := rng.IntN(20); {
		case r < 5 || m.Tip().Empty:
			// One block, or several through a catch-up window.
			var blocks []*chain.Block
			for range 1 + rng.IntN(3)*rng.IntN(2) {
				b := g.Block(m)
				if rng.IntN(2) == 0 {
					counts["confirm"] += addPending(b, m, rng)
				}
				if _, err := m.Apply(b, false); err != nil {
					t.Fatalf("step %d: model refused a block: %v", step, err)
				}
				blocks = append(blocks, b)
			}
			if len(blocks) == 1 {
				res, err := w.node.Writer().Apply(ctx, blocks[0])
				if err != nil || !res.Applied {
					t.Fatalf("step %d: apply %d: %v", step, blocks[0].Height, err)
				}
				seq = res.Seq
			} else {
				br, err := w.node.Writer().ApplyBlocks(ctx, blocks, blocks[len(blocks)-1].Height)
				if err != nil || br.Done != len(blocks) {
					t.Fatalf("step %d: apply %d blocks: %+v %v", step, len(blocks), br, err)
				}
				seq += uint64(len(blocks))
				counts["window"]++
			}
			counts["block"] += len(blocks)
		case r < 7:
			first, _ := m.FirstHeight()
			lo := max(m.RollbackFloor(), first, m.Tip().Height-min(m.Tip().Height, 4))
			target := lo + rng.Uint64N(m.Tip().Height-lo+1)
			if err := m.Rollback(target); err != nil {
				t.Fatalf("step %d: model rollback: %v", step, err)
			}
			res, err := w.node.Writer().Rollback(ctx, target)
			if err != nil {
				t.Fatalf("step %d: rollback to %d: %v", step, target, err)
			}
			seq = res.Seq
			counts["rollback"]++
		case r >= 13 && r < 15 && rng.IntN(2) == 0:
			// A lease of outputs, pending ones included: a pending spend
			// and a transaction leaving the pending set lapse leases.
			ops := spendables()
			if len(ops) == 0 {
				continue
			}
			lops := []chain.OutPoint{ops[rng.IntN(len(ops))]}
			id := fmt.Sprintf("l%d", rng.IntN(3))
			code, ans, raw := leaseCall(t, wsrv, id, lops, 0)
			_, err := m.Lease(id, lops, 0, clock.unix())
			var held *chain.LeasedError
			switch {
			case err == nil:
				seq++
				if code != http.StatusOK || ans.Seq != seq {
					t.Fatalf("step %d: lease: %d %s, want 200 at %d", step, code, raw, seq)
				}
				counts["lease"]++
			case errors.As(err, &held):
				if code != http.StatusConflict {
					t.Fatalf("step %d: lease: %d %s, want 409", step, code, raw)
				}
				counts["leased"]++
			default:
				t.Fatalf("step %d: lease: model %v, node %d %s", step, err, code, raw)
			}
		case r < 15:
			var tx chain.Tx
			replace := false
			pend := m.PendingTxs()
			switch k := rng.IntN(10); {
			case k == 0 && len(pend) > 0:
				tx = pend[rng.IntN(len(pend))] // a repeat
			default:
				ops := spendables()
				if len(ops) == 0 {
					continue
				}
				tx = chain.Tx{Hash: g.Hash()}
				for _, i := range rng.Perm(len(ops))[:min(len(ops), 1+rng.IntN(2))] {
					tx.Inputs = append(tx.Inputs, ops[i])
				}
				if k == 1 {
					tx.Inputs = append(tx.Inputs, chain.OutPoint{TxHash: g.Hash()}) // unknown
				}
				for range 1 + rng.IntN(2) {
					tx.Outputs = append(tx.Outputs, chain.Output{Address: addrs[rng.IntN(len(addrs))], Value: 1 + rng.Uint64N(1000)})
				}
				replace = rng.IntN(3) == 0
			}
			body := pendingBody(tx, replace)
			code, raw := do(t, wsrv, http.MethodPost, "/v1/pending", nodeWalletToken, body)
			changed, err := m.Post(tx, replace, clock.unix(), pendingTTL, disk.DefaultPendingMaxTxs)
			var ans struct {
				Seq   uint64 `json:"seq"`
				Error struct {
					Code    string `json:"code"`
					SpentBy struct {
						TxHash string `json:"tx_hash"`
					} `json:"spent_by"`
				} `json:"error"`
			}
			_ = json.Unmarshal([]byte(raw), &ans)
			var ce *chain.ConflictError
			switch {
			case err == nil:
				if changed {
					seq++
					posted = append(posted, tx.Hash)
					counts["posted"]++
				} else {
					counts["repeat"]++
				}
				if code != http.StatusOK || ans.Seq != seq {
					t.Fatalf("step %d: post: %d %s, want 200 at seq %d", step, code, raw, seq)
				}
			case errors.As(err, &ce):
				if code != http.StatusConflict || ans.Error.Code != "conflict" || ans.Error.SpentBy.TxHash != ce.Spender.String() {
					t.Fatalf("step %d: post: %d %s, want 409 naming %s", step, code, raw, ce.Spender)
				}
				counts["conflict"]++
			case errors.Is(err, chain.ErrUnknownInput):
				if code != http.StatusUnprocessableEntity || ans.Error.Code != "unknown_input" {
					t.Fatalf("step %d: post: %d %s, want 422", step, code, raw)
				}
				counts["unknown"]++
			default:
				t.Fatalf("step %d: model: %v (node %d %s)", step, err, code, raw)
			}
			if replace && changed {
				counts["replace"]++
			}
		case r < 16:
			if len(posted) == 0 {
				continue
			}
			h := posted[rng.IntN(len(posted))]
			code, raw := do(t, wsrv, http.MethodDelete, "/v1/pending/"+h.String(), nodeWalletToken, nil)
			var ans struct {
				Withdrawn bool   `json:"withdrawn"`
				Seq       uint64 `json:"seq"`
			}
			_ = json.Unmarshal([]byte(raw), &ans)
			w := m.Withdraw(h, clock.unix())
			if w {
				seq++
			}
			if code != http.StatusOK || ans.Withdrawn != w || ans.Seq != seq {
				t.Fatalf("step %d: withdraw: %d %s, want %v at %d", step, code, raw, w, seq)
			}
			counts["withdraw"]++
		case r < 18:
			clock.sec.Add(int64(rng.IntN(240)))
			counts["tick"]++
		case r < 19 && rng.IntN(3) == 0:
			w.restart(t, wdir, clock) // what was acknowledged survives
			counts["restart"]++
		default:
			res, err := w.node.Writer().ExpireLeases(ctx)
			n := m.ExpirePending(clock.unix())
			leases := m.Expire(clock.unix())
			if err != nil || res.Applied != (n+leases > 0) {
				t.Fatalf("step %d: expire: %+v %v, model expired %d", step, res, err, n)
			}
			seq = res.Seq
			if n > 0 {
				counts["expired"] += n
			}
		}
		if testing.Verbose() && step%50 == 0 {
			t.Logf("step %d: %v seq %d pending %d", step, counts, seq, m.PendingCount())
		}
		checkPendingReads(t, "writer", wsrv, m, addrs, posted, rng, seq)
		checkPendingReads(t, "replica", rsrv, m, addrs, posted, rng, seq)
	}
	t.Logf("steps: %v; seq %d", counts, seq)
}

// addPending adds to b, often, the pending transactions of m whose inputs
// b leaves live or creates before them: b confirms them. It returns how
// many it added.
func addPending(b *chain.Block, m *model.Model, rng *rand.Rand) int {
	spent := map[chain.OutPoint]bool{}
	created := map[chain.OutPoint]bool{}
	add := func(tx *chain.Tx) {
		for _, in := range tx.Spends() {
			spent[in] = true
		}
		for i := range tx.Outputs {
			created[chain.OutPoint{TxHash: tx.Hash, Index: uint32(i)}] = true
		}
	}
	for i := range b.Txs {
		add(&b.Txs[i])
	}
	n := 0
	for _, tx := range m.PendingTxs() {
		ok := rng.IntN(3) != 0
		for _, in := range tx.Inputs {
			ok = ok && !spent[in] && (m.IsLive(in) || created[in])
		}
		if ok {
			b.Txs = append(b.Txs, tx)
			add(&tx)
			n++
		}
	}
	return n
}

// restartable is a writer node behind one URL that survives its restarts:
// the replica follows the same address throughout.
type restartable struct {
	node *node.Node
	srv  *httptest.Server
	h    atomic.Pointer[http.Handler]
	// inflight counts the requests the current node's handler is serving:
	// the test server is not the node's own, so the node's shutdown does
	// not wait for them, and stop must before it closes the store.
	inflight atomic.Int64
}

func startRestartable(t *testing.T, dir string, clock *testClock) *restartable {
	t.Helper()
	r := &restartable{}
	r.start(t, dir, clock)
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.inflight.Add(1)
		defer r.inflight.Add(-1)
		(*r.h.Load()).ServeHTTP(w, req)
	}))
	return r
}

func (r *restartable) start(t *testing.T, dir string, clock *testClock) {
	t.Helper()
	cfg := writerConfig(dir)
	cfg.PruneDepth, cfg.RollbackWindow = walletPrune, walletWindow
	cfg.WalletToken, cfg.Now, cfg.LeaseSweep = nodeWalletToken, clock.now, -1
	cfg.Pending = disk.PendingOptions{TTL: pendingTTL}
	n, err := node.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := n.Handler()
	r.node = n
	r.h.Store(&h)
}

func (r *restartable) stop(t *testing.T) {
	t.Helper()
	// New requests (the replica's) answer 503 until the restart; those in
	// flight on the old node end with their connections.
	var unavailable http.Handler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "restarting", http.StatusServiceUnavailable)
	})
	r.h.Store(&unavailable)
	if err := r.node.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r.srv != nil {
		r.srv.CloseClientConnections()
		deadline := time.Now().Add(10 * time.Second)
		for r.inflight.Load() > 0 { // the 503 handler returns at once
			if time.Now().After(deadline) {
				t.Fatalf("%d requests still in flight 10 s after their connections closed", r.inflight.Load())
			}
			time.Sleep(time.Millisecond)
		}
	}
	if err := r.node.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func (r *restartable) restart(t *testing.T, dir string, clock *testClock) {
	t.Helper()
	r.stop(t)
	r.start(t, dir, clock)
}

func (r *restartable) close(t *testing.T) {
	t.Helper()
	r.stop(t)
	r.srv.Close()
}

func pendingBody(tx chain.Tx, replace bool) []byte {
	var ins, outs []string
	for _, o := range tx.Inputs {
		ins = append(ins, fmt.Sprintf(`{"tx_hash":"%s","index":%d}`, o.TxHash, o.Index))
	}
	for _, o := range tx.Outputs {
		outs = append(outs, fmt.Sprintf(`{"address":%q,"value":%d}`, o.Address, o.Value))
	}
	b := fmt.Sprintf(`{"hash":"%s","inputs":[%s],"outputs":[%s]`, tx.Hash, strings.Join(ins, ","), strings.Join(outs, ","))
	if replace {
		b += `,"replace":true`
	}
	return []byte(b + "}")
}

// checkPendingReads compares the reads with pending=include on srv at seq
// with the model.
func checkPendingReads(t *testing.T, who string, srv *httptest.Server, m *model.Model, addrs []string, posted []chain.Hash, rng *rand.Rand, seq uint64) {
	t.Helper()
	for _, a := range addrs {
		desc := rng.IntN(2) == 0
		limit := []int{1, 2, 5, 1000}[rng.IntN(4)]
		got, want := listPending(t, srv, a, limit, desc, seq), wantPending(m, a, desc)
		if !slices.Equal(got, want) {
			for _, tx := range m.PendingTxs() {
				_, body := get(t, srv, "/v1/pending/"+tx.Hash.String(), seq)
				_, ub := get(t, srv, "/v1/utxos/"+tx.Hash.String()+"/0?pending=include", seq)
				t.Logf("model pending %s: node %s; output 0: %s", tx.Hash, body, ub)
			}
			t.Fatalf("%s at seq %d: %s pending=include (limit %d, desc %v):\n got %v\nwant %v", who, seq, a, limit, desc, got, want)
		}
		code, body := get(t, srv, "/v1/addresses/"+url.PathEscape(a)+"/balance?pending=include", seq)
		var bal struct {
			Value   string `json:"value"`
			Pending struct {
				Funded string `json:"funded"`
				Spent  string `json:"spent"`
			} `json:"pending"`
		}
		funded, spent := m.PendingSums(a)
		b := m.Balance(a)
		if err := json.Unmarshal(body, &bal); code != 200 || err != nil || bal.Value != b.Value.String() || bal.Pending.Funded != funded.String() || bal.Pending.Spent != spent.String() {
			t.Fatalf("%s at seq %d: balance of %s: %d %s, want %s funded %s spent %s", who, seq, a, code, body, b.Value, funded, spent)
		}
	}
	for _, h := range posted {
		info, found, forgettable := m.PendingStatus(h)
		code, body := get(t, srv, "/v1/pending/"+h.String(), seq)
		if !found || (forgettable && code == http.StatusNotFound) {
			continue
		}
		var ans struct {
			Status        string `json:"status"`
			Height        uint64 `json:"height"`
			ConflictsWith string `json:"conflicts_with"`
			Since         uint64 `json:"since"`
		}
		_ = json.Unmarshal(body, &ans)
		want := info.Status.String()
		cw := ""
		if info.Status == chain.PendingConflicting {
			cw = info.ConflictsWith.String()
		}
		if code != 200 || ans.Status != want || ans.Height != info.Height || ans.ConflictsWith != cw || ans.Since != info.Since {
			t.Fatalf("%s at seq %d: status of %s: %d %s, want %+v", who, seq, h, code, body, info)
		}
		// Its first output, with pending=include.
		op := chain.OutPoint{TxHash: h}
		code, body = get(t, srv, fmt.Sprintf("/v1/utxos/%s/0?pending=include", h), seq)
		var u struct {
			Utxo *struct {
				Confirmed *bool `json:"confirmed"`
			} `json:"utxo"`
			PendingSpent *struct {
				TxHash string `json:"tx_hash"`
			} `json:"pending_spent"`
		}
		_ = json.Unmarshal(body, &u)
		_, isPending := m.PendingUtxo(op)
		_, _, cerr := m.Utxo(op)
		sh, _, spentByPending := m.PendingSpender(op)
		switch {
		case isPending:
			if code != 200 || u.Utxo == nil || u.Utxo.Confirmed == nil || *u.Utxo.Confirmed || (u.PendingSpent != nil) != spentByPending {
				t.Fatalf("%s at seq %d: unconfirmed %s: %d %s", who, seq, op, code, body)
			}
		case cerr == nil:
			if code != 200 || u.Utxo == nil || u.Utxo.Confirmed != nil || (u.PendingSpent != nil) != spentByPending {
				t.Fatalf("%s at seq %d: confirmed %s: %d %s", who, seq, op, code, body)
			}
		default:
			if code != 404 {
				t.Fatalf("%s at seq %d: %s is neither: %d %s", who, seq, op, code, body)
			}
		}
		if spentByPending && u.PendingSpent != nil && u.PendingSpent.TxHash != sh.String() {
			t.Fatalf("%s at seq %d: %s pending_spent %s, want %s", who, seq, op, body, sh)
		}
	}
}

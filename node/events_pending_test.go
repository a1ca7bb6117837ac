package node_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/internal/model"
	"github.com/utxo-cache/utxo-cache/node"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

// pview is one address's state as a watcher with pending keeps it: its
// live confirmed outputs (outpoint → value@height), its unconfirmed outputs
// (outpoint → value@pending_since) and its outputs pending transactions
// spend (outpoint → spender:input).
type pview struct {
	live, unconf, pspent map[string]string
}

func newPview() *pview {
	return &pview{live: map[string]string{}, unconf: map[string]string{}, pspent: map[string]string{}}
}

func (v *pview) String() string {
	return fmt.Sprintf("live %v unconfirmed %v pending-spent %v", v.live, v.unconf, v.pspent)
}

// pendingViewOf is the model's view of every address in addrs, computed
// from the model's pending transactions and live outputs alone.
func pendingViewOf(m *model.Model, addrs []string) map[string]*pview {
	out := map[string]*pview{}
	for _, a := range addrs {
		out[a] = newPview()
		out[a].live = liveOf(m.List(a, false))
	}
	addrOf := map[chain.OutPoint]string{}
	for _, u := range m.Live() {
		addrOf[u.OutPoint] = u.Address
	}
	for _, tx := range m.PendingTxs() {
		for i, o := range tx.Outputs {
			op := chain.OutPoint{TxHash: tx.Hash, Index: uint32(i)}
			addrOf[op] = o.Address
			if v := out[o.Address]; v != nil {
				p, _ := m.PendingUtxo(op)
				v.unconf[op.String()] = fmt.Sprintf("%d@%d", o.Value, p.Since)
			}
		}
	}
	for _, tx := range m.PendingTxs() {
		for j, in := range tx.Inputs {
			if v := out[addrOf[in]]; v != nil {
				v.pspent[in.String()] = fmt.Sprintf("%s:%d", tx.Hash, j)
			}
		}
	}
	return out
}

// pendingSnaps are the model's views after each seq.
type pendingSnaps struct {
	mu sync.Mutex
	at map[uint64]map[string]*pview
}

func (s *pendingSnaps) put(seq uint64, m *model.Model, addrs []string) {
	v := pendingViewOf(m, addrs)
	s.mu.Lock()
	s.at[seq] = v
	s.mu.Unlock()
}

func (s *pendingSnaps) get(seq uint64) map[string]*pview {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.at[seq]
}

// pendingPart is the pending part of an event: an event pending's data, or
// the "pending" member of an apply or rollback.
type pendingPart struct {
	Txs []struct {
		TxHash string `json:"tx_hash"`
		Status string `json:"status"`
	} `json:"txs"`
	Keys []struct {
		Key     map[string]string `json:"key"`
		Created []struct {
			eventUtxo
			Confirmed    *bool   `json:"confirmed"`
			PendingSince *uint64 `json:"pending_since"`
		} `json:"created"`
		Spent []struct {
			eventOutPoint
			By struct {
				TxHash string `json:"tx_hash"`
				Input  uint32 `json:"input"`
			} `json:"by"`
		} `json:"spent"`
		Removed []eventOutPoint `json:"removed"`
		Unspent []eventOutPoint `json:"unspent"`
	} `json:"keys"`
}

// pwatcher rebuilds its addresses' views from events alone; with pending
// false it keeps the live sets only and checks that its stream says
// nothing of pending transactions.
type pwatcher struct {
	pending         bool
	post            bool // subscribes with POST
	addrs           []string
	view            map[string]*pview
	last            uint64
	events, pevents int
	conns           int
	statuses        map[string]int // the moves seen, by status
}

func (w *pwatcher) apply(ev sseEvent) error {
	seq, err := strconv.ParseUint(ev.id, 10, 64)
	if err != nil {
		return fmt.Errorf("event id %q: %v", ev.id, err)
	}
	if seq <= w.last {
		return fmt.Errorf("event %d after %d: out of order or twice", seq, w.last)
	}
	if !w.pending && (ev.event == "pending" || strings.Contains(ev.data, `"pending`) || strings.Contains(ev.data, `"confirmed":false`)) {
		return fmt.Errorf("event %d of a stream without pending: %s %s", seq, ev.event, ev.data)
	}
	var body struct {
		Seq     uint64       `json:"seq"`
		Pending *pendingPart `json:"pending"`
	}
	if err := json.Unmarshal([]byte(ev.data), &body); err != nil || body.Seq != seq {
		return fmt.Errorf("event %d: seq %d, %v: %s", seq, body.Seq, err, ev.data)
	}
	var part *pendingPart
	switch ev.event {
	case "apply", "rollback":
		var b eventBody
		if err := json.Unmarshal([]byte(ev.data), &b); err != nil {
			return fmt.Errorf("event %d: %v", seq, err)
		}
		if len(b.Keys) == 0 && body.Pending == nil {
			return fmt.Errorf("event %d touches no key: %s", seq, ev.data)
		}
		for _, k := range b.Keys {
			v := w.view[k.Key["address"]]
			if v == nil || len(k.Key) != 1 {
				return fmt.Errorf("event %d: key %v not watched", seq, k.Key)
			}
			for _, u := range k.Created {
				v.live[u.op()] = u.Value + "@" + strconv.FormatUint(u.Height, 10)
			}
			for _, s := range k.Spent {
				delete(v.live, fmt.Sprintf("%s:%d", s.TxHash, s.Index))
			}
			for _, s := range k.Removed {
				delete(v.live, fmt.Sprintf("%s:%d", s.TxHash, s.Index))
			}
			for _, u := range k.Restored {
				v.live[u.op()] = u.Value + "@" + strconv.FormatUint(u.Height, 10)
			}
		}
		part = body.Pending
	case "pending":
		part = &pendingPart{}
		if err := json.Unmarshal([]byte(ev.data), part); err != nil {
			return fmt.Errorf("event %d: %v", seq, err)
		}
		if len(part.Keys) == 0 {
			return fmt.Errorf("event %d touches no key: %s", seq, ev.data)
		}
	default:
		return fmt.Errorf("event %d: kind %q", seq, ev.event)
	}
	if part != nil {
		if len(part.Keys) == 0 || len(part.Txs) == 0 {
			return fmt.Errorf("event %d: an empty pending part: %s", seq, ev.data)
		}
		for _, tx := range part.Txs {
			w.statuses[tx.Status]++
		}
		w.pevents++
		for _, k := range part.Keys {
			a := k.Key["address"]
			v := w.view[a]
			if v == nil || len(k.Key) != 1 {
				return fmt.Errorf("event %d: pending key %v not watched", seq, k.Key)
			}
			for _, s := range k.Removed {
				op := fmt.Sprintf("%s:%d", s.TxHash, s.Index)
				if _, ok := v.unconf[op]; !ok {
					return fmt.Errorf("event %d: removed %s, which %s has not unconfirmed", seq, op, a)
				}
				delete(v.unconf, op)
			}
			for _, s := range k.Unspent {
				op := fmt.Sprintf("%s:%d", s.TxHash, s.Index)
				if _, ok := v.pspent[op]; !ok {
					return fmt.Errorf("event %d: unspent %s, which no pending transaction of %s spent", seq, op, a)
				}
				delete(v.pspent, op)
			}
			for _, u := range k.Created {
				if u.Address != a || u.Confirmed == nil || *u.Confirmed || u.PendingSince == nil || u.Height != 0 {
					return fmt.Errorf("event %d: created %+v under %s", seq, u, a)
				}
				if _, ok := v.unconf[u.op()]; ok {
					return fmt.Errorf("event %d: created %s twice", seq, u.op())
				}
				v.unconf[u.op()] = u.Value + "@" + strconv.FormatUint(*u.PendingSince, 10)
			}
			for _, s := range k.Spent {
				op := fmt.Sprintf("%s:%d", s.TxHash, s.Index)
				if _, ok := v.pspent[op]; ok {
					return fmt.Errorf("event %d: pending spend of %s twice", seq, op)
				}
				v.pspent[op] = fmt.Sprintf("%s:%d", s.By.TxHash, s.By.Input)
			}
		}
	}
	w.last = seq
	w.events++
	return nil
}

func (w *pwatcher) check(snaps *pendingSnaps) error {
	snap := snaps.get(w.last)
	if snap == nil {
		return fmt.Errorf("no model state at seq %d", w.last)
	}
	for _, a := range w.addrs {
		got, want := w.view[a], snap[a]
		if !w.pending {
			want = &pview{live: want.live, unconf: map[string]string{}, pspent: map[string]string{}}
		}
		if got.String() != want.String() {
			return fmt.Errorf("seq %d, address %s: events give %v; the model %v", w.last, a, got, want)
		}
	}
	return nil
}

// run follows the watcher's addresses until it has the event of the seq
// final names, reconnecting at random points to a random node.
func (w *pwatcher) run(rng *rand.Rand, nodes []string, snaps *pendingSnaps, final chan uint64) error {
	target := uint64(0)
	for conn := 0; ; conn++ {
		w.conns++
		if conn > 10000 {
			return fmt.Errorf("no end after %d connections", conn)
		}
		useHeader := rng.IntN(2) == 0
		var req *http.Request
		base := nodes[rng.IntN(len(nodes))] + "/v1/events"
		q := url.Values{}
		if !useHeader {
			q.Set("after_seq", strconv.FormatUint(w.last, 10))
		}
		if w.post {
			var keys []string
			for _, a := range w.addrs {
				keys = append(keys, fmt.Sprintf(`{"address":%q}`, a))
			}
			body := fmt.Sprintf(`{"keys":[%s],"pending":%v}`, strings.Join(keys, ","), w.pending)
			req, _ = http.NewRequest(http.MethodPost, base+"?"+q.Encode(), strings.NewReader(body))
		} else {
			q["address"] = w.addrs
			if w.pending {
				q.Set("pending", "true")
			}
			req, _ = http.NewRequest(http.MethodGet, base+"?"+q.Encode(), nil)
		}
		if useHeader {
			req.Header.Set("Last-Event-ID", strconv.FormatUint(w.last, 10))
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			return fmt.Errorf("%s %s: %d", req.Method, req.URL, resp.StatusCode)
		}
		drop := 1 + rng.IntN(8)
		var failed error
		done := false
		_ = readEvents(bufio.NewReader(resp.Body), func(ev sseEvent) bool {
			if failed = w.apply(ev); failed != nil {
				return false
			}
			if failed = w.check(snaps); failed != nil {
				return false
			}
			if target == 0 {
				select {
				case target = <-final:
				default:
				}
			}
			if target != 0 && w.last >= target {
				done = true
				return false
			}
			drop--
			return drop > 0
		})
		resp.Body.Close()
		if failed != nil || done {
			return failed
		}
		if target == 0 {
			select {
			case target = <-final:
			default:
			}
		}
	}
}

// TestEventsPendingMatchModel: a writer and its replica serve event streams
// while the writer takes a random chain (single blocks and catch-up windows,
// blocks that confirm pending transactions and blocks that conflict them,
// rollbacks of up to four blocks) and pending transactions (posts, some
// replacing others with their descendants, withdrawals, expiries). Watchers
// with pending requested rebuild each address's live set, unconfirmed
// outputs and pending-spent outputs from events alone and equal the model
// after every event; watchers without pending keep the live sets and never
// see a word of pending transactions. All resume at random points, with
// Last-Event-ID or after_seq, on either node, by GET or POST.
func TestEventsPendingMatchModel(t *testing.T) {
	ctx := context.Background()
	clock := &testClock{}
	clock.sec.Store(1_800_000_000)
	cfg := writerConfig(t.TempDir())
	cfg.PruneDepth, cfg.RollbackWindow = walletPrune, walletWindow
	cfg.WalletToken, cfg.Now, cfg.LeaseSweep = nodeWalletToken, clock.now, -1
	cfg.Pending = disk.PendingOptions{TTL: pendingTTL}
	cfg.ReplicationRetention = 100_000
	wn, err := node.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	wsrv := httptest.NewServer(wn.Handler())
	defer func() { wsrv.CloseClientConnections(); wsrv.Close(); _ = wn.Close(ctx) }()
	rn, err := node.Start(ctx, node.Config{DataDir: t.TempDir(), ReplicaOf: wsrv.URL, ReplicationToken: "repl",
		MemoryCacheBytes: 8 << 20, WalletToken: nodeWalletToken, Now: clock.now, ReplicationRetention: 100_000})
	if err != nil {
		t.Fatal(err)
	}
	rsrv := httptest.NewServer(rn.Handler())
	defer func() { rsrv.CloseClientConnections(); rsrv.Close(); _ = rn.Close(ctx) }()
	waitFor(t, "the replica serves", func() bool {
		code, _ := do(t, rsrv, http.MethodGet, "/v1/tip", "", nil)
		return code == http.StatusOK
	})

	seed := testSeed(t)
	m := model.New(walletPrune, walletWindow)
	g := model.NewGen(seed, model.GenOptions{Addresses: 5, MaxTxs: 3})
	addrs := g.Addresses()
	snaps := &pendingSnaps{at: map[uint64]map[string]*pview{}}
	snaps.put(0, m, addrs)

	const watchers = 6
	var ws []*pwatcher
	final := make(chan uint64, watchers)
	errs := make(chan error, watchers)
	for i := range watchers {
		rng := rand.New(rand.NewPCG(seed+uint64(i), 77))
		w := &pwatcher{pending: i < 4, post: i%2 == 1, view: map[string]*pview{}, statuses: map[string]int{}}
		for _, a := range addrs {
			if rng.IntN(2) == 0 || len(w.addrs) == 0 && a == addrs[len(addrs)-1] {
				w.addrs = append(w.addrs, a)
				w.view[a] = newPview()
			}
		}
		ws = append(ws, w)
		go func() { errs <- w.run(rng, []string{wsrv.URL, rsrv.URL}, snaps, final) }()
	}

	rng := rand.New(rand.NewPCG(seed, 5))
	seq := uint64(0)
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
	for step := range 200 {
		switch r := rng.IntN(20); {
		case r < 6 || m.Tip().Empty:
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
				seq++
				snaps.put(seq, m, addrs)
			}
			if len(blocks) == 1 {
				if res, err := wn.Writer().Apply(ctx, blocks[0]); err != nil || res.Seq != seq {
					t.Fatalf("step %d: apply: seq %d (want %d), %v", step, res.Seq, seq, err)
				}
			} else {
				br, err := wn.Writer().ApplyBlocks(ctx, blocks, blocks[len(blocks)-1].Height)
				if err != nil || br.Done != len(blocks) {
					t.Fatalf("step %d: apply %d blocks: %+v %v", step, len(blocks), br, err)
				}
				counts["window"]++
			}
			counts["block"] += len(blocks)
		case r < 8:
			first, _ := m.FirstHeight()
			lo := max(m.RollbackFloor(), first, m.Tip().Height-min(m.Tip().Height, 4))
			target := lo + rng.Uint64N(m.Tip().Height-lo+1)
			if target == m.Tip().Height {
				continue
			}
			if err := m.Rollback(target); err != nil {
				t.Fatalf("step %d: model rollback: %v", step, err)
			}
			seq++
			snaps.put(seq, m, addrs)
			if res, err := wn.Writer().Rollback(ctx, target); err != nil || res.Seq != seq {
				t.Fatalf("step %d: rollback to %d: seq %d (want %d), %v", step, target, res.Seq, seq, err)
			}
			counts["rollback"]++
		case r < 15:
			ops := spendables()
			if len(ops) == 0 {
				continue
			}
			tx := chain.Tx{Hash: g.Hash()}
			for _, i := range rng.Perm(len(ops))[:min(len(ops), 1+rng.IntN(2))] {
				tx.Inputs = append(tx.Inputs, ops[i])
			}
			for range 1 + rng.IntN(2) {
				tx.Outputs = append(tx.Outputs, chain.Output{Address: addrs[rng.IntN(len(addrs))], Value: 1 + rng.Uint64N(1000)})
			}
			replace := rng.IntN(2) == 0
			changed, err := m.Post(tx, replace, clock.unix(), pendingTTL, disk.DefaultPendingMaxTxs)
			var ce *chain.ConflictError
			switch {
			case err == nil && changed:
				seq++
				snaps.put(seq, m, addrs)
				posted = append(posted, tx.Hash)
				counts["posted"]++
			case errors.As(err, &ce) || errors.Is(err, chain.ErrUnknownInput):
				counts["refused"]++
			case err != nil:
				t.Fatalf("step %d: model post: %v", step, err)
			}
			code, raw := do(t, wsrv, http.MethodPost, "/v1/pending", nodeWalletToken, pendingBody(tx, replace))
			var ans struct {
				Seq uint64 `json:"seq"`
			}
			_ = json.Unmarshal([]byte(raw), &ans)
			if (err == nil) != (code == http.StatusOK) || err == nil && ans.Seq != seq {
				t.Fatalf("step %d: post: %d %s; model %v at seq %d", step, code, raw, err, seq)
			}
		case r < 17:
			if len(posted) == 0 {
				continue
			}
			h := posted[rng.IntN(len(posted))]
			if m.Withdraw(h, clock.unix()) {
				seq++
				snaps.put(seq, m, addrs)
				counts["withdraw"]++
			}
			code, raw := do(t, wsrv, http.MethodDelete, "/v1/pending/"+h.String(), nodeWalletToken, nil)
			var ans struct {
				Seq uint64 `json:"seq"`
			}
			_ = json.Unmarshal([]byte(raw), &ans)
			if code != http.StatusOK || ans.Seq != seq {
				t.Fatalf("step %d: withdraw: %d %s, want seq %d", step, code, raw, seq)
			}
		case r < 19:
			clock.sec.Add(int64(rng.IntN(200)))
		default:
			n := m.ExpirePending(clock.unix())
			if n > 0 {
				seq++
				snaps.put(seq, m, addrs)
				counts["expired"] += n
			}
			res, err := wn.Writer().ExpireLeases(ctx)
			if err != nil || res.Applied != (n > 0) || res.Seq != seq {
				t.Fatalf("step %d: expire: %+v %v, model expired %d at seq %d", step, res, err, n, seq)
			}
		}
	}
	// A last post pays every address and expires, so every watcher with
	// pending sees an expiry.
	for len(m.Live()) == 0 {
		b := g.Block(m)
		if _, err := m.Apply(b, false); err != nil {
			t.Fatal(err)
		}
		seq++
		snaps.put(seq, m, addrs)
		if res, err := wn.Writer().Apply(ctx, b); err != nil || res.Seq != seq {
			t.Fatalf("block %d: seq %d (want %d), %v", b.Height, res.Seq, seq, err)
		}
	}
	{
		tx := chain.Tx{Hash: g.Hash(), Inputs: []chain.OutPoint{m.Live()[0].OutPoint}}
		for _, a := range addrs {
			tx.Outputs = append(tx.Outputs, chain.Output{Address: a, Value: 1})
		}
		if _, err := m.Post(tx, true, clock.unix(), pendingTTL, disk.DefaultPendingMaxTxs); err != nil {
			t.Fatal(err)
		}
		seq++
		snaps.put(seq, m, addrs)
		if code, raw := do(t, wsrv, http.MethodPost, "/v1/pending", nodeWalletToken, pendingBody(tx, true)); code != http.StatusOK {
			t.Fatalf("the last post: %d %s", code, raw)
		}
		clock.sec.Add(pendingTTL + 1)
		if m.ExpirePending(clock.unix()) == 0 {
			t.Fatal("the model expired nothing")
		}
		seq++
		snaps.put(seq, m, addrs)
		if res, err := wn.Writer().ExpireLeases(ctx); err != nil || res.Seq != seq {
			t.Fatalf("the last expiry: %+v %v, want seq %d", res, err, seq)
		}
	}
	last := g.Block(m)
	tx := chain.Tx{Hash: g.Hash()}
	for _, a := range addrs {
		tx.Outputs = append(tx.Outputs, chain.Output{Address: a, Value: 1})
	}
	last.Txs = append(last.Txs, tx)
	if _, err := m.Apply(last, false); err != nil {
		t.Fatal(err)
	}
	seq++
	snaps.put(seq, m, addrs)
	for range watchers {
		final <- seq
	}
	if res, err := wn.Writer().Apply(ctx, last); err != nil || res.Seq != seq {
		t.Fatalf("last block: seq %d (want %d), %v", res.Seq, seq, err)
	}
	for range watchers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	statuses := map[string]int{}
	pevents, conns := 0, 0
	for _, w := range ws {
		pevents, conns = pevents+w.pevents, conns+w.conns
		for s, n := range w.statuses {
			statuses[s] += n
		}
	}
	t.Logf("steps %v, %d changes; pending parts %d, moves seen %v, over %d connections", counts, seq, pevents, statuses, conns)
	for _, s := range []string{"pending", "confirmed", "conflicting", "withdrawn", "expired"} {
		if statuses[s] == 0 {
			t.Errorf("a weak run: no move to %s seen", s)
		}
	}
	if counts["window"] == 0 || counts["rollback"] == 0 {
		t.Errorf("a weak run: %v", counts)
	}
}

package loadtest

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/internal/workload"
)

// checkWorld is a small preloaded world for checker tests.
func checkWorld(t *testing.T) *world {
	t.Helper()
	w, err := newWorld(workload.Options{Seed: 7, Profile: workload.Cardano, TxsPerBlock: 30})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.preload(preloadPlan{utxos: 2000, seedUTXOs: 1000, seedBlockOutputs: 500, minBlocks: 20},
		func(*chain.Block) error { return nil }); err != nil {
		t.Fatal(err)
	}
	w.setSeq(checkSeq)
	return w
}

// checkSeq is checkWorld's commit sequence.
const checkSeq = 100

func tipJSON(tip chain.Tip) string {
	return `{"height":` + strconv.FormatUint(tip.Height, 10) + `,"hash":"` + tip.Hash.String() + `"}`
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// pageBody renders a listing page as the service would.
func pageBody(t *testing.T, tip chain.Tip, address string, items []chain.Utxo, next string) string {
	var ws []wireUtxo
	for i := range items {
		ws = append(ws, toWire(&items[i]))
	}
	if ws == nil {
		ws = []wireUtxo{}
	}
	cursor := "null"
	if next != "" {
		cursor = `"` + next + `"`
	}
	return `{"tip":` + tipJSON(tip) + `,"address":` + mustJSON(t, address) + `,"utxos":` + mustJSON(t, ws) + `,"next_cursor":` + cursor + `}`
}

func TestCheckerPages(t *testing.T) {
	w := checkWorld(t)
	c := &checker{w: w}
	tip := w.modelTip()
	// The exchange address has many outputs: pages of 10.
	addr := w.exchange[0]
	list := w.model.List(addr, false)
	if len(list) < 25 {
		t.Fatalf("exchange address has %d outputs; the test needs 25+", len(list))
	}
	req := request{kind: kindDeep, method: "GET", path: "/p", address: addr, limit: 10}
	check := func(name string, r request, body string, wantChecked, wantOK bool) {
		t.Helper()
		checked, err := c.check(&sample{req: r, status: 200, headHeight: strconv.FormatUint(tip.Height, 10), commitSeq: "100", body: []byte(body)})
		if checked != wantChecked || (err == nil) != wantOK {
			t.Errorf("%s: checked %v, err %v; want checked %v, ok %v", name, checked, err, wantChecked, wantOK)
		}
	}
	check("first page", req, pageBody(t, tip, addr, list[:10], "c1"), true, true)
	check("first page, short and final", req, pageBody(t, tip, addr, list[:10], ""), true, false)
	check("first page, skips one", req, pageBody(t, tip, addr, append(append([]chain.Utxo{}, list[:5]...), list[6:11]...), "c1"), true, false)
	bad := append([]chain.Utxo{}, list[:10]...)
	bad[3].Value++
	check("first page, wrong value", req, pageBody(t, tip, addr, bad, "c1"), true, false)

	// A continued page: must start right after the previous page's end when
	// that page had the same tip.
	cont := req
	cont.cursor = "c1"
	cont.prev = &pagePosition{last: list[9].OutPoint, tip: tip}
	check("second page", cont, pageBody(t, tip, addr, list[10:20], "c2"), true, true)
	check("second page repeats an item", cont, pageBody(t, tip, addr, list[9:19], "c2"), true, false)
	last := cont
	n := len(list)
	last.prev = &pagePosition{last: list[n-6].OutPoint, tip: tip}
	check("last page", last, pageBody(t, tip, addr, list[n-5:], ""), true, true)
	check("last page, cut short", last, pageBody(t, tip, addr, list[n-5:n-1], ""), true, false)
	// After a new tip, only contiguity can be checked.
	other := cont
	other.prev = &pagePosition{last: list[9].OutPoint, tip: chain.Tip{Height: 1}}
	check("continued across tips", other, pageBody(t, tip, addr, list[12:22], "c2"), true, true)

	// Another state than the model's (an older seq, as a lagging replica
	// answers): skipped, not judged, whatever its tip.
	old := chain.Tip{Height: tip.Height - 1, Hash: tip.Hash}
	for _, at := range []struct {
		seq string
		tip chain.Tip
	}{{"99", old}, {"99", tip}, {"101", tip}} {
		checked, err := c.check(&sample{req: req, status: 200, headHeight: strconv.FormatUint(at.tip.Height, 10), commitSeq: at.seq,
			body: []byte(pageBody(t, at.tip, addr, list[:3], ""))})
		if checked || err != nil {
			t.Errorf("an answer at seq %s, tip %s was judged: %v, %v", at.seq, at.tip, checked, err)
		}
	}
	// At the model's seq, another tip is a mismatch, not a skip.
	checked, err := c.check(&sample{req: req, status: 200, headHeight: strconv.FormatUint(old.Height, 10), commitSeq: "100",
		body: []byte(pageBody(t, old, addr, list[:10], "c"))})
	if !checked || err == nil {
		t.Errorf("an answer at the model's seq with another tip: checked %v, err %v", checked, err)
	}
	// Header and body disagreeing is a mismatch at any tip; so is an
	// answer without its state's seq.
	checked, err = c.check(&sample{req: req, status: 200, headHeight: "1", commitSeq: "100", body: []byte(pageBody(t, tip, addr, list[:10], "c"))})
	if !checked || err == nil {
		t.Error("X-Tip-Height different from the body's tip went unnoticed")
	}
	checked, err = c.check(&sample{req: req, status: 200, headHeight: strconv.FormatUint(tip.Height, 10), body: []byte(pageBody(t, tip, addr, list[:10], "c1"))})
	if !checked || err == nil {
		t.Error("an answer without X-Commit-Seq went unnoticed")
	}
}

// TestCheckerSkipsTheSameTipAtAnotherSeq: after a rollback the model is
// back at a tip it had several changes earlier. An answer a lagging replica
// gave at that earlier seq is skipped, not compared (its content is not
// even looked at: here it is wrong), and the same answer claimed at the
// model's seq is a mismatch.
func TestCheckerSkipsTheSameTipAtAnotherSeq(t *testing.T) {
	w := checkWorld(t)
	at := w.modelTip()
	for i := range 3 {
		b := w.nextBlock()
		if err := w.applyToModel(b, checkSeq+1+uint64(i)); err != nil {
			t.Fatal(err)
		}
		w.extend(b)
	}
	if err := w.rollbackModel(at.Height, checkSeq+4); err != nil {
		t.Fatal(err)
	}
	if w.modelTip() != at {
		t.Fatalf("model at %s after the rollback, want %s", w.modelTip(), at)
	}
	var live chain.OutPoint
	for op := range w.gen.LiveOutPoints() {
		live = op
		break
	}
	c := &checker{w: w}
	req := request{kind: kindOutpoint, ops: []chain.OutPoint{live}}
	wrong := sample{req: req, status: 404, headHeight: strconv.FormatUint(at.Height, 10), commitSeq: strconv.Itoa(checkSeq),
		body: []byte(`{"tip":` + tipJSON(at) + `,"error":{"code":"not_found","message":"x"}}`)}
	if checked, err := c.check(&wrong); checked || err != nil {
		t.Errorf("an answer of seq %d was judged against the model at seq %d: %v, %v", checkSeq, checkSeq+4, checked, err)
	}
	wrong.commitSeq = strconv.Itoa(checkSeq + 4)
	if checked, err := c.check(&wrong); !checked || err == nil {
		t.Errorf("a wrong answer at the model's seq: checked %v, err %v", checked, err)
	}
}

func TestCheckerOutpointsBalancesTip(t *testing.T) {
	w := checkWorld(t)
	c := &checker{w: w, stable: true}
	tip := w.modelTip()
	height := strconv.FormatUint(tip.Height, 10)
	var live chain.OutPoint
	for op := range w.gen.LiveOutPoints() {
		live = op
		break
	}
	u, _, err := w.model.Utxo(live)
	if err != nil {
		t.Fatal(err)
	}
	run := func(name string, s sample, wantOK bool) {
		t.Helper()
		s.headHeight, s.commitSeq = height, "100"
		checked, err := c.check(&s)
		if !checked || (err == nil) != wantOK {
			t.Errorf("%s: checked %v, err %v; want ok %v", name, checked, err, wantOK)
		}
	}
	wu := toWire(&u)
	good := `{"tip":` + tipJSON(tip) + `,"utxo":` + mustJSON(t, wu) + `,"spent":null}`
	run("live outpoint", sample{req: request{kind: kindOutpoint, ops: []chain.OutPoint{live}}, status: 200, body: []byte(good)}, true)
	run("claimed spent", sample{req: request{kind: kindOutpoint, ops: []chain.OutPoint{live}}, status: 200,
		body: []byte(strings.Replace(good, `"spent":null`, `"spent":{"tx_hash":"`+live.TxHash.String()+`","height":1}`, 1))}, false)
	run("claimed missing", sample{req: request{kind: kindOutpoint, ops: []chain.OutPoint{live}}, status: 404,
		body: []byte(`{"tip":` + tipJSON(tip) + `,"error":{"code":"not_found","message":"x"}}`)}, false)
	unknown := chain.OutPoint{Index: 9}
	run("unknown outpoint", sample{req: request{kind: kindOutpoint, ops: []chain.OutPoint{unknown}}, status: 404,
		body: []byte(`{"tip":` + tipJSON(tip) + `,"error":{"code":"not_found","message":"x"}}`)}, true)

	lookup := `{"tip":` + tipJSON(tip) + `,"results":[{"tx_hash":"` + live.TxHash.String() + `","index":` + strconv.Itoa(int(live.Index)) +
		`,"utxo":` + mustJSON(t, wu) + `,"spent":null},{"tx_hash":"` + unknown.TxHash.String() + `","index":9,"utxo":null,"spent":null}]}`
	lreq := request{kind: kindLookup, ops: []chain.OutPoint{live, unknown}}
	run("lookup", sample{req: lreq, status: 200, body: []byte(lookup)}, true)
	swapped := request{kind: kindLookup, ops: []chain.OutPoint{unknown, live}}
	run("lookup out of order", sample{req: swapped, status: 200, body: []byte(lookup)}, false)

	addr := u.Address
	b := w.model.Balance(addr)
	var assets []wireAsset
	for _, a := range b.Assets {
		assets = append(assets, wireAsset{Policy: strings.ToLower(hexOf(a.Policy)), Name: hexOf(a.Name), Quantity: a.Quantity.String()})
	}
	if assets == nil {
		assets = []wireAsset{}
	}
	bal := `{"tip":` + tipJSON(tip) + `,"address":` + mustJSON(t, addr) + `,"value":"` + b.Value.String() + `","assets":` + mustJSON(t, assets) +
		`,"utxo_count":` + strconv.FormatUint(b.Count, 10) + `}`
	breq := request{kind: kindBalance, address: addr}
	run("balance", sample{req: breq, status: 200, body: []byte(bal)}, true)
	run("balance off by one", sample{req: breq, status: 200,
		body: []byte(strings.Replace(bal, `"utxo_count":`+strconv.FormatUint(b.Count, 10), `"utxo_count":`+strconv.FormatUint(b.Count+1, 10), 1))}, false)

	tipBody := `{"tip":` + tipJSON(tip) + `,"utxo_count":` + strconv.FormatUint(w.model.Count(), 10) + `,"utxo_digest":"` + w.model.Digest().String() + `"}`
	run("tip", sample{req: request{kind: kindTip}, status: 200, body: []byte(tipBody)}, true)
	run("tip digest", sample{req: request{kind: kindTip}, status: 200, body: []byte(strings.Replace(tipBody, `"utxo_digest":"`, `"utxo_digest":"f`, 1))}, false)

	// While a feed moves the tip, the tip's figures are not compared.
	c.stable = false
	s := sample{req: request{kind: kindTip}, status: 200, headHeight: height, commitSeq: "100", body: []byte(strings.Replace(tipBody, `"utxo_digest":"`, `"utxo_digest":"f`, 1))}
	if checked, err := c.check(&s); checked || err != nil {
		t.Errorf("tip figures compared during a feed: %v, %v", checked, err)
	}
}

// TestAddressIndexMatchesModel: the checker's listings and balances (the
// model asked outpoint by outpoint) are exactly model.List and
// model.Balance, across a rollback and a new branch.
func TestAddressIndexMatchesModel(t *testing.T) {
	w := checkWorld(t)
	branch := rollbackAndRebranch(t, w, w.modelTip().Height-4)
	for _, b := range branch[:2] { // part of the branch: some outputs stay rolled back
		if err := w.applyToModel(b, 0); err != nil {
			t.Fatal(err)
		}
	}
	w.mu.RLock()
	defer w.mu.RUnlock()
	if len(w.byAddress) < 100 {
		t.Fatalf("only %d addresses", len(w.byAddress))
	}
	for addr := range w.byAddress {
		for _, desc := range []bool{false, true} {
			if got, want := w.addressUtxosLocked(addr, desc), w.model.List(addr, desc); !reflect.DeepEqual(got, want) {
				t.Fatalf("%s desc=%v: index lists %d, model %d", addr, desc, len(got), len(want))
			}
		}
		if got, want := balanceOf(w.addressUtxosLocked(addr, false)), w.model.Balance(addr); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: index balance %+v, model %+v", addr, got, want)
		}
	}
}

func hexOf(b []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, digits[c>>4], digits[c&0xf])
	}
	return string(out)
}

// rollbackAndRebranch rolls the model back to target and returns the new
// branch, as a feed script's rollback step does.
func rollbackAndRebranch(t *testing.T, w *world, target uint64) []*chain.Block {
	t.Helper()
	if err := w.rollbackModel(target, 0); err != nil {
		t.Fatal(err)
	}
	branch := w.rebranch(target)
	if len(branch) == 0 {
		t.Fatalf("no branch above %d", target)
	}
	return branch
}

// TestRollbackRebranch: the world's rollback re-makes the undone blocks as
// a new branch that the model accepts, and the generator goes on from its
// tip.
func TestRollbackRebranch(t *testing.T) {
	w := checkWorld(t)
	before := w.modelTip()
	countBefore := w.model.Count()
	branch := rollbackAndRebranch(t, w, before.Height-3)
	if len(branch) != 3 || w.modelTip().Height != before.Height-3 {
		t.Fatalf("branch of %d blocks, tip %v", len(branch), w.modelTip())
	}
	for _, b := range branch {
		if err := w.applyToModel(b, 0); err != nil {
			t.Fatal(err)
		}
		w.extend(b)
	}
	after := w.modelTip()
	if after.Height != before.Height || after.Hash == before.Hash {
		t.Fatalf("new branch tip %v, old %v: want the same height, another hash", after, before)
	}
	if w.model.Count() != countBefore {
		t.Errorf("the same transactions left %d UTXOs, not %d", w.model.Count(), countBefore)
	}
	for range 5 {
		b := w.nextBlock()
		if err := w.applyToModel(b, 0); err != nil {
			t.Fatalf("the generator does not go on from the new branch: %v", err)
		}
		w.extend(b)
	}
}

// TestFeedRetriesUnansweredWrites: a block post that times out is posted
// again, and "applied": false (the block is already there) settles it, so
// the model stays in step with the store.
func TestFeedRetriesUnansweredWrites(t *testing.T) {
	w := checkWorld(t)
	var mu sync.Mutex
	posts := 0
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		mu.Lock()
		posts++
		n := posts
		mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer tok" {
			rw.WriteHeader(http.StatusUnauthorized)
			return
		}
		if n == 1 {
			time.Sleep(300 * time.Millisecond) // the client gives up first
			_, _ = rw.Write([]byte(`{"applied":true,"seq":7}`))
			return
		}
		_, _ = rw.Write([]byte(`{"applied":false,"seq":7}`))
	}))
	defer srv.Close()
	f := &feed{w: w, client: &http.Client{Timeout: 100 * time.Millisecond}, writer: srv.URL, token: "tok",
		apply: newSyncHist(), rollback: newSyncHist()}
	before := w.modelTip().Height
	b, _, seq, _, err := f.step(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if b.Height != before+1 || w.modelTip().Height != before+1 || posts != 2 || seq != 7 || w.seq != 7 {
		t.Fatalf("block %d, model at %d, %d posts; want %d, %d, 2", b.Height, w.modelTip().Height, posts, before+1, before+1)
	}
	if len(f.errs) != 1 {
		t.Errorf("the unanswered attempt was not reported: %v", f.errs)
	}
}

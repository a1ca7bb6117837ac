package api_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/utxo-cache/utxo-cache/api"
	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

func pendingJSON(t chain.Tx, replace bool) string {
	var ins []string
	for _, o := range t.Inputs {
		ins = append(ins, fmt.Sprintf(`{"tx_hash":"%s","index":%d}`, o.TxHash, o.Index))
	}
	var outs []string
	for _, o := range t.Outputs {
		outs = append(outs, fmt.Sprintf(`{"address":%q,"value":%d}`, o.Address, o.Value))
	}
	b := fmt.Sprintf(`{"hash":"%s","inputs":[%s],"outputs":[%s]`, t.Hash, strings.Join(ins, ","), strings.Join(outs, ","))
	if replace {
		b += `,"replace":true`
	}
	return b + "}"
}

func (s *stack) pending(method, target, ctype string, body []byte, header ...string) *response {
	s.t.Helper()
	if header == nil {
		header = []string{"Authorization", "Bearer " + walletToken}
	}
	return s.do(call{method: method, target: target, body: body, ctype: ctype, header: header})
}

// TestPendingHTTP: the pending routes through the handler: a post, its
// status, a repeat (no-op), a double spend without replace (409 conflict
// naming the spender) and with it (the old one conflicting), a withdrawal,
// and the refusals: unknown input, bad body, no raw reader, wrong token,
// no wallet token, a replica.
func TestPendingHTTP(t *testing.T) {
	s := newStack(t, stackConfig{api: api.Options{WalletToken: walletToken}})
	s.apply(tx("fund", nil, out("alice", 100), out("bob", 50)))
	a := tx("pa", spends(op("fund", 0)), out("carol", 99))
	b := tx("pb", spends(op("fund", 0)), out("dave", 98))
	post := func(t chain.Tx, replace bool) *response {
		return s.pending(http.MethodPost, "/v1/pending", "application/json", []byte(pendingJSON(t, replace)))
	}
	status := func(h chain.Hash) string {
		r := s.pending(http.MethodGet, "/v1/pending/"+h.String(), "", nil, "X-None", "x")
		if r.code != 200 {
			return fmt.Sprint(r.code)
		}
		m := r.obj(t)
		return fmt.Sprintf("%v %v", m["status"], m["conflicts_with"])
	}
	r := post(a, false)
	if m := r.obj(t); r.code != 200 || m["status"] != "pending" || m["tx_hash"] != a.Hash.String() || m["seq"] == nil {
		t.Fatalf("post: %s", r)
	}
	seq := r.obj(t)["seq"]
	if r := post(a, false); r.code != 200 || r.obj(t)["seq"] != seq {
		t.Fatalf("post again: %s (seq %v)", r, seq)
	}
	if got := status(a.Hash); got != "pending <nil>" {
		t.Fatalf("status: %s", got)
	}
	r = post(b, false)
	if r.code != 409 || !strings.Contains(string(r.body), `"code":"conflict"`) || !strings.Contains(string(r.body), `"spent_by":{"tx_hash":"`+a.Hash.String()+`","input":0}`) {
		t.Fatalf("double spend: %s", r)
	}
	if r := post(b, true); r.code != 200 {
		t.Fatalf("replace: %s", r)
	}
	if got := status(a.Hash); got != "conflicting "+b.Hash.String() {
		t.Fatalf("replaced: %s", got)
	}
	r = s.pending(http.MethodDelete, "/v1/pending/"+b.Hash.String(), "", nil)
	if r.code != 200 || r.obj(t)["withdrawn"] != true {
		t.Fatalf("withdraw: %s", r)
	}
	if r := s.pending(http.MethodDelete, "/v1/pending/"+b.Hash.String(), "", nil); r.code != 200 || r.obj(t)["withdrawn"] != false {
		t.Fatalf("withdraw again: %s", r)
	}
	if got := status(b.Hash); got != "withdrawn <nil>" {
		t.Fatalf("withdrawn: %s", got)
	}
	for name, c := range map[string]struct {
		ctype, body string
		header      []string
		code        int
		errCode     string
	}{
		"unknown input":  {"application/json", pendingJSON(tx("pc", spends(op("nope", 0)), out("x", 1)), false), nil, 422, "unknown_input"},
		"coinbase":       {"application/json", `{"hash":"` + txh("cb").String() + `","inputs":[],"outputs":[],"coinbase":true}`, nil, 400, "invalid_argument"},
		"not json":       {"application/json", `{"hash":`, nil, 400, "invalid_argument"},
		"unknown field":  {"application/json", `{"hash":"` + txh("x").String() + `","inputs":[],"outputs":[],"x":1}`, nil, 400, "invalid_argument"},
		"raw, no reader": {"application/octet-stream", "\x01\x00", nil, 415, "unsupported_media_type"},
		"text":           {"text/plain", "x", nil, 415, "unsupported_media_type"},
		"wrong token":    {"application/json", pendingJSON(a, false), []string{"Authorization", "Bearer nope"}, 401, "unauthorized"},
		"admin token":    {"application/json", pendingJSON(a, false), []string{"Authorization", "Bearer " + testToken}, 401, "unauthorized"},
	} {
		r := s.pending(http.MethodPost, "/v1/pending", c.ctype, []byte(c.body), c.header...)
		if r.code != c.code || !strings.Contains(string(r.body), `"code":"`+c.errCode+`"`) {
			t.Errorf("%s: %s, want %d %s", name, r, c.code, c.errCode)
		}
	}
	if r := s.pending(http.MethodGet, "/v1/pending/"+txh("never").String(), "", nil, "X-None", "x"); r.code != 404 {
		t.Fatalf("never posted: %s", r)
	}
	if r := s.pending(http.MethodGet, "/v1/pending/xyz", "", nil, "X-None", "x"); r.code != 400 {
		t.Fatalf("bad hash: %s", r)
	}

	testPendingReads(t, s)

	replica := newStack(t, stackConfig{noSpec: true, api: api.Options{ReadOnly: true, WalletToken: walletToken}})
	if r := replica.pending(http.MethodPost, "/v1/pending", "application/json", []byte(pendingJSON(a, false))); r.code != 403 || !strings.Contains(string(r.body), "read_only") {
		t.Fatalf("a replica: %s", r)
	}
	// A node that reads raw transactions (here a stand-in for the chain
	// adapter: "tx:<name>" is the transaction a spends), and a pending set
	// bounded to one transaction.
	raw := newStack(t, stackConfig{noSpec: true, disk: disk.Options{Pending: disk.PendingOptions{MaxTxs: 1}},
		api: api.Options{WalletToken: walletToken, RawTx: func(b []byte) (chain.Tx, error) {
			name, ok := strings.CutPrefix(string(b), "tx:")
			if !ok {
				return chain.Tx{}, fmt.Errorf("not a transaction")
			}
			return tx(name, spends(op("fund2", 0)), out("x", 1)), nil
		}}})
	raw.apply(tx("fund2", nil, out("alice", 100), out("bob", 50)))
	if r := raw.pending(http.MethodPost, "/v1/pending", "application/octet-stream", []byte("garbage")); r.code != 400 || !strings.Contains(string(r.body), "invalid_argument") {
		t.Fatalf("an unparsable raw transaction: %s", r)
	}
	if r := raw.pending(http.MethodPost, "/v1/pending?replace=maybe", "application/octet-stream", []byte("tx:r1")); r.code != 400 {
		t.Fatalf("replace=maybe: %s", r)
	}
	if r := raw.pending(http.MethodPost, "/v1/pending?replace=true", "application/json", []byte(pendingJSON(a, false))); r.code != 400 {
		t.Fatalf("replace as a parameter of a JSON body: %s", r)
	}
	if r := raw.pending(http.MethodPost, "/v1/pending", "application/octet-stream", []byte("tx:r1")); r.code != 200 || r.obj(t)["tx_hash"] != txh("r1").String() {
		t.Fatalf("a raw transaction: %s", r)
	}
	if r := raw.pending(http.MethodPost, "/v1/pending", "application/octet-stream", []byte("tx:r2")); r.code != 409 {
		t.Fatalf("a raw double spend: %s", r)
	}
	if r := raw.pending(http.MethodPost, "/v1/pending?replace=true", "application/octet-stream", []byte("tx:r2")); r.code != 200 {
		t.Fatalf("a raw replacement (within the bound: it evicts one): %s", r)
	}
	other := tx("r3", spends(op("fund2", 1)), out("y", 1))
	if r := raw.do(call{method: http.MethodPost, target: "/v1/pending", ctype: "application/json", body: []byte(pendingJSON(other, false)),
		header: []string{"Authorization", "Bearer " + walletToken}, noSpec: true, allow5xx: true}); r.code != 507 || !strings.Contains(string(r.body), "insufficient_storage") {
		t.Fatalf("over --pending-max-txs: %s", r)
	}

	off := newStack(t, stackConfig{noSpec: true})
	if r := off.pending(http.MethodPost, "/v1/pending", "application/json", []byte(pendingJSON(a, false))); r.code != 403 || !strings.Contains(string(r.body), "wallet_writes_disabled") {
		t.Fatalf("no wallet token: %s", r)
	}
}

// testPendingReads: reads with pending=include over a confirmed output that
// a pending transaction spends, its unconfirmed outputs (one of which a
// second pending transaction spends), against figures computed by hand;
// reads without the parameter are byte for byte what they were.
func testPendingReads(t *testing.T, s *stack) {
	get := func(target string) *response {
		return s.pending(http.MethodGet, target, "", nil, "X-None", "x")
	}
	before := get("/v1/addresses/alice/utxos")
	beforeBal := get("/v1/addresses/alice/balance")
	c := tx("pc2", spends(op("fund", 0)), out("carol", 60), out("alice", 40))
	d := tx("pd2", spends(op("pc2", 0)), out("carol", 59))
	for _, x := range []chain.Tx{c, d} {
		if r := s.pending(http.MethodPost, "/v1/pending", "application/json", []byte(pendingJSON(x, false))); r.code != 200 {
			t.Fatalf("post: %s", r)
		}
	}
	after := get("/v1/addresses/alice/utxos")
	if string(after.body) != string(before.body) || after.hdr.Get("ETag") != before.hdr.Get("ETag") {
		t.Fatalf("a listing without pending=include changed:\n%s\n%s", before, after)
	}
	if r := get("/v1/addresses/alice/balance"); string(r.body) != string(beforeBal.body) {
		t.Fatalf("a balance without pending=include changed: %s", r)
	}
	items := func(r *response) string {
		var b strings.Builder
		for _, it := range r.obj(t)["utxos"].([]any) {
			m := it.(map[string]any)
			fmt.Fprintf(&b, "%s:%v=%v", strings.TrimPrefix(fmt.Sprint(m["tx_hash"]), ""), m["index"], m["value"])
			if m["confirmed"] == false {
				fmt.Fprintf(&b, " unconfirmed since %v", m["pending_since"])
				if m["height"] != nil {
					b.WriteString(" WITH HEIGHT")
				}
			}
			if sp, ok := m["pending_spent_by"].(map[string]any); ok {
				fmt.Fprintf(&b, " spent by %v:%v", sp["tx_hash"], sp["input"])
			}
			b.WriteString("; ")
		}
		return b.String()
	}
	since := func(h chain.Hash) string { return fmt.Sprint(get("/v1/pending/" + h.String()).obj(t)["since"]) }
	now, dnow := since(c.Hash), since(d.Hash)
	fund0, c0, c1, d0 := txh("fund").String()+":0=100", c.Hash.String()+":0=60", c.Hash.String()+":1=40", d.Hash.String()+":0=59"
	if got, want := items(get("/v1/addresses/alice/utxos?pending=include")), fund0+" spent by "+c.Hash.String()+":0; "+c1+" unconfirmed since "+now+"; "; got != want {
		t.Fatalf("alice:\n got %s\nwant %s", got, want)
	}
	if got, want := items(get("/v1/addresses/carol/utxos?pending=include")), d0+" unconfirmed since "+dnow+"; "; got != want {
		t.Fatalf("carol (c:0 is spent by d):\n got %s\nwant %s", got, want)
	}
	_ = c0
	// Pages of one, both ways.
	p1 := get("/v1/addresses/alice/utxos?pending=include&limit=1")
	cur, _ := p1.obj(t)["next_cursor"].(string)
	p2 := get("/v1/addresses/alice/utxos?pending=include&limit=1&cursor=" + cur)
	if items(p1) != fund0+" spent by "+c.Hash.String()+":0; " || items(p2) != c1+" unconfirmed since "+now+"; " || p2.obj(t)["next_cursor"] != nil {
		t.Fatalf("pages asc: %s / %s", p1, p2)
	}
	p1 = get("/v1/addresses/alice/utxos?pending=include&limit=1&order=desc")
	cur, _ = p1.obj(t)["next_cursor"].(string)
	p2 = get("/v1/addresses/alice/utxos?pending=include&limit=1&order=desc&cursor=" + cur)
	if items(p2) != fund0+" spent by "+c.Hash.String()+":0; " || items(p1) != c1+" unconfirmed since "+now+"; " || p2.obj(t)["next_cursor"] != nil {
		t.Fatalf("pages desc: %s / %s", p1, p2)
	}
	bal := func(a string) string {
		m := get("/v1/addresses/" + a + "/balance?pending=include").obj(t)
		p := m["pending"].(map[string]any)
		return fmt.Sprintf("%v %v funded %v spent %v", m["value"], m["utxo_count"], p["funded"], p["spent"])
	}
	if got := bal("alice"); got != "100 1 funded 40 spent 100" {
		t.Fatalf("alice's balance: %s", got)
	}
	if got := bal("carol"); got != "0 0 funded 119 spent 60" {
		t.Fatalf("carol's balance: %s", got)
	}
	r := get("/v1/utxos/" + c.Hash.String() + "/1?pending=include")
	if m := r.obj(t); r.code != 200 || m["utxo"].(map[string]any)["confirmed"] != false || m["pending_spent"] != nil {
		t.Fatalf("an unconfirmed output: %s", r)
	}
	r = get("/v1/utxos/" + c.Hash.String() + "/0?pending=include")
	if sp, _ := r.obj(t)["pending_spent"].(map[string]any); r.code != 200 || sp["tx_hash"] != d.Hash.String() {
		t.Fatalf("an unconfirmed output spent by pending: %s", r)
	}
	if r := get("/v1/utxos/" + c.Hash.String() + "/0"); r.code != 404 {
		t.Fatalf("an unconfirmed output without pending=include: %s", r)
	}
	r = s.do(call{method: http.MethodPost, target: "/v1/utxos/lookup?pending=include", ctype: "application/json",
		body: []byte(`{"outpoints":[{"tx_hash":"` + txh("fund").String() + `","index":0},{"tx_hash":"` + c.Hash.String() + `","index":1},{"tx_hash":"` + txh("zz").String() + `","index":0}]}`)})
	res, _ := r.obj(t)["results"].([]any)
	if r.code != 200 || len(res) != 3 || res[0].(map[string]any)["pending_spent"].(map[string]any)["tx_hash"] != c.Hash.String() ||
		res[1].(map[string]any)["utxo"].(map[string]any)["confirmed"] != false || res[2].(map[string]any)["utxo"] != nil {
		t.Fatalf("lookup: %s", r)
	}
	if r := get("/v1/addresses/alice/utxos?pending=maybe"); r.code != 400 {
		t.Fatalf("pending=maybe: %s", r)
	}
}

// TestPendingRaces: 300 times, two clients post transactions spending the
// same output at once through the handler: exactly one is pending, the
// other answers 409 conflict naming it.
func TestPendingRaces(t *testing.T) {
	s := newStack(t, stackConfig{noSpec: true, api: api.Options{WalletToken: walletToken}})
	const races = 300
	outs := make([]chain.Output, races)
	for i := range outs {
		outs[i] = out(fmt.Sprintf("addr%d", i%7), uint64(i+1))
	}
	s.apply(tx("pool", nil, outs...))
	for i := range races {
		txs := [2]chain.Tx{tx(fmt.Sprint("a", i), spends(op("pool", uint32(i))), out("x", 1)), tx(fmt.Sprint("b", i), spends(op("pool", uint32(i))), out("y", 1))}
		var codes [2]int
		var bodies [2]string
		var wg sync.WaitGroup
		start := make(chan struct{})
		for k := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				req := httptest.NewRequest(http.MethodPost, "/v1/pending", strings.NewReader(pendingJSON(txs[k], false)))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+walletToken)
				rec := httptest.NewRecorder()
				s.h.ServeHTTP(rec, req)
				codes[k], bodies[k] = rec.Code, rec.Body.String()
			}()
		}
		close(start)
		wg.Wait()
		win := 0
		if codes[1] == http.StatusOK {
			win = 1
		}
		lose := 1 - win
		if codes[win] != http.StatusOK || codes[lose] != http.StatusConflict || !strings.Contains(bodies[lose], txs[win].Hash.String()) {
			t.Fatalf("race %d: %d %s / %d %s", i, codes[0], bodies[0], codes[1], bodies[1])
		}
	}
}

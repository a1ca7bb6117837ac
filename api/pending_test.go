package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/utxo-cache/utxo-cache/api"
	"github.com/utxo-cache/utxo-cache/chain"
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
	return s.do(call{method: method, target: target, body: body, ctype: ctype, header: header, noSpec: true})
}

// TestPendingHTTP: the pending routes through the handler: a post, its
// status, a repeat (no-op), a double spend without replace (409 conflict
// naming the spender) and with it (the old one conflicting), a withdrawal,
// and the refusals: unknown input, bad body, no raw reader, wrong token,
// no wallet token, a replica.
func TestPendingHTTP(t *testing.T) {
	s := newStack(t, stackConfig{noSpec: true, api: api.Options{WalletToken: walletToken}})
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

	replica := newStack(t, stackConfig{noSpec: true, api: api.Options{ReadOnly: true, WalletToken: walletToken}})
	if r := replica.pending(http.MethodPost, "/v1/pending", "application/json", []byte(pendingJSON(a, false))); r.code != 403 || !strings.Contains(string(r.body), "read_only") {
		t.Fatalf("a replica: %s", r)
	}
	off := newStack(t, stackConfig{noSpec: true})
	if r := off.pending(http.MethodPost, "/v1/pending", "application/json", []byte(pendingJSON(a, false))); r.code != 403 || !strings.Contains(string(r.body), "wallet_writes_disabled") {
		t.Fatalf("no wallet token: %s", r)
	}
}

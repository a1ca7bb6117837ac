package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/utxo-cache/utxo-cache/api"
	"github.com/utxo-cache/utxo-cache/chain"
)

func leaseJSON(id string, ttl int, ops ...chain.OutPoint) string {
	var items []string
	for _, o := range ops {
		items = append(items, fmt.Sprintf(`{"tx_hash":"%s","index":%d}`, o.TxHash, o.Index))
	}
	b := `{"outpoints":[` + strings.Join(items, ",") + `]`
	if id != "" {
		b += `,"lease_id":"` + id + `"`
	}
	if ttl != 0 {
		b += fmt.Sprintf(`,"ttl_seconds":%d`, ttl)
	}
	return b + "}"
}

func (s *stack) lease(body string, header ...string) *response {
	s.t.Helper()
	if header == nil {
		header = []string{"Authorization", "Bearer " + walletToken}
	}
	return s.do(call{method: http.MethodPost, target: "/v1/leases", body: []byte(body), ctype: "application/json", header: header})
}

// serveLease posts body to h from any goroutine, outside the test's
// helpers (which may only fail the test from its own goroutine).
func serveLease(h http.Handler, body string) (int, []byte) {
	req := httptest.NewRequest(http.MethodPost, "/v1/leases", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+walletToken)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.Bytes()
}

// TestLeaseRaces: 1,000 times, two clients post overlapping leases at once
// (x and y, y and z) through the HTTP handler: exactly one wins each time;
// the loser's 409 names y and the winner's expiry, and y is then held by
// the winner alone (leased=include shows the winner's expiry).
func TestLeaseRaces(t *testing.T) {
	s := newStack(t, stackConfig{noSpec: true, api: api.Options{WalletToken: walletToken}})
	const races = 1000
	outs := make([]chain.Output, 3*races)
	for i := range outs {
		outs[i] = out(fmt.Sprintf("addr%d", i%7), uint64(i+1))
	}
	s.apply(tx("pool", nil, outs...))
	for i := range races {
		x, y, z := op("pool", uint32(3*i)), op("pool", uint32(3*i+1)), op("pool", uint32(3*i+2))
		bodies := [2]string{leaseJSON(fmt.Sprintf("a%d", i), 0, x, y), leaseJSON(fmt.Sprintf("b%d", i), 0, y, z)}
		var codes [2]int
		var answers [2][]byte
		var wg sync.WaitGroup
		start := make(chan struct{})
		for k := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				codes[k], answers[k] = serveLease(s.h, bodies[k])
			}()
		}
		close(start)
		wg.Wait()
		win := -1
		switch {
		case codes[0] == 200 && codes[1] == 409:
			win = 0
		case codes[1] == 200 && codes[0] == 409:
			win = 1
		default:
			t.Fatalf("race %d: %d %s / %d %s: want one 200 and one 409", i, codes[0], answers[0], codes[1], answers[1])
		}
		var granted struct {
			LeaseID   string `json:"lease_id"`
			ExpiresAt uint64 `json:"expires_at"`
			Seq       uint64 `json:"seq"`
		}
		if err := json.Unmarshal(answers[win], &granted); err != nil {
			t.Fatal(err)
		}
		var lost struct {
			Error struct {
				Code   string `json:"code"`
				Leased []struct {
					TxHash      string `json:"tx_hash"`
					Index       uint32 `json:"index"`
					LeasedUntil uint64 `json:"leased_until"`
				} `json:"leased"`
			} `json:"error"`
		}
		if err := json.Unmarshal(answers[1-win], &lost); err != nil {
			t.Fatal(err)
		}
		if l := lost.Error.Leased; lost.Error.Code != "leased" || len(l) != 1 || l[0].TxHash != y.TxHash.String() ||
			l[0].Index != y.Index || l[0].LeasedUntil != granted.ExpiresAt {
			t.Fatalf("race %d: the loser's answer %s does not name %s until %d", i, answers[1-win], y, granted.ExpiresAt)
		}
		if i%100 == 0 {
			r := s.get(fmt.Sprintf("/v1/utxos/%s/%d?leased=include&min_seq=%d", y.TxHash, y.Index, granted.Seq))
			if want := fmt.Sprintf(`"leased_until":%d`, granted.ExpiresAt); r.code != 200 || !bytes.Contains(r.body, []byte(want)) {
				t.Fatalf("race %d: %s after the race: %s", i, y, r)
			}
			// The loser's other outpoint is not held.
			other := [2]chain.OutPoint{z, x}[win]
			r = s.get(fmt.Sprintf("/v1/utxos/%s/%d?leased=include", other.TxHash, other.Index))
			if r.code != 200 || bytes.Contains(r.body, []byte("leased_until")) {
				t.Fatalf("race %d: the loser's %s is held: %s", i, other, r)
			}
		}
	}
}

// TestLeaseBadInputChangesNothing: a lease of a spent, unknown or frozen
// outpoint, of one another lease holds (even alongside free ones), a TTL
// out of range, a bad lease id, too many outpoints, a wrong token: each a
// clear 4xx that changes nothing (seq, answers with and without leased=…,
// the lease that holds).
func TestLeaseBadInputChangesNothing(t *testing.T) {
	s := newStack(t, stackConfig{api: api.Options{WalletToken: walletToken, MaxRequestBytes: 256 << 10}})
	s.apply(tx("a", nil, out("alice", 1), out("alice", 2), out("alice", 3), out("alice", 4)))
	s.apply(tx("b", spends(op("a", 1)), out("bob", 3)))
	live, spent, frozen, held := op("a", 0), op("a", 1), op("a", 2), op("a", 3)
	if r := s.postJSON("/v1/frozen", frozenJSON("r", frozen)); r.code != 200 {
		t.Fatal(r)
	}
	if r := s.lease(leaseJSON("holder", 600, held)); r.code != 200 {
		t.Fatal(r)
	}
	snapshot := func() string {
		var b bytes.Buffer
		for _, target := range []string{"/v1/tip", "/v1/addresses/alice/utxos", "/v1/addresses/alice/utxos?leased=include",
			"/v1/addresses/alice/utxos?leased=exclude", fmt.Sprintf("/v1/utxos/%s/0?leased=include", live.TxHash)} {
			r := s.get(target)
			fmt.Fprintf(&b, "%s %d %s %s %s\n", target, r.code, r.hdr.Get("ETag"), r.hdr.Get("X-Commit-Seq"), r.body)
		}
		r := s.do(call{method: http.MethodGet, target: "/v1/leases/holder", header: []string{"Authorization", "Bearer " + walletToken}})
		fmt.Fprintf(&b, "lease %d %s\n", r.code, r.body)
		return b.String()
	}
	before := snapshot()
	many := make([]chain.OutPoint, chain.MaxLeaseOutPoints+1)
	for i := range many {
		many[i] = chain.OutPoint{TxHash: live.TxHash, Index: uint32(i)}
	}
	wallet := []string{"Authorization", "Bearer " + walletToken}
	for _, c := range []struct {
		name, body string
		header     []string
		status     int
		code       string
	}{
		{"spent outpoint", leaseJSON("n", 0, live, spent), wallet, 422, "unknown_input"},
		{"unknown outpoint", leaseJSON("n", 0, live, op("nowhere", 0)), wallet, 422, "unknown_input"},
		{"frozen outpoint", leaseJSON("n", 0, live, frozen), wallet, 409, "frozen"},
		{"held outpoint", leaseJSON("n", 0, live, held), wallet, 409, "leased"},
		{"held, renewing another lease", leaseJSON("other", 0, held), wallet, 409, "leased"},
		{"ttl 0", `{"outpoints":[{"tx_hash":"` + live.TxHash.String() + `","index":0}],"ttl_seconds":0}`, wallet, 400, "invalid_argument"},
		{"ttl over a day", leaseJSON("n", 86_401, live), wallet, 400, "invalid_argument"},
		{"bad id", leaseJSON("a%b", 0, live), wallet, 400, "invalid_argument"},
		{"id too long", leaseJSON(strings.Repeat("x", 65), 0, live), wallet, 400, "invalid_argument"},
		{"too many outpoints", leaseJSON("n", 0, many...), wallet, 400, "invalid_argument"},
		{"an outpoint twice", leaseJSON("n", 0, live, live), wallet, 400, "invalid_argument"},
		{"no outpoints", `{"outpoints":[]}`, wallet, 400, "invalid_argument"},
		{"unknown field", `{"outpoints":[{"tx_hash":"` + live.TxHash.String() + `","index":0}],"owner":"x"}`, wallet, 400, "invalid_argument"},
		{"wrong token", leaseJSON("n", 0, live), []string{"Authorization", "Bearer nope"}, 401, "unauthorized"},
		{"admin token", leaseJSON("n", 0, live), []string{"Authorization", "Bearer " + testToken}, 401, "unauthorized"},
		{"no token", leaseJSON("n", 0, live), []string{"X-None", "1"}, 401, "unauthorized"},
	} {
		wantError(t, s.lease(c.body, c.header...), c.status, c.code)
		if now := snapshot(); now != before {
			t.Fatalf("%s changed an answer:\nbefore %s\nafter  %s", c.name, before, now)
		}
	}
	for _, target := range []string{"/v1/leases/a%25b", "/v1/leases/" + strings.Repeat("x", 65)} {
		wantError(t, s.do(call{method: http.MethodDelete, target: target, header: wallet}), 400, "invalid_argument")
	}
	wantError(t, s.do(call{method: http.MethodDelete, target: "/v1/leases/holder", header: []string{"Authorization", "Bearer nope"}}), 401, "unauthorized")
	if now := snapshot(); now != before {
		t.Fatalf("a refused release changed an answer:\nbefore %s\nafter  %s", before, now)
	}
}

// TestLeaseLifecycle: a grant shows in reads with leased=…, leaves every
// answer without it (body and ETag) as it was; a renewal moves the expiry
// and adds outpoints; a block that spends a leased output lapses that
// outpoint only, and its rollback does not bring the lease back; a release
// ends the rest, and a second release changes nothing.
func TestLeaseLifecycle(t *testing.T) {
	s := newStack(t, stackConfig{api: api.Options{WalletToken: walletToken}})
	s.apply(tx("a", nil, out("alice", 1), out("alice", 2), out("alice", 3)))
	wallet := []string{"Authorization", "Bearer " + walletToken}
	plain := func() string {
		var b bytes.Buffer
		for _, target := range []string{"/v1/addresses/alice/utxos", "/v1/addresses/alice/balance", fmt.Sprintf("/v1/utxos/%s/0", op("a", 0).TxHash)} {
			r := s.get(target)
			fmt.Fprintf(&b, "%s %d %s %s\n", target, r.code, r.hdr.Get("ETag"), r.body)
		}
		return b.String()
	}
	before := plain()
	r := s.lease(leaseJSON("L", 60, op("a", 0)))
	var g struct {
		LeaseID   string `json:"lease_id"`
		ExpiresAt uint64 `json:"expires_at"`
		Seq       uint64 `json:"seq"`
	}
	if err := json.Unmarshal(r.body, &g); r.code != 200 || err != nil || g.LeaseID != "L" {
		t.Fatalf("grant: %s", r)
	}
	if now := plain(); now != before {
		t.Fatalf("a lease changed an answer without leased=:\nbefore %s\nafter  %s", before, now)
	}
	listing := func(mode string) string {
		return string(s.get("/v1/addresses/alice/utxos?leased=" + mode).body)
	}
	if l := listing("include"); !strings.Contains(l, fmt.Sprintf(`"index":0,"address":"alice","value":"1","assets":[],"height":1,"leased_until":%d}`, g.ExpiresAt)) {
		t.Fatalf("leased=include: %s", l)
	}
	if l := listing("exclude"); strings.Contains(l, `"index":0,`) || !strings.Contains(l, `"index":1,`) {
		t.Fatalf("leased=exclude: %s", l)
	}
	// Renew, adding a:1.
	r = s.lease(leaseJSON("L", 600, op("a", 1)))
	var g2 struct {
		ExpiresAt uint64 `json:"expires_at"`
		Seq       uint64 `json:"seq"`
	}
	if err := json.Unmarshal(r.body, &g2); r.code != 200 || err != nil || g2.ExpiresAt < g.ExpiresAt+500 || g2.Seq != g.Seq+1 {
		t.Fatalf("renewal: %s after %+v", r, g)
	}
	getLease := func() *response {
		return s.do(call{method: http.MethodGet, target: "/v1/leases/L", header: wallet})
	}
	r = getLease()
	tip := s.store.Published().Tip
	want := fmt.Sprintf(`{"tip":{"height":%d,"hash":"%s"},"lease_id":"L","outpoints":[`, tip.Height, tip.Hash)
	if r.code != 200 || !strings.HasPrefix(string(r.body), want) || strings.Count(string(r.body), "tx_hash") != 2 {
		t.Fatalf("GET lease: %s", r)
	}
	// A block spends a:0: that outpoint lapses, a:1 stays held.
	b := s.apply(tx("b", spends(op("a", 0)), out("bob", 1)))
	r = getLease()
	if r.code != 200 || strings.Count(string(r.body), "tx_hash") != 1 || !strings.Contains(string(r.body), `"index":1}`) {
		t.Fatalf("after the spend: %s", r)
	}
	rb := s.do(call{method: http.MethodPost, target: "/v1/rollback", body: []byte(fmt.Sprintf(`{"height":%d}`, b.Height-1)), ctype: "application/json", auth: true})
	if rb.code != 200 {
		t.Fatal(rb)
	}
	if l := listing("include"); !strings.Contains(l, `"index":0,`) || strings.Count(l, "leased_until") != 1 {
		t.Fatalf("the rollback brought the lapsed lease back, or lost the other: %s", l)
	}
	del := func() *response { return s.do(call{method: http.MethodDelete, target: "/v1/leases/L", header: wallet}) }
	if r := del(); r.code != 200 || !strings.Contains(string(r.body), `"released":true`) {
		t.Fatalf("release: %s", r)
	}
	if r := del(); r.code != 200 || !strings.Contains(string(r.body), `"released":false`) {
		t.Fatalf("second release: %s", r)
	}
	wantError(t, getLease(), 404, "not_found")
	if l := listing("include"); strings.Contains(l, "leased_until") {
		t.Fatalf("after the release: %s", l)
	}
}

// FuzzLeaseHTTP drives the lease routes with arbitrary ids and bodies, with
// the wallet token, against one writer: never a 5xx; every answer keeps
// checkInvariants; a refused request (any 4xx) leaves the seq as it was; a
// granted lease raises it by one and answers the new seq; a release raises
// it by one exactly when it released something; a GET changes nothing.
func FuzzLeaseHTTP(f *testing.F) {
	s := newStack(f, stackConfig{noSpec: true, api: api.Options{WalletToken: walletToken}})
	outs := make([]chain.Output, 50)
	for i := range outs {
		outs[i] = out("fz", uint64(i+1))
	}
	s.apply(tx("fzl", nil, outs...))
	live := op("fzl", 3)
	f.Add(uint8(0), "", []byte(leaseJSON("f1", 30, live)))
	f.Add(uint8(0), "", []byte(leaseJSON("", 0, live, op("fzl", 4))))
	f.Add(uint8(0), "", []byte(leaseJSON("f2", 86_401, live)))
	f.Add(uint8(0), "", []byte(`{"outpoints":[{"tx_hash":"`+live.TxHash.String()+`","index":3}],"lease_id":"a\u0000b"}`))
	f.Add(uint8(1), "f1", []byte(nil))
	f.Add(uint8(2), "f1", []byte(nil))
	f.Add(uint8(2), "../tip", []byte(nil))
	f.Fuzz(func(t *testing.T, sel uint8, id string, body []byte) {
		var c call
		wallet := []string{"Authorization", "Bearer " + walletToken}
		switch sel % 3 {
		case 0:
			c = call{method: http.MethodPost, target: "/v1/leases", body: body, ctype: "application/json", header: wallet}
		case 1:
			c = call{method: http.MethodDelete, target: "/v1/leases/" + url.PathEscape(id), header: wallet}
		default:
			c = call{method: http.MethodGet, target: "/v1/leases/" + url.PathEscape(id), header: wallet}
		}
		req := c.request()
		before := s.store.Published().Seq
		rec := httptest.NewRecorder()
		s.h.ServeHTTP(rec, req)
		res := &response{code: rec.Code, hdr: rec.Result().Header, body: rec.Body.Bytes()}
		checkInvariants(t, c, res)
		after := s.store.Published().Seq
		var ans struct {
			Seq      uint64 `json:"seq"`
			Released bool   `json:"released"`
		}
		_ = json.Unmarshal(res.body, &ans)
		switch {
		case res.code != http.StatusOK || c.method == http.MethodGet:
			if after != before {
				t.Fatalf("%s %s answered %s and moved the seq %d → %d", c.method, c.target, res, before, after)
			}
		case c.method == http.MethodPost:
			if after != before+1 || ans.Seq != after {
				t.Fatalf("a granted lease: seq %d → %d, answer %s", before, after, res)
			}
		case ans.Released != (after == before+1) || (!ans.Released && after != before) || ans.Seq != after:
			t.Fatalf("a release: seq %d → %d, answer %s", before, after, res)
		}
	})
}

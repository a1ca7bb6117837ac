package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/utxo-cache/utxo-cache/api"
	"github.com/utxo-cache/utxo-cache/cache"
	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/internal/testredis"
	"github.com/utxo-cache/utxo-cache/tiers/redis"
)

const walletToken = "test-wallet-token"

// TestWalletTokenMiddleware: a wallet write runs only for a bearer of the
// wallet token on the writer: no token configured 403
// wallet_writes_disabled, a missing, wrong or admin token 401, two
// Authorization headers 400, a replica 403 read_only; the handler never
// runs for any of those.
func TestWalletTokenMiddleware(t *testing.T) {
	ran := 0
	handler := func(w http.ResponseWriter, _ *http.Request) {
		ran++
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"tip":null,"ok":true}`))
	}
	mk := func(cfg stackConfig) *stack {
		cfg.noSpec = true // the test route is not in the document
		s := newStack(t, cfg)
		s.h.(*api.API).HandleWallet(http.MethodPost, "/v1/wallet-test", handler)
		return s
	}
	withToken := mk(stackConfig{api: api.Options{WalletToken: walletToken}})
	without := mk(stackConfig{})
	replica := mk(stackConfig{api: api.Options{ReadOnly: true, WalletToken: walletToken}})
	send := func(s *stack, header ...string) *response {
		return s.do(call{method: http.MethodPost, target: "/v1/wallet-test", body: []byte(`{}`), ctype: "application/json", header: header})
	}
	bearer := func(tok string) []string { return []string{"Authorization", "Bearer " + tok} }
	for _, c := range []struct {
		name   string
		s      *stack
		header []string
		status int
		code   string
	}{
		{"no token configured", without, bearer(walletToken), 403, "wallet_writes_disabled"},
		{"missing bearer", withToken, nil, 401, "unauthorized"},
		{"wrong bearer", withToken, bearer("nope"), 401, "unauthorized"},
		{"the admin token", withToken, bearer(testToken), 401, "unauthorized"},
		{"two headers", withToken, append(bearer(walletToken), bearer(walletToken)...), 400, "invalid_argument"},
		{"replica", replica, bearer(walletToken), 403, "read_only"},
	} {
		before := ran
		wantError(t, send(c.s, c.header...), c.status, c.code)
		if ran != before {
			t.Fatalf("%s: the handler ran", c.name)
		}
	}
	if r := send(withToken, bearer(walletToken)...); r.code != 200 || ran != 1 {
		t.Fatalf("wallet token: %s, handler ran %d times", r, ran)
	}
}

func frozenJSON(reason string, ops ...chain.OutPoint) string {
	var items []string
	for _, o := range ops {
		items = append(items, fmt.Sprintf(`{"tx_hash":"%s","index":%d}`, o.TxHash, o.Index))
	}
	b := `{"outpoints":[` + strings.Join(items, ",") + `]`
	if reason != "" {
		b += `,"reason":"` + reason + `"`
	}
	return b + "}"
}

func (s *stack) unfreeze(body string) *response {
	s.t.Helper()
	return s.do(call{method: http.MethodDelete, target: "/v1/frozen", body: []byte(body), ctype: "application/json", auth: true})
}

// TestFreezeBadInputChangesNothing: every malformed or refused freeze and
// unfreeze gets its clear 4xx, and leaves the state, the seq, the answers
// and their ETags exactly as they were.
func TestFreezeBadInputChangesNothing(t *testing.T) {
	s := newStack(t, stackConfig{api: api.Options{MaxRequestBytes: 256 << 10}})
	s.apply(tx("a", nil, out("alice", 1), out("alice", 2)))
	s.apply(tx("b", spends(op("a", 1)), out("bob", 3)))
	live, spent := op("a", 0), op("a", 1)
	snapshot := func() string {
		var b bytes.Buffer
		for _, target := range []string{"/v1/tip", "/v1/addresses/alice/utxos", "/v1/addresses/alice/utxos?frozen=exclude",
			"/v1/addresses/alice/balance", fmt.Sprintf("/v1/utxos/%s/0", live.TxHash)} {
			r := s.get(target)
			fmt.Fprintf(&b, "%s %d %s %s %s\n", target, r.code, r.hdr.Get("ETag"), r.hdr.Get("X-Commit-Seq"), r.body)
		}
		return b.String()
	}
	before := snapshot()
	long := strings.Repeat("x", chain.MaxFreezeReasonLen+1)
	many := make([]chain.OutPoint, chain.MaxFreezeOutPoints+1)
	for i := range many {
		many[i] = chain.OutPoint{TxHash: live.TxHash, Index: uint32(i)}
	}
	for _, c := range []struct {
		name, body string
		unfreeze   bool
		status     int
		code       string
	}{
		{"spent outpoint", frozenJSON("r", live, spent), false, 422, "unknown_input"},
		{"unknown outpoint", frozenJSON("r", op("nowhere", 0)), false, 422, "unknown_input"},
		{"no reason", frozenJSON("", live), false, 400, "invalid_argument"},
		{"empty reason", `{"outpoints":[{"tx_hash":"` + live.TxHash.String() + `","index":0}],"reason":""}`, false, 400, "invalid_argument"},
		{"reason too long", frozenJSON(long, live), false, 400, "invalid_argument"},
		{"control character", frozenJSON(`a\u0007b`, live), false, 400, "invalid_argument"},
		{"no outpoints", `{"outpoints":[],"reason":"r"}`, false, 400, "invalid_argument"},
		{"too many outpoints", frozenJSON("r", many...), false, 400, "invalid_argument"},
		{"an outpoint twice", frozenJSON("r", live, live), false, 400, "invalid_argument"},
		{"unknown field", `{"outpoints":[{"tx_hash":"` + live.TxHash.String() + `","index":0}],"reason":"r","until":1}`, false, 400, "invalid_argument"},
		{"duplicate field", `{"reason":"r","reason":"s","outpoints":[{"tx_hash":"` + live.TxHash.String() + `","index":0}]}`, false, 400, "invalid_argument"},
		{"bad hash", `{"outpoints":[{"tx_hash":"zz","index":0}],"reason":"r"}`, false, 400, "invalid_argument"},
		{"not JSON", `outpoints`, false, 400, "invalid_argument"},
		{"unfreeze with a reason", frozenJSON("r", live), true, 400, "invalid_argument"},
		{"unfreeze of nothing", `{"outpoints":[]}`, true, 400, "invalid_argument"},
	} {
		var r *response
		if c.unfreeze {
			r = s.unfreeze(c.body)
		} else {
			r = s.postJSON("/v1/frozen", c.body)
		}
		wantError(t, r, c.status, c.code)
		if now := snapshot(); now != before {
			t.Fatalf("%s changed an answer:\nbefore %s\nafter  %s", c.name, before, now)
		}
	}
	// An unfreeze of outpoints that are not frozen is no change either.
	r := s.unfreeze(frozenJSON("", live, spent, op("nowhere", 0)))
	if r.code != 200 || !bytes.HasPrefix(r.body, []byte(`{"unfrozen":0,`)) {
		t.Fatalf("unfreeze of nothing frozen: %s", r)
	}
	if now := snapshot(); now != before {
		t.Fatalf("an unfreeze of nothing changed an answer:\nbefore %s\nafter  %s", before, now)
	}
}

// TestFreezeInvalidatesCaches: with the memory tier holding every answer of
// the frozen output's address and outpoint, a freeze shows at once in each
// (min_seq of its answer), frozen=exclude leaves it out, the balance is the
// same, an unrelated address's cached page is untouched, and the unfreeze
// undoes it all.
func TestFreezeInvalidatesCaches(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		s := newStack(t, stackConfig{})
		freezeInvalidates(t, s, func(func()) { s.mem.Wait() })
	})
	t.Run("redis", func(t *testing.T) {
		rs := testredis.Start(t)
		rt, err := redis.New(redis.Options{URL: rs.URL(), Namespace: "freeze", Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rt.Close() })
		freezeInvalidates(t, newStack(t, stackConfig{noMemory: true, tiers: []cache.Tier{rt}}), func(reread func()) {
			// The six answers' fills land off the read path, each within
			// the tier's timeout: one that timed out (a loaded machine) is
			// filled again by the next read of its answer. Until a read of
			// all six is six hits.
			want := uint64(6)
			for deadline := time.Now().Add(60 * time.Second); ; {
				for round := time.Now().Add(5 * time.Second); rt.Stats().Fills < want && time.Now().Before(round); runtime.Gosched() {
				}
				fills, hits := rt.Stats().Fills, rt.Stats().Hits
				reread()
				if missed := 6 - int(rt.Stats().Hits-hits); missed <= 0 {
					return
				} else if time.Now().After(deadline) {
					t.Fatalf("after 60s, %d of the six answers are not in Redis (%+v)", missed, rt.Stats())
				} else {
					want = fills + uint64(missed)
				}
			}
		})
	})
}

// freezeInvalidates is TestFreezeInvalidatesCaches on s, whose cache tier
// holds what was read once settle returns; settle may call reread, which
// reads every answer again.
func freezeInvalidates(t *testing.T, s *stack, settle func(reread func())) {
	s.apply(tx("a", nil, out("alice", 1), out("alice", 2), out("bob", 5)))
	frozen := op("a", 1)
	targets := []string{"/v1/addresses/alice/utxos", "/v1/addresses/alice/utxos?frozen=exclude",
		"/v1/addresses/alice/utxos?order=desc&limit=1", "/v1/addresses/alice/balance",
		fmt.Sprintf("/v1/utxos/%s/1", frozen.TxHash), "/v1/addresses/bob/utxos"}
	read := func(seq uint64) map[string]*response {
		m := map[string]*response{}
		for _, target := range targets {
			sep := "?"
			if strings.Contains(target, "?") {
				sep = "&"
			}
			m[target] = s.get(fmt.Sprintf("%s%smin_seq=%d", target, sep, seq))
		}
		return m
	}
	before := read(0)
	settle(func() { read(0) })
	read(0) // every answer now from a cache tier
	r := s.postJSON("/v1/frozen", frozenJSON("audit", frozen))
	if r.code != 200 || !bytes.HasPrefix(r.body, []byte(`{"frozen":1,`)) {
		t.Fatalf("freeze: %s", r)
	}
	seq := writeSeq(t, r)
	after := read(seq)
	item := fmt.Sprintf(`{"tx_hash":"%s","index":1,`, frozen.TxHash)
	for _, target := range targets[:3] {
		if bytes.Equal(after[target].body, before[target].body) || after[target].hdr.Get("ETag") == before[target].hdr.Get("ETag") {
			t.Errorf("%s: unchanged by the freeze: %s", target, after[target])
		}
	}
	if got := after[targets[0]].body; !bytes.Contains(got, []byte(`"height":1,"frozen":true}`)) || !bytes.Contains(got, []byte(item)) {
		t.Errorf("listing without the frozen mark: %s", got)
	}
	if got := after[targets[1]].body; bytes.Contains(got, []byte(item)) || !bytes.Contains(got, []byte(`"index":0,`)) {
		t.Errorf("frozen=exclude still lists the frozen output: %s", got)
	}
	if got := after[targets[4]].body; !bytes.Contains(got, []byte(`"frozen":true`)) {
		t.Errorf("outpoint answer without the frozen mark: %s", got)
	}
	for _, target := range targets[3:] {
		if target == targets[4] {
			continue
		}
		if !bytes.Equal(after[target].body, before[target].body) || after[target].hdr.Get("ETag") != before[target].hdr.Get("ETag") {
			t.Errorf("%s: changed by the freeze:\nbefore %s\nafter  %s", target, before[target], after[target])
		}
	}
	if e := before[targets[0]].hdr.Get("ETag"); e == before[targets[1]].hdr.Get("ETag") {
		t.Errorf("a filtered and an unfiltered page with the same items share the ETag %s", e)
	}
	r = s.unfreeze(frozenJSON("", frozen))
	if r.code != 200 || !bytes.HasPrefix(r.body, []byte(`{"unfrozen":1,`)) {
		t.Fatalf("unfreeze: %s", r)
	}
	again := read(writeSeq(t, r))
	for _, target := range targets {
		if !bytes.Equal(again[target].body, before[target].body) || again[target].hdr.Get("ETag") != before[target].hdr.Get("ETag") {
			t.Errorf("%s after the unfreeze:\n got %s\nwant %s", target, again[target], before[target])
		}
	}
}

// TestMatureOnly: a coinbase output of block H carries spendable_at_height
// H+100; mature=only leaves it out up to tip H+98 and lists it from tip
// H+99 (the next block, H+100, may spend it), whatever was read and cached
// before; its ETag changes when the output matures while the unfiltered
// page's stays.
func TestMatureOnly(t *testing.T) {
	s := newStack(t, stackConfig{})
	b := s.apply(chain.Tx{Hash: txh("cb"), Coinbase: true, Outputs: []chain.Output{out("miner", 50)}},
		tx("pay", nil, out("miner", 1)))
	at := fmt.Sprintf(`"spendable_at_height":%d`, b.Height+100)
	cb := fmt.Sprintf(`"tx_hash":"%s"`, txh("cb"))
	for s.store.State().Tip.Height < b.Height+98 {
		s.apply()
	}
	all := s.get("/v1/addresses/miner/utxos")
	if !bytes.Contains(all.body, []byte(cb)) || !bytes.Contains(all.body, []byte(`"coinbase":true,`+at)) {
		t.Fatalf("coinbase output without spendable_at_height: %s", all)
	}
	young := s.get("/v1/addresses/miner/utxos?mature=only")
	if bytes.Contains(young.body, []byte(cb)) || !bytes.Contains(young.body, []byte(txh("pay").String())) {
		t.Fatalf("mature=only at tip %d: %s", b.Height+98, young)
	}
	s.apply() // tip H+99
	if r := s.get("/v1/addresses/miner/utxos"); r.hdr.Get("ETag") != all.hdr.Get("ETag") {
		t.Fatalf("the unfiltered page changed: %s", r)
	}
	grown := s.get("/v1/addresses/miner/utxos?mature=only")
	if !bytes.Contains(grown.body, []byte(cb)) || grown.hdr.Get("ETag") == young.hdr.Get("ETag") {
		t.Fatalf("mature=only at tip %d: %s (ETag %s, before %s)", b.Height+99, grown, grown.hdr.Get("ETag"), young.hdr.Get("ETag"))
	}
	if r := s.get("/v1/addresses/miner/utxos?mature=only", "If-None-Match", young.hdr.Get("ETag")); r.code != 200 {
		t.Fatalf("the old ETag still matches: %s", r)
	}
	if r := s.get("/v1/addresses/miner/utxos?mature=only", "If-None-Match", grown.hdr.Get("ETag")); r.code != 304 {
		t.Fatalf("the new ETag does not match: %s", r)
	}
}

// TestFilteredPagesFollowPositions: a frozen=exclude listing pages by
// position: its cursors resume where the last page stopped, skipping
// frozen outputs, and together the pages are the unfrozen outputs in
// order, whatever the limit.
func TestFilteredPagesFollowPositions(t *testing.T) {
	s := newStack(t, stackConfig{})
	var outs []chain.Output
	for i := range 12 {
		outs = append(outs, out("carol", uint64(i+1)))
	}
	s.apply(tx("many", nil, outs...))
	var ops []chain.OutPoint
	for _, i := range []uint32{0, 1, 2, 5, 6, 11} {
		ops = append(ops, op("many", i))
	}
	if r := s.postJSON("/v1/frozen", frozenJSON("audit", ops...)); r.code != 200 {
		t.Fatalf("freeze: %s", r)
	}
	want := []uint32{3, 4, 7, 8, 9, 10}
	for _, desc := range []bool{false, true} {
		for _, limit := range []int{1, 2, 5, 100} {
			var got []uint32
			cursor := ""
			for range 20 {
				target := fmt.Sprintf("/v1/addresses/carol/utxos?frozen=exclude&limit=%d", limit)
				if desc {
					target += "&order=desc"
				}
				if cursor != "" {
					target += "&cursor=" + cursor
				}
				idx, next := s.pageIndexes(target)
				got = append(got, idx...)
				if next == "" {
					break
				}
				cursor = next
			}
			w := append([]uint32(nil), want...)
			if desc {
				for i, j := 0, len(w)-1; i < j; i, j = i+1, j-1 {
					w[i], w[j] = w[j], w[i]
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(w) {
				t.Errorf("desc %v limit %d: %v, want %v", desc, limit, got, w)
			}
		}
	}
}

// pageIndexes reads a page and returns its items' output indexes and its
// next_cursor (query-escaped; "" at the end).
func (s *stack) pageIndexes(target string) ([]uint32, string) {
	s.t.Helper()
	r := s.get(target)
	var body struct {
		Utxos []struct {
			Index uint32 `json:"index"`
		} `json:"utxos"`
		NextCursor *string `json:"next_cursor"`
	}
	if r.code != 200 || json.Unmarshal(r.body, &body) != nil {
		s.t.Fatalf("GET %s: %s", target, r)
	}
	var idx []uint32
	for _, u := range body.Utxos {
		idx = append(idx, u.Index)
	}
	if body.NextCursor == nil {
		return idx, ""
	}
	return idx, url.QueryEscape(*body.NextCursor)
}

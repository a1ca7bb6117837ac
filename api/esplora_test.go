package api_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/utxo-cache/utxo-cache/api/esplora"
	"github.com/utxo-cache/utxo-cache/bitcoin"
	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

// Two addresses of the first Bitcoin blocks.
const (
	espA = "1A1zP1eP5QGefi2DMPTfTL5SLmv7DivfNa"
	espB = "12c6DSiU4Rq3P4ZxziKxzrL5LmMBrzjrJX"
)

// TestOpenAPIEsplora exercises every operation and declared status of the
// Esplora front end (paths under /api/), validates each request and answer
// against the document, and checks that no declared status went
// unexercised.
func TestOpenAPIEsplora(t *testing.T) {
	doc, _ := loadSpec(t)
	// A store with counters and the script hash index: a, b live; a spent.
	e := newStack(t, stackConfig{noSpec: true, esplora: &esplora.Options{UtxosLimit: 1},
		disk: disk.Options{Counters: true, Dimensions: []disk.Dimension{disk.DimScriptHash},
			Derivers: disk.Derivers{disk.DimScriptHash: bitcoin.ScriptHashValues}}})
	genesis(t, e)
	e.apply(chain.Tx{Hash: txh("a"), Coinbase: true, Outputs: []chain.Output{out(espA, 1), out(espA, 2), out(espA, 3), out(espB, 4)}})
	e.apply(tx("b", spends(op("a", 0)), out("script:"+strings.Repeat("5a", 32), 1)))
	// A store that keeps neither counters nor the index, and has no block.
	empty := newStack(t, stackConfig{noSpec: true, esplora: &esplora.Options{}})
	// A store started mid-chain.
	mid := newStack(t, stackConfig{noSpec: true, esplora: &esplora.Options{}})
	if _, err := mid.w.Apply(context.Background(), &chain.Block{Height: 5, Hash: hx("mid"), Time: 1, Txs: []chain.Tx{tx("m", nil, out(espA, 1))}}); err != nil {
		t.Fatal(err)
	}

	shA := func() string { h, _ := bitcoin.ScriptHashOf(espA); return hex.EncodeToString(h[:]) }()
	shB := func() string { h, _ := bitcoin.ScriptHashOf(espB); return hex.EncodeToString(h[:]) }()
	a := txh("a").String()
	etag := func(s *stack, target string) string { return s.do(call{method: "GET", target: target}).hdr.Get("ETag") }
	type row struct {
		s      *stack
		target string
		header []string
		want   int
		body   string // when set, the body must be this
	}
	rows := []row{
		{e, "/api/address/" + espB + "/utxo", nil, 200, ""},
		{e, "/api/address/" + espA + "/utxo", nil, 400, "Too many unspent transaction outputs (>1). Page through them with ?limit=N&cursor=C, or raise --esplora-utxos-limit."},
		{e, "/api/address/" + espA + "/utxo?limit=1", nil, 200, ""},
		{e, "/api/address/" + espA + "/utxo?limit=1&cursor=1-0-1", nil, 200, ""},
		{e, "/api/address/" + espA + "/utxo?limit=0", nil, 400, ""},
		{e, "/api/address/" + espA + "/utxo?cursor=1-0-1", nil, 400, "cursor needs limit"},
		{e, "/api/address/" + espA + "/utxo?limit=1&cursor=01-0-1", nil, 400, "Invalid cursor"},
		{e, "/api/address/" + espA + "/utxo?x=1", nil, 400, ""},
		{e, "/api/address/nope/utxo", nil, 400, "Invalid Bitcoin address"},
		{e, "/api/scripthash/" + shB + "/utxo", nil, 200, ""},
		{e, "/api/scripthash/zz/utxo", nil, 400, "Invalid scripthash"},
		{empty, "/api/scripthash/" + shB + "/utxo", nil, 404, ""},
		{e, "/api/address/" + espA, nil, 200, `{"address":"` + espA + `","chain_stats":{"funded_txo_count":3,"funded_txo_sum":6,"spent_txo_count":1,"spent_txo_sum":1,"tx_count":2},"mempool_stats":{"funded_txo_count":0,"funded_txo_sum":0,"spent_txo_count":0,"spent_txo_sum":0,"tx_count":0}}`},
		{e, "/api/address/nope", nil, 400, ""},
		{empty, "/api/address/" + espA, nil, 404, ""},
		{e, "/api/scripthash/" + shA, nil, 200, `{"chain_stats":{"funded_txo_count":3,"funded_txo_sum":6,"spent_txo_count":1,"spent_txo_sum":1,"tx_count":2},"mempool_stats":{"funded_txo_count":0,"funded_txo_sum":0,"spent_txo_count":0,"spent_txo_sum":0,"tx_count":0},"scripthash":"` + shA + `"}`},
		{e, "/api/scripthash/00", nil, 400, ""},
		{empty, "/api/scripthash/" + shA, nil, 404, ""},
		{e, "/api/tx/" + a + "/outspend/0", nil, 200, `{"spent":true,"txid":"` + txh("b").String() + `","vin":0,"status":{"confirmed":true,"block_height":2,"block_hash":"` + e.store.State().Tip.Hash.String() + `","block_time":1700000000}}`},
		{e, "/api/tx/" + a + "/outspend/1", nil, 200, `{"spent":false}`},
		{e, "/api/tx/" + a + "/outspend/1", []string{"If-None-Match", etag(e, "/api/tx/"+a+"/outspend/1")}, 304, ""},
		{e, "/api/tx/" + a + "/outspend/9", nil, 404, ""},
		{e, "/api/tx/" + a + "/outspend/-1", nil, 400, "Invalid number"},
		{e, "/api/tx/" + a + "/outspend/4294967296", nil, 400, "Invalid number"},
		{e, "/api/tx/xx/outspend/0", nil, 400, "Invalid hex string"},
		{e, "/api/tx/" + a + "/outspends", nil, 404, ""},
		{e, "/api/tx/x/outspends", nil, 400, ""},
		{e, "/api/blocks/tip/height", nil, 200, "2"},
		{empty, "/api/blocks/tip/height", nil, 404, ""},
		{e, "/api/blocks/tip/hash", nil, 200, e.store.State().Tip.Hash.String()},
		{empty, "/api/blocks/tip/hash", nil, 404, ""},
		{e, "/api/block-height/2", nil, 200, e.store.State().Tip.Hash.String()},
		{e, "/api/block-height/3", nil, 404, "Block not found"},
		{mid, "/api/block-height/4", nil, 404, ""},
		{e, "/api/block-height/+1", nil, 400, "Invalid number"},
		{e, "/api/block/" + e.store.State().Tip.Hash.String() + "/status", nil, 200, `{"in_best_chain":true,"height":2,"next_best":null}`},
		{e, "/api/block/" + strings.Repeat("0", 64) + "/status", nil, 200, `{"in_best_chain":false,"height":null,"next_best":null}`},
		{mid, "/api/block/" + strings.Repeat("0", 64) + "/status", nil, 404, ""},
		{e, "/api/block/abc/status", nil, 400, "Invalid hex string"},
	}
	// The address listing's 304.
	rows = append(rows, row{e, "/api/address/" + espB + "/utxo", []string{"If-None-Match", etag(e, "/api/address/"+espB+"/utxo")}, 304, ""})
	covered := map[string]bool{}
	for _, r := range rows {
		c := call{method: "GET", target: r.target, header: r.header}
		res := r.s.do(c)
		if res.code != r.want || (r.body != "" && string(res.body) != r.body) {
			t.Errorf("GET %s: %s, want %d %s", r.target, res, r.want, r.body)
			continue
		}
		key, errs := specCheck(t, c.request(), nil, res)
		for _, err := range errs {
			t.Errorf("GET %s: %v", r.target, err)
		}
		covered[key] = true
	}
	var missing []string
	for path, item := range doc.Paths.Map() {
		if !strings.HasPrefix(path, "/api/") || strings.HasPrefix(path, "/api/v0/") {
			continue // not the Esplora front end
		}
		for _, o := range item.Operations() {
			for status := range o.Responses.Map() {
				if status != "default" && !covered[o.OperationID+" "+status] {
					missing = append(missing, o.OperationID+" "+status)
				}
			}
		}
	}
	slices.Sort(missing)
	if len(missing) > 0 {
		t.Errorf("declared responses no row exercises: %v", missing)
	}
}

// genesis applies an empty block at height 0 to s's empty store: its
// chain then starts at the genesis block, as a Bitcoin import's does.
func genesis(t *testing.T, s *stack) {
	t.Helper()
	if _, err := s.w.Apply(context.Background(), &chain.Block{Height: 0, Hash: hx("genesis", t.Name()), Time: 1_600_000_000}); err != nil {
		t.Fatal(err)
	}
}

// TestEsploraPagesAndCache: an answer about a block ten or more blocks deep
// lives long; the paged listing's pages join up to the whole listing, and
// a change the listing sees changes its ETag.
func TestEsploraPagesAndCache(t *testing.T) {
	e := newStack(t, stackConfig{esplora: &esplora.Options{}, disk: disk.Options{Counters: true}})
	genesis(t, e)
	var outs []chain.Output
	for i := range 25 {
		outs = append(outs, out(espA, uint64(i+1)))
	}
	e.apply(chain.Tx{Hash: txh("c"), Coinbase: true, Outputs: outs})
	whole := e.do(call{method: "GET", target: "/api/address/" + espA + "/utxo"})
	if whole.code != 200 || whole.hdr.Get("Cache-Control") != "public, max-age=10" {
		t.Fatalf("whole listing: %s %v", whole, whole.hdr)
	}
	var joined []string
	cursor := ""
	for range 10 {
		target := "/api/address/" + espA + "/utxo?limit=10"
		if cursor != "" {
			target += "&cursor=" + cursor
		}
		r := e.do(call{method: "GET", target: target})
		body := strings.TrimSuffix(strings.TrimPrefix(string(r.body), "["), "]")
		if body != "" {
			joined = append(joined, body)
		}
		if cursor = r.hdr.Get("X-Next-Cursor"); cursor == "" {
			break
		}
	}
	if got := "[" + strings.Join(joined, ",") + "]"; got != string(whole.body) {
		t.Fatalf("pages join to\n%s\nwant\n%s", got, whole.body)
	}
	for range 10 {
		e.apply()
	}
	r := e.do(call{method: "GET", target: "/api/block-height/1"})
	if r.hdr.Get("Cache-Control") != "public, max-age=157784630" {
		t.Errorf("block 1 of 11: %v", r.hdr)
	}
	r = e.do(call{method: "GET", target: "/api/block-height/2"})
	if r.hdr.Get("Cache-Control") != "public, max-age=10" {
		t.Errorf("block 2 of 11: %v", r.hdr)
	}
	before := e.do(call{method: "GET", target: "/api/address/" + espA + "/utxo"}).hdr.Get("ETag")
	e.apply(tx("d", spends(op("c", 3)), out(espB, 4)))
	after := e.do(call{method: "GET", target: "/api/address/" + espA + "/utxo"})
	if after.hdr.Get("ETag") == before || strings.Contains(string(after.body), fmt.Sprintf(`"txid":"%s","vout":3,`, txh("c"))) {
		t.Errorf("after a spend: ETag %s (was %s), %s", after.hdr.Get("ETag"), before, after.body)
	}
	stats := e.do(call{method: "GET", target: "/api/address/" + espB})
	if !strings.Contains(string(stats.body), `"chain_stats":{"funded_txo_count":1,"funded_txo_sum":4,"spent_txo_count":0,"spent_txo_sum":0,"tx_count":1}`) {
		t.Errorf("stats of %s: %s", espB, stats.body)
	}
}

// FuzzEsploraPaths: no path or query under /api/ makes the front end
// answer 5xx or panic, and every answer is Esplora's shape (checkInvariants).
func FuzzEsploraPaths(f *testing.F) {
	for _, s := range []string{"/api/address/" + espA + "/utxo?limit=1&cursor=1-0-0", "/api/tx/" + strings.Repeat("ab", 32) + "/outspend/1",
		"/api/block-height/0", "/api/block/" + strings.Repeat("ab", 32) + "/status", "/api/scripthash/" + strings.Repeat("ab", 32), "/api/blocks/tip/hash"} {
		f.Add(s)
	}
	e := newStack(f, stackConfig{esplora: &esplora.Options{UtxosLimit: 1}, disk: disk.Options{Counters: true}})
	e.apply(chain.Tx{Hash: txh("a"), Coinbase: true, Outputs: []chain.Output{out(espA, 1), out(espA, 2)}})
	f.Fuzz(func(t *testing.T, target string) {
		e.t = t // the stack outlives each input: it reports to the input's test
		if !strings.HasPrefix(target, "/api/") || strings.ContainsAny(target, " #\x00\r\n\t") {
			return
		}
		req := call{method: "GET", target: target}
		func() {
			defer func() {
				if recover() != nil { // an unparseable URL: httptest.NewRequest panics
					t.Skip()
				}
			}()
			req.request()
		}()
		e.do(req)
	})
}

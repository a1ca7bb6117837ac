package node_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/utxo-cache/utxo-cache/bitcoin"
	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/internal/npmci"
	"github.com/utxo-cache/utxo-cache/node"
)

// The Esplora front end against a node that imported the real Bitcoin
// blocks 0..14131 (testdata/bitcoin, PROVENANCE.md there), checked with
// the real @mempool/mempool.js client and against facts computed here from
// the blocks alone: each address's live outputs and lifetime counters, each
// spent output's spender and input, each block's hash and time.

// esploraFacts are what the blocks say, independently of the store.
type esploraFacts struct {
	blocks  []*chain.Block
	live    map[chain.OutPoint]factOut
	spent   map[chain.OutPoint]factSpend
	stats   map[string]*factStats
	byAddr  map[string][]chain.OutPoint // live outputs, in chain order
	created []chain.OutPoint            // every output created, in chain order
}

type factOut struct {
	address string
	value   uint64
	height  uint64
}

type factSpend struct {
	txid   chain.Hash
	vin    int
	height uint64
}

type factStats struct {
	TxCount        uint64 `json:"tx_count"`
	FundedTxoCount uint64 `json:"funded_txo_count"`
	FundedTxoSum   uint64 `json:"funded_txo_sum"`
	SpentTxoCount  uint64 `json:"spent_txo_count"`
	SpentTxoSum    uint64 `json:"spent_txo_sum"`
}

var (
	esploraFactsOnce sync.Once
	esploraFactsVal  *esploraFacts
	esploraFactsErr  error
)

// loadEsploraFacts converts the fixture's blocks once per test binary and
// computes the facts.
func loadEsploraFacts(t *testing.T) *esploraFacts {
	t.Helper()
	esploraFactsOnce.Do(func() {
		br, err := bitcoin.OpenBlockFile(filepath.Join("..", "testdata", "bitcoin", "blk_0_to_14131.dat.bz2"), bitcoin.Mainnet)
		if err != nil {
			esploraFactsErr = err
			return
		}
		defer br.Close()
		a, err := bitcoin.NewAdapter(bitcoin.Options{})
		if err != nil {
			esploraFactsErr = err
			return
		}
		f := &esploraFacts{live: map[chain.OutPoint]factOut{}, spent: map[chain.OutPoint]factSpend{}, stats: map[string]*factStats{}}
		all := map[chain.OutPoint]factOut{}
		for {
			blk, err := br.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				esploraFactsErr = err
				return
			}
			b, err := a.Convert(blk, uint64(len(f.blocks)))
			if err != nil {
				esploraFactsErr = err
				return
			}
			f.blocks = append(f.blocks, b)
			for _, tx := range b.Txs {
				touched := map[string]bool{}
				for vin, in := range tx.Spends() {
					o := all[in]
					delete(f.live, in)
					f.spent[in] = factSpend{txid: tx.Hash, vin: vin, height: b.Height}
					s := f.stat(o.address)
					s.SpentTxoCount++
					s.SpentTxoSum += o.value
					touched[o.address] = true
				}
				tx.Creates(func(i uint32, o *chain.Output, _ bool) {
					op := chain.OutPoint{TxHash: tx.Hash, Index: i}
					fo := factOut{address: o.Address, value: o.Value, height: b.Height}
					all[op], f.live[op] = fo, fo
					f.created = append(f.created, op)
					s := f.stat(o.Address)
					s.FundedTxoCount++
					s.FundedTxoSum += o.Value
					touched[o.Address] = true
				})
				for a := range touched {
					f.stat(a).TxCount++
				}
			}
		}
		f.byAddr = map[string][]chain.OutPoint{}
		for _, op := range f.created {
			if o, ok := f.live[op]; ok {
				f.byAddr[o.address] = append(f.byAddr[o.address], op)
			}
		}
		esploraFactsVal = f
	})
	if esploraFactsErr != nil {
		t.Fatal(esploraFactsErr)
	}
	return esploraFactsVal
}

func (f *esploraFacts) stat(a string) *factStats {
	s := f.stats[a]
	if s == nil {
		s = &factStats{}
		f.stats[a] = s
	}
	return s
}

// status is the Esplora status object of a block height.
func (f *esploraFacts) status(h uint64) map[string]any {
	b := f.blocks[h]
	return map[string]any{"confirmed": true, "block_height": float64(h), "block_hash": b.Hash.String(), "block_time": float64(b.Time)}
}

// wantUtxos is an address's Esplora UTXO list, in chain order.
func (f *esploraFacts) wantUtxos(a string) []any {
	out := []any{}
	for _, op := range f.byAddr[a] {
		o := f.live[op]
		out = append(out, map[string]any{"txid": op.TxHash.String(), "vout": float64(op.Index), "status": f.status(o.height), "value": float64(o.value)})
	}
	return out
}

// esploraNode starts a writer node for the Bitcoin chain with the script
// hash index and the given UTXO limit, with every fixture block applied.
func esploraNode(t *testing.T, f *esploraFacts, limit int) *httptest.Server {
	t.Helper()
	cfg := writerConfig(t.TempDir())
	cfg.Chain, cfg.Indexes, cfg.PruneDepth, cfg.RollbackWindow = "bitcoin", "script_hash", 20000, 100
	cfg.EsploraUtxosLimit = limit
	cfg.WalletToken = "wallet"
	n, err := node.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close(context.Background()) })
	last := uint64(len(f.blocks) - 1)
	for i := 0; i < len(f.blocks); i += 2000 {
		if _, err := n.Writer().ApplyBlocks(context.Background(), f.blocks[i:min(i+2000, len(f.blocks))], last); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(n.Handler())
	t.Cleanup(srv.Close)
	return srv
}

// eget returns the status, headers and body of a GET.
func eget(t *testing.T, srv *httptest.Server, target string) (int, http.Header, string) {
	t.Helper()
	resp, err := srv.Client().Get(srv.URL + target)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func mustJSON(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("not JSON: %v: %s", err, s)
	}
	return v
}

// jsonEqual compares two values as JSON documents (maps with their keys
// sorted, structs as the maps they marshal to).
func jsonEqual(a, b any) bool {
	norm := func(v any) []byte {
		x, _ := json.Marshal(v)
		var n any
		_ = json.Unmarshal(x, &n)
		y, _ := json.Marshal(n)
		return y
	}
	return bytes.Equal(norm(a), norm(b))
}

// sampleAddresses picks the addresses with the most live outputs, with the
// most spends, fully spent ones and a spread of the others.
func (f *esploraFacts) sampleAddresses() (sample []string, top string) {
	addrs := make([]string, 0, len(f.stats))
	for a := range f.stats {
		addrs = append(addrs, a)
	}
	slices.Sort(addrs)
	byLive := slices.Clone(addrs)
	slices.SortStableFunc(byLive, func(a, b string) int { return len(f.byAddr[b]) - len(f.byAddr[a]) })
	bySpent := slices.Clone(addrs)
	slices.SortStableFunc(bySpent, func(a, b string) int { return int(f.stats[b].SpentTxoCount) - int(f.stats[a].SpentTxoCount) })
	seen := map[string]bool{}
	add := func(a string) {
		if !seen[a] {
			seen[a] = true
			sample = append(sample, a)
		}
	}
	for _, a := range byLive[:5] {
		add(a)
	}
	for _, a := range bySpent[:5] {
		add(a)
	}
	n := 0
	for _, a := range addrs {
		if len(f.byAddr[a]) == 0 && n < 3 {
			add(a)
			n++
		}
	}
	for i := 0; i < len(addrs); i += len(addrs) / 10 {
		add(addrs[i])
	}
	return sample, byLive[0]
}

// sampleOutPoints picks spent and live outputs and one that never existed.
func (f *esploraFacts) sampleOutPoints() []chain.OutPoint {
	var spent, live []chain.OutPoint
	for _, op := range f.created {
		if _, ok := f.spent[op]; ok {
			spent = append(spent, op)
		} else {
			live = append(live, op)
		}
	}
	var out []chain.OutPoint
	for i := 0; i < len(spent); i += max(1, len(spent)/12) {
		out = append(out, spent[i])
	}
	for i := 0; i < len(live); i += max(1, len(live)/6) {
		out = append(out, live[i])
	}
	return append(out, chain.OutPoint{TxHash: sha256.Sum256([]byte("never")), Index: 0})
}

// TestEsploraFixtures checks the front end's routes over HTTP against the
// facts and the /v1 answers.
func TestEsploraFixtures(t *testing.T) {
	f := loadEsploraFacts(t)
	sample, top := f.sampleAddresses()
	limit := len(f.byAddr[top]) - 1 // the top address is over it
	srv := esploraNode(t, f, limit)
	tip := f.blocks[len(f.blocks)-1]

	if code, h, body := eget(t, srv, "/api/blocks/tip/height"); code != 200 || body != strconv.FormatUint(tip.Height, 10) ||
		h.Get("Content-Type") != "text/plain" || h.Get("Cache-Control") != "public, max-age=10" || h.Get("X-Commit-Seq") == "" {
		t.Errorf("tip height: %d %v %q", code, h, body)
	}
	if code, _, body := eget(t, srv, "/api/blocks/tip/hash"); code != 200 || body != tip.Hash.String() {
		t.Errorf("tip hash: %d %q", code, body)
	}
	for _, h := range []uint64{0, 1, 9000, tip.Height - 9, tip.Height} {
		code, hdr, body := eget(t, srv, "/api/block-height/"+strconv.FormatUint(h, 10))
		wantAge := "public, max-age=10"
		if tip.Height-h >= 10 {
			wantAge = "public, max-age=157784630"
		}
		if code != 200 || body != f.blocks[h].Hash.String() || hdr.Get("Cache-Control") != wantAge {
			t.Errorf("block-height %d: %d %q %q", h, code, body, hdr.Get("Cache-Control"))
		}
		code, _, body = eget(t, srv, "/api/block/"+f.blocks[h].Hash.String()+"/status")
		next := any(nil)
		if h < tip.Height {
			next = f.blocks[h+1].Hash.String()
		}
		if want := map[string]any{"in_best_chain": true, "height": float64(h), "next_best": next}; code != 200 || !jsonEqual(mustJSON(t, body), want) {
			t.Errorf("block %d status: %d %s", h, code, body)
		}
	}
	for target, want := range map[string]struct {
		code int
		body string
	}{
		"/api/block-height/14132":                             {404, "Block not found"},
		"/api/block-height/x":                                 {400, "Invalid number"},
		"/api/block/" + strings.Repeat("ab", 32) + "/status":  {200, `{"in_best_chain":false,"height":null,"next_best":null}`},
		"/api/block/zz/status":                                {400, "Invalid hex string"},
		"/api/tx/" + strings.Repeat("ab", 32) + "/outspend/x": {400, "Invalid number"},
		"/api/address/notanaddress/utxo":                      {400, "Invalid Bitcoin address"},
		"/api/scripthash/00/utxo":                             {400, "Invalid scripthash"},
		"/api/nothing":                                        {404, `endpoint does not exist "/nothing"`},
	} {
		code, h, body := eget(t, srv, target)
		if code != want.code || body != want.body {
			t.Errorf("%s: %d %q, want %d %q", target, code, body, want.code, want.body)
		}
		if ct := h.Get("Content-Type"); (code >= 400) && ct != "text/plain" {
			t.Errorf("%s: error Content-Type %q", target, ct)
		}
	}

	for _, a := range sample {
		wantList := f.wantUtxos(a)
		code, h, body := eget(t, srv, "/api/address/"+a+"/utxo")
		if a == top {
			if code != 400 || !strings.HasPrefix(body, fmt.Sprintf("Too many unspent transaction outputs (>%d)", limit)) || h.Get("Content-Type") != "text/plain" {
				t.Errorf("%s over the limit: %d %q", a, code, body)
			}
			// The paged variant serves it whole.
			var got []any
			cursor := ""
			for pages := 0; ; pages++ {
				target := "/api/address/" + a + "/utxo?limit=7"
				if cursor != "" {
					target += "&cursor=" + cursor
				}
				code, h, body := eget(t, srv, target)
				if code != 200 {
					t.Fatalf("%s: %d %s", target, code, body)
				}
				got = append(got, mustJSON(t, body).([]any)...)
				if cursor = h.Get("X-Next-Cursor"); cursor == "" {
					break
				}
			}
			if !jsonEqual(got, wantList) {
				t.Errorf("%s paged: %d outputs, want %d", a, len(got), len(wantList))
			}
		} else if code != 200 || !jsonEqual(mustJSON(t, body), wantList) || h.Get("Etag") == "" || h.Get("Cache-Control") != "public, max-age=10" {
			t.Errorf("%s utxo: %d %s\nwant %d outputs", a, code, body, len(wantList))
		}
		// The script hash route lists the same outputs.
		sh, ok := bitcoin.ScriptHashOf(a)
		if !ok {
			t.Fatalf("no script hash for %s", a)
		}
		if a != top {
			if code, _, body := eget(t, srv, "/api/scripthash/"+hex.EncodeToString(sh[:])+"/utxo"); code != 200 || !jsonEqual(mustJSON(t, body), wantList) {
				t.Errorf("%s by script hash: %d %s", a, code, body)
			}
		}
		// The same outputs as /v1.
		code, _, body = eget(t, srv, "/v1/addresses/"+a+"/utxos?limit=1000")
		var v1 struct {
			Utxos []struct {
				TxHash string `json:"tx_hash"`
				Index  uint32 `json:"index"`
				Value  string `json:"value"`
			} `json:"utxos"`
		}
		if code != 200 || json.Unmarshal([]byte(body), &v1) != nil || len(v1.Utxos) != len(wantList) {
			t.Errorf("%s /v1: %d %s", a, code, body)
		}
		wantStats := map[string]any{"address": a, "chain_stats": f.stats[a], "mempool_stats": factStats{}}
		if code, _, body := eget(t, srv, "/api/address/"+a); code != 200 || !jsonEqual(mustJSON(t, body), wantStats) {
			t.Errorf("%s stats: %d %s, want %+v", a, code, body, *f.stats[a])
		}
	}

	for _, op := range f.sampleOutPoints() {
		code, h, body := eget(t, srv, fmt.Sprintf("/api/tx/%s/outspend/%d", op.TxHash, op.Index))
		s, spent := f.spent[op]
		_, live := f.live[op]
		switch {
		case spent:
			want := map[string]any{"spent": true, "txid": s.txid.String(), "vin": float64(s.vin), "status": f.status(s.height)}
			if code != 200 || !jsonEqual(mustJSON(t, body), want) || h.Get("Cache-Control") != "public, max-age=157784630" {
				t.Errorf("outspend %s: %d %s %q", op, code, body, h.Get("Cache-Control"))
			}
		case live:
			if code != 200 || body != `{"spent":false}` {
				t.Errorf("outspend %s: %d %s", op, code, body)
			}
		default:
			if code != 404 || h.Get("Content-Type") != "text/plain" {
				t.Errorf("outspend of unknown %s: %d %s", op, code, body)
			}
		}
	}
	if code, _, _ := eget(t, srv, "/api/tx/"+f.created[0].TxHash.String()+"/outspends"); code != 404 {
		t.Errorf("outspends: %d, want 404", code)
	}

	t.Run("mempool.js", func(t *testing.T) { testMempoolJS(t, srv, f, sample, top, limit) })
}

// mempoolJSDir holds the pinned @mempool/mempool.js (package.json,
// package-lock.json) and check.js, which calls it.
var mempoolJSDir = filepath.Join("..", "tools", "mempooljs")

// clientOutcome is what check.js records of one client call.
type clientOutcome struct {
	Value       json.RawMessage `json:"value"`
	Status      int             `json:"status"`
	Body        string          `json:"body"`
	ContentType string          `json:"contentType"`
	Thrown      string          `json:"thrown"`
}

func (o clientOutcome) String() string {
	return fmt.Sprintf("value %s, status %d, body %q, thrown %q", o.Value, o.Status, o.Body, o.Thrown)
}

// mempoolJSResult is what check.js prints: each client call's outcome.
type mempoolJSResult struct {
	TipHeight clientOutcome            `json:"tipHeight"`
	TipHash   clientOutcome            `json:"tipHash"`
	Utxo      map[string]clientOutcome `json:"utxo"`
	Address   map[string]clientOutcome `json:"address"`
	Outspend  []clientOutcome          `json:"outspend"`
}

// runMempoolJS runs tools/mempooljs/check.js, @mempool/mempool.js as a
// wallet calls it, against srv for addresses and outpoints.
func runMempoolJS(t *testing.T, srv *httptest.Server, addresses []string, ops []chain.OutPoint) mempoolJSResult {
	t.Helper()
	npmci.Ensure(t, mempoolJSDir, "the Esplora client test", "@mempool/mempool.js")
	req := map[string]any{"hostname": strings.TrimPrefix(srv.URL, "http://"), "addresses": addresses}
	pairs := [][]any{}
	for _, op := range ops {
		pairs = append(pairs, []any{op.TxHash.String(), op.Index})
	}
	req["outpoints"] = pairs
	reqFile := filepath.Join(t.TempDir(), "request.json")
	b, _ := json.Marshal(req)
	if err := os.WriteFile(reqFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", "check.js", reqFile)
	cmd.Dir = mempoolJSDir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node check.js: %v\n%s", err, stderr.String())
	}
	var got mempoolJSResult
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatalf("check.js output: %v\n%s", err, stdout.String())
	}
	return got
}

func testMempoolJS(t *testing.T, srv *httptest.Server, f *esploraFacts, sample []string, top string, limit int) {
	ops := f.sampleOutPoints()
	got := runMempoolJS(t, srv, sample, ops)
	tip := f.blocks[len(f.blocks)-1]
	// The client parses the text/plain height as a JSON number, as it does
	// Esplora's.
	if string(got.TipHeight.Value) != strconv.FormatUint(tip.Height, 10) {
		t.Errorf("getBlocksTipHeight: %+v", got.TipHeight)
	}
	if string(got.TipHash.Value) != `"`+tip.Hash.String()+`"` {
		t.Errorf("getBlocksTipHash: %+v", got.TipHash)
	}
	_, _, v1tip := eget(t, srv, "/v1/tip")
	if !strings.Contains(v1tip, `"height":`+strconv.FormatUint(tip.Height, 10)) {
		t.Errorf("/v1/tip %s", v1tip)
	}
	for _, a := range sample {
		u := got.Utxo[a]
		if a == top {
			if u.Status != 400 || !strings.HasPrefix(u.Body, fmt.Sprintf("Too many unspent transaction outputs (>%d)", limit)) {
				t.Errorf("getAddressTxsUtxo(%s) over the limit: %+v", a, u)
			}
		} else if u.Value == nil || !jsonEqual(mustJSON(t, string(u.Value)), f.wantUtxos(a)) {
			t.Errorf("getAddressTxsUtxo(%s): %+v", a, u)
		}
		want := map[string]any{"address": a, "chain_stats": f.stats[a], "mempool_stats": factStats{}}
		if ad := got.Address[a]; ad.Value == nil || !jsonEqual(mustJSON(t, string(ad.Value)), want) {
			t.Errorf("getAddress(%s): %+v", a, ad)
		}
	}
	for i, op := range ops {
		o := got.Outspend[i]
		// /v1 says who spent it, or that it is live, or that it is unknown.
		code, _, v1 := eget(t, srv, fmt.Sprintf("/v1/utxos/%s/%d", op.TxHash, op.Index))
		s, spent := f.spent[op]
		switch {
		case spent:
			want := map[string]any{"spent": true, "txid": s.txid.String(), "vin": float64(s.vin), "status": f.status(s.height)}
			if o.Value == nil || !jsonEqual(mustJSON(t, string(o.Value)), want) || code != 200 || !strings.Contains(v1, s.txid.String()) {
				t.Errorf("getTxOutspend(%s): %+v (/v1: %d %s)", op, o, code, v1)
			}
		case code == 200:
			if string(o.Value) != `{"spent":false}` || !strings.Contains(v1, `"spent":null`) {
				t.Errorf("getTxOutspend(%s): %+v (/v1: %s)", op, o, v1)
			}
		default:
			if o.Status != 404 || code != 404 {
				t.Errorf("getTxOutspend(%s) of an unknown outpoint: %+v (/v1: %d)", op, o, code)
			}
		}
	}
	t.Logf("mempool.js: %d addresses, %d outpoints, tip %d", len(sample), len(ops), tip.Height)
}

// p2pkh is the output script paying a fixed key hash.
var p2pkh = append(append([]byte{0x76, 0xa9, 20}, bytes.Repeat([]byte{0x11}, 20)...), 0x88, 0xac)

// rawSpend serializes a version-2 Bitcoin transaction (no witness) that
// spends op with an empty scriptSig and pays value to the P2PKH script, and
// returns it with its txid, computed here.
func rawSpend(op chain.OutPoint, value uint64) ([]byte, chain.Hash) {
	return rawSpendTo(op, [][]byte{p2pkh}, value)
}

// rawSpendTo is rawSpend with an output of value for each script.
func rawSpendTo(op chain.OutPoint, scripts [][]byte, value uint64) ([]byte, chain.Hash) {
	b := binary.LittleEndian.AppendUint32(nil, 2)
	b = append(b, 1)
	for i := 31; i >= 0; i-- { // wire order: the display hash reversed
		b = append(b, op.TxHash[i])
	}
	b = binary.LittleEndian.AppendUint32(b, op.Index)
	b = append(b, 0, 0xff, 0xff, 0xff, 0xff) // empty scriptSig, sequence
	b = append(b, byte(len(scripts)))
	for _, script := range scripts {
		b = binary.LittleEndian.AppendUint64(b, value)
		b = append(b, byte(len(script)))
		b = append(b, script...)
	}
	b = binary.LittleEndian.AppendUint32(b, 0)
	first := sha256.Sum256(b)
	second := sha256.Sum256(first[:])
	var id chain.Hash
	for i := range id {
		id[i] = second[31-i]
	}
	return b, id
}

// TestEsploraPending: the Esplora answers include the pending set, as
// Esplora includes the mempool, and a post or a withdrawal invalidates the
// cached ones: the spent output leaves its address's listing, the payee's
// listing shows the unconfirmed output, mempool_stats count both, and the
// outspend names the pending spender. The /v1 answers without
// pending=include keep their bytes and ETags.
func TestEsploraPending(t *testing.T) {
	f := loadEsploraFacts(t)
	var a string
	for addr, ops := range f.byAddr {
		if len(ops) >= 2 && len(ops) <= 50 && (a == "" || addr < a) {
			a = addr
		}
	}
	srv := esploraNode(t, f, 0)
	op := f.byAddr[a][0]
	spent := f.live[op]
	raw, txid := rawSpend(op, 1000)
	wantBefore := f.wantUtxos(a)

	read := func(target string) (string, string) {
		t.Helper()
		code, h, body := eget(t, srv, target)
		if code != 200 {
			t.Fatalf("GET %s: %d %s", target, code, body)
		}
		return body, h.Get("ETag")
	}
	// Warm the caches: the same reads twice.
	for range 2 {
		read("/api/address/" + a + "/utxo")
		read("/api/address/" + a)
		read(fmt.Sprintf("/api/tx/%s/outspend/%d", op.TxHash, op.Index))
	}
	v1Before, v1Tag := read("/v1/addresses/" + a + "/utxos")

	post := func(method, target string, body []byte) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+target, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer wallet")
		req.Header.Set("Content-Type", "application/octet-stream")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s %s: %d %s", method, target, resp.StatusCode, b)
		}
	}
	post("POST", "/v1/pending", raw)

	// The payee's address, as the store names the P2PKH output.
	utxo, _ := read(fmt.Sprintf("/v1/utxos/%s/0?pending=include", txid))
	var pu struct {
		Utxo struct {
			Address string `json:"address"`
		} `json:"utxo"`
	}
	err := json.Unmarshal([]byte(utxo), &pu)
	u := pu.Utxo
	if err != nil || u.Address == "" {
		t.Fatalf("the pending output: %s (%v)", utxo, err)
	}

	body, _ := read("/api/address/" + a + "/utxo")
	if want := wantBefore[1:]; !jsonEqual(mustJSON(t, body), want) {
		t.Errorf("utxo of the spender's address with the spend pending:\n%s\nwant %v", body, want)
	}
	body, _ = read("/api/address/" + u.Address + "/utxo")
	if want := []any{map[string]any{"txid": txid.String(), "vout": float64(0), "status": map[string]any{"confirmed": false}, "value": float64(1000)}}; !jsonEqual(mustJSON(t, body), want) {
		t.Errorf("utxo of the payee: %s", body)
	}
	body, _ = read("/api/address/" + a)
	wantStats := map[string]any{"address": a, "chain_stats": f.stats[a],
		"mempool_stats": factStats{TxCount: 1, SpentTxoCount: 1, SpentTxoSum: spent.value}}
	if !jsonEqual(mustJSON(t, body), wantStats) {
		t.Errorf("address with the spend pending: %s", body)
	}
	body, _ = read(fmt.Sprintf("/api/tx/%s/outspend/%d", op.TxHash, op.Index))
	if want := map[string]any{"spent": true, "txid": txid.String(), "vin": float64(0), "status": map[string]any{"confirmed": false}}; !jsonEqual(mustJSON(t, body), want) {
		t.Errorf("outspend with the spend pending: %s", body)
	}
	if body, tag := read("/v1/addresses/" + a + "/utxos"); body != v1Before || tag != v1Tag {
		t.Errorf("/v1 listing without pending=include changed with a pending post")
	}
	// The same through mempool.js, as a wallet sees it.
	js := runMempoolJS(t, srv, []string{a, u.Address}, []chain.OutPoint{op})
	for _, c := range []struct {
		what string
		got  clientOutcome
		want string
	}{
		{"getAddressTxsUtxo(spender)", js.Utxo[a], "/api/address/" + a + "/utxo"},
		{"getAddressTxsUtxo(payee)", js.Utxo[u.Address], "/api/address/" + u.Address + "/utxo"},
		{"getAddress(spender)", js.Address[a], "/api/address/" + a},
		{"getTxOutspend", js.Outspend[0], fmt.Sprintf("/api/tx/%s/outspend/%d", op.TxHash, op.Index)},
	} {
		body, _ := read(c.want)
		if c.got.Value == nil || !jsonEqual(mustJSON(t, string(c.got.Value)), mustJSON(t, body)) {
			t.Errorf("mempool.js %s with the spend pending: %+v, the node answers %s", c.what, c.got, body)
		}
	}

	// Withdrawn: everything as before.
	post("DELETE", "/v1/pending/"+txid.String(), nil)
	body, _ = read("/api/address/" + a + "/utxo")
	if !jsonEqual(mustJSON(t, body), wantBefore) {
		t.Errorf("utxo after the withdrawal: %s", body)
	}
	body, _ = read("/api/address/" + u.Address + "/utxo")
	if body != "[]" {
		t.Errorf("payee after the withdrawal: %s", body)
	}
	body, _ = read(fmt.Sprintf("/api/tx/%s/outspend/%d", op.TxHash, op.Index))
	if body != `{"spent":false}` {
		t.Errorf("outspend after the withdrawal: %s", body)
	}

	// An OP_RETURN output keeps its index and is never an output: the
	// payee's output is vout 1.
	raw, txid = rawSpendTo(op, [][]byte{{0x6a, 4, 't', 'e', 's', 't'}, p2pkh}, 0)
	post("POST", "/v1/pending", raw)
	if code, _, body := eget(t, srv, fmt.Sprintf("/v1/utxos/%s/0?pending=include", txid)); code != 404 {
		t.Errorf("the OP_RETURN output of a pending transaction: %d %s", code, body)
	}
	body, _ = read("/api/address/" + u.Address + "/utxo")
	if want := []any{map[string]any{"txid": txid.String(), "vout": float64(1), "status": map[string]any{"confirmed": false}, "value": float64(0)}}; !jsonEqual(mustJSON(t, body), want) {
		t.Errorf("utxo of the payee of a transaction with an OP_RETURN first: %s", body)
	}
}

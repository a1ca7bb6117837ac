package api_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/utxo-cache/utxo-cache/api"
	"github.com/utxo-cache/utxo-cache/api/esplora"
	"github.com/utxo-cache/utxo-cache/blockfrost"
	"github.com/utxo-cache/utxo-cache/cache"
	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/events"
	"github.com/utxo-cache/utxo-cache/internal/model"
	"github.com/utxo-cache/utxo-cache/query"
	"github.com/utxo-cache/utxo-cache/replication"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
	"github.com/utxo-cache/utxo-cache/tiers/memory"
	"github.com/utxo-cache/utxo-cache/writer"
)

// The handler tests run the real stack in-process: a Pebble store in
// t.TempDir(), the single writer, the read server with a memory tier, and
// the Gin handler, driven through httptest. Every exchange goes through
// stack.do, which checks the invariants every answer must keep (JSON errors,
// tip headers equal to the body's tip, no 5xx) and validates the request and
// the real response against api/openapi.yaml (openapi_test.go).

const testToken = "test-admin-token"

// replToken is the replication token of stacks with replication on.
const replToken = "test-replication-token"

// hx is a deterministic 32-byte hash of parts.
func hx(parts ...any) chain.Hash { return sha256.Sum256(fmt.Append(nil, parts...)) }

// txh is the hash of the test transaction called name.
func txh(name string) chain.Hash { return hx("tx", name) }

func op(txName string, i uint32) chain.OutPoint { return chain.OutPoint{TxHash: txh(txName), Index: i} }

func out(addr string, v uint64, assets ...chain.Asset) chain.Output {
	return chain.Output{Address: addr, Value: v, Assets: assets}
}

func tx(name string, inputs []chain.OutPoint, outs ...chain.Output) chain.Tx {
	return chain.Tx{Hash: txh(name), Inputs: inputs, Outputs: outs}
}

func spends(ops ...chain.OutPoint) []chain.OutPoint { return ops }

// stackConfig shapes a test stack; the zero value is a writer with the test
// token, a memory tier and default retention.
type stackConfig struct {
	disk     disk.Options
	api      api.Options
	noToken  bool // configure no admin token: writes disabled
	noMemory bool // no memory tier
	tiers    []cache.Tier
	hot      int // query.Options.HotAddresses (0: default)
	// byCost applies cost-based admission to the remote tiers; by default
	// they are asked for every answer, so that tests of the tiers see them
	// answer.
	byCost   *query.Admission
	noWriter bool
	wrap     func(api.Reader) api.Reader
	noSpec   bool // skip the OpenAPI validation of every exchange
	// replication serves the change log and checkpoints (the writer's
	// replication.Source) to bearers of replToken.
	replication bool
	// writer configures the writer (its free-space guard).
	writer writer.Options
	// events serves event streams (an events.Hub over the store).
	events bool
	// blockfrost mounts the Blockfrost front end with these options.
	blockfrost *blockfrost.Options
	// esplora, when set, mounts the Esplora front end with these options.
	esplora *esplora.Options
}

// eventSource is what a test's event hub reads.
type eventSource struct {
	*disk.Store
	reads *query.Server
}

func (e eventSource) Published() query.Published { return e.reads.Published() }
func (e eventSource) WaitFor(ctx context.Context, minSeq, minHeight uint64, maxWait time.Duration) (query.Published, error) {
	return e.reads.WaitFor(ctx, minSeq, minHeight, maxWait)
}

// stack is one running in-process service.
type stack struct {
	t      testing.TB
	store  *disk.Store
	w      *writer.Writer
	reads  *query.Server
	mem    *memory.Tier
	h      http.Handler
	spec   bool
	blocks int                 // blocks built by next, for unique hashes
	source *replication.Source // with stackConfig.replication
}

func newStack(t testing.TB, cfg stackConfig) *stack {
	t.Helper()
	do := cfg.disk
	if do.CacheBytes == 0 {
		do.CacheBytes = 8 << 20
	}
	if do.MemTableBytes == 0 {
		do.MemTableBytes = 4 << 20
	}
	store, err := disk.Open(t.TempDir(), do)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	s := &stack{t: t, store: store, spec: !cfg.noSpec}
	var tiers []cache.Tier
	if !cfg.noMemory {
		mem, err := memory.New(memory.Options{MaxBytes: 32 << 20, FloorSlots: 1 << 12})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(mem.Close)
		s.mem = mem
		tiers = append(tiers, mem)
	}
	tiers = append(tiers, cfg.tiers...)
	admission := query.Admission{All: true}
	if cfg.byCost != nil {
		admission = *cfg.byCost
	}
	s.reads = query.New(store, query.Options{Tiers: tiers, HotAddresses: cfg.hot, Admission: admission})
	t.Cleanup(s.reads.Close)
	s.w = writer.New(store, cfg.writer)
	t.Cleanup(func() { _ = s.w.Close() })
	s.w.Subscribe(s.reads)

	opts := cfg.api
	if !cfg.noToken && opts.AdminToken == "" {
		opts.AdminToken = testToken
	}
	var r api.Reader = s.reads
	if cfg.wrap != nil {
		r = cfg.wrap(r)
	}
	if cfg.replication {
		s.source = replication.NewSource(store, s.w, t.TempDir(), 2)
		opts.ReplicationToken, opts.Replication = replToken, s.source
	}
	if cfg.events {
		hub, err := events.New(eventSource{store, s.reads}, events.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(hub.Close)
		opts.Events = hub
	}
	if cfg.blockfrost != nil {
		opts.Blockfrost = blockfrost.New(s.reads, *cfg.blockfrost)
	}
	if cfg.esplora != nil {
		f, err := esplora.New(s.reads, *cfg.esplora)
		if err != nil {
			t.Fatal(err)
		}
		opts.Esplora = f
	}
	var w api.Writer = s.w
	if cfg.noWriter {
		w = nil
	}
	s.h = api.New(r, w, opts)
	return s
}

// call is one HTTP exchange.
type call struct {
	method, target string
	body           []byte
	ctype          string
	header         []string // name, value pairs
	auth           bool     // send "Authorization: Bearer <testToken>"
	noSpec         bool     // not validated against the OpenAPI document (another test covers it)
	allow5xx       bool
	// stalled: the body's bytes arrive, then its connection's read
	// deadline passes (os.ErrDeadlineExceeded) before the rest.
	stalled bool
	// canceled: the request's context is canceled from the start (an
	// event stream then ends after its first line).
	canceled bool
}

// response is what the handler answered.
type response struct {
	code int
	hdr  http.Header
	body []byte
}

func (r *response) String() string {
	return fmt.Sprintf("%d %s", r.code, r.body)
}

// obj decodes the body as a JSON object (numbers as json.Number).
func (r *response) obj(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	d := json.NewDecoder(bytes.NewReader(r.body))
	d.UseNumber()
	if err := d.Decode(&m); err != nil {
		t.Fatalf("body is not a JSON object: %v: %s", err, r.body)
	}
	return m
}

func (c call) request() *http.Request {
	var body io.Reader
	if c.body != nil {
		body = bytes.NewReader(c.body)
	}
	if c.stalled {
		body = io.MultiReader(bytes.NewReader(c.body), stalledReader{})
	}
	req := httptest.NewRequest(c.method, c.target, body)
	if c.stalled {
		req.ContentLength = -1
	}
	if c.ctype != "" {
		req.Header.Set("Content-Type", c.ctype)
	}
	if c.auth {
		req.Header.Set("Authorization", "Bearer "+testToken)
	}
	for i := 0; i+1 < len(c.header); i += 2 {
		req.Header.Add(c.header[i], c.header[i+1])
	}
	if c.canceled {
		ctx, cancel := context.WithCancel(req.Context())
		cancel()
		req = req.WithContext(ctx)
	}
	return req
}

// stalledReader is the rest of a body whose connection's read deadline
// passed, as net/http's body reader returns it.
type stalledReader struct{}

func (stalledReader) Read([]byte) (int, error) {
	return 0, &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
}

// do serves c and checks the answer's invariants and its OpenAPI description.
func (s *stack) do(c call) *response {
	s.t.Helper()
	req := c.request()
	rec := httptest.NewRecorder()
	s.h.ServeHTTP(rec, req)
	res := &response{code: rec.Code, hdr: rec.Result().Header, body: rec.Body.Bytes()}
	checkInvariants(s.t, c, res)
	if s.spec && !c.noSpec {
		checkSpec(s.t, c.request(), c.body, res)
	}
	return res
}

// checkInvariants checks what every answer must keep: no 5xx, a JSON body
// (errors as {"error":{code,message}}), no body on 304, and the
// X-Tip-Height / X-Tip-Hash headers equal to the tip in the body.
func checkInvariants(t testing.TB, c call, r *response) {
	t.Helper()
	if r.code >= 500 && !c.allow5xx {
		t.Fatalf("%s %s: %s", c.method, c.target, r)
	}
	if c.method == http.MethodHead {
		// The GET's status and headers, no body (TestHead compares them).
		if len(r.body) != 0 {
			t.Fatalf("HEAD %s: %d with a body: %q", c.target, r.code, r.body)
		}
		return
	}
	if r.code == http.StatusNotModified {
		if len(r.body) != 0 {
			t.Fatalf("%s %s: 304 with a body: %q", c.method, c.target, r.body)
		}
		return
	}
	if r.code >= 300 && r.code < 400 {
		return
	}
	path := c.target
	if i := strings.IndexByte(path, '?'); i >= 0 {
		path = path[:i]
	}
	if path == "/metrics" || path == "/openapi.yaml" {
		return
	}
	if path == "/v1/events" && r.code == http.StatusOK {
		if ct := r.hdr.Get("Content-Type"); ct != "text/event-stream" || !bytes.HasPrefix(r.body, []byte(": heartbeat\n\n")) {
			t.Fatalf("%s %s: 200 %q: %q", c.method, c.target, ct, r.body)
		}
		return
	}
	if strings.HasPrefix(path, "/api/") && !strings.HasPrefix(path, "/api/v0/") {
		// The Esplora front end: its own bodies, errors in text/plain.
		ct := r.hdr.Get("Content-Type")
		if r.hdr.Get("X-Commit-Seq") == "" || (r.code >= 400 && ct != "text/plain") || (ct != "text/plain" && ct != "application/json") {
			t.Fatalf("%s %s: %q without X-Commit-Seq or with a wrong Content-Type: %s", c.method, c.target, ct, r)
		}
		return
	}
	if strings.HasPrefix(path, "/v1/replication/") && r.code == http.StatusOK {
		// A CBOR sequence or a tar archive, with the state in the headers.
		if r.hdr.Get("X-Commit-Seq") == "" {
			t.Fatalf("%s %s: 200 without X-Commit-Seq", c.method, c.target)
		}
		return
	}
	if ct := r.hdr.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("%s %s: Content-Type %q: %s", c.method, c.target, ct, r)
	}
	if strings.HasPrefix(path, "/api/v0/") {
		// The Blockfrost front end: its own shapes, errors as
		// {"status_code","error","message"}, the state in the headers.
		if !json.Valid(r.body) || r.hdr.Get("X-Commit-Seq") == "" {
			t.Fatalf("%s %s: not JSON, or no X-Commit-Seq: %s", c.method, c.target, r)
		}
		if r.code >= 400 {
			var e struct {
				StatusCode int    `json:"status_code"`
				Error      string `json:"error"`
				Message    string `json:"message"`
			}
			if err := json.Unmarshal(r.body, &e); err != nil || e.StatusCode != r.code || e.Error != http.StatusText(r.code) || e.Message == "" {
				t.Fatalf("%s %s: not a Blockfrost error: %s", c.method, c.target, r)
			}
		}
		return
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("%s %s: body is not a JSON object: %v: %s", c.method, c.target, err, r)
	}
	if r.code >= 400 {
		var e struct {
			Error *struct {
				Code    *string `json:"code"`
				Message *string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(r.body, &e); err != nil || e.Error == nil || e.Error.Code == nil || e.Error.Message == nil ||
			*e.Error.Code == "" || *e.Error.Message == "" {
			t.Fatalf("%s %s: error answer without error.code and error.message: %s", c.method, c.target, r)
		}
	}
	raw, ok := m["tip"]
	if !ok {
		if strings.HasPrefix(path, "/v1/") && r.code != http.StatusNotFound && r.code != http.StatusMethodNotAllowed {
			t.Fatalf("%s %s: answer without a tip: %s", c.method, c.target, r)
		}
		return
	}
	height, hash := r.hdr.Get("X-Tip-Height"), r.hdr.Get("X-Tip-Hash")
	if string(raw) == "null" {
		if height != "" || hash != "" {
			t.Fatalf("%s %s: tip null but headers %q %q", c.method, c.target, height, hash)
		}
		return
	}
	var tip struct {
		Height json.Number `json:"height"`
		Hash   string      `json:"hash"`
	}
	if err := json.Unmarshal(raw, &tip); err != nil {
		t.Fatalf("%s %s: tip %s: %v", c.method, c.target, raw, err)
	}
	if height != tip.Height.String() || hash != tip.Hash {
		t.Fatalf("%s %s: headers X-Tip-Height %q X-Tip-Hash %q, body tip %s", c.method, c.target, height, hash, raw)
	}
}

func (s *stack) get(target string, header ...string) *response {
	s.t.Helper()
	return s.do(call{method: http.MethodGet, target: target, header: header})
}

// post sends body with the admin token.
func (s *stack) post(target string, body []byte, ctype string) *response {
	s.t.Helper()
	return s.do(call{method: http.MethodPost, target: target, body: body, ctype: ctype, auth: true})
}

func (s *stack) postJSON(target, body string) *response {
	s.t.Helper()
	return s.post(target, []byte(body), "application/json")
}

func (s *stack) postBlock(b *chain.Block) *response {
	s.t.Helper()
	return s.post("/v1/blocks", chain.AppendBlockJSON(nil, b), "application/json")
}

func (s *stack) postBlockCBOR(b *chain.Block) *response {
	s.t.Helper()
	return s.post("/v1/blocks", chain.AppendBlockCBOR(nil, b), "application/cbor")
}

// next builds the block after the current tip (height 1 on an empty store).
func (s *stack) next(txs ...chain.Tx) *chain.Block {
	tip := s.store.State().Tip
	s.blocks++
	b := &chain.Block{Height: 1, Hash: hx("block", s.blocks, s.t.Name()), Time: 1_700_000_000, Txs: txs}
	if !tip.Empty {
		b.Height, b.PrevHash = tip.Height+1, tip.Hash
	}
	return b
}

// apply posts the next block and requires it applied.
func (s *stack) apply(txs ...chain.Tx) *chain.Block {
	s.t.Helper()
	b := s.next(txs...)
	r := s.postBlock(b)
	wantApplied(s.t, r, true, b)
	return b
}

func wantApplied(t testing.TB, r *response, applied bool, b *chain.Block) {
	t.Helper()
	want := fmt.Sprintf(`{"applied":%t,"tip":{"height":%d,"hash":"%s"}}`, applied, b.Height, b.Hash)
	if r.code != http.StatusOK || withoutSeq(t, r) != want {
		t.Fatalf("post block %d: %s, want 200 %s", b.Height, r, want)
	}
}

// writeSeq returns the "seq" of a write's answer, which must end the body
// and equal its X-Commit-Seq header.
func writeSeq(t testing.TB, r *response) uint64 {
	t.Helper()
	i := bytes.LastIndex(r.body, []byte(`,"seq":`))
	if i < 0 || !bytes.HasSuffix(r.body, []byte("}")) {
		t.Fatalf("write answer without seq: %s", r)
	}
	n, err := strconv.ParseUint(string(r.body[i+len(`,"seq":`):len(r.body)-1]), 10, 64)
	if err != nil {
		t.Fatalf("write answer seq: %v: %s", err, r)
	}
	if h := r.hdr.Get("X-Commit-Seq"); h != strconv.FormatUint(n, 10) {
		t.Fatalf("write answer seq %d, X-Commit-Seq %q", n, h)
	}
	return n
}

// withoutSeq is a write's answer without its seq member (checked by writeSeq).
func withoutSeq(t testing.TB, r *response) string {
	t.Helper()
	if r.code != http.StatusOK {
		return string(r.body)
	}
	writeSeq(t, r)
	i := bytes.LastIndex(r.body, []byte(`,"seq":`))
	return string(r.body[:i]) + "}"
}

// state is the body of GET /v1/tip: tip, UTXO count and digest.
func (s *stack) state() string {
	s.t.Helper()
	r := s.get("/v1/tip")
	if r.code != http.StatusOK {
		s.t.Fatalf("GET /v1/tip: %s", r)
	}
	return string(r.body)
}

// unchanged fails unless the state is still before.
func (s *stack) unchanged(before, what string) {
	s.t.Helper()
	if now := s.state(); now != before {
		s.t.Fatalf("%s changed the state:\nbefore %s\nafter  %s", what, before, now)
	}
}

// wantError checks an error answer's status and code.
func wantError(t testing.TB, r *response, status int, code string) {
	t.Helper()
	var e struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	_ = json.Unmarshal(r.body, &e)
	if r.code != status || e.Error.Code != code {
		t.Fatalf("got %s, want %d %s", r, status, code)
	}
}

func tipJSON(b *chain.Block) string {
	return fmt.Sprintf(`{"height":%d,"hash":"%s"}`, b.Height, b.Hash)
}

func TestEmptyStore(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackConfig{})
	if got, want := s.state(), `{"tip":null,"utxo_count":0,"utxo_digest":"`+strings.Repeat("0", 64)+`"}`; got != want {
		t.Fatalf("tip of an empty store: %s, want %s", got, want)
	}
	if r := s.get("/v1/addresses/alice/balance"); r.code != 200 ||
		string(r.body) != `{"tip":null,"address":"alice","value":"0","assets":[],"utxo_count":0}` {
		t.Fatalf("balance: %s", r)
	}
	if r := s.get("/v1/addresses/alice/utxos"); r.code != 200 ||
		string(r.body) != `{"tip":null,"address":"alice","utxos":[],"next_cursor":null}` {
		t.Fatalf("utxos: %s", r)
	}
	wantError(t, s.get("/v1/utxos/"+txh("x").String()+"/0"), 404, "not_found")
	r := s.postJSON("/v1/utxos/lookup", `{"outpoints":[{"tx_hash":"`+txh("x").String()+`","index":0}]}`)
	if want := `{"tip":null,"results":[{"tx_hash":"` + txh("x").String() + `","index":0,"utxo":null,"spent":null}]}`; r.code != 200 || string(r.body) != want {
		t.Fatalf("lookup: %s, want %s", r, want)
	}
	if r := s.get("/healthz"); r.code != 200 || string(r.body) != `{"status":"ok"}` {
		t.Fatalf("healthz: %s", r)
	}
	if r := s.get("/readyz"); r.code != 200 {
		t.Fatalf("readyz: %s", r)
	}
	doc, err := os.ReadFile("openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if r := s.get("/openapi.yaml"); r.code != 200 || !bytes.Equal(r.body, doc) {
		t.Fatalf("/openapi.yaml: %d, %d bytes, want the %d bytes of openapi.yaml", r.code, len(r.body), len(doc))
	}
	// No Gatherer: no /metrics (the document describes a server with one).
	wantError(t, s.do(call{method: "GET", target: "/metrics", noSpec: true}), 404, "not_found")
}

func TestHealthReadyMetrics(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	var notReady atomic.Bool
	s := newStack(t, stackConfig{api: api.Options{Registry: reg, Gatherer: reg, Ready: func() error {
		if notReady.Load() {
			return fmt.Errorf("shutting down")
		}
		return nil
	}}})
	s.apply(tx("m", nil, out("alice", 1)))
	s.get("/v1/addresses/alice/balance")
	r := s.get("/metrics")
	if r.code != 200 || !bytes.Contains(r.body, []byte(`utxo_cache_http_request_seconds_count{code="200",route="/v1/addresses/:address/balance"} 1`)) {
		t.Fatalf("/metrics does not count the balance read by route: %s", r)
	}
	if r := s.get("/readyz"); r.code != 200 {
		t.Fatalf("readyz: %s", r)
	}
	notReady.Store(true)
	wantError(t, s.do(call{method: "GET", target: "/readyz", allow5xx: true}), 503, "not_ready")
	if r := s.get("/healthz"); r.code != 200 {
		t.Fatalf("healthz while not ready: %s", r)
	}
	if r := s.get("/v1/addresses/alice/balance"); r.code != 200 {
		t.Fatalf("reads while not ready: %s", r)
	}
}

// TestPostBlocks posts JSON and CBOR blocks, re-posts applied ones, and
// compares the tip, count and digest with the reference model.
func TestPostBlocks(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackConfig{})
	m := model.New(2160, 4320)
	dh := hx("datum")
	b1 := s.next(
		chain.Tx{Hash: txh("cb"), Coinbase: true, Outputs: []chain.Output{out("alice", 50), out("bob", 7,
			chain.Asset{Policy: []byte{2}, Name: []byte("z"), Quantity: 3}, chain.Asset{Policy: []byte{1}, Name: nil, Quantity: 9})}},
		chain.Tx{Hash: txh("pay"), Inputs: spends(op("cb", 0)), Outputs: []chain.Output{
			{Address: "carol", Value: 20, DatumHash: &dh, Datum: []byte{1, 2}, ScriptRef: []byte{3}}, out("alice", 30)}},
	)
	wantApplied(t, s.postBlock(b1), true, b1)
	if _, err := m.Apply(b1, false); err != nil {
		t.Fatal(err)
	}
	b2 := s.next(
		chain.Tx{Hash: txh("bad"), Invalid: true, Inputs: spends(op("nowhere", 0)), CollateralInputs: spends(op("pay", 1)),
			Outputs: []chain.Output{out("x", 1)}, CollateralReturn: &chain.Output{Address: "alice", Value: 29}},
	)
	wantApplied(t, s.postBlockCBOR(b2), true, b2)
	if _, err := m.Apply(b2, false); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`{"tip":%s,"utxo_count":%d,"utxo_digest":"%s"}`, tipJSON(b2), m.Count(), m.Digest())
	if got := s.state(); got != want {
		t.Fatalf("tip after two blocks:\n got %s\nwant %s", got, want)
	}
	r := s.get("/v1/addresses/bob/utxos")
	if !bytes.Contains(r.body, []byte(`"assets":[{"policy":"01","name":"","quantity":"9"},{"policy":"02","name":"7a","quantity":"3"}]`)) ||
		!bytes.Contains(r.body, []byte(`"coinbase":true`)) {
		t.Fatalf("bob's outputs: %s", r)
	}
	r = s.get("/v1/addresses/alice/utxos")
	if !bytes.Contains(r.body, []byte(`"collateral_return":true`)) || !bytes.Contains(r.body, []byte(`"index":1,`)) {
		t.Fatalf("alice's outputs (the collateral return at index len(outputs)): %s", r)
	}
	r = s.get("/v1/utxos/" + txh("pay").String() + "/0")
	if !bytes.Contains(r.body, []byte(`"datum_hash":"`+dh.String()+`","datum":"0102","script_ref":"03"`)) {
		t.Fatalf("carol's output: %s", r)
	}

	// Re-posting applied blocks, in either encoding, changes nothing.
	before := s.state()
	wantApplied(t, s.postBlock(b2), false, b2)
	wantApplied(t, s.postBlockCBOR(b2), false, b2)
	s.unchanged(before, "re-posting the tip")
	r = s.postBlock(b1)
	if want := `{"applied":false,"tip":` + tipJSON(b2) + `}`; r.code != 200 || withoutSeq(t, r) != want {
		t.Fatalf("re-posting block 1: %s, want %s", r, want)
	}
	s.unchanged(before, "re-posting block 1")
	// A parameter on the media type is fine.
	b3 := s.next()
	wantApplied(t, s.post("/v1/blocks", chain.AppendBlockJSON(nil, b3), "application/json; charset=utf-8"), true, b3)
}

func TestInvalidBlock(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackConfig{})
	b1 := s.apply(tx("a", nil, out("alice", 5)))
	good := s.next(tx("b", spends(op("a", 0)), out("bob", 5)))
	goodJSON := string(chain.AppendBlockJSON(nil, good))
	before := s.state()
	for _, c := range []struct {
		name, body, ctype string
	}{
		{"bad JSON", `{"height":`, "application/json"},
		{"not an object", `[1,2]`, "application/json"},
		{"empty body", ``, "application/json"},
		{"missing hash", strings.Replace(goodJSON, `"hash":"`+good.Hash.String()+`",`, "", 1), "application/json"},
		{"missing txs", fmt.Sprintf(`{"height":2,"hash":"%s","prev_hash":"%s"}`, good.Hash, b1.Hash), "application/json"},
		{"height as string", strings.Replace(goodJSON, `"height":2`, `"height":"2"`, 1), "application/json"},
		{"short hash", strings.Replace(goodJSON, good.Hash.String(), good.Hash.String()[:62], 1), "application/json"},
		{"unknown field", strings.Replace(goodJSON, `{"height":2`, `{"height":2,"extra":1`, 1), "application/json"},
		{"negative value", strings.Replace(goodJSON, `"value":5`, `"value":-5`, 1), "application/json"},
		{"trailing data", goodJSON + `{}`, "application/json"},
		{"CBOR garbage", "\xff\x00\x13\x37garbage", "application/cbor"},
		{"JSON sent as CBOR", goodJSON, "application/cbor"},
		{"truncated CBOR", string(chain.AppendBlockCBOR(nil, good)[:40]), "application/cbor"},
	} {
		r := s.post("/v1/blocks", []byte(c.body), c.ctype)
		if r.code != 400 {
			t.Errorf("%s: %s, want 400 invalid_block", c.name, r)
			continue
		}
		wantError(t, r, 400, "invalid_block")
		s.unchanged(before, c.name)
	}
	// The good block still applies afterwards.
	wantApplied(t, s.postBlock(good), true, good)
}

func TestWriteAuthorization(t *testing.T) {
	t.Parallel()
	blockAndRollback := func(s *stack) (block, rollback []byte) {
		return chain.AppendBlockJSON(nil, s.next(tx("t", nil, out("a", 1)))), []byte(`{"height":1}`)
	}
	t.Run("unauthorized", func(t *testing.T) {
		t.Parallel()
		s := newStack(t, stackConfig{})
		s.apply(tx("first", nil, out("a", 1)))
		before := s.state()
		block, rollback := blockAndRollback(s)
		for _, auth := range [][]string{
			nil,
			{"Authorization", "Bearer wrong-token"},
			{"Authorization", "Bearer " + testToken + "x"},
			{"Authorization", "Bearer " + testToken[:len(testToken)-1]},
			{"Authorization", "Basic " + testToken},
			{"Authorization", testToken},
			{"Authorization", "Bearer"},
			{"Authorization", ""},
		} {
			for _, c := range []call{
				{method: "POST", target: "/v1/blocks", body: block, ctype: "application/json", header: auth},
				{method: "POST", target: "/v1/rollback", body: rollback, ctype: "application/json", header: auth},
			} {
				wantError(t, s.do(c), 401, "unauthorized")
				s.unchanged(before, fmt.Sprintf("%s with %q", c.target, auth))
			}
		}
	})
	for _, c := range []struct {
		name string
		cfg  stackConfig
		code string
	}{
		{"no token configured", stackConfig{noToken: true}, "writes_disabled"},
		{"replica", stackConfig{api: api.Options{ReadOnly: true}}, "read_only"},
		{"replica without token", stackConfig{noToken: true, api: api.Options{ReadOnly: true}}, "read_only"},
		{"no writer", stackConfig{noWriter: true}, "read_only"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := newStack(t, c.cfg)
			before := s.state()
			block, rollback := blockAndRollback(s)
			for _, target := range []string{"/v1/blocks", "/v1/rollback"} {
				body := block
				if target == "/v1/rollback" {
					body = rollback
				}
				for _, auth := range []bool{true, false} {
					wantError(t, s.do(call{method: "POST", target: target, body: body, ctype: "application/json", auth: auth}), 403, c.code)
					s.unchanged(before, target)
				}
			}
			// Reads work on every role.
			if r := s.get("/v1/addresses/a/balance"); r.code != 200 {
				t.Fatalf("read: %s", r)
			}
		})
	}
}

func TestNotNextBlock(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackConfig{})
	b1 := s.apply(tx("a", nil, out("alice", 5)))
	b2 := s.apply(tx("b", nil, out("bob", 5)))
	before := s.state()
	gap := &chain.Block{Height: 4, Hash: hx("gap"), PrevHash: b2.Hash}
	wrongPrev := &chain.Block{Height: 3, Hash: hx("wrong prev"), PrevHash: b1.Hash}
	noPrev := &chain.Block{Height: 3, Hash: hx("no prev")}
	forkAtTip := &chain.Block{Height: 2, Hash: hx("fork 2"), PrevHash: b1.Hash}
	forkBelow := &chain.Block{Height: 1, Hash: hx("fork 1")}
	// prev_hash is required but for the first block of an empty store: a
	// block that omits it and is next in height is invalid (400).
	wantError(t, s.postBlock(noPrev), 400, "invalid_block")
	wantError(t, s.postBlockCBOR(noPrev), 400, "invalid_block")
	s.unchanged(before, "a block without prev_hash")
	for _, b := range []*chain.Block{gap, wrongPrev, forkAtTip, forkBelow} {
		for _, cbor := range []bool{false, true} {
			r := s.postBlock(b)
			if cbor {
				r = s.postBlockCBOR(b)
			}
			wantError(t, r, 409, "not_next_block")
			var body struct{ Tip json.RawMessage }
			_ = json.Unmarshal(r.body, &body)
			if string(body.Tip) != tipJSON(b2) {
				t.Fatalf("block %d %s: the answer carries tip %s, want the current tip %s", b.Height, b.Hash, body.Tip, tipJSON(b2))
			}
			s.unchanged(before, fmt.Sprintf("block %d", b.Height))
		}
	}
}

// TestRejectedBlocks covers the 422 classes: each rejected block changes
// nothing, neither the tip nor the answers of the addresses it touches.
func TestRejectedBlocks(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackConfig{})
	s.apply(tx("a", nil, out("alice", 5), out("alice", 6), out("bob", 7)))
	s.apply(tx("b", spends(op("a", 2)), out("carol", 7)))
	reads := []string{"/v1/tip", "/v1/addresses/alice/balance", "/v1/addresses/alice/utxos",
		"/v1/addresses/carol/utxos", "/v1/addresses/dave/balance", "/v1/utxos/" + txh("a").String() + "/0",
		"/v1/utxos/" + txh("a").String() + "/2"}
	snapshot := func() string {
		var b strings.Builder
		for _, target := range reads {
			fmt.Fprintf(&b, "%s\n", s.get(target))
		}
		return b.String()
	}
	before := snapshot()
	for _, c := range []struct {
		name string
		txs  []chain.Tx
		code string
	}{
		{"never existed", []chain.Tx{tx("u1", spends(op("nowhere", 0)), out("dave", 1))}, "unknown_input"},
		{"index out of range", []chain.Tx{tx("u2", spends(op("a", 3)), out("dave", 1))}, "unknown_input"},
		{"already spent", []chain.Tx{tx("u3", spends(op("a", 2)), out("dave", 1))}, "unknown_input"},
		{"after a good tx", []chain.Tx{tx("ok", spends(op("a", 0)), out("dave", 1)), tx("u4", spends(op("nowhere", 1)))}, "unknown_input"},
		{"unknown collateral", []chain.Tx{{Hash: txh("u5"), Invalid: true, CollateralInputs: spends(op("nowhere", 0)),
			CollateralReturn: &chain.Output{Address: "dave", Value: 1}}}, "unknown_input"},
		{"spent later in the block", []chain.Tx{tx("s1", spends(op("a", 0)), out("dave", 1)), tx("s2", spends(op("a", 0)), out("dave", 2))}, "double_spend"},
		{"twice in one tx", []chain.Tx{tx("s3", spends(op("a", 1), op("a", 1)), out("dave", 1))}, "double_spend"},
		{"collateral and input", []chain.Tx{tx("s4", spends(op("a", 0)), out("dave", 1)),
			{Hash: txh("s5"), Invalid: true, CollateralInputs: spends(op("a", 0))}}, "double_spend"},
		{"output already live", []chain.Tx{tx("a", nil, out("dave", 1))}, "duplicate_outpoint"},
		{"same tx twice in the block", []chain.Tx{tx("d1", nil, out("dave", 1)), tx("d1", nil, out("dave", 2))}, "duplicate_outpoint"},
		{"collateral return on a live outpoint", []chain.Tx{{Hash: txh("b"), Invalid: true,
			CollateralReturn: &chain.Output{Address: "dave", Value: 1}}}, "duplicate_outpoint"},
	} {
		b := s.next(c.txs...)
		for _, cbor := range []bool{false, true} {
			r := s.postBlock(b)
			if cbor {
				r = s.postBlockCBOR(b)
			}
			if r.code != 422 {
				t.Errorf("%s: %s, want 422 %s", c.name, r, c.code)
				continue
			}
			wantError(t, r, 422, c.code)
			if after := snapshot(); after != before {
				t.Fatalf("%s changed the answers:\nbefore\n%s\nafter\n%s", c.name, before, after)
			}
		}
	}
	// The store still takes the next good block.
	s.apply(tx("c", spends(op("a", 0)), out("dave", 5)))
}

func TestTooLarge(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackConfig{api: api.Options{MaxBlockBytes: 4096, MaxRequestBytes: 2048}})
	s.apply(tx("a", nil, out("alice", 5)))
	before := s.state()

	var outs []chain.Output
	for i := range 200 {
		outs = append(outs, out(fmt.Sprintf("address-%03d", i), uint64(i)))
	}
	big := s.next(tx("big", nil, outs...))
	if n := len(chain.AppendBlockJSON(nil, big)); n <= 4096 {
		t.Fatalf("test block of %d bytes is not over the limit", n)
	}
	wantError(t, s.postBlock(big), 413, "too_large")
	wantError(t, s.postBlockCBOR(big), 413, "too_large")
	s.unchanged(before, "an oversized block")

	// Without a Content-Length (chunked), the limit holds while reading.
	c := call{method: "POST", target: "/v1/blocks", body: chain.AppendBlockJSON(nil, big), ctype: "application/json", auth: true}
	req := c.request()
	req.ContentLength = -1
	rec := httptest.NewRecorder()
	s.h.ServeHTTP(rec, req)
	wantError(t, &response{code: rec.Code, hdr: rec.Result().Header, body: rec.Body.Bytes()}, 413, "too_large")
	s.unchanged(before, "an oversized chunked block")

	// A block just under the limit is fine.
	small := s.next(tx("small", nil, outs[:30]...))
	if n := len(chain.AppendBlockJSON(nil, small)); n > 4096 {
		t.Fatalf("small block of %d bytes", n)
	}
	wantApplied(t, s.postBlock(small), true, small)
	before = s.state()

	var ops []string
	for i := range 40 {
		ops = append(ops, fmt.Sprintf(`{"tx_hash":"%s","index":%d}`, txh("a"), i))
	}
	lookup := `{"outpoints":[` + strings.Join(ops, ",") + `]}`
	if len(lookup) <= 2048 {
		t.Fatalf("lookup of %d bytes is not over the limit", len(lookup))
	}
	wantError(t, s.postJSON("/v1/utxos/lookup", lookup), 413, "too_large")
	// The OpenAPI document omits 413 for /v1/rollback (TestOpenAPIEveryEndpointAndStatus).
	r := s.do(call{method: "POST", target: "/v1/rollback", auth: true, ctype: "application/json", noSpec: true,
		body: []byte(`{"height":1` + strings.Repeat(" ", 2048) + `}`)})
	wantError(t, r, 413, "too_large")
	s.unchanged(before, "oversized requests")
}

// readTargets are GETs whose answers a snapshot compares.
func readTargets(addrs []string, ops []chain.OutPoint) []string {
	targets := []string{"/v1/tip"}
	for _, a := range addrs {
		e := url.PathEscape(a)
		targets = append(targets, "/v1/addresses/"+e+"/balance", "/v1/addresses/"+e+"/utxos",
			"/v1/addresses/"+e+"/utxos?order=desc&limit=2", "/v1/addresses/"+e+"/utxos?limit=1")
	}
	for _, o := range ops {
		targets = append(targets, fmt.Sprintf("/v1/utxos/%s/%d", o.TxHash, o.Index))
	}
	return targets
}

// snapshot renders the answers of targets (and one lookup of ops), for
// comparing two states.
func (s *stack) snapshot(targets []string, ops []chain.OutPoint) string {
	s.t.Helper()
	var b strings.Builder
	for _, target := range targets {
		r := s.get(target)
		fmt.Fprintf(&b, "%s -> %d %s\n", target, r.code, r.body)
	}
	var items []string
	for _, o := range ops {
		items = append(items, fmt.Sprintf(`{"tx_hash":"%s","index":%d}`, o.TxHash, o.Index))
	}
	r := s.postJSON("/v1/utxos/lookup", `{"outpoints":[`+strings.Join(items, ",")+`]}`)
	fmt.Fprintf(&b, "lookup -> %d %s\n", r.code, r.body)
	return b.String()
}

func TestRollback(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackConfig{disk: disk.Options{RollbackWindow: 3, PruneDepth: 1}})
	addrs := []string{"alice", "bob", "carol"}
	ops := []chain.OutPoint{op("1", 0), op("1", 1), op("2", 0), op("3", 0), op("4", 0), op("5", 0), op("5", 1)}
	targets := readTargets(addrs, ops)
	snaps := map[uint64]string{}
	blocks := map[uint64]*chain.Block{}
	for h, txs := range [][]chain.Tx{
		{tx("1", nil, out("alice", 10), out("bob", 20))},
		{tx("2", spends(op("1", 0)), out("carol", 10))},
		{tx("3", spends(op("2", 0)), out("alice", 10))},
		{tx("4", spends(op("1", 1)), out("alice", 20))},
		{tx("5", spends(op("3", 0), op("4", 0)), out("bob", 15), out("carol", 15))},
	} {
		blocks[uint64(h+1)] = s.apply(txs...)
		// Fill the caches with this state: the rollback must not serve it.
		s.snapshot(targets, ops)
		snaps[uint64(h+1)] = s.snapshot(targets, ops)
	}
	wantTip := func(r *response, b *chain.Block) {
		t.Helper()
		if want := `{"tip":` + tipJSON(b) + `}`; r.code != 200 || withoutSeq(t, r) != want {
			t.Fatalf("rollback: %s, want 200 %s", r, want)
		}
	}
	// A rollback of two blocks is one change of the commit sequence.
	seqBefore := s.store.Published().Seq
	r := s.postJSON("/v1/rollback", `{"height":3}`)
	wantTip(r, blocks[3])
	if got := writeSeq(t, r); got != seqBefore+1 {
		t.Fatalf("rollback of 2 blocks: seq %d, want %d (one change)", got, seqBefore+1)
	}
	wantState := func(h uint64) {
		t.Helper()
		if got := s.snapshot(targets, ops); got != snaps[h] {
			t.Fatalf("after the rollback to %d the answers differ from those right after block %d:\n got\n%s\nwant\n%s", h, h, got, snaps[h])
		}
	}
	wantState(3)
	before := s.state()
	r = s.postJSON("/v1/rollback", `{"height":3}`) // the tip: a no-op
	wantTip(r, blocks[3])
	if got := writeSeq(t, r); got != seqBefore+1 {
		t.Fatalf("no-op rollback: seq %d, want %d (no change)", got, seqBefore+1)
	}
	wantTip(s.postJSON("/v1/rollback", `{"hash":"`+blocks[3].Hash.String()+`"}`), blocks[3])
	s.unchanged(before, "a rollback to the tip")

	for _, c := range []struct{ name, body string }{
		{"above the tip", `{"height":4}`},
		{"far above the tip", `{"height":9007199254740992}`},
		{"hash rolled back", `{"hash":"` + blocks[5].Hash.String() + `"}`},
		{"hash never seen", `{"hash":"` + hx("nope").String() + `"}`},
		{"hash not hex", `{"hash":"` + strings.Repeat("z", 64) + `"}`},
		{"short hash", `{"hash":"abcd"}`},
		{"both", `{"height":2,"hash":"` + blocks[2].Hash.String() + `"}`},
		{"neither", `{}`},
		{"negative", `{"height":-1}`},
		{"fraction", `{"height":1.5}`},
		{"exponent", `{"height":3e0}`},
		{"past uint64", `{"height":18446744073709551616}`},
		{"max uint64", `{"height":18446744073709551615}`},
		{"string height", `{"height":"2"}`},
		{"null height", `{"height":null}`},
		{"unknown field", `{"height":2,"force":true}`},
		{"trailing data", `{"height":2} {}`},
		{"not JSON", `height=2`},
		{"empty", ``},
	} {
		wantError(t, s.postJSON("/v1/rollback", c.body), 400, "invalid_argument")
		s.unchanged(before, c.name)
	}
	wantTip(s.postJSON("/v1/rollback", `{"hash":"`+blocks[2].Hash.String()+`"}`), blocks[2])
	wantState(2)

	// Grow again, on another branch: 3', 4', 5', 6'.
	for range 4 {
		b := s.apply()
		snaps[b.Height] = s.snapshot(targets, ops)
	}
	tip := s.store.State().Tip
	before = s.state()
	wantError(t, s.postJSON("/v1/rollback", fmt.Sprintf(`{"height":%d}`, tip.Height-4)), 409, "rollback_too_deep")
	wantError(t, s.postJSON("/v1/rollback", `{"height":0}`), 409, "rollback_too_deep")
	s.unchanged(before, "a rollback too deep")
	r = s.postJSON("/v1/rollback", fmt.Sprintf(`{"height":%d}`, tip.Height-3))
	if r.code != 200 {
		t.Fatalf("rollback of exactly the window: %s", r)
	}
	wantState(tip.Height - 3)
}

// TestRollbackHeightIsUint64: heights past 2^53, where a float64 loses
// integers, are parsed exactly.
func TestRollbackHeightIsUint64(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackConfig{})
	const h = 1<<53 + 1 // not a float64
	b1 := &chain.Block{Height: h, Hash: hx("big", 1), Txs: []chain.Tx{tx("b1", nil, out("alice", 1))}}
	wantApplied(t, s.postBlock(b1), true, b1)
	b2 := &chain.Block{Height: h + 1, Hash: hx("big", 2), PrevHash: b1.Hash, Txs: []chain.Tx{tx("b2", nil, out("bob", 2))}}
	wantApplied(t, s.postBlock(b2), true, b2)
	r := s.postJSON("/v1/rollback", fmt.Sprintf(`{"height":%d}`, uint64(h)))
	if want := `{"tip":` + tipJSON(b1) + `}`; r.code != 200 || withoutSeq(t, r) != want {
		t.Fatalf("rollback to %d: %s, want 200 %s", uint64(h), r, want)
	}
	if tip := s.store.State().Tip; tip.Height != h || tip.Hash != b1.Hash {
		t.Fatalf("tip %s after the rollback, want %d", tip, uint64(h))
	}
}

// TestBadArguments covers every malformed path, query and lookup value:
// 400 invalid_argument, nothing changed.
func TestBadArguments(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackConfig{})
	s.apply(tx("a", nil, out("alice", 1), out("alice", 2), out("alice", 3), out("bob", 4)))
	before := s.state()
	r := s.get("/v1/addresses/alice/utxos?limit=1")
	cursor, _ := r.obj(t)["next_cursor"].(string)
	if cursor == "" {
		t.Fatalf("no next_cursor: %s", r)
	}
	rd := s.get("/v1/addresses/alice/utxos?limit=1&order=desc")
	descCursor, _ := rd.obj(t)["next_cursor"].(string)
	h := txh("a").String()
	long := strings.Repeat("x", 1025)
	for _, target := range []string{
		"/v1/utxos/abc/0",
		"/v1/utxos/" + h[:63] + "/0",
		"/v1/utxos/" + h + "0/0",
		"/v1/utxos/" + strings.Repeat("g", 64) + "/0",
		"/v1/utxos/" + h[:62] + "%20%20/0",
		"/v1/utxos/" + h + "/-1",
		"/v1/utxos/" + h + "/01",
		"/v1/utxos/" + h + "/00",
		"/v1/utxos/" + h + "/4294967296",
		"/v1/utxos/" + h + "/99999999999",
		"/v1/utxos/" + h + "/x",
		"/v1/utxos/" + h + "/1.0",
		"/v1/utxos/" + h + "/+1",
		"/v1/utxos/" + h + "/0x1",
		"/v1/utxos/" + h + "/%201",
		"/v1/addresses/alice/utxos?limit=0",
		"/v1/addresses/alice/utxos?limit=1001",
		"/v1/addresses/alice/utxos?limit=x",
		"/v1/addresses/alice/utxos?limit=",
		"/v1/addresses/alice/utxos?limit=-1",
		"/v1/addresses/alice/utxos?limit=1e2",
		"/v1/addresses/alice/utxos?limit=99999999999999999999",
		"/v1/addresses/alice/utxos?order=sideways",
		"/v1/addresses/alice/utxos?order=DESC",
		"/v1/addresses/alice/utxos?cursor=",
		"/v1/addresses/alice/utxos?cursor=not-a-cursor",
		"/v1/addresses/alice/utxos?cursor=" + strings.Repeat("A", 32),
		"/v1/addresses/alice/utxos?cursor=" + cursor + "A",
		"/v1/addresses/alice/utxos?cursor=" + cursor[:31],
		"/v1/addresses/alice/utxos?cursor=" + flipChar(cursor, 3),
		"/v1/addresses/alice/utxos?cursor=" + flipChar(cursor, 31),
		"/v1/addresses/bob/utxos?cursor=" + cursor,                    // another address's cursor
		"/v1/addresses/alice/utxos?order=desc&cursor=" + cursor,       // the other order's
		"/v1/addresses/alice/utxos?cursor=" + descCursor,              // the other order's
		"/v1/addresses/" + long + "/utxos",                            // 1025 bytes
		"/v1/addresses/" + long + "/balance",                          // 1025 bytes
		"/v1/addresses/" + strings.Repeat("%C3%A9", 513) + "/balance", // 1026 bytes, 513 characters
	} {
		r := s.get(target)
		if r.code != 400 {
			t.Errorf("GET %s: %s, want 400 invalid_argument", target, r)
			continue
		}
		wantError(t, r, 400, "invalid_argument")
	}
	s.unchanged(before, "bad read arguments")
	// The boundaries that are fine.
	for _, target := range []string{
		"/v1/addresses/alice/utxos?limit=1",
		"/v1/addresses/alice/utxos?limit=1000",
		"/v1/addresses/alice/utxos?order=asc",
		"/v1/addresses/alice/utxos?order=desc",
		"/v1/addresses/alice/utxos?cursor=" + cursor,
		"/v1/addresses/alice/utxos?cursor=" + cursor + "&limit=7",
		"/v1/addresses/alice/utxos?order=desc&cursor=" + descCursor,
		"/v1/addresses/" + long[1:] + "/utxos", // 1024 bytes
		"/v1/addresses/" + long[1:] + "/balance",
	} {
		if r := s.get(target); r.code != 200 {
			t.Errorf("GET %s: %s, want 200", target, r)
		}
	}
	// Hashes are hex in either case. (The document's pattern admits only
	// lowercase: TestOpenAPIEveryEndpointAndStatus.)
	if r := s.do(call{method: "GET", target: "/v1/utxos/" + strings.ToUpper(h) + "/0", noSpec: true}); r.code != 200 {
		t.Errorf("GET with an uppercase hash: %s, want 200", r)
	}
	for _, target := range []string{"/v1/utxos/" + h + "/4294967295", "/v1/utxos/" + h + "/4"} {
		wantError(t, s.get(target), 404, "not_found")
	}

	var many []string
	for i := range 1001 {
		many = append(many, fmt.Sprintf(`{"tx_hash":"%s","index":%d}`, h, i))
	}
	for _, body := range []string{
		`{"outpoints":[]}`,
		`{"outpoints":[` + strings.Join(many, ",") + `]}`,
		`{"outpoints":null}`,
		`{}`,
		``,
		`[]`,
		`{"outpoints":[{"tx_hash":"` + h + `"}]}`,
		`{"outpoints":[{"index":0}]}`,
		`{"outpoints":[{"tx_hash":"` + h[:63] + `","index":0}]}`,
		`{"outpoints":[{"tx_hash":"` + h + `","index":-1}]}`,
		`{"outpoints":[{"tx_hash":"` + h + `","index":4294967296}]}`,
		`{"outpoints":[{"tx_hash":"` + h + `","index":1.5}]}`,
		`{"outpoints":[{"tx_hash":"` + h + `","index":"1"}]}`,
		`{"outpoints":[{"tx_hash":"` + h + `","index":0,"extra":1}]}`,
		`{"outpoints":[{"tx_hash":"` + h + `","index":0}],"extra":1}`,
		`{"outpoints":[{"tx_hash":"` + h + `","index":0}]} trailing`,
		`{"outpoints":[{"tx_hash":null,"index":0}]}`,
	} {
		r := s.postJSON("/v1/utxos/lookup", body)
		if r.code != 400 {
			t.Errorf("lookup %.80s: %s, want 400 invalid_argument", body, r)
			continue
		}
		wantError(t, r, 400, "invalid_argument")
	}
	r = s.postJSON("/v1/utxos/lookup", `{"outpoints":[`+strings.Join(many[:1000], ",")+`]}`)
	if r.code != 200 || bytes.Count(r.body, []byte(`"tx_hash"`)) < 1000 {
		t.Fatalf("lookup of 1000 outpoints: %d", r.code)
	}
	s.unchanged(before, "bad lookups")
}

// flipChar changes the character at i of a base64url string.
func flipChar(s string, i int) string {
	c := byte('A')
	if s[i] == 'A' {
		c = 'B'
	}
	return s[:i] + string(c) + s[i+1:]
}

func TestNotFound(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackConfig{disk: disk.Options{PruneDepth: 2}})
	s.apply(tx("a", nil, out("alice", 1)))
	s.apply(tx("b", spends(op("a", 0)), out("bob", 1))) // spends a:0 at height 2
	target := "/v1/utxos/" + txh("a").String() + "/0"
	lookup := `{"outpoints":[{"tx_hash":"` + txh("a").String() + `","index":0}]}`
	spentAt2 := `"spent":{"tx_hash":"` + txh("b").String() + `","height":2}`
	for range 2 { // heights 3 and 4: tip - 2 <= prune depth
		s.apply()
		if r := s.get(target); r.code != 200 || !bytes.Contains(r.body, []byte(spentAt2)) {
			t.Fatalf("spent record within prune depth: %s", r)
		}
		if r := s.postJSON("/v1/utxos/lookup", lookup); !bytes.Contains(r.body, []byte(spentAt2)) {
			t.Fatalf("lookup within prune depth: %s", r)
		}
	}
	s.apply() // height 5: spent 3 blocks ago
	wantError(t, s.get(target), 404, "not_found")
	if r := s.postJSON("/v1/utxos/lookup", lookup); !bytes.Contains(r.body, []byte(`"utxo":null,"spent":null`)) {
		t.Fatalf("lookup past prune depth: %s", r)
	}
	// A rollback to height 4 brings the answer of height 4 back.
	if r := s.postJSON("/v1/rollback", `{"height":4}`); r.code != 200 {
		t.Fatal(r)
	}
	if r := s.get(target); r.code != 200 || !bytes.Contains(r.body, []byte(spentAt2)) {
		t.Fatalf("after the rollback to 4: %s", r)
	}
	for _, target := range []string{
		"/v1/utxos/" + txh("never").String() + "/0",
		"/v1/utxos/" + txh("a").String() + "/1",
		"/v1/utxos/" + txh("a").String() + "/4294967295",
	} {
		wantError(t, s.get(target), 404, "not_found")
	}
	// Unknown endpoints and methods answer JSON errors too.
	r := s.do(call{method: "GET", target: "/v1/nope", noSpec: true})
	wantError(t, r, 404, "not_found")
	wantError(t, s.do(call{method: "GET", target: "/", noSpec: true}), 404, "not_found")
	wantError(t, s.do(call{method: "DELETE", target: "/v1/tip", noSpec: true}), 405, "method_not_allowed")
	wantError(t, s.do(call{method: "GET", target: "/v1/blocks", noSpec: true}), 405, "method_not_allowed")
}

func TestLookup(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackConfig{})
	s.apply(tx("a", nil, out("alice", 1), out("bob", 2)))
	s.apply(tx("b", spends(op("a", 0)), out("carol", 1)))
	a, b := txh("a"), txh("b")
	r := s.postJSON("/v1/utxos/lookup", fmt.Sprintf(`{"outpoints":[{"tx_hash":"%s","index":1},{"tx_hash":"%s","index":9},`+
		`{"tx_hash":"%s","index":0},{"tx_hash":"%s","index":0},{"tx_hash":"%s","index":1}]}`, a, a, a, b, strings.ToUpper(a.String())))
	var body struct {
		Results []struct {
			TxHash string          `json:"tx_hash"`
			Index  uint32          `json:"index"`
			Utxo   json.RawMessage `json:"utxo"`
			Spent  json.RawMessage `json:"spent"`
		} `json:"results"`
	}
	if err := json.Unmarshal(r.body, &body); err != nil || len(body.Results) != 5 {
		t.Fatalf("lookup: %s", r)
	}
	want := []struct {
		tx    chain.Hash
		index uint32
		addr  string // "" for null
		spent string
	}{{a, 1, "bob", "null"}, {a, 9, "", "null"}, {a, 0, "alice", `{"tx_hash":"` + b.String() + `","height":2}`}, {b, 0, "carol", "null"}, {a, 1, "bob", "null"}}
	for i, w := range want {
		g := body.Results[i]
		if g.TxHash != w.tx.String() || g.Index != w.index || string(g.Spent) != w.spent ||
			(w.addr == "") != (string(g.Utxo) == "null") || (w.addr != "" && !bytes.Contains(g.Utxo, []byte(`"address":"`+w.addr+`"`))) {
			t.Fatalf("result %d: %+v, want %+v", i, g, w)
		}
	}
}

// TestETags checks the conditional reads: 304 without a body while the
// answer is unchanged, across blocks that do not touch it, and 200 with a new
// ETag after a block that does.
func TestETags(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackConfig{})
	s.apply(tx("a", nil, out("alice", 1), out("alice", 2), out("bob", 3)))
	targets := []string{
		"/v1/addresses/alice/balance",
		"/v1/addresses/alice/utxos",
		"/v1/addresses/alice/utxos?order=desc&limit=1",
		"/v1/utxos/" + txh("a").String() + "/0",
	}
	etags := map[string]string{}
	for _, target := range targets {
		r := s.get(target)
		etag := r.hdr.Get("ETag")
		if r.code != 200 || !strings.HasPrefix(etag, `W/"`) || !strings.HasSuffix(etag, `"`) {
			t.Fatalf("GET %s: %s, ETag %q", target, r, etag)
		}
		etags[target] = etag
		strong := strings.TrimPrefix(etag, "W/")
		for _, inm := range []string{etag, strong, `"other", ` + etag, "*"} {
			r := s.get(target, "If-None-Match", inm)
			if r.code != 304 || r.hdr.Get("ETag") != etag || r.hdr.Get("X-Tip-Height") != "1" {
				t.Fatalf("GET %s If-None-Match %s: %s %v", target, inm, r, r.hdr)
			}
		}
		if r := s.get(target, "If-None-Match", `W/"other"`); r.code != 200 {
			t.Fatalf("GET %s with another ETag: %s", target, r)
		}
	}
	for _, target := range []string{"/v1/tip"} {
		if r := s.get(target, "If-None-Match", "*"); r.code != 200 || r.hdr.Get("ETag") != "" {
			t.Fatalf("GET %s is not conditional: %s %v", target, r, r.hdr)
		}
	}

	// A block that does not touch alice: her answers keep their ETag (the
	// tip is not part of it) and revalidate with 304 at the new tip.
	b2 := s.apply(tx("b", spends(op("a", 2)), out("carol", 3)))
	for _, target := range targets {
		r := s.get(target, "If-None-Match", etags[target])
		if r.code != 304 || r.hdr.Get("X-Tip-Height") != "2" || r.hdr.Get("X-Tip-Hash") != b2.Hash.String() {
			t.Fatalf("GET %s after an unrelated block: %s %v", target, r, r.hdr)
		}
		r = s.get(target)
		if r.code != 200 || r.hdr.Get("ETag") != etags[target] || !bytes.Contains(r.body, []byte(tipJSON(b2))) {
			t.Fatalf("GET %s after an unrelated block: %s, ETag %q want %q", target, r, r.hdr.Get("ETag"), etags[target])
		}
	}

	// A block that spends alice's first output changes all of them.
	s.apply(tx("c", spends(op("a", 0)), out("dave", 1)))
	for _, target := range targets {
		r := s.get(target, "If-None-Match", etags[target])
		if r.code != 200 || r.hdr.Get("ETag") == etags[target] || r.hdr.Get("ETag") == "" {
			t.Fatalf("GET %s after a block that changed it: %s, ETag %q (was %q)", target, r, r.hdr.Get("ETag"), etags[target])
		}
		if r := s.get(target, "If-None-Match", r.hdr.Get("ETag")); r.code != 304 {
			t.Fatalf("GET %s with the new ETag: %s", target, r)
		}
	}
}

// TestAddressEscaping: addresses are opaque; an escaped "/" stays inside
// its path segment, and other escapes decode.
func TestAddressEscaping(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackConfig{})
	addrs := []string{"a/b", "a/b/", "/lead", "100%", "a b", "q?x=1#f", "ü/€", "%2F", "a+b", "..", "a\\b"}
	var outs []chain.Output
	for i, a := range addrs {
		outs = append(outs, out(a, uint64(i+1)))
	}
	s.apply(tx("a", nil, outs...))
	for i, a := range addrs {
		e := url.PathEscape(a)
		if a == ".." {
			e = "%2E%2E"
		}
		wantAddr, _ := json.Marshal(a)
		r := s.get("/v1/addresses/" + e + "/balance")
		if r.code != 200 || !bytes.Contains(r.body, []byte(`"address":`+string(wantAddr)+`,"value":"`+strconv.Itoa(i+1)+`"`)) {
			t.Errorf("balance of %q (%s): %s", a, e, r)
		}
		r = s.get("/v1/addresses/" + e + "/utxos")
		if r.code != 200 || !bytes.Contains(r.body, []byte(`"index":`+strconv.Itoa(i)+`,"address":`+string(wantAddr))) {
			t.Errorf("utxos of %q (%s): %s", a, e, r)
		}
	}
	// Unescaped, "a/b" is not an address segment.
	if r := s.do(call{method: "GET", target: "/v1/addresses/a/b/balance", noSpec: true}); r.code != 404 {
		t.Errorf("GET /v1/addresses/a/b/balance: %s, want 404", r)
	}
}

// panicReader is a test double of the read side that panics once, to test
// the handler's recovery (not the read path).
type panicReader struct {
	api.Reader
	armed atomic.Bool
}

func (p *panicReader) Balance(ctx context.Context, address string) (query.Answer, error) {
	if p.armed.CompareAndSwap(true, false) {
		panic("internal detail: /var/lib/secret " + address)
	}
	return p.Reader.Balance(ctx, address)
}

func TestPanicIsJSON500(t *testing.T) {
	t.Parallel()
	var pr *panicReader
	s := newStack(t, stackConfig{wrap: func(r api.Reader) api.Reader { pr = &panicReader{Reader: r}; return pr }})
	s.apply(tx("a", nil, out("alice", 1)))
	pr.armed.Store(true)
	// The OpenAPI document declares no 500 (TestOpenAPIEveryEndpointAndStatus).
	r := s.do(call{method: "GET", target: "/v1/addresses/alice/balance", allow5xx: true, noSpec: true})
	wantError(t, r, 500, "internal")
	if bytes.Contains(r.body, []byte("secret")) || bytes.Contains(r.body, []byte("panic")) || bytes.Contains(r.body, []byte(".go")) {
		t.Fatalf("the 500 leaks internals: %s", r)
	}
	if want := `{"tip":{"height":1,"hash":"` + s.store.State().Tip.Hash.String() + `"},"error":{"code":"internal","message":"internal error"}}`; string(r.body) != want {
		t.Fatalf("500 body %s, want %s", r.body, want)
	}
	if r := s.get("/v1/addresses/alice/balance"); r.code != 200 {
		t.Fatalf("after the panic: %s", r)
	}
}

// TestWriterClosed: writes after the writer stopped answer 503 unavailable
// (the server is shutting down), never 500; reads still answer.
func TestWriterClosed(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackConfig{})
	s.apply(tx("a", nil, out("alice", 1)))
	_ = s.w.Close()
	r := s.do(call{method: "POST", target: "/v1/blocks", auth: true, ctype: "application/json", noSpec: true, allow5xx: true,
		body: chain.AppendBlockJSON(nil, s.next())})
	wantError(t, r, 503, "unavailable")
	r = s.do(call{method: "POST", target: "/v1/rollback", auth: true, ctype: "application/json", noSpec: true, allow5xx: true,
		body: []byte(`{"height":1}`)})
	wantError(t, r, 503, "unavailable")
	if r := s.get("/v1/addresses/alice/balance"); r.code != 200 {
		t.Fatalf("read after the writer closed: %s", r)
	}
}

// TestAmounts: amounts are decimal strings, exact past 2^53, and balance
// sums past 2^64 render exactly.
func TestAmounts(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackConfig{})
	const max = math.MaxUint64
	tok := chain.Asset{Policy: []byte{0xab}, Name: []byte("t"), Quantity: max}
	s.apply(tx("a", nil, out("big", 1<<53+1), out("rich", max, tok), out("rich", max, tok), out("rich", 7)))
	// Values in a posted block may be decimal strings too.
	b := s.next()
	raw := fmt.Sprintf(`{"height":%d,"hash":"%s","prev_hash":"%s","txs":[{"hash":"%s","inputs":[],"outputs":[{"address":"rich","value":"18446744073709551615"}]}]}`,
		b.Height, b.Hash, b.PrevHash, txh("str"))
	if r := s.postJSON("/v1/blocks", raw); r.code != 200 {
		t.Fatalf("block with a string value: %s", r)
	}
	r := s.get("/v1/addresses/big/utxos")
	if !bytes.Contains(r.body, []byte(`"value":"9007199254740993"`)) {
		t.Fatalf("2^53+1: %s", r)
	}
	r = s.get("/v1/utxos/" + txh("a").String() + "/1")
	if !bytes.Contains(r.body, []byte(`"value":"18446744073709551615","assets":[{"policy":"ab","name":"74","quantity":"18446744073709551615"}]`)) {
		t.Fatalf("2^64-1: %s", r)
	}
	// 3 × (2^64-1) + 7 and 2 × (2^64-1).
	r = s.get("/v1/addresses/rich/balance")
	want := `"address":"rich","value":"55340232221128654852","assets":[{"policy":"ab","name":"74","quantity":"36893488147419103230"}],"utxo_count":4}`
	if r.code != 200 || !bytes.HasSuffix(r.body, []byte(want)) {
		t.Fatalf("balance past 2^64: %s, want …%s", r, want)
	}
}

// TestCursorWalk walks listings through their cursors in both orders, and
// continues a walk across new blocks: no item repeated, none live all along
// skipped.
func TestCursorWalk(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackConfig{})
	var want []chain.OutPoint // walker's outputs in chain order
	for blk := range 4 {
		var txs []chain.Tx
		for pos := range 3 {
			name := fmt.Sprintf("w%d.%d", blk, pos)
			txs = append(txs, tx(name, nil, out("walker", 1), out("other", 1), out("walker", 2)))
			want = append(want, op(name, 0), op(name, 2))
		}
		s.apply(txs...)
	}
	for _, desc := range []bool{false, true} {
		exp := slices.Clone(want)
		if desc {
			slices.Reverse(exp)
		}
		for _, limit := range []int{1, 5, 24, 25, 1000} {
			got := s.walk("walker", desc, limit, "", -1)
			if !slices.Equal(got, exp) {
				t.Fatalf("walk desc=%v limit=%d: %v, want %v", desc, limit, got, exp)
			}
		}
	}

	// A walk continued after blocks that spend an item already returned,
	// spend one not yet returned, and add new ones.
	page, cursor := s.page("walker", false, 5, "")
	s.apply(tx("x1", spends(want[1], want[10]), out("walker", 3)))
	s.apply(tx("x2", nil, out("walker", 4)))
	rest := s.walk("walker", false, 4, cursor, -1)
	got := append(page, rest...)
	seen := map[chain.OutPoint]bool{}
	for _, o := range got {
		if seen[o] {
			t.Fatalf("walk across blocks repeats %v", o)
		}
		seen[o] = true
	}
	for i, o := range want {
		if i != 1 && i != 10 && !seen[o] {
			t.Fatalf("walk across blocks skips %v, live all along", o)
		}
	}
	if seen[want[10]] || !seen[op("x1", 0)] || !seen[op("x2", 0)] {
		t.Fatalf("walk across blocks: %v", got)
	}
}

// page fetches one page of address's listing.
func (s *stack) page(address string, desc bool, limit int, cursor string) ([]chain.OutPoint, string) {
	s.t.Helper()
	q := url.Values{"limit": {strconv.Itoa(limit)}}
	if desc {
		q.Set("order", "desc")
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	r := s.get("/v1/addresses/" + url.PathEscape(address) + "/utxos?" + q.Encode())
	var body struct {
		Utxos []struct {
			TxHash string `json:"tx_hash"`
			Index  uint32 `json:"index"`
		} `json:"utxos"`
		NextCursor *string `json:"next_cursor"`
	}
	if r.code != 200 || json.Unmarshal(r.body, &body) != nil || len(body.Utxos) > limit {
		s.t.Fatalf("page of %s: %s", address, r)
	}
	var ops []chain.OutPoint
	for _, u := range body.Utxos {
		h, err := chain.ParseHash(u.TxHash)
		if err != nil {
			s.t.Fatal(err)
		}
		ops = append(ops, chain.OutPoint{TxHash: h, Index: u.Index})
	}
	if body.NextCursor == nil {
		return ops, ""
	}
	if len(body.Utxos) != limit {
		s.t.Fatalf("a short page with a next_cursor: %s", r)
	}
	return ops, *body.NextCursor
}

// walk follows next_cursor from cursor to the end (at most pages pages when
// pages >= 0).
func (s *stack) walk(address string, desc bool, limit int, cursor string, pages int) []chain.OutPoint {
	s.t.Helper()
	var all []chain.OutPoint
	for n := 0; pages < 0 || n < pages; n++ {
		ops, next := s.page(address, desc, limit, cursor)
		all = append(all, ops...)
		if next == "" {
			break
		}
		cursor = next
	}
	return all
}

// TestRollbackBelowFirstBlock: a store whose chain starts at height 10 (a
// store that starts mid-chain) rolls back to any height below it within the
// window: the answers are those of the empty store, as before block 10.
// Heights 9 and 8 name the same state; both must succeed.
func TestRollbackBelowFirstBlock(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackConfig{disk: disk.Options{RollbackWindow: 6}})
	empty := s.state()
	b10 := &chain.Block{Height: 10, Hash: hx("b10"), PrevHash: hx("b9"), Txs: []chain.Tx{tx("t10", nil, out("alice", 1))}}
	b11 := &chain.Block{Height: 11, Hash: hx("b11"), PrevHash: b10.Hash, Txs: []chain.Tx{tx("t11", spends(op("t10", 0)), out("bob", 1))}}
	for _, target := range []uint64{9, 8, 5} {
		wantApplied(t, s.postBlock(b10), true, b10)
		wantApplied(t, s.postBlock(b11), true, b11)
		r := s.postJSON("/v1/rollback", fmt.Sprintf(`{"height":%d}`, target))
		if r.code != 200 || withoutSeq(t, r) != `{"tip":null}` {
			t.Errorf("rollback from 11 to %d, below the first block 10, within the window 6: %s, want 200 {\"tip\":null}", target, r)
			continue
		}
		s.unchanged(empty, "a rollback below the first block (compared with the empty store)")
	}
	if s.store.State().Tip.Empty {
		wantApplied(t, s.postBlock(b10), true, b10)
		wantApplied(t, s.postBlock(b11), true, b11)
	}
	before := s.state()
	wantError(t, s.postJSON("/v1/rollback", `{"height":4}`), 409, "rollback_too_deep")
	s.unchanged(before, "a rollback 7 blocks deep")
}

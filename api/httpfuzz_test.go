package api_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/utxo-cache/utxo-cache/api"
	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

// FuzzHTTP drives the whole HTTP surface of a writer: each input decodes
// into a short sequence of requests (fuzzRequest: a method from a set that
// includes odd ones, a real route with mutated segments or a raw path, a raw
// query, an Authorization header with the right, a wrong or no admin or
// replication token, a Content-Type, an If-None-Match, and a body: raw bytes,
// or a block, rollback or lookup built against the current tip, whole or
// with a byte flipped), served by the real stack (Pebble in a temp dir, the
// writer, the query server with its memory tier, the change log and
// checkpoints, /metrics). For every request:
//
//   - never a 5xx, except 503 behind for a read with min_seq or min_height
//     (waits are capped at a millisecond, so the fuzzer stays fast);
//   - the answer keeps checkInvariants (a JSON body, error code and message,
//     tip headers equal to the body's tip);
//   - the state (tip, seq, UTXO count, digest, and the published state the
//     reads serve) changes only when the request carried the admin token and
//     answered 200, and then the answer's tip and seq are the new state;
//   - X-Commit-Seq never decreases, across the sequence and across every
//     input the process runs (a rollback increases the seq).
//
// One stack serves every input of a fuzzing process; each input starts from
// the same state (the base chain: fuzzBase), restored by rolling back to the
// highest base block on the chain and re-applying the rest. Seeds include
// valid JSON and CBOR blocks for the base tip, rollbacks and lookups, and the
// malformed requests of issue 12.
func FuzzHTTP(f *testing.F) {
	fz := newFuzzHTTP(f)
	for _, seed := range fz.seeds() {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fz.reset(t)
		in := &fuzzInput{data: data}
		for i := 0; i < maxFuzzRequests && !in.done(); i++ {
			req, ok := fz.decode(in, i)
			if ok {
				fz.serve(t, req)
			}
		}
	})
}

// TestFuzzHTTPSeeds runs FuzzHTTP's seeds and checks that they reach what
// the fuzzer starts from: acknowledged JSON and CBOR blocks, rollbacks, freezes and unfreezes
// that change the state, refused writes (401, 405, 400, 415, 422), 304,
// 503 behind, and the replication and operational routes. A decoder that
// drifted from the seeds' encoding would leave the fuzzer mutating noise.
func TestFuzzHTTPSeeds(t *testing.T) {
	fz := newFuzzHTTP(t)
	seen := map[string]int{}
	fz.observe = func(r fuzzRequest, res *response, changed bool) {
		path, _, _ := strings.Cut(r.target, "?")
		if strings.HasPrefix(path, "/v1/addresses/") || strings.HasPrefix(path, "/v1/utxos/") && path != "/v1/utxos/lookup" {
			path = path[:strings.Index(path[4:], "/")+4] + "/…"
		}
		k := fmt.Sprintf("%s %s %d", r.method, path, res.code)
		if changed {
			k += " changed"
		}
		if code := errorCode(res); code != "" {
			k += " " + code
		}
		if r.header.Get("Content-Type") == "application/cbor" {
			k += " cbor"
		}
		seen[k]++
	}
	for i, seed := range fz.seeds() {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			fz.reset(t)
			in := &fuzzInput{data: seed}
			for j := 0; j < maxFuzzRequests && !in.done(); j++ {
				if req, ok := fz.decode(in, j); ok {
					fz.serve(t, req)
				}
			}
			if !in.done() {
				t.Fatalf("seed %d has more than %d requests", i, maxFuzzRequests)
			}
		})
	}
	for _, want := range []string{
		"POST /v1/blocks 200 changed", "POST /v1/blocks 200 changed cbor", "POST /v1/blocks 200 cbor", // an idempotent re-post
		"POST /v1/rollback 200 changed", "POST /v1/blocks 401 unauthorized", "POST /v1/rollback 401 unauthorized",
		"PUT /v1/blocks 405 method_not_allowed", "POST /v1/rollback 400 invalid_argument",
		"POST /v1/blocks 415 unsupported_media_type", "POST /v1/blocks 400 invalid_block cbor",
		"POST /v1/blocks 422 unknown_input", "POST /v1/utxos/lookup 200", "POST /v1/utxos/lookup 400 invalid_argument",
		"GET /v1/addresses/… 200", "GET /v1/addresses/… 400 invalid_argument", "GET /v1/utxos/… 304",
		"GET /v1/tip 503 behind", "GET /v1/replication/changes 200", "GET /v1/replication/changes 401 unauthorized",
		"GET /v1/replication/checkpoint 200", "GET /v1/replication/checkpoint 401 unauthorized",
		"GET /metrics 200", "GET /readyz 200", "GET /v1//tip 404 not_found",
		"POST /v1/frozen 200 changed", "DELETE /v1/frozen 200 changed", "POST /v1/frozen 400 invalid_argument",
		"POST /v1/frozen 401 unauthorized",
	} {
		if seen[want] == 0 {
			t.Errorf("no seed reached %q", want)
		}
	}
	if t.Failed() {
		t.Logf("reached: %v", seen)
	}
}

// maxFuzzRequests bounds the requests of one input.
const maxFuzzRequests = 8

// fuzzRequestTimeout is how long one request may take before FuzzHTTP
// reports it as hung (generous: the machine is shared and busy).
const fuzzRequestTimeout = 20 * time.Second

// fuzzBaseLen is how many blocks the base chain has.
const fuzzBaseLen = 3

// fuzzHTTP is the stack under fuzzing and what the decoder draws from.
type fuzzHTTP struct {
	s       *stack
	base    []*chain.Block // heights 1..fuzzBaseLen
	lastSeq uint64         // the highest X-Commit-Seq seen by this process
	// observe, when set, sees every request served and its answer.
	observe func(r fuzzRequest, res *response, changed bool)
}

func newFuzzHTTP(f testing.TB) *fuzzHTTP {
	reg := prometheus.NewRegistry()
	s := newStack(f, stackConfig{
		noSpec:      true,
		replication: true,
		// Deep enough for any input's blocks and the reset's rollback.
		disk: disk.Options{RollbackWindow: 64, PruneDepth: 64},
		api:  api.Options{MaxWait: time.Millisecond, Registry: reg, Gatherer: reg},
	})
	// Change-log long polls answer at once (a wait=30 would stall the
	// fuzzer for 30 s); everything else serves as in production.
	s.h.(*api.API).Drain()
	fz := &fuzzHTTP{s: s}
	txs := [][]chain.Tx{
		{tx("fz1", nil, out("alice", 1), out("alice", 2), out("a/b", 3), out("ü", 4), out("\ufffd", 9), out("bob", 5))},
		{tx("fz2", spends(op("fz1", 0)), out("bob", 1), out("alice", 6))},
		{tx("fz3", spends(op("fz1", 5)), out("carol", 7))},
	}
	var prev chain.Hash
	for i, t := range txs {
		b := &chain.Block{Height: uint64(i + 1), Hash: hx("fuzzbase", i+1), PrevHash: prev, Time: 1_700_000_000, Txs: t}
		prev = b.Hash
		fz.base = append(fz.base, b)
	}
	fz.reset(f)
	return fz
}

// reset brings the store back to the base chain, whatever the last input
// did: it rolls back to the highest base block still on the chain (or to
// nothing) and applies the base blocks above it.
func (fz *fuzzHTTP) reset(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	st := fz.s.store.State()
	top := fz.base[len(fz.base)-1]
	if !st.Tip.Empty && st.Tip.Height == top.Height && st.Tip.Hash == top.Hash {
		return
	}
	from := 0 // base blocks [from:] are to be applied
	if !st.Tip.Empty {
		for h := min(st.Tip.Height, uint64(len(fz.base))); h >= 1; h-- {
			_, err := fz.s.w.RollbackToHash(ctx, fz.base[h-1].Hash)
			if err == nil {
				from = int(h)
				break
			}
			if !errors.Is(err, chain.ErrInvalidArgument) {
				t.Fatalf("reset: roll back to base block %d: %v", h, err)
			}
		}
		if from == 0 {
			if _, err := fz.s.w.Rollback(ctx, 0); err != nil {
				t.Fatalf("reset: roll back to nothing: %v", err)
			}
		}
	}
	for _, b := range fz.base[from:] {
		if res, err := fz.s.w.Apply(ctx, b); err != nil || !res.Applied {
			t.Fatalf("reset: apply base block %d: %+v %v", b.Height, res, err)
		}
	}
	fz.lastSeq = max(fz.lastSeq, fz.s.store.State().Seq)
}

// fuzzRequest is one decoded request.
type fuzzRequest struct {
	method, target string
	header         http.Header
	body           []byte
	chunked        bool // ContentLength -1, as for a chunked body
	adminAuth      bool // carries the admin token, as the server compares it
}

// fuzzInput reads an input; past its end every read is zero.
type fuzzInput struct {
	data []byte
	pos  int
}

func (in *fuzzInput) done() bool { return in.pos >= len(in.data) }

func (in *fuzzInput) byte() byte {
	if in.done() {
		return 0
	}
	in.pos++
	return in.data[in.pos-1]
}

// bytes reads a length (one byte, or two with long) and that many bytes.
func (in *fuzzInput) bytes(long bool) []byte {
	n := int(in.byte())
	if long {
		n = n<<8 | int(in.byte())
	}
	n = min(n, len(in.data)-in.pos)
	b := in.data[in.pos : in.pos+n]
	in.pos += n
	return b
}

// pick reads a selector: dictionary entry sel/4 when sel%4 != 3, else a
// raw string from the input.
func (in *fuzzInput) pick(dict []string) string {
	sel := in.byte()
	if sel%4 == 3 {
		return string(in.bytes(false))
	}
	return dict[int(sel/4)%len(dict)]
}

var (
	fuzzMethods = []string{
		http.MethodGet, http.MethodPost, http.MethodHead, http.MethodPut, http.MethodDelete,
		http.MethodPatch, http.MethodOptions, http.MethodTrace, http.MethodConnect, "PROPFIND", "get", "BREW",
	}
	// fuzzRoutes are the real routes; {0} and {1} are the mutated segments.
	fuzzRoutes = []string{
		"/v1/tip",
		"/v1/addresses/{0}/utxos",
		"/v1/addresses/{0}/balance",
		"/v1/utxos/{0}/{1}",
		"/v1/utxos/lookup",
		"/v1/blocks",
		"/v1/rollback",
		"/v1/replication/changes",
		"/v1/replication/checkpoint",
		"/healthz",
		"/readyz",
		"/openapi.yaml",
		"/metrics",
		"/v1/{0}",
		"/{0}/{1}",
		"{0}", // a raw path
		"/v1/frozen",
	}
	fuzzSegments = []string{
		"alice", "bob", "carol", "a%2Fb", "%C3%BC", "%EF%BF%BD", "%FF", "nobody", "", "0", "1", "5",
		txh("fz1").String(), txh("fz2").String(), strings.ToUpper(txh("fz3").String()), "4294967296", "-1", "01",
		"..", "%2E%2E", "%00", "tip", "blocks", "rollback", "utxos", "lookup", "addresses", "replication",
	}
	fuzzQueries = []string{
		"", "limit=2", "limit=2&order=desc", "order=asc", "cursor=%%%%", "limit=%zz", "order=%zz",
		"limit=5;order=desc", "limit=1&limit=2", "cursor=", "cursor=AAAA", "x=1", "min_seq=1",
		"min_seq=18446744073709551615&wait=0", "min_height=99", "min_height=1&wait=0.001", "wait=1e3",
		"wait=NaN", "after=0", "after=1&wait=30", "after=%zz", "after=99999999", "min_seq=01",
		"frozen=exclude", "mature=only&frozen=exclude&limit=1", "frozen=maybe",
	}
	fuzzContentTypes = []string{
		"", "application/json", "application/cbor", "application/json; charset=utf-8", "APPLICATION/CBOR",
		"text/plain", "application/json, application/cbor", "application/cbor; q=1", "multipart/form-data; boundary=x",
	}
)

// fuzzAuth returns the Authorization header of selector sel (none: "") and
// whether the server would take it for the admin token.
func fuzzAuth(in *fuzzInput) (string, bool) {
	switch in.byte() % 10 {
	case 0:
		return "", false
	case 1:
		return "Bearer " + testToken, true
	case 2:
		return "bearer " + testToken, true
	case 3:
		return "Bearer " + replToken, false
	case 4:
		return "Bearer wrong-" + testToken, false
	case 5:
		return "Bearer " + testToken + " ", false
	case 6:
		return "Basic " + testToken, false
	case 7:
		return "Bearer", false
	case 8:
		return "BEARER " + replToken, false
	default:
		raw := string(in.bytes(false))
		return raw, len(raw) >= 7 && strings.EqualFold(raw[:7], "bearer ") && raw[7:] == testToken
	}
}

// decode reads request i of an input; ok is false for a request net/http
// would refuse before any handler (an unparsable target, a header value with
// control characters).
func (fz *fuzzHTTP) decode(in *fuzzInput, i int) (fuzzRequest, bool) {
	r := fuzzRequest{method: fuzzMethods[int(in.byte())%len(fuzzMethods)], header: http.Header{}}
	route := fuzzRoutes[int(in.byte())%len(fuzzRoutes)]
	if strings.Contains(route, "{0}") {
		route = strings.Replace(route, "{0}", in.pick(fuzzSegments), 1)
	}
	if strings.Contains(route, "{1}") {
		route = strings.Replace(route, "{1}", in.pick(fuzzSegments), 1)
	}
	r.target = route
	if q := in.pick(fuzzQueries); q != "" {
		r.target += "?" + q
	}
	auth, admin := fuzzAuth(in)
	if auth != "" {
		r.header.Set("Authorization", auth)
		r.adminAuth = admin
	}
	if ct := in.pick(fuzzContentTypes); ct != "" {
		r.header.Set("Content-Type", ct)
	}
	switch extra := in.byte(); extra % 5 {
	case 1:
		r.header.Set("If-None-Match", "*")
	case 2:
		r.header.Set("If-None-Match", string(in.bytes(false)))
	case 3:
		r.chunked = true
	}
	r.body = fz.body(in, i)
	if _, err := url.ParseRequestURI(r.target); err != nil {
		return r, false
	}
	for _, vs := range r.header {
		for _, v := range vs {
			if strings.ContainsFunc(v, func(c rune) bool { return c < 0x20 && c != '\t' || c == 0x7f }) {
				return r, false
			}
		}
	}
	return r, true
}

// body reads a body: none, raw bytes, or one built against the current tip.
func (fz *fuzzHTTP) body(in *fuzzInput, i int) []byte {
	kind, p := in.byte(), in.byte()
	st := fz.s.store.State()
	switch kind % 8 {
	case 0:
		return nil
	case 1:
		return in.bytes(true)
	case 2:
		return chain.AppendBlockJSON(nil, fz.nextBlock(st.Tip, i, p))
	case 3:
		return chain.AppendBlockCBOR(nil, fz.nextBlock(st.Tip, i, p))
	case 4:
		var b []byte
		if p%2 == 0 {
			b = chain.AppendBlockJSON(nil, fz.nextBlock(st.Tip, i, p))
		} else {
			b = chain.AppendBlockCBOR(nil, fz.nextBlock(st.Tip, i, p))
		}
		pos := int(binary.BigEndian.Uint16([]byte{in.byte(), in.byte()}))
		b[pos%len(b)] ^= in.byte() | 1
		return b
	case 5:
		return fmt.Appendf(nil, `{"height":%d}`, st.Tip.Height-min(st.Tip.Height, uint64(p%4)))
	case 6:
		return fmt.Appendf(nil, `{"hash":"%s"}`, fz.base[int(p)%len(fz.base)].Hash)
	default:
		var b bytes.Buffer
		b.WriteString(`{"outpoints":[`)
		for j := range int(p%3) + 1 {
			if j > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"tx_hash":"%s","index":%d}`, txh(fmt.Sprint("fz", 1+int(p/4+byte(j))%3)), int(p/16)%7)
		}
		b.WriteString(`]}`)
		return b.Bytes()
	}
}

// nextBlock is a block on top of tip: one transaction that pays a known
// address and, by shape, spends one of the base outputs (live, spent or
// unknown) or one of its own.
func (fz *fuzzHTTP) nextBlock(tip chain.Tip, i int, shape byte) *chain.Block {
	b := &chain.Block{Height: 1, Hash: hx("fuzzblock", tip.Hash, i, shape), Time: 1_700_000_000}
	if !tip.Empty {
		b.Height, b.PrevHash = tip.Height+1, tip.Hash
	}
	name := fmt.Sprint("fuzz", b.Hash)
	addrs := []string{"alice", "bob", "a/b", "\ufffd", "dave"}
	t := tx(name, nil, out(addrs[int(shape)%len(addrs)], uint64(shape)+1))
	switch shape % 4 {
	case 1:
		t.Inputs = spends(op(fmt.Sprint("fz", 1+int(shape/4)%3), uint32(shape/16)%7))
	case 2:
		t.Inputs = spends(op(name, 0)) // spends its own output
	case 3:
		t.Outputs = append(t.Outputs, out("", 1)) // an empty address
	}
	b.Txs = []chain.Tx{t}
	return b
}

// fuzzState is what no request may change without authority.
type fuzzState struct {
	tip       chain.Tip
	count     uint64
	digest    chain.Digest
	seq       uint64
	published string
}

func (fz *fuzzHTTP) state() fuzzState {
	st := fz.s.store.State()
	p := fz.s.reads.Published()
	return fuzzState{tip: st.Tip, count: st.UtxoCount, digest: st.Digest, seq: st.Seq, published: fmt.Sprint(p.Seq, p.Tip)}
}

// serve sends r and checks every promise of FuzzHTTP.
func (fz *fuzzHTTP) serve(t *testing.T, r fuzzRequest) {
	t.Helper()
	u, _ := url.ParseRequestURI(r.target)
	req := (&http.Request{
		Method: r.method, URL: u, RequestURI: r.target, Host: "example.com",
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: r.header, Body: http.NoBody,
	}).WithContext(context.Background())
	if r.body != nil {
		req.Body, req.ContentLength = httpBody(r.body), int64(len(r.body))
	}
	if r.chunked {
		req.ContentLength = -1
	}
	desc := fmt.Sprintf("%s %q (Authorization %q, Content-Type %q, body %q)",
		r.method, r.target, r.header.Get("Authorization"), r.header.Get("Content-Type"), r.body)
	before := fz.state()
	rec := httptest.NewRecorder()
	// A request that hangs is a finding too: waits are capped at a
	// millisecond and long polls drained, so nothing may take seconds. The
	// fuzzer has no timeout of its own; this one crashes the process with
	// every goroutine's stack, which the fuzzer reports with the input.
	watchdog := time.AfterFunc(fuzzRequestTimeout, func() {
		stacks := make([]byte, 1<<20)
		stacks = stacks[:runtime.Stack(stacks, true)]
		panic(fmt.Sprintf("%s: no answer after %s\n%s", desc, fuzzRequestTimeout, stacks))
	})
	fz.s.h.ServeHTTP(rec, req)
	watchdog.Stop()
	res := &response{code: rec.Code, hdr: rec.Result().Header, body: rec.Body.Bytes()}
	after := fz.state()

	// A HEAD's 503 behind has no body to name its code: its query says it.
	behind := res.code == http.StatusServiceUnavailable && (errorCode(res) == "behind" || r.method == http.MethodHead) &&
		waitsFor(u.RawQuery)
	if res.code >= 500 && !behind {
		t.Fatalf("%s: %s", desc, res)
	}
	checkInvariants(t, call{method: r.method, target: r.target, allow5xx: behind}, res)

	if after != before {
		if !r.adminAuth || res.code != http.StatusOK {
			t.Fatalf("%s answered %s and changed the state:\nbefore %+v\nafter  %+v", desc, res, before, after)
		}
		// An acknowledged write: its answer is the new state.
		var w struct {
			Tip *struct {
				Height uint64 `json:"height"`
				Hash   string `json:"hash"`
			} `json:"tip"`
			Seq *uint64 `json:"seq"`
		}
		if err := json.Unmarshal(res.body, &w); err != nil || w.Seq == nil || *w.Seq != after.seq {
			t.Fatalf("%s changed the state to seq %d, answered %s", desc, after.seq, res)
		}
		if (w.Tip == nil) != after.tip.Empty || w.Tip != nil && (w.Tip.Height != after.tip.Height || w.Tip.Hash != after.tip.Hash.String()) {
			t.Fatalf("%s changed the state to tip %s, answered %s", desc, after.tip, res)
		}
	}

	if fz.observe != nil {
		fz.observe(r, res, after != before)
	}
	if h := res.hdr.Get("X-Commit-Seq"); h != "" {
		seq, err := strconv.ParseUint(h, 10, 64)
		if err != nil {
			t.Fatalf("%s: X-Commit-Seq %q: %v", desc, h, err)
		}
		if seq < fz.lastSeq {
			t.Fatalf("%s: X-Commit-Seq %d after %d: %s", desc, seq, fz.lastSeq, res)
		}
		fz.lastSeq = seq
	}
}

// waitsFor reports whether a raw query names min_seq or min_height, the
// parameters that may make a read answer 503 behind.
func waitsFor(raw string) bool {
	for pair := range strings.SplitSeq(raw, "&") {
		k, _, _ := strings.Cut(pair, "=")
		if name, err := url.QueryUnescape(k); err == nil && (name == "min_seq" || name == "min_height") {
			return true
		}
	}
	return false
}

// httpBody is a request body over b.
type httpBodyReader struct{ *bytes.Reader }

func (httpBodyReader) Close() error { return nil }

func httpBody(b []byte) httpBodyReader { return httpBodyReader{bytes.NewReader(b)} }

// errorCode is the error.code of an error answer ("" when there is none).
func errorCode(r *response) string {
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	_ = json.Unmarshal(r.body, &e)
	return e.Error.Code
}

// fuzzReq is a seed request, encoded as decode reads it.
type fuzzReq struct {
	method, route byte   // indexes into fuzzMethods, fuzzRoutes
	seg           []any  // per {n}: an int (index into fuzzSegments) or a raw string
	query         any    // an int (index into fuzzQueries) or a raw string
	auth          byte   // fuzzAuth's selector (0 none, 1 admin, 3 replication, 4 wrong)
	ctype         any    // an int (index into fuzzContentTypes) or a raw string
	extra         byte   // 0 nothing, 1 If-None-Match: *, 3 chunked
	kind, p       byte   // body kind and parameter (see body)
	raw           []byte // kind 1's bytes
}

func appendPick(dst []byte, v any) []byte {
	switch v := v.(type) {
	case int:
		return append(dst, byte(4*v))
	case string:
		return append(append(dst, 3, byte(len(v))), v...)
	}
	panic(fmt.Sprintf("pick %T", v))
}

func encodeFuzz(reqs ...fuzzReq) []byte {
	var b []byte
	for _, r := range reqs {
		b = append(b, r.method, r.route)
		for _, s := range r.seg {
			b = appendPick(b, s)
		}
		if r.query == nil {
			r.query = 0
		}
		if r.ctype == nil {
			r.ctype = 0
		}
		b = appendPick(b, r.query)
		b = append(b, r.auth)
		b = appendPick(b, r.ctype)
		b = append(b, r.extra, r.kind, r.p)
		if r.kind == 1 {
			b = append(b, byte(len(r.raw)>>8), byte(len(r.raw)))
			b = append(b, r.raw...)
		}
	}
	return b
}

// seeds are valid and malformed sequences against the base chain.
func (fz *fuzzHTTP) seeds() [][]byte {
	const (
		get, post, head, put                                                              = 0, 1, 2, 3
		rTip, rUtxos, rBalance, rUtxo, rLookup, rBlocks, rRollback, rChanges, rCheckpoint = 0, 1, 2, 3, 4, 5, 6, 7, 8
		rHealth, rReady, rOpenAPI, rMetrics, rV1, rAny, rRaw, rFrozen                     = 9, 10, 11, 12, 13, 14, 15, 16
		del                                                                               = 4
		cJSON, cCBOR                                                                      = 1, 2
	)
	top := fz.base[len(fz.base)-1]
	next := &chain.Block{Height: top.Height + 1, Hash: hx("fuzzseed", 1), PrevHash: top.Hash, Time: 1_700_000_000,
		Txs: []chain.Tx{tx("seed1", spends(op("fz2", 1)), out("alice", 5), out("erin", 1))}}
	next2 := &chain.Block{Height: top.Height + 2, Hash: hx("fuzzseed", 2), PrevHash: next.Hash, Time: 1_700_000_000,
		Txs: []chain.Tx{tx("seed2", spends(op("seed1", 1)), out("bob", 1))}}
	blockJSON, blockCBOR := chain.AppendBlockJSON(nil, next), chain.AppendBlockCBOR(nil, next)
	lookup := fmt.Appendf(nil, `{"outpoints":[{"tx_hash":"%s","index":1},{"tx_hash":"%s","index":0}]}`, txh("fz1"), txh("fz2"))
	unfreeze := fmt.Appendf(nil, `{"outpoints":[{"tx_hash":"%s","index":1}]}`, txh("fz1"))
	freeze := fmt.Appendf(nil, `{"outpoints":[{"tx_hash":"%s","index":1}],"reason":"fuzz"}`, txh("fz1"))
	seeds := [][]fuzzReq{
		// Reads of every route.
		{{method: get, route: rTip}, {method: get, route: rUtxos, seg: []any{0}, query: 2}, {method: get, route: rBalance, seg: []any{5}}},
		{{method: get, route: rUtxo, seg: []any{12, 10}}, {method: get, route: rUtxo, seg: []any{14, 9}, extra: 1}},
		{{method: post, route: rLookup, ctype: cJSON, kind: 1, raw: lookup}, {method: post, route: rLookup, ctype: cJSON, kind: 7, p: 2}},
		{{method: get, route: rHealth}, {method: get, route: rReady}, {method: get, route: rOpenAPI}, {method: get, route: rMetrics}},
		// Writes: JSON and CBOR blocks, raw and built, then rollbacks.
		{{method: post, route: rBlocks, ctype: cJSON, auth: 1, kind: 1, raw: blockJSON}, {method: get, route: rBalance, seg: []any{0}}},
		{{method: post, route: rBlocks, ctype: cCBOR, auth: 1, kind: 1, raw: blockCBOR}, {method: post, route: rBlocks, ctype: cCBOR, auth: 1, kind: 1, raw: blockCBOR}},
		{{method: post, route: rBlocks, ctype: cJSON, auth: 1, kind: 1, raw: blockJSON},
			{method: post, route: rBlocks, ctype: cJSON, auth: 1, kind: 1, raw: chain.AppendBlockJSON(nil, next2)},
			{method: post, route: rRollback, ctype: cJSON, auth: 1, kind: 1, raw: []byte(`{"height":3}`)}},
		{{method: post, route: rBlocks, ctype: cJSON, auth: 1, kind: 2}, {method: post, route: rBlocks, ctype: cCBOR, auth: 1, kind: 3, p: 1},
			{method: post, route: rRollback, ctype: cJSON, auth: 1, kind: 5, p: 1}, {method: post, route: rRollback, ctype: cJSON, auth: 1, kind: 6, p: 0}},
		{{method: post, route: rBlocks, ctype: cJSON, auth: 1, kind: 4, p: 2}, {method: post, route: rBlocks, ctype: cCBOR, auth: 1, kind: 4, p: 3}},
		{{method: post, route: rRollback, ctype: cJSON, auth: 1, kind: 1, raw: []byte(`{"height":0}`)}, {method: get, route: rTip},
			{method: post, route: rBlocks, ctype: cJSON, auth: 1, kind: 2}},
		// Writes without authority, or with the wrong one.
		{{method: post, route: rBlocks, ctype: cJSON, kind: 1, raw: blockJSON}, {method: post, route: rBlocks, ctype: cJSON, auth: 4, kind: 1, raw: blockJSON},
			{method: post, route: rBlocks, ctype: cJSON, auth: 3, kind: 1, raw: blockJSON}, {method: post, route: rRollback, ctype: cJSON, auth: 6, kind: 5, p: 1}},
		{{method: put, route: rBlocks, ctype: cJSON, auth: 1, kind: 1, raw: blockJSON}, {method: head, route: rTip}, {method: 9, route: rRollback, auth: 1, kind: 5, p: 1}},
		// Malformed bodies: duplicate keys, a wrong media type, chunked.
		{{method: post, route: rRollback, ctype: cJSON, auth: 1, kind: 1, raw: []byte(`{"height":3,"height":2}`)},
			{method: post, route: rLookup, ctype: cJSON, kind: 1, raw: []byte(`{"outpoints":[],"outpoints":[]}`)},
			{method: post, route: rBlocks, ctype: 5, auth: 1, kind: 1, raw: blockJSON},
			{method: post, route: rBlocks, ctype: cJSON, auth: 1, extra: 3, kind: 1, raw: blockJSON}},
		{{method: post, route: rBlocks, ctype: cCBOR, auth: 1, kind: 1, raw: []byte{0xbf, 0x9f, 0x5f, 0xff}},
			{method: post, route: rBlocks, ctype: cCBOR, auth: 1, kind: 1, raw: []byte{0x9b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}},
		// Malformed queries and paths (issue 12).
		{{method: get, route: rUtxos, seg: []any{0}, query: 4}, {method: get, route: rUtxos, seg: []any{0}, query: 5},
			{method: get, route: rUtxos, seg: []any{0}, query: 7}, {method: get, route: rBalance, seg: []any{6}}},
		{{method: get, route: rTip, query: 13}, {method: get, route: rBalance, seg: []any{0}, query: 14}, {method: get, route: rTip, query: 15}},
		{{method: get, route: rRaw, seg: []any{"/v1//tip"}}, {method: get, route: rAny, seg: []any{"v1", "tip/"}}, {method: get, route: rV1, seg: []any{"%zz"}}},
		// Freezes: one acknowledged, read with and without frozen=exclude, refused ones, the unfreeze.
		{{method: post, route: rFrozen, ctype: cJSON, auth: 1, kind: 1, raw: freeze}, {method: get, route: rUtxos, seg: []any{0}, query: 23},
			{method: get, route: rUtxos, seg: []any{0}, query: 24}, {method: get, route: rUtxos, seg: []any{0}, query: 25},
			{method: post, route: rFrozen, ctype: cJSON, auth: 1, kind: 1, raw: []byte(`{"outpoints":[],"reason":"x"}`)},
			{method: post, route: rFrozen, ctype: cJSON, kind: 1, raw: freeze},
			{method: del, route: rFrozen, ctype: cJSON, auth: 1, kind: 1, raw: unfreeze}},
		// Replication, with and without its token.
		{{method: get, route: rChanges, query: 18, auth: 3}, {method: get, route: rChanges, query: 19, auth: 3}, {method: get, route: rChanges, query: 18, auth: 1},
			{method: get, route: rCheckpoint, auth: 3}, {method: get, route: rCheckpoint}},
		{{method: post, route: rBlocks, ctype: cJSON, auth: 1, kind: 2}, {method: get, route: rChanges, query: 18, auth: 3},
			{method: get, route: rTip, query: 12}, {method: get, route: rUtxos, seg: []any{0}, query: 1, extra: 1}},
	}
	encoded := make([][]byte, len(seeds))
	for i, s := range seeds {
		encoded[i] = encodeFuzz(s...)
	}
	return encoded
}

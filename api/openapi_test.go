package api_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/utxo-cache/utxo-cache/api"
	"github.com/utxo-cache/utxo-cache/blockfrost"
	"github.com/utxo-cache/utxo-cache/cardano/credential"
	"github.com/utxo-cache/utxo-cache/cardano/script"
	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/internal/textenc"
	"github.com/utxo-cache/utxo-cache/replication"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
	"github.com/utxo-cache/utxo-cache/writer"
)

// The OpenAPI document is checked against real exchanges: every exchange of
// the handler tests (stack.do calls checkSpec), and a table below that covers
// every operation and every status the document declares, plus the statuses
// the server produces that it does not.

func init() {
	// CBOR blocks are opaque binary to the document.
	openapi3filter.RegisterBodyDecoder("application/cbor", openapi3filter.FileBodyDecoder)
	// So are the replication endpoints' change log and checkpoint archive.
	openapi3filter.RegisterBodyDecoder("application/cbor-seq", openapi3filter.FileBodyDecoder)
	openapi3filter.RegisterBodyDecoder("application/x-tar", openapi3filter.FileBodyDecoder)
	openapi3filter.RegisterBodyDecoder("text/event-stream", openapi3filter.FileBodyDecoder)
}

var spec struct {
	once   sync.Once
	doc    *openapi3.T
	router routers.Router
	err    error
}

// loadSpec loads and validates api/openapi.yaml once.
func loadSpec(t testing.TB) (*openapi3.T, routers.Router) {
	t.Helper()
	spec.once.Do(func() {
		loader := openapi3.NewLoader()
		doc, err := loader.LoadFromFile("openapi.yaml")
		if err != nil {
			spec.err = fmt.Errorf("load openapi.yaml: %w", err)
			return
		}
		if err := doc.Validate(loader.Context); err != nil {
			spec.err = fmt.Errorf("openapi.yaml is not a valid OpenAPI document: %w", err)
			return
		}
		r, err := legacy.NewRouter(doc)
		if err != nil {
			spec.err = fmt.Errorf("router of openapi.yaml: %w", err)
			return
		}
		spec.doc, spec.router = doc, r
	})
	if spec.err != nil {
		t.Fatal(spec.err)
	}
	return spec.doc, spec.router
}

// checkSpec fails t unless the exchange agrees with the document.
func checkSpec(t testing.TB, req *http.Request, body []byte, res *response) {
	t.Helper()
	_, errs := specCheck(t, req, body, res)
	for _, err := range errs {
		t.Errorf("%s %s: %v", req.Method, req.URL.RequestURI(), err)
	}
}

// specCheck validates one exchange against the document: the response
// always (its status must be declared for the operation, its body must match
// the schema), the request too, and a request the document rejects must not
// succeed. It returns "operationId status" of the exchange ("" when the
// document has no such route, which is fine for a 404 or 405 answer).
func specCheck(t testing.TB, req *http.Request, body []byte, res *response) (string, []error) {
	_, router := loadSpec(t)
	ctx := context.Background()
	vreq := req.Clone(ctx)
	vreq.Body = io.NopCloser(bytes.NewReader(body))
	if req.URL.RawPath != "" {
		// The legacy router matches the decoded path; an escaped "/" inside
		// an address must stay inside its segment.
		u := *req.URL
		u.Path, u.RawPath = req.URL.RawPath, ""
		vreq.URL = &u
	}
	// A HEAD is its GET without the body (RFC 9110 §9.3.2): the document
	// describes it through the GET, status and headers.
	head := req.Method == http.MethodHead
	if head {
		vreq.Method = http.MethodGet
	}
	route, params, err := router.FindRoute(vreq)
	if err != nil {
		if res.code == http.StatusNotFound || res.code == http.StatusMethodNotAllowed {
			return "", nil
		}
		return "", []error{fmt.Errorf("answered %d but the document has no such route: %v", res.code, err)}
	}
	key := route.Operation.OperationID + " " + strconv.Itoa(res.code)
	var errs []error
	in := &openapi3filter.RequestValidationInput{Request: vreq, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
	if err := openapi3filter.ValidateRequest(ctx, in); err != nil && res.code < 400 {
		errs = append(errs, fmt.Errorf("answered %d to a request the document rejects: %v", res.code, err))
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: res.code, Header: res.hdr,
		Body: io.NopCloser(bytes.NewReader(res.body)), Options: &openapi3filter.Options{IncludeResponseStatus: true, ExcludeResponseBody: head}}
	if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
		errs = append(errs, fmt.Errorf("%s: the answer does not match the document: %v\nbody: %.300s", key, err, res.body))
	}
	return key, errs
}

func TestOpenAPIDocument(t *testing.T) {
	doc, _ := loadSpec(t)
	ops := 0
	for _, item := range doc.Paths.Map() {
		ops += len(item.Operations())
	}
	if ops != 51 {
		t.Fatalf("the document describes %d operations, the API has 51", ops)
	}
}

// TestOpenAPIEveryEndpointAndStatus runs one table of exchanges that covers
// every operation and every status the document declares, validates each
// request and real response, and then checks that no declared status went
// unexercised. The last rows are statuses the server answers and the
// document does not declare.
func TestOpenAPIEveryEndpointAndStatus(t *testing.T) {
	doc, _ := loadSpec(t)
	reg := prometheus.NewRegistry()
	var notReady atomic.Bool
	var pr *panicReader
	m := newStack(t, stackConfig{
		noSpec:      true,
		replication: true,
		events:      true,
		// The change log keeps the last 3 changes (the rollback window).
		disk: disk.Options{PruneDepth: 1, RollbackWindow: 3},
		api: api.Options{Registry: reg, Gatherer: reg, MaxRequestBytes: 4096, MaxBlockBytes: 8192, WalletToken: walletToken, Ready: func() error {
			if notReady.Load() {
				return fmt.Errorf("draining")
			}
			return nil
		}},
		wrap: func(r api.Reader) api.Reader { pr = &panicReader{Reader: r}; return pr },
	})
	dh := hx("dh")
	m.apply(chain.Tx{Hash: txh("a"), Coinbase: true, Outputs: []chain.Output{
		out("alice", 1, chain.Asset{Policy: []byte{1}, Name: []byte("n"), Quantity: 1 << 60}),
		{Address: "alice", Value: 2, DatumHash: &dh, Datum: []byte{0xd0}, ScriptRef: []byte{0x5c}},
		out("bob", 3), out("a/b", 4)}})
	m.apply(tx("b", spends(op("a", 2)), out("carol", 3))) // a:2 spent at 2
	// a:1 spent at 3, as the collateral of an invalid tx.
	m.apply(chain.Tx{Hash: txh("c"), Invalid: true, CollateralInputs: spends(op("a", 1)),
		CollateralReturn: &chain.Output{Address: "alice", Value: 1}})
	m.apply()
	noToken := newStack(t, stackConfig{noSpec: true, noToken: true})
	replica := newStack(t, stackConfig{noSpec: true, api: api.Options{ReadOnly: true, WalletToken: walletToken, ReplicaStatus: func() api.ReplicaStatus {
		return api.ReplicaStatus{Seq: 0, WriterSeq: 7, LagBlocks: 7, LastContact: 1500 * time.Millisecond}
	}}})
	lostReplica := newStack(t, stackConfig{noSpec: true, api: api.Options{ReadOnly: true, ReplicaStatus: func() api.ReplicaStatus {
		return api.ReplicaStatus{LastContact: -1} // never heard from its writer
	}}})
	closed := newStack(t, stackConfig{noSpec: true, api: api.Options{WalletToken: walletToken}})
	_ = closed.w.Close()
	// A writer whose disk is full: every write is refused with 507.
	fullSpace := &settableSpace{}
	fullSpace.avail.Store(1 << 40)
	var full *stack
	full = newStack(t, stackConfig{noSpec: true, writer: writer.Options{Space: fullSpace, Reserve: 1 << 20},
		api: api.Options{WalletToken: walletToken, WritesRefused: func() error { return full.w.WritesRefused() }}})
	full.apply(tx("full", nil, out("alice", 1)))
	full.apply(tx("full2", nil, out("bob", 1)))
	fullSpace.avail.Store(0)

	// A store that keeps the Cardano indexes, one output on a base address
	// carrying an asset.
	idx := newStack(t, stackConfig{noSpec: true, disk: disk.Options{Dimensions: []disk.Dimension{disk.DimPaymentCredential,
		disk.DimStakeCredential, disk.DimAssetPolicy, disk.DimAsset}, Derivers: disk.Derivers{
		disk.DimPaymentCredential: credential.PaymentValues, disk.DimStakeCredential: credential.StakeValues}}})
	cred := func(hrp string, raw []byte) string {
		return textenc.Bech32(hrp, textenc.ConvertBits(raw), textenc.Bech32Const)
	}
	payHash, stakeHash, policy := bytes.Repeat([]byte{0x11}, 28), bytes.Repeat([]byte{0x22}, 28), bytes.Repeat([]byte{0x33}, 28)
	base := cred("addr", append(append([]byte{0x01}, payHash...), stakeHash...))
	idx.apply(tx("idx", nil, out(base, 5, chain.Asset{Policy: policy, Name: []byte("tok"), Quantity: 7}), out(base, 6)))
	payCred, stakeAddr := cred("addr_vkh", payHash), cred("stake", append([]byte{0xe1}, stakeHash...))
	policyHex := hex.EncodeToString(policy)
	unit := policyHex + hex.EncodeToString([]byte("tok"))

	// The Blockfrost front end over a store of the Cardano indexes, with
	// and without a project token; and over a store without them.
	bfDims := []disk.Dimension{disk.DimPaymentCredential, disk.DimStakeCredential, disk.DimReferenceScriptHash, disk.DimDatumHash}
	bfDerivers := disk.Derivers{disk.DimPaymentCredential: credential.PaymentValues, disk.DimStakeCredential: credential.StakeValues,
		disk.DimReferenceScriptHash: script.RefScriptValues, disk.DimDatumHash: script.DatumValues}
	bf := newStack(t, stackConfig{noSpec: true, disk: disk.Options{Dimensions: bfDims, Derivers: bfDerivers}, blockfrost: &blockfrost.Options{}})
	bfLocked := newStack(t, stackConfig{noSpec: true, disk: disk.Options{Dimensions: bfDims, Derivers: bfDerivers}, blockfrost: &blockfrost.Options{ProjectID: "p1"}})
	bfBare := newStack(t, stackConfig{noSpec: true, blockfrost: &blockfrost.Options{}})
	bfEmpty := newStack(t, stackConfig{noSpec: true, disk: disk.Options{Dimensions: bfDims, Derivers: bfDerivers}, blockfrost: &blockfrost.Options{}})
	plutusRef := []byte{0x82, 0x02, 0x43, 0x42, 0x01, 0x02}
	bfDatum := []byte{0xd8, 0x79, 0x80}
	bfBase := cred("addr", append(append([]byte{0x01}, payHash...), stakeHash...))
	bf.apply(tx("bf", nil, chain.Output{Address: bfBase, Value: 5, Assets: []chain.Asset{{Policy: policy, Name: []byte("tok"), Quantity: 7}},
		Datum: bfDatum, ScriptRef: plutusRef}))
	bfScript := func() string {
		r, _ := script.ParseRef(plutusRef)
		return hex.EncodeToString(r.Hash[:])
	}()
	bfDatumHash := func() string { h := script.DatumHash(bfDatum); return hex.EncodeToString(h[:]) }()
	bfTx := txh("bf").String()
	type bfOp struct {
		path     string // the 200 target
		bad      string // a 400 target
		notFound string // a 404 target, "" when the operation declares none
	}
	type bfRow struct {
		name string
		s    *stack
		t    string
		want int
	}
	var bfRows []bfRow
	for _, o := range []bfOp{
		{"/api/v0/addresses/" + bfBase, "/api/v0/addresses/" + payCred, ""},
		{"/api/v0/addresses/" + bfBase + "/utxos?count=5&page=1&order=desc", "/api/v0/addresses/" + bfBase + "/utxos?count=101", ""},
		{"/api/v0/addresses/" + payCred + "/utxos/" + unit, "/api/v0/addresses/" + bfBase + "/utxos/zz", ""},
		{"/api/v0/accounts/" + stakeAddr + "/utxos?page=2", "/api/v0/accounts/" + bfBase + "/utxos", ""},
		{"/api/v0/txs/" + bfTx + "/utxos", "/api/v0/txs/00/utxos", "/api/v0/txs/" + strings.Repeat("ab", 32) + "/utxos"},
		{"/api/v0/blocks/latest", "/api/v0/blocks/latest?count=1", "empty"},
		{"/api/v0/scripts/" + bfScript, "/api/v0/scripts/00", "/api/v0/scripts/" + strings.Repeat("ab", 28)},
		{"/api/v0/scripts/" + bfScript + "/cbor", "/api/v0/scripts/00/cbor", "/api/v0/scripts/" + strings.Repeat("ab", 28) + "/cbor"},
		{"/api/v0/scripts/" + bfScript + "/json", "/api/v0/scripts/00/json", "/api/v0/scripts/" + strings.Repeat("ab", 28) + "/json"},
		{"/api/v0/scripts/datum/" + bfDatumHash + "/cbor", "/api/v0/scripts/datum/00/cbor", "/api/v0/scripts/datum/" + strings.Repeat("ab", 32) + "/cbor"},
	} {
		bfRows = append(bfRows, bfRow{"blockfrost " + o.path, bf, o.path, 200}, bfRow{"blockfrost bad " + o.bad, bf, o.bad, 400}, bfRow{"blockfrost without project_id " + o.path, bfLocked, o.path, 403})
		switch o.notFound {
		case "":
		case "empty":
			bfRows = append(bfRows, bfRow{"blockfrost empty store " + o.path, bfEmpty, o.path, 404})
		default:
			bfRows = append(bfRows, bfRow{"blockfrost not held " + o.notFound, bf, o.notFound, 404})
		}
	}
	// What a store without the indexes cannot answer is 400, not an
	// empty 404; an unknown path under /api/v0 is 404 in Blockfrost's shape.
	for _, r := range []bfRow{
		{"blockfrost credential not kept", bfBare, "/api/v0/addresses/" + payCred + "/utxos", 400},
		{"blockfrost script not kept", bfBare, "/api/v0/scripts/" + bfScript, 400},
		{"blockfrost unknown path", bf, "/api/v0/epochs/latest/parameters", 404},
		{"blockfrost behind", bf, "/api/v0/addresses/" + bfBase + "/utxos?min_seq=1000&wait=0", 503},
		{"blockfrost unknown parameter", bf, "/api/v0/addresses/" + bfBase + "/utxos?limit=1", 400},
	} {
		bfRows = append(bfRows, r)
	}

	h := txh("a").String()
	etagOf := func(s *stack, target string) string {
		r := s.do(call{method: "GET", target: target})
		return r.hdr.Get("ETag")
	}
	big := make([]chain.Output, 400)
	for i := range big {
		big[i] = out(fmt.Sprintf("big-%d", i), 1)
	}
	var lookupItems []string
	for i := range 100 {
		lookupItems = append(lookupItems, fmt.Sprintf(`{"tx_hash":"%s","index":%d}`, h, i))
	}
	var b5 *chain.Block

	type row struct {
		name  string
		s     *stack
		mk    func() call
		want  int
		arm   func() // before the call
		after func() // after the call
	}
	get := func(target string, header ...string) func() call {
		return func() call { return call{method: "GET", target: target, header: header} }
	}
	post := func(target, ctype string, body []byte) func() call {
		return func() call { return call{method: "POST", target: target, body: body, ctype: ctype, auth: true} }
	}
	del := func(target, ctype string, body []byte) func() call {
		return func() call { return call{method: "DELETE", target: target, body: body, ctype: ctype, auth: true} }
	}
	frozenBody := func(o chain.OutPoint, reason string) []byte {
		b := fmt.Sprintf(`{"outpoints":[{"tx_hash":"%s","index":%d}]`, o.TxHash, o.Index)
		if reason != "" {
			b += `,"reason":"` + reason + `"`
		}
		return []byte(b + "}")
	}
	walletAuth := []string{"Authorization", "Bearer " + walletToken}
	wcall := func(method, target, ctype string, body []byte) func() call {
		return func() call { return call{method: method, target: target, body: body, ctype: ctype, header: walletAuth} }
	}
	pendingTx := func(name string, in chain.OutPoint, replace bool) []byte {
		return []byte(pendingJSON(tx(name, spends(in), out("alice", 1)), replace))
	}
	pendingCBOR := func(name string, in chain.OutPoint) []byte {
		t := tx(name, spends(in), out("alice", 1))
		return chain.AppendTxCBOR(nil, &t)
	}
	leaseBody := func(id string, ttl int, ops ...chain.OutPoint) []byte {
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
		return []byte(b + "}")
	}
	repl := func(target string) func() call { return get(target, "Authorization", "Bearer "+replToken) }
	seqOf := func(s *stack) uint64 { return s.store.Published().Seq }
	var held []*replication.Checkpoint // checkpoints in progress, for 429
	var heldChanges []*replication.ChangeStream
	postFn := func(target, ctype string, body func() []byte) func() call {
		return func() call { return call{method: "POST", target: target, body: body(), ctype: ctype, auth: true} }
	}
	stream := func(method, target, body string, header ...string) func() call {
		return func() call {
			c := call{method: method, target: target, header: header, canceled: true, allow5xx: true}
			if body != "" {
				c.body, c.ctype = []byte(body), "application/json"
			}
			return c
		}
	}
	rows := []row{
		// Event streams: m keeps the changes from 2 on (its rollback window).
		{name: "events", s: m, mk: stream("GET", "/v1/events?address=alice&address=bob", ""), want: 200},
		{name: "events resumed", s: m, mk: stream("GET", "/v1/events?address=alice&after_seq=3", "", "Last-Event-ID", "2"), want: 200},
		{name: "events without keys", s: m, mk: stream("GET", "/v1/events", ""), want: 400},
		{name: "events unknown key", s: m, mk: stream("GET", "/v1/events?addr=alice", ""), want: 400},
		{name: "events unindexed", s: m, mk: stream("GET", "/v1/events?policy=01", ""), want: 404},
		{name: "events truncated", s: m, mk: stream("GET", "/v1/events?address=alice&after_seq=0", ""), want: 410},
		{name: "events pending", s: m, mk: stream("GET", "/v1/events?address=alice&pending=true", ""), want: 200},
		{name: "events without a log", s: noToken, mk: stream("GET", "/v1/events?address=alice", ""), want: 503},
		{name: "events post", s: m, mk: stream("POST", "/v1/events", `{"keys":[{"address":"alice"},{"address":"bob"}]}`), want: 200},
		{name: "events post two members", s: m, mk: stream("POST", "/v1/events", `{"keys":[{"address":"alice","policy":"01"}]}`), want: 400},
		{name: "events post unindexed", s: m, mk: stream("POST", "/v1/events", `{"keys":[{"asset":"`+strings.Repeat("ab", 30)+`"}]}`), want: 404},
		{name: "events post truncated", s: m, mk: stream("POST", "/v1/events?after_seq=0", `{"keys":[{"address":"alice"}]}`), want: 410},
		{name: "events post pending", s: m, mk: stream("POST", "/v1/events", `{"keys":[{"address":"alice"}],"pending":true}`), want: 200},
		{name: "events post without a log", s: noToken, mk: stream("POST", "/v1/events", `{"keys":[{"address":"alice"}]}`), want: 503},

		{name: "tip", s: m, mk: get("/v1/tip"), want: 200},
		{name: "tip of a replica", s: replica, mk: get("/v1/tip"), want: 200},
		{name: "tip of a replica never in contact", s: lostReplica, mk: get("/v1/tip"), want: 200},

		// Replication, while m is at seq 4 and keeps the changes from 2 on.
		{name: "changes", s: m, mk: repl("/v1/replication/changes?after=2"), want: 200},
		{name: "changes none yet", s: m, mk: func() call {
			return repl(fmt.Sprintf("/v1/replication/changes?after=%d&wait=0", seqOf(m)))()
		}, want: 200},
		{name: "changes busy", s: m, mk: repl("/v1/replication/changes?after=2"), want: 429, arm: func() {
			for range replication.DefaultMaxChangeStreams {
				cs, err := m.source.OpenChanges(2, 1<<20)
				if err != nil {
					t.Fatalf("hold a change stream: %v", err)
				}
				heldChanges = append(heldChanges, cs)
			}
		}, after: func() {
			for _, cs := range heldChanges {
				_ = cs.Close()
			}
			heldChanges = nil
		}},
		{name: "changes ahead", s: m, mk: repl("/v1/replication/changes?after=1000000"), want: 409},
		{name: "changes truncated", s: m, mk: repl("/v1/replication/changes?after=0"), want: 410},
		{name: "changes without after", s: m, mk: repl("/v1/replication/changes?wait=1"), want: 400},
		{name: "changes bad wait", s: m, mk: repl("/v1/replication/changes?after=2&wait=soon"), want: 400},
		{name: "changes unauthorized", s: m, mk: get("/v1/replication/changes?after=2", "Authorization", "Bearer "+testToken), want: 401},
		{name: "changes no token", s: m, mk: get("/v1/replication/changes?after=2"), want: 401},
		{name: "changes disabled", s: noToken, mk: repl("/v1/replication/changes?after=0"), want: 403},
		{name: "changes of a replica", s: replica, mk: repl("/v1/replication/changes?after=0"), want: 403},
		{name: "checkpoint", s: m, mk: repl("/v1/replication/checkpoint"), want: 200},
		{name: "checkpoint busy", s: m, mk: repl("/v1/replication/checkpoint"), want: 429, arm: func() {
			for range 2 {
				cp, err := m.source.Checkpoint(context.Background())
				if err != nil {
					t.Fatalf("hold a checkpoint: %v", err)
				}
				held = append(held, cp)
			}
		}, after: func() {
			for _, cp := range held {
				_ = cp.Close()
			}
			held = nil
		}},
		{name: "checkpoint after the busy ones", s: m, mk: repl("/v1/replication/checkpoint"), want: 200},
		{name: "checkpoint unknown parameter", s: m, mk: repl("/v1/replication/checkpoint?full=1"), want: 400},
		{name: "checkpoint unauthorized", s: m, mk: get("/v1/replication/checkpoint", "Authorization", "Bearer nope"), want: 401},
		{name: "checkpoint disabled", s: noToken, mk: repl("/v1/replication/checkpoint"), want: 403},
		{name: "checkpoint of a replica", s: replica, mk: repl("/v1/replication/checkpoint"), want: 403},

		{name: "utxos", s: m, mk: get("/v1/addresses/alice/utxos"), want: 200},
		{name: "utxos page", s: m, mk: get("/v1/addresses/alice/utxos?limit=1&order=desc"), want: 200},
		{name: "utxos escaped", s: m, mk: get("/v1/addresses/a%2Fb/utxos"), want: 200},
		{name: "utxos empty", s: m, mk: get("/v1/addresses/nobody/utxos"), want: 200},
		{name: "utxos 304", s: m, mk: func() call {
			return call{method: "GET", target: "/v1/addresses/alice/utxos", header: []string{"If-None-Match", etagOf(m, "/v1/addresses/alice/utxos")}}
		}, want: 304},
		{name: "utxos limit 0", s: m, mk: get("/v1/addresses/alice/utxos?limit=0"), want: 400},
		{name: "utxos limit x", s: m, mk: get("/v1/addresses/alice/utxos?limit=x"), want: 400},
		{name: "utxos order", s: m, mk: get("/v1/addresses/alice/utxos?order=sideways"), want: 400},
		{name: "utxos cursor", s: m, mk: get("/v1/addresses/alice/utxos?cursor=nope"), want: 400},
		{name: "utxos long address", s: m, mk: get("/v1/addresses/" + strings.Repeat("x", 1025) + "/utxos"), want: 400},
		{name: "balance", s: m, mk: get("/v1/addresses/alice/balance"), want: 200},
		{name: "balance empty", s: m, mk: get("/v1/addresses/nobody/balance"), want: 200},
		{name: "balance 304", s: m, mk: func() call {
			return call{method: "GET", target: "/v1/addresses/alice/balance", header: []string{"If-None-Match", etagOf(m, "/v1/addresses/alice/balance")}}
		}, want: 304},
		{name: "balance long address", s: m, mk: get("/v1/addresses/" + strings.Repeat("x", 1025) + "/balance"), want: 400},
		{name: "payment credential utxos", s: idx, mk: get("/v1/payment-credentials/" + payCred + "/utxos?limit=1"), want: 200},
		{name: "payment credential utxos 304", s: idx, mk: func() call {
			target := "/v1/payment-credentials/" + payCred + "/utxos"
			return call{method: "GET", target: target, header: []string{"If-None-Match", etagOf(idx, target)}}
		}, want: 304},
		{name: "payment credential utxos bad bech32", s: idx, mk: get("/v1/payment-credentials/" + payCred[:len(payCred)-1] + "q/utxos"), want: 400},
		{name: "payment credential utxos not kept", s: noToken, mk: get("/v1/payment-credentials/" + payCred + "/utxos"), want: 404},
		{name: "payment credential utxos behind", s: idx, mk: get("/v1/payment-credentials/" + payCred + "/utxos?min_seq=1000&wait=0"), want: 503},
		{name: "payment credential balance", s: idx, mk: get("/v1/payment-credentials/" + payCred + "/balance"), want: 200},
		{name: "payment credential balance 304", s: idx, mk: func() call {
			target := "/v1/payment-credentials/" + payCred + "/balance"
			return call{method: "GET", target: target, header: []string{"If-None-Match", etagOf(idx, target)}}
		}, want: 304},
		{name: "payment credential balance stake prefix", s: idx, mk: get("/v1/payment-credentials/" + cred("stake_vkh", payHash) + "/balance"), want: 400},
		{name: "payment credential balance not kept", s: m, mk: get("/v1/payment-credentials/" + payCred + "/balance"), want: 404},
		{name: "payment credential balance behind", s: idx, mk: get("/v1/payment-credentials/" + payCred + "/balance?min_seq=1000&wait=0"), want: 503},
		{name: "stake credential utxos", s: idx, mk: get("/v1/stake-credentials/" + stakeAddr + "/utxos?order=desc"), want: 200},
		{name: "stake credential utxos 304", s: idx, mk: func() call {
			target := "/v1/stake-credentials/" + stakeAddr + "/utxos"
			return call{method: "GET", target: target, header: []string{"If-None-Match", etagOf(idx, target)}}
		}, want: 304},
		{name: "stake credential utxos an address", s: idx, mk: get("/v1/stake-credentials/" + base + "/utxos"), want: 400},
		{name: "stake credential utxos not kept", s: m, mk: get("/v1/stake-credentials/" + stakeAddr + "/utxos"), want: 404},
		{name: "stake credential utxos behind", s: idx, mk: get("/v1/stake-credentials/" + stakeAddr + "/utxos?min_seq=1000&wait=0"), want: 503},
		{name: "stake credential balance", s: idx, mk: get("/v1/stake-credentials/" + cred("stake_vkh", stakeHash) + "/balance"), want: 200},
		{name: "stake credential balance 304", s: idx, mk: func() call {
			target := "/v1/stake-credentials/" + stakeAddr + "/balance"
			return call{method: "GET", target: target, header: []string{"If-None-Match", etagOf(idx, target)}}
		}, want: 304},
		{name: "stake credential balance bad", s: idx, mk: get("/v1/stake-credentials/nope/balance"), want: 400},
		{name: "stake credential balance not kept", s: noToken, mk: get("/v1/stake-credentials/" + stakeAddr + "/balance"), want: 404},
		{name: "stake credential balance behind", s: idx, mk: get("/v1/stake-credentials/" + stakeAddr + "/balance?min_seq=1000&wait=0"), want: 503},
		{name: "policy utxos", s: idx, mk: get("/v1/policies/" + policyHex + "/utxos"), want: 200},
		{name: "policy utxos 304", s: idx, mk: func() call {
			target := "/v1/policies/" + policyHex + "/utxos"
			return call{method: "GET", target: target, header: []string{"If-None-Match", etagOf(idx, target)}}
		}, want: 304},
		{name: "policy utxos odd hex", s: idx, mk: get("/v1/policies/abc/utxos"), want: 400},
		{name: "policy utxos not kept", s: m, mk: get("/v1/policies/" + policyHex + "/utxos"), want: 404},
		{name: "policy utxos behind", s: idx, mk: get("/v1/policies/" + policyHex + "/utxos?min_seq=1000&wait=0"), want: 503},
		{name: "policy balance", s: idx, mk: get("/v1/policies/" + strings.ToUpper(policyHex) + "/balance"), want: 200},
		{name: "policy balance 304", s: idx, mk: func() call {
			target := "/v1/policies/" + policyHex + "/balance"
			return call{method: "GET", target: target, header: []string{"If-None-Match", etagOf(idx, target)}}
		}, want: 304},
		{name: "policy balance not hex", s: idx, mk: get("/v1/policies/xyz1/balance"), want: 400},
		{name: "policy balance not kept", s: m, mk: get("/v1/policies/" + policyHex + "/balance"), want: 404},
		{name: "policy balance behind", s: idx, mk: get("/v1/policies/" + policyHex + "/balance?min_seq=1000&wait=0"), want: 503},
		{name: "asset utxos", s: idx, mk: get("/v1/assets/" + unit + "/utxos"), want: 200},
		{name: "asset utxos 304", s: idx, mk: func() call {
			target := "/v1/assets/" + unit + "/utxos"
			return call{method: "GET", target: target, header: []string{"If-None-Match", etagOf(idx, target)}}
		}, want: 304},
		{name: "asset utxos short unit", s: idx, mk: get("/v1/assets/" + policyHex[:54] + "/utxos"), want: 400},
		{name: "asset utxos not kept", s: noToken, mk: get("/v1/assets/" + unit + "/utxos"), want: 404},
		{name: "asset utxos behind", s: idx, mk: get("/v1/assets/" + unit + "/utxos?min_seq=1000&wait=0"), want: 503},
		{name: "asset balance", s: idx, mk: get("/v1/assets/" + policyHex + "/balance"), want: 200},
		{name: "asset balance 304", s: idx, mk: func() call {
			target := "/v1/assets/" + unit + "/balance"
			return call{method: "GET", target: target, header: []string{"If-None-Match", etagOf(idx, target)}}
		}, want: 304},
		{name: "asset balance long name", s: idx, mk: get("/v1/assets/" + unit + strings.Repeat("00", 65) + "/balance"), want: 400},
		{name: "asset balance not kept", s: m, mk: get("/v1/assets/" + unit + "/balance"), want: 404},
		{name: "asset balance behind", s: idx, mk: get("/v1/assets/" + unit + "/balance?min_seq=1000&wait=0"), want: 503},
		{name: "utxo live", s: m, mk: get("/v1/utxos/" + h + "/0"), want: 200},
		{name: "utxo datum", s: m, mk: get("/v1/utxos/" + h + "/1"), want: 200},
		{name: "utxo collateral return", s: m, mk: get("/v1/utxos/" + txh("c").String() + "/0"), want: 200},
		{name: "utxo 304", s: m, mk: func() call {
			return call{method: "GET", target: "/v1/utxos/" + h + "/0", header: []string{"If-None-Match", etagOf(m, "/v1/utxos/"+h+"/0")}}
		}, want: 304},
		{name: "utxo bad hash", s: m, mk: get("/v1/utxos/xyz/0"), want: 400},
		{name: "utxo bad index", s: m, mk: get("/v1/utxos/" + h + "/-1"), want: 400},
		{name: "utxo index over uint32", s: m, mk: get("/v1/utxos/" + h + "/4294967296"), want: 400},
		{name: "utxo never existed", s: m, mk: get("/v1/utxos/" + txh("zz").String() + "/0"), want: 404},
		{name: "utxo pruned", s: m, mk: get("/v1/utxos/" + h + "/2"), want: 404},
		{name: "lookup", s: m, mk: post("/v1/utxos/lookup", "application/json", []byte(
			`{"outpoints":[{"tx_hash":"`+h+`","index":0},{"tx_hash":"`+h+`","index":1},{"tx_hash":"`+h+`","index":9}]}`)), want: 200},
		{name: "lookup empty", s: m, mk: post("/v1/utxos/lookup", "application/json", []byte(`{"outpoints":[]}`)), want: 400},
		{name: "lookup bad", s: m, mk: post("/v1/utxos/lookup", "application/json", []byte(`{"outpoints":[{"tx_hash":"x","index":0}]}`)), want: 400},
		{name: "lookup too large", s: m, mk: post("/v1/utxos/lookup", "application/json", []byte(`{"outpoints":[`+strings.Join(lookupItems, ",")+`]}`)), want: 413},
		{name: "block unauthorized", s: m, mk: func() call {
			return call{method: "POST", target: "/v1/blocks", ctype: "application/json", body: chain.AppendBlockJSON(nil, m.next())}
		}, want: 401},
		{name: "block bad JSON", s: m, mk: post("/v1/blocks", "application/json", []byte(`{"height":`)), want: 400},
		{name: "block CBOR garbage", s: m, mk: post("/v1/blocks", "application/cbor", []byte{0xff, 0x01}), want: 400},
		{name: "block as text/plain", s: m, mk: postFn("/v1/blocks", "text/plain", func() []byte {
			return chain.AppendBlockJSON(nil, m.next())
		}), want: 415},
		{name: "block not next", s: m, mk: postFn("/v1/blocks", "application/json", func() []byte {
			b := m.next()
			b.Height++
			return chain.AppendBlockJSON(nil, b)
		}), want: 409},
		{name: "block unknown input", s: m, mk: postFn("/v1/blocks", "application/json", func() []byte {
			return chain.AppendBlockJSON(nil, m.next(tx("u", spends(op("nope", 0)))))
		}), want: 422},
		{name: "block double spend", s: m, mk: postFn("/v1/blocks", "application/json", func() []byte {
			return chain.AppendBlockJSON(nil, m.next(tx("d", spends(op("a", 0), op("a", 0)))))
		}), want: 422},
		{name: "block duplicate outpoint", s: m, mk: postFn("/v1/blocks", "application/json", func() []byte {
			return chain.AppendBlockJSON(nil, m.next(tx("a", nil, out("x", 1))))
		}), want: 422},
		{name: "block too large", s: m, mk: postFn("/v1/blocks", "application/json", func() []byte {
			return chain.AppendBlockJSON(nil, m.next(tx("big", nil, big...)))
		}), want: 413},
		{name: "block", s: m, mk: postFn("/v1/blocks", "application/json", func() []byte {
			b5 = m.next(tx("e", spends(op("a", 0)), out("alice", 1)))
			return chain.AppendBlockJSON(nil, b5)
		}), want: 200},
		{name: "block again", s: m, mk: postFn("/v1/blocks", "application/json", func() []byte { return chain.AppendBlockJSON(nil, b5) }), want: 200},
		{name: "block CBOR", s: m, mk: postFn("/v1/blocks", "application/cbor", func() []byte {
			return chain.AppendBlockCBOR(nil, m.next(tx("f", nil, out("dave", 1))))
		}), want: 200},
		{name: "block writes disabled", s: noToken, mk: post("/v1/blocks", "application/json", chain.AppendBlockJSON(nil, noToken.next())), want: 403},
		{name: "block read only", s: replica, mk: post("/v1/blocks", "application/json", chain.AppendBlockJSON(nil, replica.next())), want: 403},
		{name: "rollback unauthorized", s: m, mk: func() call {
			return call{method: "POST", target: "/v1/rollback", ctype: "application/json", body: []byte(`{"height":5}`)}
		}, want: 401},
		{name: "rollback above tip", s: m, mk: post("/v1/rollback", "application/json", []byte(`{"height":99}`)), want: 400},
		{name: "rollback unknown hash", s: m, mk: post("/v1/rollback", "application/json", []byte(`{"hash":"`+hx("x").String()+`"}`)), want: 400},
		{name: "rollback too deep", s: m, mk: post("/v1/rollback", "application/json", []byte(`{"height":1}`)), want: 409},
		{name: "rollback", s: m, mk: post("/v1/rollback", "application/json", []byte(`{"height":5}`)), want: 200},
		{name: "rollback by hash", s: m, mk: postFn("/v1/rollback", "application/json", func() []byte {
			return []byte(`{"hash":"` + b5.Hash.String() + `"}`)
		}), want: 200},
		{name: "freeze", s: m, mk: post("/v1/frozen", "application/json", frozenBody(op("a", 3), "audit")), want: 200},
		{name: "freeze again, nothing changes", s: m, mk: post("/v1/frozen", "application/json", frozenBody(op("a", 3), "audit")), want: 200},
		{name: "utxos without frozen", s: m, mk: get("/v1/addresses/a%2Fb/utxos?frozen=exclude"), want: 200},
		{name: "utxos mature only", s: m, mk: get("/v1/addresses/alice/utxos?mature=only&frozen=include&limit=1"), want: 200},
		{name: "utxos bad frozen", s: m, mk: get("/v1/addresses/alice/utxos?frozen=no"), want: 400},
		{name: "utxos bad mature", s: m, mk: get("/v1/addresses/alice/utxos?mature=yes"), want: 400},
		{name: "utxo frozen", s: m, mk: get("/v1/utxos/" + h + "/3"), want: 200},
		{name: "freeze unknown outpoint", s: m, mk: post("/v1/frozen", "application/json", frozenBody(op("nowhere", 0), "audit")), want: 422},
		{name: "freeze without reason", s: m, mk: post("/v1/frozen", "application/json", frozenBody(op("a", 3), "")), want: 400},
		{name: "freeze unauthorized", s: m, mk: func() call {
			return call{method: "POST", target: "/v1/frozen", ctype: "application/json", body: frozenBody(op("a", 3), "x")}
		}, want: 401},
		{name: "freeze writes disabled", s: noToken, mk: post("/v1/frozen", "application/json", frozenBody(op("a", 3), "x")), want: 403},
		{name: "freeze read only", s: replica, mk: post("/v1/frozen", "application/json", frozenBody(op("a", 3), "x")), want: 403},
		{name: "freeze as text/plain", s: m, mk: post("/v1/frozen", "text/plain", frozenBody(op("a", 3), "x")), want: 415},
		{name: "freeze too large", s: m, mk: post("/v1/frozen", "application/json", []byte(`{"reason":"x"`+strings.Repeat(" ", 5000)+`}`)), want: 413},
		{name: "freeze slow body", s: m, mk: func() call {
			return call{method: "POST", target: "/v1/frozen", ctype: "application/json", body: []byte(`{"outpoints":`), stalled: true, auth: true}
		}, want: 408},
		{name: "freeze writer closed", s: closed, mk: post("/v1/frozen", "application/json", frozenBody(op("a", 3), "x")), want: 503},
		{name: "freeze disk full", s: full, mk: post("/v1/frozen", "application/json", frozenBody(op("full", 0), "x")), want: 507},
		{name: "unfreeze", s: m, mk: del("/v1/frozen", "application/json", frozenBody(op("a", 3), "")), want: 200},
		{name: "unfreeze with a reason", s: m, mk: del("/v1/frozen", "application/json", frozenBody(op("a", 3), "x")), want: 400},
		{name: "unfreeze unauthorized", s: m, mk: func() call {
			return call{method: "DELETE", target: "/v1/frozen", ctype: "application/json", body: frozenBody(op("a", 3), "")}
		}, want: 401},
		{name: "unfreeze read only", s: replica, mk: del("/v1/frozen", "application/json", frozenBody(op("a", 3), "")), want: 403},
		{name: "unfreeze as text/plain", s: m, mk: del("/v1/frozen", "text/plain", frozenBody(op("a", 3), "")), want: 415},
		{name: "unfreeze too large", s: m, mk: del("/v1/frozen", "application/json", []byte(`{`+strings.Repeat(" ", 5000)+`}`)), want: 413},
		{name: "unfreeze slow body", s: m, mk: func() call {
			return call{method: "DELETE", target: "/v1/frozen", ctype: "application/json", body: []byte(`{"outpoints":`), stalled: true, auth: true}
		}, want: 408},
		{name: "unfreeze writer closed", s: closed, mk: del("/v1/frozen", "application/json", frozenBody(op("a", 3), "")), want: 503},
		{name: "unfreeze disk full", s: full, mk: del("/v1/frozen", "application/json", frozenBody(op("full", 0), "")), want: 507},
		{name: "lease", s: m, mk: wcall("POST", "/v1/leases", "application/json", leaseBody("L1", 60, op("a", 3))), want: 200},
		{name: "lease held", s: m, mk: wcall("POST", "/v1/leases", "application/json", leaseBody("L2", 0, op("a", 3))), want: 409},
		{name: "lease unknown outpoint", s: m, mk: wcall("POST", "/v1/leases", "application/json", leaseBody("", 0, op("nowhere", 0))), want: 422},
		{name: "lease ttl out of range", s: m, mk: wcall("POST", "/v1/leases", "application/json", leaseBody("", 86401, op("a", 0))), want: 400},
		{name: "lease bad id", s: m, mk: wcall("POST", "/v1/leases", "application/json", leaseBody("a b", 0, op("a", 0))), want: 400},
		{name: "lease admin token", s: m, mk: post("/v1/leases", "application/json", leaseBody("", 0, op("a", 0))), want: 401},
		{name: "lease wallet writes disabled", s: noToken, mk: wcall("POST", "/v1/leases", "application/json", leaseBody("", 0, op("a", 0))), want: 403},
		{name: "lease read only", s: replica, mk: wcall("POST", "/v1/leases", "application/json", leaseBody("", 0, op("a", 0))), want: 403},
		{name: "lease as text/plain", s: m, mk: wcall("POST", "/v1/leases", "text/plain", leaseBody("", 0, op("a", 0))), want: 415},
		{name: "lease too large", s: m, mk: wcall("POST", "/v1/leases", "application/json", []byte(`{`+strings.Repeat(" ", 5000)+`}`)), want: 413},
		{name: "lease stalled", s: m, mk: func() call {
			return call{method: "POST", target: "/v1/leases", ctype: "application/json", body: []byte(`{"outpoints":`), stalled: true, header: walletAuth}
		}, want: 408},
		{name: "lease writer closed", s: closed, mk: wcall("POST", "/v1/leases", "application/json", leaseBody("", 0, op("a", 0))), want: 503},
		{name: "lease disk full", s: full, mk: wcall("POST", "/v1/leases", "application/json", leaseBody("", 0, op("full", 0))), want: 507},
		{name: "utxos leased include", s: m, mk: get("/v1/addresses/alice/utxos?leased=include"), want: 200},
		{name: "utxos leased exclude", s: m, mk: get("/v1/addresses/alice/utxos?leased=exclude&frozen=exclude"), want: 200},
		{name: "utxos bad leased", s: m, mk: get("/v1/addresses/alice/utxos?leased=maybe"), want: 400},
		{name: "utxo leased include", s: m, mk: get("/v1/utxos/" + h + "/3?leased=include"), want: 200},
		{name: "utxo leased exclude", s: m, mk: get("/v1/utxos/" + h + "/3?leased=exclude"), want: 404},
		{name: "lookup leased include", s: m, mk: postFn("/v1/utxos/lookup?leased=include", "application/json", func() []byte {
			return []byte(`{"outpoints":[{"tx_hash":"` + h + `","index":3},{"tx_hash":"` + h + `","index":2}]}`)
		}), want: 200},
		{name: "get lease", s: m, mk: wcall("GET", "/v1/leases/L1", "", nil), want: 200},
		{name: "get lease on a replica, behind", s: replica, mk: wcall("GET", "/v1/leases/L1?min_seq=99&wait=0", "", nil), want: 503},
		{name: "get lease unknown", s: m, mk: wcall("GET", "/v1/leases/nope", "", nil), want: 404},
		{name: "get lease bad id", s: m, mk: wcall("GET", "/v1/leases/a.b", "", nil), want: 400},
		{name: "get lease no token", s: m, mk: get("/v1/leases/L1"), want: 401},
		{name: "get lease no wallet token", s: noToken, mk: wcall("GET", "/v1/leases/L1", "", nil), want: 403},
		{name: "release", s: m, mk: wcall("DELETE", "/v1/leases/L1", "", nil), want: 200},
		{name: "release again", s: m, mk: wcall("DELETE", "/v1/leases/L1", "", nil), want: 200},
		{name: "release bad id", s: m, mk: wcall("DELETE", "/v1/leases/a.b", "", nil), want: 400},
		{name: "release no token", s: m, mk: func() call { return call{method: "DELETE", target: "/v1/leases/L1"} }, want: 401},
		{name: "release read only", s: replica, mk: wcall("DELETE", "/v1/leases/L1", "", nil), want: 403},
		{name: "release writer closed", s: closed, mk: wcall("DELETE", "/v1/leases/L1", "", nil), want: 503},
		{name: "release disk full", s: full, mk: wcall("DELETE", "/v1/leases/L1", "", nil), want: 507},
		{name: "pending", s: m, mk: wcall("POST", "/v1/pending", "application/json", pendingTx("p1", op("a", 3), false)), want: 200},
		{name: "pending again, CBOR", s: m, mk: wcall("POST", "/v1/pending", "application/cbor", pendingCBOR("p1", op("a", 3))), want: 200},
		{name: "pending conflict", s: m, mk: wcall("POST", "/v1/pending", "application/json", pendingTx("p2", op("a", 3), false)), want: 409},
		{name: "pending unknown input", s: m, mk: wcall("POST", "/v1/pending", "application/json", pendingTx("p3", op("nowhere", 0), false)), want: 422},
		{name: "pending bad body", s: m, mk: wcall("POST", "/v1/pending", "application/json", []byte(`{"hash":1}`)), want: 400},
		{name: "pending admin token", s: m, mk: post("/v1/pending", "application/json", pendingTx("p3", op("a", 3), false)), want: 401},
		{name: "pending wallet writes disabled", s: noToken, mk: wcall("POST", "/v1/pending", "application/json", pendingTx("p3", op("a", 3), false)), want: 403},
		{name: "pending read only", s: replica, mk: wcall("POST", "/v1/pending", "application/json", pendingTx("p3", op("a", 3), false)), want: 403},
		{name: "pending as text/plain", s: m, mk: wcall("POST", "/v1/pending", "text/plain", pendingTx("p3", op("a", 3), false)), want: 415},
		{name: "pending too large", s: m, mk: wcall("POST", "/v1/pending", "application/json", []byte(`{`+strings.Repeat(" ", chain.MaxPendingTxBytes)+`}`)), want: 413},
		{name: "pending stalled", s: m, mk: func() call {
			return call{method: "POST", target: "/v1/pending", ctype: "application/json", body: []byte(`{"hash":`), stalled: true, header: walletAuth}
		}, want: 408},
		{name: "pending writer closed", s: closed, mk: wcall("POST", "/v1/pending", "application/json", pendingTx("p3", op("a", 0), false)), want: 503},
		{name: "pending disk full", s: full, mk: wcall("POST", "/v1/pending", "application/json", pendingTx("p3", op("full", 0), false)), want: 507},
		{name: "utxos pending include", s: m, mk: get("/v1/addresses/alice/utxos?pending=include&limit=2"), want: 200},
		{name: "balance pending include", s: m, mk: get("/v1/addresses/alice/balance?pending=include"), want: 200},
		{name: "utxo pending include", s: m, mk: get("/v1/utxos/" + h + "/3?pending=include"), want: 200},
		{name: "utxo unconfirmed", s: m, mk: get("/v1/utxos/" + txh("p1").String() + "/0?pending=include"), want: 200},
		{name: "lookup pending include", s: m, mk: postFn("/v1/utxos/lookup?pending=include", "application/json", func() []byte {
			return []byte(`{"outpoints":[{"tx_hash":"` + h + `","index":3},{"tx_hash":"` + txh("p1").String() + `","index":0},{"tx_hash":"` + h + `","index":2}]}`)
		}), want: 200},
		{name: "get pending", s: m, mk: get("/v1/pending/" + txh("p1").String()), want: 200},
		{name: "get pending unknown", s: m, mk: get("/v1/pending/" + txh("zz").String()), want: 404},
		{name: "get pending bad hash", s: m, mk: get("/v1/pending/xyz"), want: 400},
		{name: "get pending behind", s: replica, mk: get("/v1/pending/" + txh("p1").String() + "?min_seq=99&wait=0"), want: 503},
		{name: "withdraw", s: m, mk: wcall("DELETE", "/v1/pending/"+txh("p1").String(), "", nil), want: 200},
		{name: "withdraw bad hash", s: m, mk: wcall("DELETE", "/v1/pending/xyz", "", nil), want: 400},
		{name: "withdraw no token", s: m, mk: func() call { return call{method: "DELETE", target: "/v1/pending/" + txh("p1").String()} }, want: 401},
		{name: "withdraw read only", s: replica, mk: wcall("DELETE", "/v1/pending/"+txh("p1").String(), "", nil), want: 403},
		{name: "withdraw writer closed", s: closed, mk: wcall("DELETE", "/v1/pending/"+txh("p1").String(), "", nil), want: 503},
		{name: "withdraw disk full", s: full, mk: wcall("DELETE", "/v1/pending/"+txh("p1").String(), "", nil), want: 507},
		{name: "rollback writes disabled", s: noToken, mk: post("/v1/rollback", "application/json", []byte(`{"height":0}`)), want: 403},
		{name: "rollback read only", s: replica, mk: post("/v1/rollback", "application/json", []byte(`{"height":0}`)), want: 403},
		{name: "healthz", s: m, mk: get("/healthz"), want: 200},
		{name: "readyz", s: m, mk: get("/readyz"), want: 200},
		{name: "readyz draining", s: m, mk: get("/readyz"), want: 503, arm: func() { notReady.Store(true) }, after: func() { notReady.Store(false) }},
		{name: "metrics", s: m, mk: get("/metrics"), want: 200},
		{name: "openapi", s: m, mk: get("/openapi.yaml"), want: 200},

		// Read conditions (min_seq, min_height, wait), strict query strings,
		// media types, and a stopped writer.
		{name: "tip min_seq met", s: m, mk: get("/v1/tip?min_seq=1&min_height=1&wait=0.5"), want: 200},
		{name: "tip unknown parameter", s: m, mk: get("/v1/tip?nope=1"), want: 400},
		{name: "tip behind", s: m, mk: get("/v1/tip?min_seq=1000000&wait=0"), want: 503},
		{name: "utxos behind", s: m, mk: get("/v1/addresses/alice/utxos?min_height=1000000&wait=0"), want: 503},
		{name: "balance behind", s: m, mk: get("/v1/addresses/alice/balance?min_seq=1000000&wait=0"), want: 503},
		{name: "utxo behind", s: m, mk: get("/v1/utxos/" + h + "/0?min_seq=1000000&wait=0"), want: 503},
		{name: "lookup behind", s: m, mk: post("/v1/utxos/lookup?min_seq=1000000&wait=0", "application/json", []byte(
			`{"outpoints":[{"tx_hash":"`+h+`","index":0}]}`)), want: 503},
		{name: "block media type", s: m, mk: post("/v1/blocks", "text/xml", []byte(`{}`)), want: 415},
		{name: "block writer closed", s: closed, mk: post("/v1/blocks", "application/json", chain.AppendBlockJSON(nil, closed.next())), want: 503},
		{name: "rollback writer closed", s: closed, mk: post("/v1/rollback", "application/json", []byte(`{"height":0}`)), want: 503},
		{name: "block disk full", s: full, mk: post("/v1/blocks", "application/json", chain.AppendBlockJSON(nil, full.next(tx("f3", nil, out("carol", 1))))), want: 507},
		{name: "rollback disk full", s: full, mk: post("/v1/rollback", "application/json", []byte(`{"height":1}`)), want: 507},
		{name: "readyz disk full", s: full, mk: get("/readyz"), want: 200},

		// A body whose connection's read deadline passed; the service's
		// own deadline is TestSlowBody's.
		{name: "lookup slow body", s: m, mk: func() call {
			return call{method: "POST", target: "/v1/utxos/lookup", ctype: "application/json", body: []byte(`{"outpoints":`), stalled: true}
		}, want: 408},
		{name: "block slow body", s: m, mk: func() call {
			return call{method: "POST", target: "/v1/blocks", ctype: "application/json", body: []byte(`{"height":`), stalled: true, auth: true}
		}, want: 408},
		{name: "rollback slow body", s: m, mk: func() call {
			return call{method: "POST", target: "/v1/rollback", ctype: "application/json", body: []byte(`{"height":`), stalled: true, auth: true}
		}, want: 408},
		{name: "rollback as text/plain", s: m, mk: post("/v1/rollback", "text/plain", []byte(`{"height":5}`)), want: 415},

		// Statuses the server answers that the document does not declare.
		{name: "rollback too large", s: m, mk: post("/v1/rollback", "application/json", []byte(`{"height":5`+strings.Repeat(" ", 5000)+`}`)), want: 413},
		{name: "panic", s: m, mk: get("/v1/addresses/alice/balance"), want: 500, arm: func() { pr.armed.Store(true) }},
		{name: "utxo uppercase hash", s: m, mk: get("/v1/utxos/" + strings.ToUpper(h) + "/0"), want: 200},
		{name: "rollback by uppercase hash", s: m, mk: postFn("/v1/rollback", "application/json", func() []byte {
			return []byte(`{"hash":"` + strings.ToUpper(b5.Hash.String()) + `"}`)
		}), want: 200},
	}
	for _, r := range bfRows {
		rows = append(rows, row{name: r.name, s: r.s, mk: get(r.t), want: r.want})
	}
	rows = append(rows, row{name: "blockfrost POST", s: bf, mk: post("/api/v0/blocks/latest", "application/json", []byte("{}")), want: 405})
	rows = append(rows, row{name: "blockfrost with project_id", s: bfLocked, mk: get("/api/v0/addresses/"+bfBase, "project_id", "p1"), want: 200})
	covered := map[string]bool{}
	for _, r := range rows {
		if r.arm != nil {
			r.arm()
		}
		c := r.mk()
		c.allow5xx = true
		res := r.s.do(c)
		if r.after != nil {
			r.after()
		}
		if res.code != r.want {
			t.Errorf("%s: %s %s answered %s, the table wants %d", r.name, c.method, c.target, res, r.want)
			continue
		}
		key, errs := specCheck(t, c.request(), c.body, res)
		for _, err := range errs {
			t.Errorf("%s: %s %s: %v", r.name, c.method, c.target, err)
		}
		covered[key] = true
	}
	var missing []string
	for path, item := range doc.Paths.Map() {
		if strings.HasPrefix(path, "/api/") && !strings.HasPrefix(path, "/api/v0/") {
			continue // the Esplora front end: TestOpenAPIEsplora
		}
		for _, o := range item.Operations() {
			for status := range o.Responses.Map() {
				// "default" answers every undeclared status (500, 503): rows
				// such as "panic" and "writer closed" validate against it.
				if status == "default" {
					continue
				}
				if !covered[o.OperationID+" "+status] {
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

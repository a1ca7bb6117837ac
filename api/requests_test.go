package api_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/utxo-cache/utxo-cache/api"
	"github.com/utxo-cache/utxo-cache/chain"
)

// bodyTrap is a request body that fails the test when read.
type bodyTrap struct{ t *testing.T }

func (b bodyTrap) Read([]byte) (int, error) {
	b.t.Errorf("the body was read")
	return 0, http.ErrBodyReadAfterClose
}

// TestUnsupportedMediaType: POST /v1/blocks with a Content-Type other than
// application/json or application/cbor (parameters allowed, any case)
// answers 415 unsupported_media_type without reading the body; the
// authorization checks come first, the size limit after.
func TestUnsupportedMediaType(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackConfig{api: api.Options{MaxBlockBytes: 1 << 10}})
	s.apply(tx("a", nil, out("alice", 5)))
	before := s.state()
	good := s.next(tx("b", spends(op("a", 0)), out("bob", 5)))
	goodJSON := chain.AppendBlockJSON(nil, good)

	for _, ctype := range []string{
		"", // missing: curl --data-binary without -H sends the form type, a bare client nothing
		"text/plain",
		"text/plain; charset=utf-8",
		"application/x-www-form-urlencoded",
		"application/xml",
		"application/jsonl",
		"application/json-seq",
		"application/cbor-seq",
		"json",
		"application/json; charset", // malformed: a parameter without a value
		"*/*",
	} {
		r := s.do(call{method: "POST", target: "/v1/blocks", body: goodJSON, ctype: ctype, auth: true, noSpec: true})
		if r.code != http.StatusUnsupportedMediaType {
			t.Fatalf("Content-Type %q: %s, want 415", ctype, r)
		}
		wantError(t, r, http.StatusUnsupportedMediaType, "unsupported_media_type")
		s.unchanged(before, "a block sent as "+strconv.Quote(ctype))

		// The body is not read, and its size does not matter yet.
		req := httptest.NewRequest("POST", "/v1/blocks", bodyTrap{t})
		req.ContentLength = 1 << 20
		req.Header.Set("Authorization", "Bearer "+testToken)
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		rec := httptest.NewRecorder()
		s.h.ServeHTTP(rec, req)
		if rec.Code != http.StatusUnsupportedMediaType {
			t.Errorf("Content-Type %q with a 1 MiB body: %d %s, want 415", ctype, rec.Code, rec.Body)
		}
	}

	// Authorization comes first.
	r := s.do(call{method: "POST", target: "/v1/blocks", body: goodJSON, ctype: "text/plain", noSpec: true})
	wantError(t, r, http.StatusUnauthorized, "unauthorized")
	for _, cfg := range []stackConfig{{noToken: true}, {noWriter: true}} {
		o := newStack(t, cfg)
		r := o.do(call{method: "POST", target: "/v1/blocks", body: goodJSON, ctype: "text/plain", auth: true, noSpec: true})
		if r.code != http.StatusForbidden {
			t.Errorf("%+v: text/plain block answered %s, want 403", cfg, r)
		}
	}
	// The size limit comes after.
	big := chain.AppendBlockJSON(nil, s.next(tx("big", nil, out(strings.Repeat("x", 1000), 1), out(strings.Repeat("y", 1000), 1))))
	wantError(t, s.post("/v1/blocks", big, "text/plain"), http.StatusUnsupportedMediaType, "unsupported_media_type")
	wantError(t, s.post("/v1/blocks", big, "application/json"), http.StatusRequestEntityTooLarge, "too_large")

	// The two media types in any case, with parameters.
	for i, ctype := range []string{"Application/JSON", "application/json; charset=UTF-8", "application/json;", "APPLICATION/CBOR", "application/cbor; x=1"} {
		b := s.next(tx("ok"+strconv.Itoa(i), nil, out("carol", 1)))
		body := chain.AppendBlockJSON(nil, b)
		if strings.Contains(strings.ToLower(ctype), "cbor") {
			body = chain.AppendBlockCBOR(nil, b)
		}
		wantApplied(t, s.post("/v1/blocks", body, ctype), true, b)
	}
}

// TestStrictRequestBodies: every JSON request body is strict. A duplicate
// key (encoding/json would keep the last one: a rollback to the second
// height), a key in another case, an unknown field or trailing data is 400
// invalid_argument with nothing changed.
func TestStrictRequestBodies(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackConfig{})
	s.apply(tx("a", nil, out("alice", 1), out("bob", 2)))
	b2 := s.apply(tx("b", spends(op("a", 0)), out("carol", 1)))
	b3 := s.apply()
	before := s.state()
	h := txh("a").String()
	opJSON := `{"tx_hash":"` + h + `","index":0}`
	for _, body := range []string{
		`{"height":3,"height":1}`,
		`{"height":3,"h\u0065ight":1}`, // the same key after unescaping
		`{"hash":"` + b3.Hash.String() + `","hash":"` + b2.Hash.String() + `"}`,
		`{"height":null,"height":1}`,
		`{"Height":1}`,
		`{"HEIGHT":1}`,
		`{"height":1,"hash":"` + b2.Hash.String() + `"}`,
		`{"height":1,"extra":1}`,
		`{"height":1} {"height":2}`,
		`{"height":1}x`,
		`{"height":1.0}`,
		`{"height":1e0}`,
		`{"height":"1"}`,
		`{"height":null}`,
		`{"hash":null}`,
		`{"height":3,"hash":null}`,
		`{}`,
		`[]`,
		``,
	} {
		r := s.postJSON("/v1/rollback", body)
		if r.code != 400 {
			t.Errorf("rollback %s: %s, want 400 invalid_argument", body, r)
			continue
		}
		wantError(t, r, 400, "invalid_argument")
		s.unchanged(before, "rollback "+body)
	}
	for _, body := range []string{
		`{"outpoints":[` + opJSON + `],"outpoints":[` + opJSON + `]}`,
		`{"outpoints":[{"tx_hash":"` + h + `","index":0,"index":1}]}`,
		`{"outpoints":[{"tx_hash":"` + h + `","tx_hash":"` + h + `","index":0}]}`,
		`{"Outpoints":[` + opJSON + `]}`,
		`{"outpoints":[{"TX_HASH":"` + h + `","index":0}]}`,
		`{"outpoints":[` + opJSON + `]}[]`,
		`{"outpoints":[{"tx_hash":"` + h + `","index":1.0}]}`,
	} {
		r := s.postJSON("/v1/utxos/lookup", body)
		if r.code != 400 {
			t.Errorf("lookup %s: %s, want 400 invalid_argument", body, r)
			continue
		}
		wantError(t, r, 400, "invalid_argument")
	}

	// Whitespace around the value and between tokens is fine.
	if r := s.postJSON("/v1/utxos/lookup", " {\"outpoints\": [ "+opJSON+" ] }\n"); r.code != 200 {
		t.Fatalf("lookup with whitespace: %s", r)
	}
	if r := s.postJSON("/v1/rollback", " { \"hash\" : \""+b2.Hash.String()+"\" }\n"); r.code != 200 || withoutSeq(t, r) != `{"tip":`+tipJSON(b2)+`}` {
		t.Fatalf("rollback by hash: %s", r)
	}
}

// TestAddressNotUTF8: an address that is not valid UTF-8 after path
// unescaping is 400 invalid_argument on every address route (blocks cannot
// hold one), not a 200 for the address "\ufffd" the JSON encoder would echo.
func TestAddressNotUTF8(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackConfig{})
	s.apply(tx("a", nil, out("\ufffd", 1), out("ü", 2), out("a/\ufffd", 3)))
	for _, seg := range []string{
		"%FF",
		"%C3",          // a truncated sequence
		"a%C3",         // the same at the end
		"%C0%AF",       // an overlong "/"
		"%ED%A0%80",    // a UTF-16 surrogate
		"%F4%90%80%80", // above U+10FFFF
		"a%2F%FF",      // with an escaped "/": Gin unescapes the raw path itself
	} {
		for _, route := range []string{"/balance", "/utxos"} {
			target := "/v1/addresses/" + seg + route
			r := s.do(call{method: "GET", target: target, noSpec: true})
			if r.code != 400 {
				t.Errorf("GET %s: %s, want 400 invalid_argument", target, r)
				continue
			}
			wantError(t, r, 400, "invalid_argument")
		}
	}
	// Valid UTF-8, U+FFFD itself included, is an address like any other.
	for seg, value := range map[string]string{"%EF%BF%BD": "1", "%C3%BC": "2", "a%2F%EF%BF%BD": "3"} {
		r := s.get("/v1/addresses/" + seg + "/balance")
		if r.code != 200 || !strings.Contains(string(r.body), `"value":"`+value+`"`) {
			t.Errorf("GET balance of %s: %s, want 200 with value %s", seg, r, value)
		}
	}
}

package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// fuzzStack is a small store for the fuzz targets: addresses with a few
// outputs, one of them spent, so that reads find something.
func fuzzStack(f *testing.F) *stack {
	s := newStack(f, stackConfig{noSpec: true})
	s.apply(tx("a", nil, out("alice", 1), out("alice", 2), out("alice", 3), out("a/b", 4), out("ü", 5)))
	s.apply(tx("b", spends(op("a", 0)), out("bob", 1), out("alice", 6)))
	return s
}

// serveRaw serves a GET of the raw request-URI target as net/http's server
// would hand it over; ok is false when net/http would refuse the URI itself.
func serveRaw(h http.Handler, target string) (*response, bool) {
	u, err := url.ParseRequestURI(target)
	if err != nil {
		return nil, false
	}
	req := (&http.Request{
		Method: http.MethodGet, URL: u, RequestURI: target, Host: "example.com",
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: http.Header{}, Body: http.NoBody,
	}).WithContext(context.Background())
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return &response{code: rec.Code, hdr: rec.Result().Header, body: rec.Body.Bytes()}, true
}

// FuzzPaths sends random path segments and query strings to the GET routes:
// never a 5xx (a panic is a recovered 500), always a JSON answer with tip
// headers that match its body, and the state never changes.
func FuzzPaths(f *testing.F) {
	s := fuzzStack(f)
	h := txh("a").String()
	for _, seed := range []struct {
		kind       uint8
		seg1, seg2 string
		query      string
	}{
		{0, "alice", "", "limit=2&order=desc"},
		{0, "a%2Fb", "", ""},
		{1, "%C3%BC", "", ""},
		{1, "%FF", "", ""},
		{0, "a%2F%C3", "", ""},
		{0, "alice", "", "cursor=AAAA&limit=0"},
		{0, "alice", "", "limit=1&limit=2&order=asc&order=desc"},
		{0, "alice", "", "cursor=&cursor=x"},
		{0, "%", "", "%zz"},
		{1, "..", "", ""},
		{1, "%2E%2E", "", ""},
		{1, "%00", "", ""},
		{1, strings.Repeat("x", 1025), "", ""},
		{2, h, "0", ""},
		{2, h, "4294967296", ""},
		{2, h, "-1", ""},
		{2, h, "%30", ""},
		{2, strings.ToUpper(h), "1", ""},
		{2, "", "", ""},
		{3, "", "", "x=1"},
		{4, "v1", "tip", ""},
		{4, "v1", "tip/", ""},
		{4, "v1", "addresses", ""},
		{5, "alice", "balance/", ""},
		{5, "alice", "utxos/extra", ""},
		{5, "", "balance", ""},
		{5, "alice%2F", "utxos", ""},
		{4, "v1/addresses//balance", "", ""},
		{4, "v1//tip", "", ""},
		{4, "./v1", "tip", ""},
		{6, "", "", ""},
	} {
		f.Add(seed.kind, seed.seg1, seed.seg2, seed.query)
	}
	before := s.store.State()
	f.Fuzz(func(t *testing.T, kind uint8, seg1, seg2, query string) {
		var path string
		switch kind % 7 {
		case 0:
			path = "/v1/addresses/" + seg1 + "/utxos"
		case 1:
			path = "/v1/addresses/" + seg1 + "/balance"
		case 2:
			path = "/v1/utxos/" + seg1 + "/" + seg2
		case 3:
			path = "/v1/tip"
		case 4:
			path = "/" + seg1 + "/" + seg2
		case 5:
			path = "/v1/addresses/" + seg1 + "/" + seg2
		default:
			path = "/v1/utxos/lookup"
		}
		target := path
		if query != "" {
			target += "?" + query
		}
		r, ok := serveRaw(s.h, target)
		if !ok {
			return
		}
		checkInvariants(t, call{method: http.MethodGet, target: target}, r)
		if after := s.store.State(); after != before {
			t.Fatalf("GET %s changed the state: %+v -> %+v", target, before, after)
		}
	})
}

// FuzzCursor sends random cursors: the answer is 200 (a cursor the service
// issued) or 400 invalid_argument, nothing else.
func FuzzCursor(f *testing.F) {
	s := fuzzStack(f)
	for _, desc := range []bool{false, true} {
		order := "asc"
		if desc {
			order = "desc"
		}
		_, c := s.page("alice", desc, 1, "")
		f.Add(c, desc)
		f.Add(flipChar(c, 0), desc)
		f.Add(flipChar(c, 31), desc)
		f.Add(c[:31], desc)
		f.Add(c+"=", desc)
		f.Add(c+c, desc)
		f.Add(strings.ToUpper(c), desc)
		_, c2 := s.page("alice", desc, 1, c)
		f.Add(c2, !desc)
		f.Add(order, desc)
	}
	for _, c := range []string{"", "A", strings.Repeat("A", 32), strings.Repeat("_", 32), strings.Repeat("/", 32), "%", "\x00", "AQ"} {
		f.Add(c, false)
	}
	f.Fuzz(func(t *testing.T, cursor string, desc bool) {
		q := url.Values{"cursor": {cursor}, "limit": {"2"}}
		if desc {
			q.Set("order", "desc")
		}
		target := "/v1/addresses/alice/utxos?" + q.Encode()
		r, ok := serveRaw(s.h, target)
		if !ok {
			t.Fatalf("unparsable target %q", target)
		}
		checkInvariants(t, call{method: http.MethodGet, target: target}, r)
		switch r.code {
		case http.StatusOK:
		case http.StatusBadRequest:
			wantError(t, r, http.StatusBadRequest, "invalid_argument")
		default:
			t.Fatalf("cursor %q: %s, want 200 or 400", cursor, r)
		}
	})
}

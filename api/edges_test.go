package api_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/utxo-cache/utxo-cache/api"
	"github.com/utxo-cache/utxo-cache/chain"
)

// The edges of the HTTP surface: what a client that sends something odd,
// or sends it oddly, is answered.

// TestTwoAuthorizationHeaders: a request with two Authorization headers is
// refused with 400 invalid_argument on every endpoint that takes a token,
// whichever comes first; the first is not taken for the answer.
func TestTwoAuthorizationHeaders(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackConfig{replication: true})
	s.apply(tx("a", nil, out("alice", 1)))
	before := s.state()
	block := chain.AppendBlockJSON(nil, s.next(tx("b", nil, out("bob", 1))))
	for _, ep := range []struct {
		method, target, token string
		body                  []byte
	}{
		{"POST", "/v1/blocks", testToken, block},
		{"POST", "/v1/rollback", testToken, []byte(`{"height":0}`)},
		{"GET", "/v1/replication/changes?after=0", replToken, nil},
		{"GET", "/v1/replication/checkpoint", replToken, nil},
	} {
		right, wrong := "Bearer "+ep.token, "Bearer wrong-"+ep.token
		for _, pair := range [][2]string{{right, wrong}, {wrong, right}, {right, right}, {right, ""}} {
			c := call{method: ep.method, target: ep.target, body: ep.body, ctype: "application/json",
				header: []string{"Authorization", pair[0], "Authorization", pair[1]}}
			r := s.do(c)
			wantError(t, r, http.StatusBadRequest, "invalid_argument")
			if !strings.Contains(errorMessage(t, r), "2 Authorization headers") {
				t.Errorf("%s %s with %q: message %q does not say why", ep.method, ep.target, pair, errorMessage(t, r))
			}
			s.unchanged(before, fmt.Sprintf("%s with two Authorization headers", ep.target))
		}
	}
	// One header with the right token still opens them.
	if r := s.do(call{method: "GET", target: "/v1/replication/changes?after=0", header: []string{"Authorization", "Bearer " + replToken}}); r.code != 200 {
		t.Fatalf("changes with one right header: %s", r)
	}
	if r := s.postJSON("/v1/rollback", `{"height":1}`); r.code != 200 {
		t.Fatalf("rollback with one right header: %s", r)
	}
	// The roles come first: a replica is read-only whatever it is sent.
	replica := newStack(t, stackConfig{api: api.Options{ReadOnly: true}})
	wantError(t, replica.do(call{method: "POST", target: "/v1/rollback", body: []byte(`{"height":0}`), ctype: "application/json",
		header: []string{"Authorization", "Bearer a", "Authorization", "Bearer b"}}), http.StatusForbidden, "read_only")
}

// errorMessage is the error.message of an error answer.
func errorMessage(t testing.TB, r *response) string {
	t.Helper()
	m, _ := r.obj(t)["error"].(map[string]any)
	msg, _ := m["message"].(string)
	return msg
}

// TestHead: HEAD answers wherever GET does, with the GET's status and
// headers (Content-Length the GET body's length, the same ETag, 304 for a
// matching If-None-Match) and no body; a path that takes no GET answers
// HEAD 405, an unknown one 404, both without a body.
func TestHead(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	s := newStack(t, stackConfig{replication: true, api: api.Options{Registry: reg, Gatherer: reg}})
	s.apply(tx("a", nil, out("alice", 1), out("alice", 2)))
	h := txh("a").String()
	for _, target := range []string{
		"/v1/tip",
		"/v1/tip?min_seq=1&wait=0",
		"/v1/addresses/alice/utxos?limit=1",
		"/v1/addresses/alice/balance",
		"/v1/utxos/" + h + "/0",
		"/v1/utxos/" + h + "/7",                  // 404 not_found
		"/v1/addresses/alice/utxos?limit=0",      // 400
		"/v1/tip?min_seq=99&wait=0",              // 503 behind
		"/v1/replication/changes?after=0&wait=0", // CBOR, no Content-Length of its own
		"/v1/replication/checkpoint",             // streamed: HEAD builds no archive
		"/v1/replication/changes?after=9",        // 409
		"/healthz", "/readyz", "/openapi.yaml",
	} {
		c := call{method: "GET", target: target, header: []string{"Authorization", "Bearer " + replToken}, allow5xx: true}
		get := s.do(c)
		c.method = "HEAD"
		head := s.do(c)
		if head.code != get.code {
			t.Errorf("HEAD %s: %d, GET %d", target, head.code, get.code)
			continue
		}
		if cl := head.hdr.Get("Content-Length"); cl != "" && cl != strconv.Itoa(len(get.body)) {
			t.Errorf("HEAD %s: Content-Length %s, the GET's body has %d bytes", target, cl, len(get.body))
		}
		if len(get.body) > 0 && head.hdr.Get("Content-Length") == "" && !strings.HasSuffix(target, "checkpoint") {
			t.Errorf("HEAD %s: no Content-Length", target)
		}
		for name := range get.hdr {
			if name == "Content-Length" {
				continue
			}
			if !slices.Equal(get.hdr[name], head.hdr[name]) {
				t.Errorf("HEAD %s: %s %q, GET %q", target, name, head.hdr[name], get.hdr[name])
			}
		}
		if len(head.hdr) < len(get.hdr) {
			t.Errorf("HEAD %s: headers %v, GET %v", target, head.hdr, get.hdr)
		}
	}
	// Conditional: the ETag of a HEAD revalidates like a GET's.
	target := "/v1/addresses/alice/balance"
	etag := s.do(call{method: "HEAD", target: target}).hdr.Get("ETag")
	if etag == "" || etag != s.get(target).hdr.Get("ETag") {
		t.Fatalf("HEAD %s: ETag %q, GET %q", target, etag, s.get(target).hdr.Get("ETag"))
	}
	if r := s.do(call{method: "HEAD", target: target, header: []string{"If-None-Match", etag}}); r.code != http.StatusNotModified {
		t.Errorf("HEAD %s with its ETag: %d, want 304", target, r.code)
	}
	// /metrics changes between two requests; its HEAD answers all the same.
	if r := s.do(call{method: "HEAD", target: "/metrics"}); r.code != 200 || !strings.HasPrefix(r.hdr.Get("Content-Type"), "text/plain") {
		t.Errorf("HEAD /metrics: %d %v", r.code, r.hdr)
	}
	for target, want := range map[string]int{"/v1/blocks": 405, "/v1/rollback": 405, "/v1/utxos/lookup": 405, "/v1/nope": 404, "/v1/tip/": 404} {
		r := s.do(call{method: "HEAD", target: target})
		if r.code != want || r.hdr.Get("Content-Type") != "application/json" {
			t.Errorf("HEAD %s: %d %v, want %d with the JSON error's headers", target, r.code, r.hdr, want)
		}
		if want == 405 && r.hdr.Get("Allow") != "POST" {
			t.Errorf("HEAD %s: Allow %q, want POST", target, r.hdr.Get("Allow"))
		}
	}
	if r := s.do(call{method: "DELETE", target: "/v1/tip", noSpec: true}); r.code != 405 || r.hdr.Get("Allow") != "GET, HEAD" {
		t.Errorf("DELETE /v1/tip: %d, Allow %q, want 405 and GET, HEAD", r.code, r.hdr.Get("Allow"))
	}

	// Through a server: a HEAD answer sends no body bytes, so the GET that
	// follows on the same connection parses.
	srv := httptest.NewServer(s.h)
	t.Cleanup(srv.Close)
	conn := dial(t, srv)
	fmt.Fprintf(conn, "HEAD /v1/tip HTTP/1.1\r\nHost: x\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(conn)
	res, err := http.ReadResponse(br, &http.Request{Method: "HEAD"})
	if err != nil || res.StatusCode != 200 || res.ContentLength != int64(len(s.get("/v1/tip").body)) {
		t.Fatalf("HEAD /v1/tip through a server: %v %+v", err, res)
	}
	res, err = http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("the GET after a HEAD: %v", err)
	}
	if b, _ := io.ReadAll(res.Body); string(b) != `{"status":"ok"}` {
		t.Fatalf("the GET after a HEAD: %d %q", res.StatusCode, b)
	}
}

// TestEmptyOrder: order= is 400, as every other empty parameter.
func TestEmptyOrder(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackConfig{})
	s.apply(tx("a", nil, out("alice", 1)))
	for _, p := range []string{"order=", "limit=", "cursor=", "min_seq=", "min_height=", "wait="} {
		wantError(t, s.get("/v1/addresses/alice/utxos?"+p), http.StatusBadRequest, "invalid_argument")
	}
	for _, p := range []string{"", "order=asc", "order=desc"} {
		if r := s.get("/v1/addresses/alice/utxos?" + p); r.code != 200 {
			t.Errorf("?%s: %s", p, r)
		}
	}
}

// TestWaitSaysWhatIsAccepted: a wait the service does not take is 400 with
// a message that gives the format and the cap; a long one in that format is
// cut to the cap, not refused.
func TestWaitSaysWhatIsAccepted(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackConfig{replication: true, api: api.Options{MaxWait: 2 * time.Second}})
	for target, limit := range map[string]string{
		"/v1/tip?wait=1e9":                         "2s",
		"/v1/tip?wait=-1":                          "2s",
		"/v1/addresses/alice/balance?wait=1s":      "2s",
		"/v1/replication/changes?after=0&wait=1e9": "30s",
	} {
		r := s.get(target, "Authorization", "Bearer "+replToken)
		wantError(t, r, http.StatusBadRequest, "invalid_argument")
		msg := errorMessage(t, r)
		for _, want := range []string{"decimal", "no sign or exponent", "above " + limit} {
			if !strings.Contains(msg, want) {
				t.Errorf("%s: message %q does not say %q", target, msg, want)
			}
		}
	}
	if r := s.get("/v1/tip?wait=1000000000"); r.code != 200 {
		t.Errorf("wait=1000000000: %s, want 200 (cut to --max-wait)", r)
	}
}

// TestRollbackMediaType: POST /v1/rollback takes application/json only (any
// case, with parameters), as POST /v1/blocks takes JSON or CBOR: anything
// else, a missing type included, is 415 unsupported_media_type, answered
// after the authorization checks and before the body is read.
func TestRollbackMediaType(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackConfig{})
	s.apply(tx("a", nil, out("alice", 1)))
	s.apply()
	before := s.state()
	for _, ctype := range []string{"", "text/plain", "application/x-www-form-urlencoded", "application/cbor", "application/json; charset", "*/*"} {
		r := s.do(call{method: "POST", target: "/v1/rollback", body: []byte(`{"height":1}`), ctype: ctype, auth: true, noSpec: ctype == ""})
		wantError(t, r, http.StatusUnsupportedMediaType, "unsupported_media_type")
		s.unchanged(before, "a rollback sent as "+strconv.Quote(ctype))

		req := httptest.NewRequest("POST", "/v1/rollback", bodyTrap{t})
		req.ContentLength = 12
		req.Header.Set("Authorization", "Bearer "+testToken)
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		rec := httptest.NewRecorder()
		s.h.ServeHTTP(rec, req)
		if rec.Code != http.StatusUnsupportedMediaType {
			t.Errorf("Content-Type %q: %d %s, want 415", ctype, rec.Code, rec.Body)
		}
	}
	// Authorization comes first.
	wantError(t, s.do(call{method: "POST", target: "/v1/rollback", body: []byte(`{"height":1}`), ctype: "text/plain"}),
		http.StatusUnauthorized, "unauthorized")
	if r := s.post("/v1/rollback", []byte(`{"height":1}`), "Application/JSON; charset=utf-8"); r.code != 200 {
		t.Fatalf("rollback as Application/JSON; charset=utf-8: %s", r)
	}
}

// TestReplicaReplication403: a replica has a replication token (it follows
// its writer with it) but serves no change log: its 403 says so, and does
// not claim that no token is configured. A writer without a token says
// that.
func TestReplicaReplication403(t *testing.T) {
	t.Parallel()
	replica := newStack(t, stackConfig{noToken: true, api: api.Options{ReadOnly: true}})
	writer := newStack(t, stackConfig{})
	for _, target := range []string{"/v1/replication/changes?after=0", "/v1/replication/checkpoint"} {
		r := replica.get(target, "Authorization", "Bearer "+replToken)
		wantError(t, r, http.StatusForbidden, "replication_disabled")
		if msg := errorMessage(t, r); !strings.Contains(msg, "replica") || strings.Contains(msg, "no replication token") {
			t.Errorf("a replica's %s: %q, want a message that says it is a replica", target, msg)
		}
		r = writer.get(target, "Authorization", "Bearer "+replToken)
		wantError(t, r, http.StatusForbidden, "replication_disabled")
		if msg := errorMessage(t, r); !strings.Contains(msg, "no replication token") {
			t.Errorf("a writer without a replication token, %s: %q", target, msg)
		}
	}
	r := replica.post("/v1/blocks", chain.AppendBlockJSON(nil, replica.next()), "application/json")
	wantError(t, r, http.StatusForbidden, "read_only")
	if msg := errorMessage(t, r); !strings.Contains(msg, "replica") {
		t.Errorf("a replica's write: %q", msg)
	}
}

// TestTrailingSlash: a path with a trailing slash is no endpoint: 404 in the
// JSON shape, for every method, instead of a redirect with an HTML body.
// The paths that are endpoints answer as before, and an address may still
// end in an escaped slash.
func TestTrailingSlash(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackConfig{})
	s.apply(tx("a", nil, out("alice", 1), out("a/b/", 2)))
	for _, c := range []call{
		{method: "GET", target: "/v1/tip/"},
		{method: "GET", target: "/healthz/"},
		{method: "GET", target: "/v1/addresses/alice/balance/"},
		{method: "GET", target: "/v1/addresses/alice/utxos/?limit=1"},
		{method: "POST", target: "/v1/blocks/", ctype: "application/json", body: []byte(`{}`), auth: true},
		{method: "POST", target: "/v1/rollback/", ctype: "application/json", body: []byte(`{"height":0}`), auth: true},
		{method: "POST", target: "/v1/utxos/lookup/", ctype: "application/json", body: []byte(`{}`)},
	} {
		c.noSpec = true
		r := s.do(c)
		wantError(t, r, http.StatusNotFound, "not_found")
		if r.hdr.Get("Location") != "" || !strings.Contains(errorMessage(t, r), "slash") {
			t.Errorf("%s %s: %s (Location %q)", c.method, c.target, r, r.hdr.Get("Location"))
		}
	}
	for _, target := range []string{"/v1/tip", "/healthz", "/v1/addresses/alice/balance", "/v1/addresses/a%2Fb%2F/balance"} {
		if r := s.get(target); r.code != 200 {
			t.Errorf("GET %s: %s", target, r)
		}
	}
}

// TestSlowBody: a request body that does not arrive within BodyTimeout is
// answered 408 request_timeout in the JSON shape, the connection is closed,
// and nothing changes. Through a real server: the deadline is the
// connection's.
func TestSlowBody(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackConfig{api: api.Options{BodyTimeout: 100 * time.Millisecond}})
	s.apply(tx("a", nil, out("alice", 1)))
	s.apply()
	before := s.state()
	srv := httptest.NewServer(s.h)
	t.Cleanup(srv.Close)
	for _, target := range []string{"/v1/rollback", "/v1/blocks", "/v1/utxos/lookup"} {
		conn := dial(t, srv)
		// 100 bytes announced, 11 sent, then nothing.
		fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n"+
			"Content-Length: 100\r\n\r\n{\"height\":1", target, testToken)
		res, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("%s: %v", target, err)
		}
		body, _ := io.ReadAll(res.Body)
		r := &response{code: res.StatusCode, hdr: res.Header, body: body}
		checkInvariants(t, call{method: "POST", target: target}, r)
		wantError(t, r, http.StatusRequestTimeout, "request_timeout")
		if !res.Close {
			t.Errorf("%s: 408 without Connection: close", target)
		}
		if msg := errorMessage(t, r); !strings.Contains(msg, "100ms") {
			t.Errorf("%s: message %q does not give the timeout", target, msg)
		}
		s.unchanged(before, "a body that never came")
	}
}

// TestAnswersNetHTTPGivesItself pins down what docs/api.md says the service
// cannot answer in its JSON shape: requests that net/http refuses before
// any handler runs get its own plain-text answers.
func TestAnswersNetHTTPGivesItself(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackConfig{})
	srv := httptest.NewUnstartedServer(s.h)
	srv.Config.MaxHeaderBytes = 4 << 10
	srv.Start()
	t.Cleanup(srv.Close)
	for _, c := range []struct {
		name, request string
		status        int
	}{
		{"a bad escape in the path", "GET /v1/addresses/%zz/balance HTTP/1.1\r\nHost: x\r\n\r\n", 400},
		{"no Host", "GET /v1/tip HTTP/1.1\r\n\r\n", 400},
		{"a malformed header line", "GET /v1/tip HTTP/1.1\r\nHost: x\r\nno colon\r\n\r\n", 400},
		{"headers over MaxHeaderBytes", "GET /v1/tip HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 16<<10) + "\r\n\r\n", 431},
		{"an unknown Transfer-Encoding", "POST /v1/rollback HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 501},
		{"an unknown Expect", "GET /v1/tip HTTP/1.1\r\nHost: x\r\nExpect: tea\r\n\r\n", 417},
	} {
		conn := dial(t, srv)
		go func() { _, _ = io.WriteString(conn, c.request) }()
		res, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if ct := res.Header.Get("Content-Type"); res.StatusCode != c.status || ct != "" && !strings.HasPrefix(ct, "text/plain") {
			t.Errorf("%s: %d %q, want net/http's own %d (update docs/api.md if this changed)",
				c.name, res.StatusCode, res.Header.Get("Content-Type"), c.status)
		}
	}
}

// dial connects to srv, with a deadline that only a server that never
// answers reaches. The connection is closed before srv (cleanups run last
// first): a test that fails while the server waits for the rest of a body
// does not hold srv.Close forever.
func dial(t *testing.T, srv *httptest.Server) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	return conn
}

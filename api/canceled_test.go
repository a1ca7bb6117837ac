package api_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/utxo-cache/utxo-cache/api"
	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/query"
)

// logBuffer collects log lines; safe for concurrent use.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// waitingReader is a read side whose Balance waits for its context first, as
// a read that waits for a state (min_seq) does, and can be made to fail with
// a context.Canceled that is not the request's.
type waitingReader struct {
	api.Reader
	rogue atomic.Bool
}

func (w *waitingReader) Balance(ctx context.Context, address string) (query.Answer, error) {
	if w.rogue.Load() {
		return query.Answer{}, context.Canceled
	}
	if err := ctx.Err(); err != nil {
		return query.Answer{}, err
	}
	return w.Reader.Balance(ctx, address)
}

// TestClientClosedRequest: a request whose client went away (its context
// canceled) answers 499 client_closed_request, not 500 internal; it is
// logged below Error (Info for a write, Debug for a read) and counted under
// code 499, not as a 5xx. The abandoned block is not applied here (the
// writer checks the context before it starts), and re-posting it settles
// the outcome either way.
func TestClientClosedRequest(t *testing.T) {
	t.Parallel()
	var logs logBuffer
	reg := prometheus.NewRegistry()
	var wr *waitingReader
	s := newStack(t, stackConfig{
		api: api.Options{
			Logger:   slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
			Registry: reg, Gatherer: reg,
		},
		wrap: func(r api.Reader) api.Reader { wr = &waitingReader{Reader: r}; return wr },
	})
	s.apply(tx("a", nil, out("alice", 1)))
	before := s.state()

	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	serve := func(c call) *httptest.ResponseRecorder {
		t.Helper()
		rec := httptest.NewRecorder()
		s.h.ServeHTTP(rec, c.request().WithContext(canceled))
		return rec
	}
	b := s.next(tx("b", spends(op("a", 0)), out("bob", 1)))
	for _, c := range []call{
		{method: "POST", target: "/v1/blocks", body: chain.AppendBlockJSON(nil, b), ctype: "application/json", auth: true},
		{method: "POST", target: "/v1/rollback", body: []byte(`{"height":0}`), ctype: "application/json", auth: true},
		{method: "GET", target: "/v1/addresses/alice/balance"},
	} {
		rec := serve(c)
		r := &response{code: rec.Code, hdr: rec.Result().Header, body: rec.Body.Bytes()}
		wantError(t, r, 499, "client_closed_request")
		s.unchanged(before, c.method+" "+c.target+" with a canceled context")
	}
	out := logs.String()
	if strings.Contains(out, "level=ERROR") || strings.Contains(out, "context canceled") {
		t.Errorf("an abandoned request was logged as an error:\n%s", out)
	}
	for _, want := range []string{
		`level=INFO msg="client closed the request" method=POST path=/v1/blocks`,
		`level=INFO msg="client closed the request" method=POST path=/v1/rollback`,
		`level=DEBUG msg="client closed the request" method=GET path=/v1/addresses/:address/balance`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	codes := map[string]uint64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "utxo_cache_http_request_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "code" {
					codes[l.GetValue()] += m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	if codes["499"] != 3 {
		t.Errorf("requests counted by code %v, want three under 499", codes)
	}
	for code := range codes {
		if strings.HasPrefix(code, "5") {
			t.Errorf("requests counted under %s: %v", code, codes)
		}
	}

	// Re-posting the block settles it: applied now (or 200 applied:false
	// had the abandoned request gone through).
	wantApplied(t, s.postBlock(b), true, b)

	// A context.Canceled that is not the request's own is a server fault.
	wr.rogue.Store(true)
	r := s.do(call{method: "GET", target: "/v1/addresses/alice/balance", allow5xx: true, noSpec: true})
	wantError(t, r, http.StatusInternalServerError, "internal")
	if !strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("an internal context.Canceled was not logged as an error:\n%s", logs.String())
	}
}

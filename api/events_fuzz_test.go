package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzEventsRequest: any query string and POST body to /v1/events answers
// a client error or a stream (a canceled request's stream ends after its
// first line), never a 5xx, and never panics.
func FuzzEventsRequest(f *testing.F) {
	s := newStack(f, stackConfig{events: true, noSpec: true})
	s.apply(tx("a", nil, out("alice", 1)))
	f.Add("address=alice", `{"keys":[{"address":"alice"}]}`)
	f.Add("address=alice&after_seq=1&pending=false", `{"keys":[{"policy":"01"}],"pending":false}`)
	f.Add("asset=zz&address=", `{"keys":[{}]}`)
	f.Add("after_seq=-1", `{"keys":[{"address":"a","address":"b"}]}`)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f.Fuzz(func(t *testing.T, query, body string) {
		for _, method := range []string{http.MethodGet, http.MethodPost} {
			req, err := http.NewRequestWithContext(ctx, method, "http://x/v1/events?"+query, strings.NewReader(body))
			if err != nil {
				continue // not a request a client can send
			}
			req.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			s.h.ServeHTTP(rec, req)
			switch rec.Code {
			case 200, 400, 404, 410, 413, 501:
			default:
				t.Fatalf("%s %q %q: %d %s", method, query, body, rec.Code, rec.Body)
			}
		}
	})
}

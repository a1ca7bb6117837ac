package bare

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestBareHandler(t *testing.T) {
	page := []byte(`{"tip":{"height":1,"hash":"00"},"address":"a","utxos":[],"next_cursor":null}`)
	lookup := []byte(`{"results":[]}`)
	h := NewHandler(map[string][]byte{
		"GET /v1/addresses/:address/utxos": page,
		"POST /v1/utxos/lookup":            lookup,
	})
	for _, tc := range []struct {
		method, path, inm, body string
		status                  int
		want                    []byte
	}{
		{"GET", "/v1/addresses/bc1qxyz/utxos?limit=100&cursor=abc", "", "", 200, page},
		{"GET", "/v1/addresses/a%2Fb/utxos", "", "", 200, page},
		{"GET", "/v1/addresses/a/utxos", etag, "", 304, nil},
		{"GET", "/v1/addresses/a/utxos", `"other", ` + etag, "", 304, nil},
		{"GET", "/v1/addresses/a/utxos", `W/"other"`, "", 200, page},
		{"POST", "/v1/utxos/lookup", etag, `{"outpoints":[]}`, 200, lookup}, // no ETag on POST
		{"GET", "/v1/tip", "", "", 404, nil},
	} {
		req := httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body))
		if tc.inm != "" {
			req.Header.Set("If-None-Match", tc.inm)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		got, _ := io.ReadAll(rec.Body)
		if rec.Code != tc.status || (tc.want != nil && string(got) != string(tc.want)) {
			t.Errorf("%s %s (If-None-Match %q): %d %q, want %d %q", tc.method, tc.path, tc.inm, rec.Code, got, tc.status, tc.want)
		}
		if tc.status == http.StatusOK {
			if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("%s %s: Content-Type %q", tc.method, tc.path, ct)
			}
			for _, name := range []string{"X-Commit-Seq", "X-Tip-Height", "X-Tip-Hash"} {
				if rec.Header().Get(name) == "" {
					t.Errorf("%s %s: no %s: the ceiling sends the headers the service sends", tc.method, tc.path, name)
				}
			}
			if tc.method == "GET" && rec.Header().Get("ETag") != etag {
				t.Errorf("%s %s: ETag %q", tc.method, tc.path, rec.Header().Get("ETag"))
			}
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("a key without a method did not panic")
		}
	}()
	NewHandler(map[string][]byte{"/v1/tip": nil})
}

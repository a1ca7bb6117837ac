package bare

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// echoReads answers each read with its name and the parameters it was
// given, so that the test sees what the router passed.
type echoReads struct{}

func (echoReads) Balance(_ context.Context, address string) (int, []byte) {
	return http.StatusOK, []byte("balance " + address)
}

func (echoReads) Page(_ context.Context, address, limit, order, cursor string) (int, []byte) {
	return http.StatusOK, []byte(strings.Join([]string{"page", address, limit, order, cursor}, " "))
}

func (echoReads) Outpoint(_ context.Context, txHash, index string) (int, []byte) {
	if index == "9" {
		return http.StatusNotFound, []byte("none")
	}
	return http.StatusOK, []byte("outpoint " + txHash + " " + index)
}

func TestReadsHandler(t *testing.T) {
	h := NewReadsHandler(echoReads{})
	for _, tc := range []struct {
		path   string
		status int
		want   string
	}{
		{"/v1/addresses/bc1qxyz/balance", 200, "balance bc1qxyz"},
		{"/v1/addresses/a%2Fb/balance", 200, "balance a/b"}, // the service's path unescaping
		{"/v1/addresses/a/utxos?limit=100&order=desc&cursor=1.2.3", 200, "page a 100 desc 1.2.3"},
		{"/v1/addresses/a/utxos", 200, "page a   "},
		{"/v1/utxos/ab/1", 200, "outpoint ab 1"},
		{"/v1/utxos/ab/9", 404, "none"},
		{"/v1/tip", 404, ""},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", tc.path, nil))
		got, _ := io.ReadAll(rec.Body)
		if rec.Code != tc.status || string(got) != tc.want {
			t.Errorf("GET %s: %d %q, want %d %q", tc.path, rec.Code, got, tc.status, tc.want)
		}
		if tc.want != "" && rec.Header().Get("Content-Type") != "application/json" {
			t.Errorf("GET %s: Content-Type %q", tc.path, rec.Header().Get("Content-Type"))
		}
	}
}

package api_test

import (
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/utxo-cache/utxo-cache/api"
	"github.com/utxo-cache/utxo-cache/query"
	"github.com/utxo-cache/utxo-cache/replication"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
	"github.com/utxo-cache/utxo-cache/writer"
)

// TestDrainEndsLongPolls: a replica's change-log long poll on an idle
// writer waits (up to 30 s here) until Drain, which answers it at once with
// nothing, and later polls do not wait: http.Server.Shutdown, which waits
// for requests in flight, is not held by replicas.
func TestDrainEndsLongPolls(t *testing.T) {
	store, err := disk.Open(t.TempDir(), disk.Options{CacheBytes: 8 << 20, MemTableBytes: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	reads := query.New(store, query.Options{})
	t.Cleanup(reads.Close)
	w := writer.New(store, writer.Options{})
	t.Cleanup(func() { _ = w.Close() })
	w.Subscribe(reads)
	a := api.New(reads, w, api.Options{
		ReplicationToken: "repl",
		Replication:      replication.NewSource(store, w, filepath.Join(t.TempDir(), "staging"), 2),
	})
	poll := func() <-chan *httptest.ResponseRecorder {
		done := make(chan *httptest.ResponseRecorder, 1)
		go func() {
			req := httptest.NewRequest(http.MethodGet, "/v1/replication/changes?after=0&wait=30", nil)
			req.Header.Set("Authorization", "Bearer repl")
			rec := httptest.NewRecorder()
			a.ServeHTTP(rec, req)
			done <- rec
		}()
		return done
	}
	answered := func(done <-chan *httptest.ResponseRecorder, what string) {
		t.Helper()
		select {
		case rec := <-done:
			if rec.Code != http.StatusOK || rec.Body.Len() != 0 || rec.Header().Get("X-Commit-Seq") != "0" {
				t.Fatalf("%s: %d %q (X-Commit-Seq %q), want 200 and no change", what, rec.Code, rec.Body, rec.Header().Get("X-Commit-Seq"))
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no answer within 10s", what)
		}
	}

	inFlight := poll()
	select {
	case rec := <-inFlight:
		t.Fatalf("a poll with nothing to send answered before its wait: %d %q", rec.Code, rec.Body)
	case <-time.After(50 * time.Millisecond):
	}
	a.Drain()
	answered(inFlight, "the poll in flight at Drain")
	answered(poll(), "a poll after Drain")
	a.Drain() // again: nothing happens
}

package replication

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
	"github.com/utxo-cache/utxo-cache/writer"
)

type emptyStore struct{}

func (emptyStore) Published() disk.State { return disk.State{Tip: chain.Tip{Empty: true}} }

type noApplier struct{}

func (noApplier) Apply(context.Context, *chain.Block) (writer.Result, error) {
	panic("no change expected")
}
func (noApplier) Rollback(context.Context, uint64) (writer.Result, error) {
	panic("no change expected")
}

// TestFirstPollDoesNotWait: a follower's first request does not long-poll,
// so a replica of an idle writer has contact (is ready, knows its lag) as
// soon as the writer answers; later requests wait for changes.
func TestFirstPollDoesNotWait(t *testing.T) {
	var mu sync.Mutex
	var waits []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		waits = append(waits, r.URL.Query().Get("wait"))
		mu.Unlock()
		w.Header().Set("X-Commit-Seq", "0")
		w.WriteHeader(http.StatusOK) // nothing after seq 0
	}))
	defer srv.Close()
	f, err := NewFollower(emptyStore{}, noApplier{}, FollowerOptions{URL: srv.URL, Token: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if st := f.Status(); st.LastContact >= 0 {
		t.Fatalf("contact before any request: %+v", st)
	}
	for range 2 {
		if err := f.poll(context.Background()); err != nil {
			t.Fatal(err)
		}
		if st := f.Status(); st.LastContact < 0 {
			t.Fatalf("no contact after the writer answered: %+v", st)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(waits) != 2 || waits[0] != "0" || waits[1] != "10" {
		t.Fatalf("waits asked %q, want [0 10]", waits)
	}
}

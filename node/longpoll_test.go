package node_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/node"
)

// TestReplicaLongPoll: on a replica, a long-poll (If-None-Match with wait)
// on an address is woken by the changes the replica applies from the
// writer: a block to another address leaves it waiting, and the block to
// its address gets it answered 200 with the replica's new answer and ETag,
// long before its wait ends.
func TestReplicaLongPoll(t *testing.T) {
	defer goleak.VerifyNone(t)
	wn, wsrv := startWriter(t, t.TempDir())
	defer closeNode(t, wn, wsrv)
	rn, err := node.Start(context.Background(), node.Config{
		DataDir: t.TempDir(), ReplicaOf: wsrv.URL, ReplicationToken: "repl", MemoryCacheBytes: 8 << 20,
		MaxWait: 10 * time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	rsrv := httptest.NewServer(rn.Handler())
	defer closeNode(t, rn, rsrv)

	post := func(b *chain.Block) uint64 {
		t.Helper()
		code, body := do(t, wsrv, http.MethodPost, "/v1/blocks", "admin", chain.AppendBlockJSON(nil, b))
		var ans struct{ Seq uint64 }
		if err := json.Unmarshal([]byte(body), &ans); code != http.StatusOK || err != nil {
			t.Fatalf("POST /v1/blocks: %d %s", code, body)
		}
		return ans.Seq
	}
	get := func(target, inm string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, rsrv.URL+target, nil)
		if err != nil {
			t.Fatal(err)
		}
		if inm != "" {
			req.Header.Set("If-None-Match", inm)
		}
		resp, err := rsrv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	const target = "/v1/addresses/watched/balance"

	seq0 := post(block(0))
	// The replica answers 503 until it has bootstrapped and reached seq0.
	first := get(target+"?wait=60&min_seq="+strconv.FormatUint(seq0, 10), "")
	for deadline := time.Now().Add(time.Minute); first.StatusCode == http.StatusServiceUnavailable && time.Now().Before(deadline); {
		first.Body.Close()
		first = get(target+"?wait=60&min_seq="+strconv.FormatUint(seq0, 10), "")
	}
	first.Body.Close()
	etag := first.Header.Get("ETag")
	if first.StatusCode != http.StatusOK || etag == "" {
		t.Fatalf("GET %s on the replica: %d %v", target, first.StatusCode, first.Header)
	}

	done := make(chan *http.Response, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodGet, rsrv.URL+target+"?wait=300", nil)
		req.Header.Set("If-None-Match", etag)
		resp, err := rsrv.Client().Do(req)
		if err != nil {
			resp = &http.Response{StatusCode: -1, Status: err.Error()}
		}
		done <- resp
	}()

	post(block(1)) // to "addr": the watched answer is unchanged
	b2 := block(2)
	b2.Txs[0].Outputs[0].Address = "watched"
	seq2 := post(b2)

	var r *http.Response
	select {
	case r = <-done:
	case <-time.After(4 * time.Minute):
		t.Fatal("the long-poll on the replica did not answer")
	}
	if r.Body != nil {
		defer r.Body.Close()
	}
	if r.StatusCode != http.StatusOK {
		t.Fatalf("long-poll on the replica: %d %s, want 200", r.StatusCode, r.Status)
	}
	now := get(target+"?min_seq="+strconv.FormatUint(seq2, 10)+"&wait=60", "")
	now.Body.Close()
	if got := r.Header.Get("ETag"); got == etag || got != now.Header.Get("ETag") {
		t.Fatalf("long-poll answered ETag %q; before %q, at seq %d %q", got, etag, seq2, now.Header.Get("ETag"))
	}
	if s := r.Header.Get("X-Commit-Seq"); s != strconv.FormatUint(seq2, 10) {
		t.Fatalf("long-poll answered at seq %s, want %d (the block to the watched address)", s, seq2)
	}
}

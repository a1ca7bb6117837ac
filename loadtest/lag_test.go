package loadtest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// fakeReplica answers GET /v1/tip?min_seq=S&wait=W as a replica does: at
// once when it has published S, else when it does within W, else 503
// behind. fail makes it answer 500 for min_seq fail.
type fakeReplica struct {
	mu        sync.Mutex
	seq       uint64
	published chan struct{} // closed and replaced on each publish
	fail      uint64
}

func newFakeReplica() *fakeReplica { return &fakeReplica{published: make(chan struct{})} }

func (f *fakeReplica) publish(seq uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seq = seq
	close(f.published)
	f.published = make(chan struct{})
}

func (f *fakeReplica) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	minSeq, _ := strconv.ParseUint(r.URL.Query().Get("min_seq"), 10, 64)
	secs, _ := strconv.ParseFloat(r.URL.Query().Get("wait"), 64)
	if minSeq == f.fail {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	deadline := time.NewTimer(time.Duration(secs * float64(time.Second)))
	defer deadline.Stop()
	for {
		f.mu.Lock()
		seq, ch := f.seq, f.published
		f.mu.Unlock()
		if seq >= minSeq {
			w.Header().Set("X-Commit-Seq", strconv.FormatUint(seq, 10))
			_, _ = w.Write([]byte(`{}`))
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":{"code":"behind","message":"x"}}`))
			return
		case <-r.Context().Done():
			return
		}
	}
}

// TestLagObserver: a write is observed until the replica publishes its seq
// (through 503s when that takes longer than one wait), its lag counts from
// the acknowledgement, a write never published is counted as not reached,
// an error status is reported, and finish waits for every observation.
func TestLagObserver(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	fr := newFakeReplica()
	fr.fail = 9
	srv := httptest.NewServer(fr)
	defer srv.Close()
	client := newClient(8, 5*time.Second)
	defer client.CloseIdleConnections()
	o := newLagObserver(client, srv.URL)
	o.wait, o.timeout = 20*time.Millisecond, 3*time.Second
	ctx := context.Background()

	fr.publish(1)
	o.observe(ctx, 1, time.Now()) // already there
	ack := time.Now()
	o.observe(ctx, 3, ack) // published after several waits ran out
	o.observe(ctx, 9, time.Now())
	const delay = 100 * time.Millisecond
	time.AfterFunc(delay, func() { fr.publish(3) })
	short := newLagObserver(client, srv.URL)
	short.wait, short.timeout = 10*time.Millisecond, 50*time.Millisecond
	short.observe(ctx, 4, time.Now()) // never published
	var nilObserver *lagObserver
	nilObserver.observe(ctx, 5, time.Now())

	res := o.finish()
	if res.Writes != 3 || res.Lag.Count != 2 || res.NotReached != 0 || res.Unobserved != 0 || len(res.Errors) != 1 {
		t.Fatalf("result %+v", res)
	}
	// The lag of seq 3 counts from its acknowledgement: at least the delay
	// before its publication.
	if res.Lag.Max < float64(delay.Milliseconds()) {
		t.Errorf("max lag %.2f ms, below the %s the replica took to publish", res.Lag.Max, delay)
	}
	if sres := short.finish(); sres.Writes != 1 || sres.NotReached != 1 || sres.Lag.Count != 0 || len(sres.Errors) != 0 {
		t.Errorf("never published: %+v", sres)
	}
	if res.Replica != srv.URL {
		t.Errorf("replica %q", res.Replica)
	}
}

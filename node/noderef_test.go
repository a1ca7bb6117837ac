package node

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestNodeRefRetire: a node's ref is retired when the replica swaps in a new
// store and again when the old node is closed; the second retire returns at
// once, and a retire waits for the request in flight.
func TestNodeRefRetire(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	ref := newNodeRef(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		close(entered)
		<-release
	}))
	var sw switchHandler
	sw.cur.Store(ref)
	served := make(chan struct{})
	go func() {
		defer close(served)
		sw.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/v1/tip", nil))
	}()
	<-entered
	sw.cur.Store(newNodeRef(http.NotFoundHandler()))
	retired := make(chan struct{})
	go func() { ref.retire(); close(retired) }()
	select {
	case <-retired:
		t.Fatal("retire returned while a request was in flight")
	case <-time.After(20 * time.Millisecond):
	}
	close(release)
	<-served
	<-retired
	ref.retire() // closeNode retires it again
	if ref.acquire() {
		t.Fatal("a retired ref took a request")
	}
}

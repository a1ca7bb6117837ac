package events

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"testing"

	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

// inUse is the heap and goroutine stack memory in use after a collection.
func inUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse + ms.StackInuse
}

// TestIdleStreamMemory measures the memory an idle stream costs: N streams
// of 10 keys each, live and waiting, over real HTTP connections. It reports
// the cost per stream of the hub's part (the stream, its keys and its
// goroutine, running as the API runs it) and of the whole exchange
// (server and client side of the connection too, all in this process), and
// fails if the hub's part exceeds 16 KiB.
func TestIdleStreamMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 1000 connections")
	}
	const n = 1000
	node := newTestNode(t, disk.Options{}, Options{MaxStreams: n})
	keys := func(i int) []*Key {
		ks := make([]*Key, 10)
		for j := range ks {
			a := []byte{'a', byte('0' + i%10), byte('0' + i/10%10), byte('0' + i/100%10), byte('0' + j)}
			ks[j] = NewKey(disk.DimAddress, a, "address", string(a))
		}
		return ks
	}

	// The hub's part: streams run by goroutines writing to a sink.
	ctx, cancel := context.WithCancel(context.Background())
	before := inUse()
	done := make(chan struct{}, n)
	for i := range n {
		s, err := node.hub.Subscribe(keys(i), 0, false)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			_ = s.Run(ctx, discard{}, func() error { return nil })
			s.Close()
			done <- struct{}{}
		}()
		<-s.joined
	}
	hubPer := (int64(inUse()) - int64(before)) / n
	cancel()
	for range n {
		<-done
	}

	// The whole exchange over HTTP.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i, _ := strconv.Atoi(r.URL.Query().Get("i"))
		s, err := node.hub.Subscribe(keys(i), 0, false)
		if err != nil {
			http.Error(w, err.Error(), 503)
			return
		}
		defer s.Close()
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		_ = s.Run(r.Context(), w, rc.Flush)
	}))
	defer func() { srv.CloseClientConnections(); srv.Close() }()
	tr := &http.Transport{MaxIdleConnsPerHost: n, MaxConnsPerHost: 0}
	client := &http.Client{Transport: tr}
	before = inUse()
	var bodies []*http.Response
	for i := range n {
		resp, err := client.Get(srv.URL + "/?i=" + strconv.Itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := bufio.NewReaderSize(resp.Body, 16).ReadString('\n'); err != nil {
			t.Fatal(err)
		}
		bodies = append(bodies, resp)
	}
	wholePer := (int64(inUse()) - int64(before)) / n
	for _, b := range bodies {
		b.Body.Close()
	}
	tr.CloseIdleConnections()
	srv.CloseClientConnections()
	t.Logf("memory per idle stream of 10 keys: %d bytes in the hub (stream, keys, goroutine); %d bytes for the whole HTTP exchange, client side included", hubPer, wholePer)
	if hubPer > 16<<10 {
		t.Fatalf("an idle stream costs %d bytes in the hub, over 16 KiB", hubPer)
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

package events

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/changeset"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

// publishTimes records when each seq was published (the writer's
// AfterPublish, on its goroutine, before the change is acknowledged).
type publishTimes struct {
	mu sync.Mutex
	at map[uint64]time.Time
}

func (p *publishTimes) Changed(*changeset.Set) {}
func (p *publishTimes) AfterPublish(cs *changeset.Set) {
	p.mu.Lock()
	p.at[cs.Seq] = time.Now()
	p.mu.Unlock()
}

// TestDeliveryLatency measures, with 1,000 streams of 10 addresses each
// (10,000 addresses) over HTTP, the time from a block's publish to its
// event read by the client: each block pays one address of every stream.
// It reports the p50, p99 and maximum; it asserts only that every event
// arrives (the figure depends on the machine).
func TestDeliveryLatency(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 1000 connections")
	}
	const streams, blocks = 1000, 30
	n := newTestNode(t, disk.Options{}, Options{MaxStreams: streams})
	pt := &publishTimes{at: map[uint64]time.Time{}}
	n.w.Subscribe(pt)
	joined := make(chan chan struct{}, streams)
	addr := func(stream, j int) string { return "s" + strconv.Itoa(stream) + "k" + strconv.Itoa(j) }
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i, _ := strconv.Atoi(r.URL.Query().Get("i"))
		keys := make([]*Key, 10)
		for j := range keys {
			keys[j] = NewKey(disk.DimAddress, []byte(addr(i, j)), "address", addr(i, j))
		}
		s, err := n.hub.Subscribe(keys, 0, false)
		if err != nil {
			http.Error(w, err.Error(), 503)
			return
		}
		defer s.Close()
		joined <- s.joined
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		_ = s.Run(r.Context(), w, rc.Flush)
	}))
	defer func() { srv.CloseClientConnections(); srv.Close() }()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: streams}}

	type arrival struct {
		seq uint64
		at  time.Time
	}
	arrivals := make(chan arrival, streams*blocks)
	ready := make(chan struct{}, streams)
	errs := make(chan error, streams)
	for i := range streams {
		go func() {
			resp, err := client.Get(srv.URL + "/?i=" + strconv.Itoa(i))
			if err != nil {
				errs <- err
				return
			}
			defer resp.Body.Close()
			br := bufio.NewReader(resp.Body)
			ready <- struct{}{}
			got := 0
			for got < blocks {
				line, err := br.ReadString('\n')
				if err != nil {
					errs <- err
					return
				}
				if strings.HasPrefix(line, "id: ") {
					seq, _ := strconv.ParseUint(strings.TrimSpace(line[4:]), 10, 64)
					arrivals <- arrival{seq, time.Now()}
					got++
				}
			}
			errs <- nil
		}()
	}
	for range streams {
		<-ready
	}
	// Wait until every stream is live (joined the dispatcher).
	for range streams {
		<-<-joined
	}
	ctx := context.Background()
	tick := time.NewTicker(100 * time.Millisecond) // a 10 blocks/s feed
	defer tick.Stop()
	for h := uint64(0); h < blocks; h++ {
		<-tick.C
		b := payBlock(h, "")
		b.Txs[0].Outputs = b.Txs[0].Outputs[:0]
		for i := range streams {
			b.Txs[0].Outputs = append(b.Txs[0].Outputs, chainOutput(addr(i, int(h)%10), 1))
		}
		if _, err := n.w.Apply(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	for range streams {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	close(arrivals)
	var lat []time.Duration
	for a := range arrivals {
		pt.mu.Lock()
		at := pt.at[a.seq]
		pt.mu.Unlock()
		lat = append(lat, a.at.Sub(at))
	}
	slices.Sort(lat)
	if len(lat) != streams*blocks {
		t.Fatalf("%d events, want %d", len(lat), streams*blocks)
	}
	t.Logf("%d streams × 10 addresses, %d blocks at 10/s, each paying one address of every stream: publish → event read p50 %s, p99 %s, max %s",
		streams, blocks, lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1])
}

func chainOutput(address string, value uint64) chain.Output {
	return chain.Output{Address: address, Value: value}
}

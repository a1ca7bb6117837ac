package node_test

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/utxo-cache/utxo-cache/node"
)

// TestEventDeliveryCounted: every event a live stream writes is counted in
// utxo_cache_event_delivery_seconds, which needs the node to know when its
// change was published before the hub can deliver it. The stream resumes
// from a seq the node has not reached, so it is live from its start (it
// reads nothing from the log, whose events the histogram does not count):
// each of the later blocks gives it exactly one live event.
func TestEventDeliveryCounted(t *testing.T) {
	ctx := context.Background()
	wn, err := node.Start(ctx, writerConfig(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(wn.Handler())
	defer func() { srv.CloseClientConnections(); srv.Close(); _ = wn.Close(ctx) }()
	const skipped, blocks = 5, 200
	req, err := http.NewRequest(http.MethodGet, srv.URL+"/v1/events?address=addr", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Last-Event-ID", strconv.Itoa(skipped))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/events: %d", resp.StatusCode)
	}
	for h := range uint64(blocks) {
		if _, err := wn.Writer().Apply(ctx, block(h)); err != nil {
			t.Fatal(err)
		}
	}
	want := skipped + 1
	if err := readEvents(bufio.NewReader(resp.Body), func(ev sseEvent) bool {
		if ev.id != strconv.Itoa(want) {
			t.Fatalf("event id %q, want %d", ev.id, want)
		}
		want++
		return want <= blocks
	}); err != nil {
		t.Fatal(err)
	}
	// The stream counts an event once it has written it: the client may
	// read it a moment before.
	line := "utxo_cache_event_delivery_seconds_count " + strconv.Itoa(blocks-skipped) + "\n"
	waitFor(t, "the delivery histogram to count every event", func() bool {
		_, metrics := do(t, srv, http.MethodGet, "/metrics", "", nil)
		return strings.Contains(metrics, line)
	})
}

package node_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os/exec"
	"testing"

	"github.com/utxo-cache/utxo-cache/node"
)

// nodeEvents runs testdata/sse_client.mjs (Node's own fetch stream reader,
// parsing as a browser's EventSource does) against url for count events.
func nodeEvents(t *testing.T, url string, count int, lastID ...string) []map[string]string {
	t.Helper()
	bin, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("the wire-format test needs Node.js 20 or later: install it (apt-get install nodejs, or https://nodejs.org/en/download): %v", err)
	}
	args := append([]string{"testdata/sse_client.mjs", url, fmt.Sprint(count)}, lastID...)
	var stderr bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node sse_client.mjs: %v: %s", err, stderr.String())
	}
	var evs []map[string]string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var ev map[string]string
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("client output %q: %v", sc.Text(), err)
		}
		evs = append(evs, ev)
	}
	return evs
}

// TestEventsWireFormatNode: a stream read by Node's fetch and parsed as an
// EventSource parses it gives the events of the chain: their ids, names
// and JSON data, and a Last-Event-ID resume gives exactly the later ones.
func TestEventsWireFormatNode(t *testing.T) {
	ctx := context.Background()
	wn, err := node.Start(ctx, writerConfig(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(wn.Handler())
	defer func() { srv.CloseClientConnections(); srv.Close(); _ = wn.Close(ctx) }()
	for h := range uint64(3) {
		if _, err := wn.Writer().Apply(ctx, block(h)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := wn.Writer().Rollback(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := wn.Writer().Apply(ctx, block(2)); err != nil {
		t.Fatal(err)
	}
	out := func(h uint64) string { return fmt.Sprintf(`{"tx_hash":"%s","index":0}`, block(h).Txs[0].Hash) }
	utxo := func(h uint64) string {
		return fmt.Sprintf(`{"tx_hash":"%s","index":0,"address":"addr","value":"1","assets":[],"height":%d}`, block(h).Txs[0].Hash, h)
	}
	apply := func(seq, h uint64) map[string]string {
		return map[string]string{"id": fmt.Sprint(seq), "event": "apply", "data": fmt.Sprintf(
			`{"seq":%d,"block":{"height":%d,"hash":"%s"},"keys":[{"key":{"address":"addr"},"created":[%s],"spent":[]}]}`,
			seq, h, block(h).Hash, utxo(h))}
	}
	want := []map[string]string{apply(1, 0), apply(2, 1), apply(3, 2),
		{"id": "4", "event": "rollback", "data": fmt.Sprintf(
			`{"seq":4,"target":{"height":1,"hash":"%s"},"keys":[{"key":{"address":"addr"},"removed":[%s],"restored":[]}]}`,
			block(1).Hash, out(2))},
		apply(5, 2)}
	got := nodeEvents(t, srv.URL+"/v1/events?address=addr&after_seq=0", 5)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("events:\n%v\nwant\n%v", got, want)
	}
	// An EventSource's reconnection: Last-Event-ID wins over after_seq.
	got = nodeEvents(t, srv.URL+"/v1/events?address=addr&after_seq=0", 2, "3")
	if fmt.Sprint(got) != fmt.Sprint(want[3:]) {
		t.Fatalf("resumed after 3:\n%v\nwant\n%v", got, want[3:])
	}
}

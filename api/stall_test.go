package api_test

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/utxo-cache/utxo-cache/api"
	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/query"
	"github.com/utxo-cache/utxo-cache/replication"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
	"github.com/utxo-cache/utxo-cache/writer"
)

// The streamed answers of the replication endpoints against readers that
// stop reading: a real HTTP server (a recorder has no write deadlines), and
// raw TCP clients that send a request, read the answer's head and then
// nothing more. Both sides' socket buffers are a few KiB, so the server's
// writes block after a few KiB of a large answer, as they would after a few
// MiB with the kernel's defaults.

// replServer is a writer serving the replication endpoints over HTTP.
type replServer struct {
	t       *testing.T
	store   *disk.Store
	w       *writer.Writer
	src     *replication.Source
	staging string
	addr    string
	logs    *syncBuffer
	blocks  int
}

// syncBuffer is a log sink safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// smallSendBuffers gives every accepted connection a small send buffer.
type smallSendBuffers struct{ net.Listener }

func (l smallSendBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(8 << 10)
	}
	return c, err
}

func newReplServer(t *testing.T, stall time.Duration, src replication.SourceOptions) *replServer {
	t.Helper()
	store, err := disk.Open(t.TempDir(), disk.Options{CacheBytes: 64 << 20, MemTableBytes: 32 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	reads := query.New(store, query.Options{})
	t.Cleanup(reads.Close)
	w := writer.New(store, writer.Options{})
	t.Cleanup(func() { _ = w.Close() })
	w.Subscribe(reads)
	s := &replServer{t: t, store: store, w: w, logs: &syncBuffer{}}
	s.staging = filepath.Join(t.TempDir(), "staging")
	src.Staging = s.staging
	s.src = replication.NewSourceWith(store, w, src)
	a := api.New(reads, w, api.Options{
		ReplicationToken: replToken,
		Replication:      s.src,
		StallTimeout:     stall,
		Logger:           slog.New(slog.NewTextHandler(s.logs, nil)),
	})
	srv := httptest.NewUnstartedServer(a)
	srv.Listener = smallSendBuffers{srv.Listener}
	srv.Start()
	t.Cleanup(srv.Close)
	s.addr = srv.Listener.Addr().String()
	return s
}

// applyBig applies a block of n outputs, each with a datum of datumBytes:
// a change record of about n×datumBytes.
func (s *replServer) applyBig(n, datumBytes int) {
	s.t.Helper()
	s.blocks++
	outs := make([]chain.Output, n)
	for i := range outs {
		datum := bytes.Repeat([]byte{byte(s.blocks), byte(i)}, datumBytes/2)
		outs[i] = chain.Output{Address: fmt.Sprintf("addr-%d-%d", s.blocks, i), Value: 1, Datum: datum}
	}
	b := &chain.Block{Height: uint64(s.blocks), Hash: hx("big", s.blocks), Time: 1_700_000_000,
		Txs: []chain.Tx{tx(fmt.Sprintf("big-%d", s.blocks), nil, outs...)}}
	if tip := s.store.State().Tip; !tip.Empty {
		b.PrevHash = tip.Hash
	}
	if _, err := s.w.Apply(context.Background(), b); err != nil {
		s.t.Fatalf("apply block %d: %v", b.Height, err)
	}
}

// stall sends GET target with a tiny receive buffer, reads the answer's
// head (so the handler is past its slot and writing), and then reads
// nothing more. It returns the status line.
func (s *replServer) stall(target string) (net.Conn, string) {
	s.t.Helper()
	c, err := net.Dial("tcp", s.addr)
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { _ = c.Close() })
	_ = c.(*net.TCPConn).SetReadBuffer(4 << 10)
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: writer\r\nAuthorization: Bearer %s\r\n\r\n", target, replToken)
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	r := bufio.NewReaderSize(c, 16)
	status, err := r.ReadString('\n')
	for line := status; err == nil && line != "\r\n"; {
		line, err = r.ReadString('\n')
	}
	if err != nil {
		s.t.Fatalf("GET %s: the answer's head: %v", target, err)
	}
	return c, strings.TrimSpace(status)
}

// get is a well-behaved client's request: the whole answer.
func (s *replServer) get(target string) (int, http.Header, []byte) {
	s.t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+s.addr+target, nil)
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+replToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("GET %s: %v", target, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		s.t.Fatalf("GET %s: body: %v", target, err)
	}
	return res.StatusCode, res.Header, body
}

// wantBusy checks a 429 answer: the documented error shape, Retry-After.
func wantBusy(t *testing.T, what string, code int, h http.Header, body []byte) {
	t.Helper()
	var e struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if code != http.StatusTooManyRequests || json.Unmarshal(body, &e) != nil || e.Error.Code != "too_many_requests" ||
		e.Error.Message == "" || h.Get("Retry-After") == "" {
		t.Fatalf("%s: %d %.200q (Retry-After %q), want 429 too_many_requests with Retry-After", what, code, body, h.Get("Retry-After"))
	}
}

// waitFor polls cond until it holds, or fails the test after limit. It
// returns how long it took.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > limit {
			t.Fatalf("%s: not within %s", what, limit)
		}
		time.Sleep(5 * time.Millisecond) // a poll interval, not a condition
	}
	return time.Since(start)
}

func stagedCheckpoints(t *testing.T, staging string) int {
	t.Helper()
	entries, err := os.ReadDir(staging)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return len(entries)
}

// TestStalledCheckpointReadersLoseTheirSlots: two clients that take a
// checkpoint's head and then stop reading hold both checkpoint slots (a
// bootstrap meanwhile is 429) only until the stall timeout: then their
// streams are dropped, logged, their staged files removed, and a new
// checkpoint streams whole.
func TestStalledCheckpointReadersLoseTheirSlots(t *testing.T) {
	const stall = 500 * time.Millisecond
	s := newReplServer(t, stall, replication.SourceOptions{MaxCheckpoints: 2})
	s.applyBig(32, 32<<10) // a checkpoint of about 1 MiB: far beyond the sockets' buffers
	held := time.Now()     // no stream can be dropped before held+stall
	for range 2 {
		if _, status := s.stall("/v1/replication/checkpoint"); status != "HTTP/1.1 200 OK" {
			t.Fatalf("stalled checkpoint: %s, want 200", status)
		}
	}
	staged := stagedCheckpoints(t, s.staging)
	code, h, body := s.get("/v1/replication/checkpoint")
	if time.Since(held) < stall { // else the machine is too slow to see the slots held
		if staged != 2 {
			t.Fatalf("%d checkpoints staged while two stream, want 2", staged)
		}
		wantBusy(t, "a bootstrap while two checkpoint readers stall", code, h, body)
	}

	// The slots come back once the stalled streams are dropped.
	waitFor(t, 20*time.Second, "the stalled checkpoints' staged files removed", func() bool {
		return stagedCheckpoints(t, s.staging) == 0
	})
	heldFor := time.Since(held)
	t.Logf("stall timeout %s: the slots were held %s after the readers stopped", stall, heldFor)
	code, h, body = s.get("/v1/replication/checkpoint")
	if code != http.StatusOK {
		t.Fatalf("checkpoint after the stalled ones: %d %s, want 200", code, body)
	}
	tr := tar.NewReader(bytes.NewReader(body))
	files := 0
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("checkpoint after the stalled ones: not a whole archive: %v", err)
		}
		if files == 0 && hdr.Name != "UTXO-CACHE-CHECKPOINT.json" {
			t.Fatalf("checkpoint's first entry %q, want the manifest", hdr.Name)
		}
		files++
	}
	if h.Get("X-Commit-Seq") != "1" || files < 3 {
		t.Fatalf("checkpoint after the stalled ones: seq %q, %d files", h.Get("X-Commit-Seq"), files)
	}
	if n := strings.Count(s.logs.String(), "checkpoint stream dropped"); n != 2 {
		t.Fatalf("%d drops logged, want 2:\n%s", n, s.logs)
	}
}

// TestStalledChangeReadersLoseTheirSlots: change-log answers are bounded
// like checkpoints: with MaxChangeStreams readers stalled mid-answer, one
// more is 429 too_many_requests (which a replica retries); the stalled ones
// are dropped after the stall timeout and logged, and the next answer is
// exactly the change log's bytes.
func TestStalledChangeReadersLoseTheirSlots(t *testing.T) {
	const stall = 500 * time.Millisecond
	s := newReplServer(t, stall, replication.SourceOptions{MaxChangeStreams: 2})
	s.applyBig(32, 32<<10) // a change of about 1 MiB
	s.applyBig(1, 1<<10)
	held := time.Now() // no answer can be dropped before held+stall
	for range 2 {
		if _, status := s.stall("/v1/replication/changes?after=0"); status != "HTTP/1.1 200 OK" {
			t.Fatalf("stalled change reader: %s, want 200", status)
		}
	}
	code, h, body := s.get("/v1/replication/changes?after=1")
	if time.Since(held) < stall { // else the machine is too slow to see the slots held
		wantBusy(t, "a third change reader", code, h, body)
	}

	want, n, _, _, err := s.src.Changes(0, 4<<20)
	if err != nil || n != 2 {
		t.Fatalf("the change log: %d changes, %v", n, err)
	}
	var got []byte
	waitFor(t, 20*time.Second, "a change-log answer after the stalled ones", func() bool {
		code, h, got = s.get("/v1/replication/changes?after=0")
		return code == http.StatusOK
	})
	t.Logf("stall timeout %s: the slots were held %s after the readers stopped", stall, time.Since(held))
	if !bytes.Equal(got, want) || h.Get("Content-Type") != "application/cbor-seq" || h.Get("X-Commit-Seq") != "2" ||
		h.Get("X-Tip-Height") != "2" {
		t.Fatalf("answer after the stalled ones: %d bytes (%s, seq %q, height %q), want the log's %d bytes",
			len(got), h.Get("Content-Type"), h.Get("X-Commit-Seq"), h.Get("X-Tip-Height"), len(want))
	}
	waitFor(t, 20*time.Second, "both drops logged", func() bool {
		return strings.Count(s.logs.String(), "change-log answer dropped") == 2
	})
}

// TestSlowChangeReadersHeap: a change-log answer is streamed from the
// store, not built in memory, so readers stalled in the middle of a large
// change pin next to nothing each: under 256 KiB of heap per reader (about
// 30 KiB measured: a goroutine, its connection's buffers, an iterator),
// whatever the size of the change, which stays where the store holds it
// (a memory table or a cached block), shared by all. Built whole, the answer
// pinned its size per reader: 4.2 MB each here.
func TestSlowChangeReadersHeap(t *testing.T) {
	if raceEnabled {
		t.Skip("heap figures are meaningless under -race")
	}
	const readers = 8
	s := newReplServer(t, time.Minute, replication.SourceOptions{MaxChangeStreams: readers})
	s.applyBig(64, 64<<10) // a change of about 4 MiB
	record, _, _, _, err := s.src.Changes(0, 4<<20)
	if err != nil {
		t.Fatal(err)
	}
	// One reader first: the costs paid once (the change's block read into
	// Pebble's cache, pools filled) are not the readers'.
	s.stall("/v1/replication/changes?after=0")
	heap := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	for range readers - 1 {
		s.stall("/v1/replication/changes?after=0")
	}
	after := heap()
	grown := int64(after) - int64(before)
	perReader := float64(grown) / (readers - 1)
	t.Logf("%d readers stalled on a %d-byte change: heap %+d bytes in all for %d more readers (%.0f per reader)",
		readers, len(record), grown, readers-1, perReader)
	if perReader > 256<<10 {
		t.Fatalf("each reader stalled on a %d-byte change pins %.0f bytes of heap, want under 256 KiB", len(record), perReader)
	}
	code, h, body := s.get("/v1/replication/changes?after=0")
	wantBusy(t, fmt.Sprintf("a change reader beyond the %d stalled ones", readers), code, h, body)
}

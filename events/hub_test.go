package events

import (
	"bufio"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/query"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
	"github.com/utxo-cache/utxo-cache/writer"
)

// testNode is a store with its writer, reads and hub.
type testNode struct {
	store *disk.Store
	w     *writer.Writer
	reads *query.Server
	hub   *Hub
}

type testSource struct {
	*disk.Store
	*query.Server
}

func (s testSource) Published() query.Published { return s.Server.Published() }

func newTestNode(t *testing.T, dopts disk.Options, hopts Options) *testNode {
	t.Helper()
	store, err := disk.Open(t.TempDir(), dopts)
	if err != nil {
		t.Fatal(err)
	}
	n := &testNode{store: store, reads: query.New(store, query.Options{HotAddresses: -1})}
	n.w = writer.New(store, writer.Options{})
	n.w.Subscribe(n.reads)
	if n.hub, err = New(testSource{store, n.reads}, hopts); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		n.hub.Close()
		_ = n.w.Close()
		n.reads.Close()
		_ = store.Close()
	})
	return n
}

// payBlock is block height paying value to address.
func payBlock(height uint64, address string) *chain.Block {
	h := func(parts ...any) chain.Hash { return sha256.Sum256(fmt.Append(nil, parts...)) }
	b := &chain.Block{Height: height, Hash: h("block", height), Txs: []chain.Tx{{
		Hash: h("tx", height), Outputs: []chain.Output{{Address: address, Value: height + 1}}}}}
	if height > 0 {
		b.PrevHash = h("block", height-1)
	}
	return b
}

// ids reads events from r until one named last (included) or the end, and
// returns the ids and names.
func ids(r io.Reader, last string) (seqs []uint64, names []string, err error) {
	br := bufio.NewReader(r)
	var name string
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return seqs, names, err
		}
		switch {
		case strings.HasPrefix(line, "id: "):
			n, err := strconv.ParseUint(strings.TrimSpace(line[4:]), 10, 64)
			if err != nil {
				return seqs, names, err
			}
			seqs = append(seqs, n)
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimSpace(line[7:])
			names = append(names, name)
		case line == "\n" && name == last:
			return seqs, names, nil
		}
	}
}

// TestSlowConsumerOverflows: a live stream whose client does not read while
// more changes than its queue holds are published is ended with an overflow
// event whose id is the last seq it got; resuming after that id delivers
// every later event, none missing, none twice.
func TestSlowConsumerOverflows(t *testing.T) {
	ctx := context.Background()
	n := newTestNode(t, disk.Options{}, Options{Queue: 3})
	if _, err := n.w.Apply(ctx, payBlock(0, "alice")); err != nil {
		t.Fatal(err)
	}
	s, err := n.hub.Subscribe([]*Key{NewKey(disk.DimAddress, []byte("alice"), "address", "alice")}, 0, true)
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	runErr := make(chan error, 1)
	go func() {
		err := s.Run(ctx, pw, func() error { return nil })
		s.Close()
		pw.CloseWithError(io.EOF)
		runErr <- err
	}()
	br := bufio.NewReader(pr)
	if line, err := br.ReadString('\n'); err != nil || line != ": heartbeat\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	// The catch-up writes seq 1 (block 0) and blocks on the pipe: read it.
	seqs, _, err := ids(br, "apply")
	if err != nil || fmt.Sprint(seqs) != "[1]" {
		t.Fatalf("catch-up: %v %v", seqs, err)
	}
	<-s.joined
	const blocks = 10
	for h := uint64(1); h <= blocks; h++ {
		if _, err := n.w.Apply(ctx, payBlock(h, "alice")); err != nil {
			t.Fatal(err)
		}
	}
	got, names, err := ids(br, "overflow")
	if err != nil {
		t.Fatalf("reading: %v (got %v %v)", err, got, names)
	}
	if err := <-runErr; err != nil {
		t.Fatalf("run: %v", err)
	}
	if names[len(names)-1] != "overflow" || len(got) < 2 {
		t.Fatalf("events %v %v: no overflow", got, names)
	}
	resume := got[len(got)-1]
	for i, seq := range got[:len(got)-1] {
		if seq != uint64(i)+2 {
			t.Fatalf("events before the overflow: %v", got)
		}
	}
	if resume != got[len(got)-2] {
		t.Fatalf("overflow id %d, last event %d", resume, got[len(got)-2])
	}
	// Resume: exactly the seqs after the overflow's id.
	s2, err := n.hub.Subscribe([]*Key{NewKey(disk.DimAddress, []byte("alice"), "address", "alice")}, resume, true)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	pr2, pw2 := io.Pipe()
	cctx, cancel := context.WithCancel(ctx)
	go func() { _ = s2.Run(cctx, pw2, func() error { return nil }); pw2.Close() }()
	consecutiveApplies(t, bufio.NewReader(pr2), resume, blocks+1)
	cancel()
	_, _ = io.Copy(io.Discard, pr2)
}

// consecutiveApplies reads apply events from br until it has those of
// every seq after `after` up to last, and fails t unless they are exactly
// those, in order.
func consecutiveApplies(t *testing.T, br *bufio.Reader, after, last uint64) {
	t.Helper()
	var got []uint64
	for uint64(len(got)) < last-after {
		seqs, _, err := ids(br, "apply")
		if err != nil {
			t.Fatalf("stream after %d: %v (got %v)", after, err, got)
		}
		got = append(got, seqs...)
	}
	for i, seq := range got {
		if seq != after+1+uint64(i) {
			t.Fatalf("stream after %d got %v", after, got)
		}
	}
}

// TestTruncatedResume: a resume point whose next change the log no longer
// keeps is refused with ErrLogTruncated; one the log keeps is taken.
func TestTruncatedResume(t *testing.T) {
	ctx := context.Background()
	n := newTestNode(t, disk.Options{LogRetention: 4}, Options{})
	for h := uint64(0); h < 10; h++ {
		if _, err := n.w.Apply(ctx, payBlock(h, "alice")); err != nil {
			t.Fatal(err)
		}
	}
	k := []*Key{NewKey(disk.DimAddress, []byte("alice"), "address", "alice")}
	if _, err := n.hub.Subscribe(k, 2, true); !errors.Is(err, ErrLogTruncated) {
		t.Fatalf("resume after 2 with the log at 7..10: %v", err)
	}
	s, err := n.hub.Subscribe(k, 6, true)
	if err != nil {
		t.Fatalf("resume after 6: %v", err)
	}
	s.Close()
}

// gatedSource holds the dispatcher's waits until open is closed.
type gatedSource struct {
	testSource
	open chan struct{}
}

func (s gatedSource) WaitFor(ctx context.Context, minSeq, minHeight uint64, maxWait time.Duration) (query.Published, error) {
	select {
	case <-s.open:
	case <-ctx.Done():
		return query.Published{}, ctx.Err()
	}
	return s.testSource.WaitFor(ctx, minSeq, minHeight, maxWait)
}

// TestDispatcherBehindTheLog: when the log prunes changes the dispatcher
// has not read yet (more changes applied than the log keeps while it was
// held), a live stream ends with a log_truncated event at the last seq it
// had every change of, and the hub goes on: a new stream gets the next
// change's event, and resuming from the truncated id is refused.
func TestDispatcherBehindTheLog(t *testing.T) {
	ctx := context.Background()
	store, err := disk.Open(t.TempDir(), disk.Options{LogRetention: 4})
	if err != nil {
		t.Fatal(err)
	}
	reads := query.New(store, query.Options{HotAddresses: -1})
	w := writer.New(store, writer.Options{})
	w.Subscribe(reads)
	src := gatedSource{testSource{store, reads}, make(chan struct{})}
	hub, err := New(src, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { hub.Close(); _ = w.Close(); reads.Close(); _ = store.Close() }()
	k := []*Key{NewKey(disk.DimAddress, []byte("alice"), "address", "alice")}
	s, err := hub.Subscribe(k, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	runErr := make(chan error, 1)
	go func() {
		err := s.Run(ctx, pw, func() error { return nil })
		s.Close()
		pw.CloseWithError(io.EOF)
		runErr <- err
	}()
	br := bufio.NewReader(pr)
	if line, err := br.ReadString('\n'); err != nil || line != ": heartbeat\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	<-s.joined
	for h := uint64(0); h < 10; h++ { // seqs 1..10; the log keeps 7..10
		if _, err := w.Apply(ctx, payBlock(h, "alice")); err != nil {
			t.Fatal(err)
		}
	}
	close(src.open)
	seqs, names, err := ids(br, "log_truncated")
	if err != nil || fmt.Sprint(seqs) != "[0]" || fmt.Sprint(names) != "[log_truncated]" {
		t.Fatalf("the live stream: %v %v %v (run: %v); want one log_truncated event at 0", seqs, names, err, <-runErr)
	}
	if err := <-runErr; err != nil {
		t.Fatalf("run: %v", err)
	}
	if _, err := hub.Subscribe(k, 0, true); !errors.Is(err, ErrLogTruncated) {
		t.Fatalf("resuming after 0: %v, want ErrLogTruncated", err)
	}

	s2, err := hub.Subscribe(k, 0, false)
	if err != nil {
		t.Fatalf("a new stream after the skip: %v", err)
	}
	defer s2.Close()
	pr2, pw2 := io.Pipe()
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _ = s2.Run(cctx, pw2, func() error { return nil }); pw2.Close() }()
	br2 := bufio.NewReader(pr2)
	if line, err := br2.ReadString('\n'); err != nil || line != ": heartbeat\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	<-s2.joined
	if _, err := w.Apply(ctx, payBlock(10, "alice")); err != nil {
		t.Fatal(err)
	}
	if seqs, _, err := ids(br2, "apply"); err != nil || fmt.Sprint(seqs) != "[11]" {
		t.Fatalf("the new stream: %v %v, want the apply event of 11", seqs, err)
	}
	cancel()
	_, _ = io.Copy(io.Discard, pr2)
}

// TestMaxStreams: one stream more than MaxStreams is refused; closing one
// frees its slot.
func TestMaxStreams(t *testing.T) {
	n := newTestNode(t, disk.Options{}, Options{MaxStreams: 2})
	k := []*Key{NewKey(disk.DimAddress, []byte("alice"), "address", "alice")}
	a, err := n.hub.Subscribe(k, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	b, err := n.hub.Subscribe(k, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.hub.Subscribe(k, 0, false); !errors.Is(err, ErrTooManyStreams) {
		t.Fatalf("a third stream: %v", err)
	}
	a.Close()
	a.Close() // twice frees one slot
	c, err := n.hub.Subscribe(k, 0, false)
	if err != nil {
		t.Fatalf("after a close: %v", err)
	}
	if _, err := n.hub.Subscribe(k, 0, false); !errors.Is(err, ErrTooManyStreams) {
		t.Fatalf("a third stream again: %v", err)
	}
	b.Close()
	c.Close()
	if n.hub.Open() != 0 {
		t.Fatalf("%d open", n.hub.Open())
	}
}

// TestHeartbeat: a stream with nothing to send sends a comment line every
// Heartbeat.
func TestHeartbeat(t *testing.T) {
	n := newTestNode(t, disk.Options{}, Options{Heartbeat: 20 * time.Millisecond})
	s, err := n.hub.Subscribe([]*Key{NewKey(disk.DimAddress, []byte("alice"), "address", "alice")}, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _ = s.Run(ctx, pw, func() error { return nil }); pw.Close() }()
	br := bufio.NewReader(pr)
	start := time.Now()
	for i := range 3 {
		line, err := br.ReadString('\n')
		if err != nil || line != ": heartbeat\n" {
			t.Fatalf("line %d: %q %v", i, line, err)
		}
		if blank, err := br.ReadString('\n'); err != nil || blank != "\n" {
			t.Fatalf("after heartbeat %d: %q %v", i, blank, err)
		}
	}
	if d := time.Since(start); d < 40*time.Millisecond {
		t.Fatalf("three heartbeats in %s: not spaced by the 20ms heartbeat", d)
	}
	cancel()
	_, _ = io.Copy(io.Discard, pr)
}

// countingSource counts the views opened through it.
type countingSource struct {
	testSource
	views *atomic.Int64
}

func (s countingSource) PublishedView() (*disk.View, error) {
	s.views.Add(1)
	return s.testSource.PublishedView()
}

// TestIdleHubReadsNoLog: with no stream open, the dispatcher passes the
// published changes without reading the log; streams opened while blocks
// keep coming (live, and resumed from a seq the idle dispatcher passed)
// still get every change after their start, in order, none twice.
func TestIdleHubReadsNoLog(t *testing.T) {
	// A stream that misses an event would wait for it: the deadline turns
	// that into a failure (the stream's Run ends, and its reader with it).
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	store, err := disk.Open(t.TempDir(), disk.Options{})
	if err != nil {
		t.Fatal(err)
	}
	reads := query.New(store, query.Options{HotAddresses: -1})
	w := writer.New(store, writer.Options{})
	w.Subscribe(reads)
	var views atomic.Int64
	hub, err := New(countingSource{testSource{store, reads}, &views}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { hub.Close(); _ = w.Close(); reads.Close(); _ = store.Close() }()

	const idle = 20
	for h := uint64(0); h < idle; h++ {
		if _, err := w.Apply(ctx, payBlock(h, "alice")); err != nil {
			t.Fatal(err)
		}
	}
	// Wait for the dispatcher to pass seq idle (it closes gen as it moves).
	for {
		hub.mu.Lock()
		next, gen, failed := hub.next, hub.gen, hub.failed
		hub.mu.Unlock()
		if failed != nil {
			t.Fatalf("the dispatcher failed: %v", failed)
		}
		if next > idle {
			break
		}
		select {
		case <-gen:
		case <-ctx.Done():
			t.Fatalf("the dispatcher stayed at %d of %d published changes", next-1, idle)
		}
	}
	if n := views.Load(); n != 0 {
		t.Fatalf("the idle dispatcher opened %d views of the log", n)
	}

	// Blocks keep coming while streams open, live and resumed.
	const total = 60
	fed := make(chan error, 1)
	go func() {
		for h := uint64(idle); h < total; h++ {
			if _, err := w.Apply(ctx, payBlock(h, "alice")); err != nil {
				fed <- err
				return
			}
		}
		fed <- nil
	}()
	k := []*Key{NewKey(disk.DimAddress, []byte("alice"), "address", "alice")}
	check := func(after uint64, resume bool) {
		t.Helper()
		s, err := hub.Subscribe(k, after, resume)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		start := s.pos
		pr, pw := io.Pipe()
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go func() { _ = s.Run(cctx, pw, func() error { return nil }); pw.Close() }()
		consecutiveApplies(t, bufio.NewReader(pr), start, total)
		cancel()
		_, _ = io.Copy(io.Discard, pr)
	}
	check(5, true) // from a change the idle dispatcher passed
	check(0, false)
	check(idle/2, true)
	if err := <-fed; err != nil {
		t.Fatal(err)
	}
}

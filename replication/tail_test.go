package replication

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
	"github.com/utxo-cache/utxo-cache/writer"
)

type emptyStore struct{}

func (emptyStore) Published() disk.State { return disk.State{Tip: chain.Tip{Empty: true}} }

type fixedStore struct{ st disk.State }

func (s fixedStore) Published() disk.State { return s.st }

type noApplier struct{}

func (noApplier) Apply(context.Context, *chain.Block) (writer.Result, error) {
	panic("no change expected")
}
func (noApplier) ApplyWallet(context.Context, []chain.WalletOp) (writer.Result, error) {
	panic("no change expected")
}
func (noApplier) Rollback(context.Context, uint64) (writer.Result, error) {
	panic("no change expected")
}
func (noApplier) ApplyBlocks(context.Context, []*chain.Block, uint64) (writer.BatchResult, error) {
	panic("no change expected")
}
func (noApplier) Freeze(context.Context, chain.Freeze) (writer.Result, error) {
	panic("no change expected")
}
func (noApplier) Unfreeze(context.Context, chain.Freeze) (writer.Result, error) {
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
	f, err := NewTail(emptyStore{}, noApplier{}, TailOptions{URL: srv.URL, Token: "t"})
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

// TestNotWritersState: a replica whose own state differs from the writer's
// record of that seq (a store tampered with) stops with an error that says
// so (ErrNotWritersState, with ErrDiverged): the replica must stop serving
// it, not only stop applying.
func TestNotWritersState(t *testing.T) {
	tip := func(h uint64, name string) chain.Tip { return chain.Tip{Height: h, Hash: chain.Hash{name[0]}} }
	b := &chain.Block{Height: 7, Hash: tip(7, "w").Hash, Txs: []chain.Tx{}}
	rec, err := chain.AppendChangeCBOR(nil, &chain.Change{Seq: 3, Kind: chain.ChangeApply, Block: b,
		After: chain.Summary{Tip: tip(7, "w")}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("after") != "2" {
			t.Errorf("asked after %s, want 2 (the record of the replica's own seq 3)", r.URL.Query().Get("after"))
		}
		w.Header().Set("X-Commit-Seq", "3")
		_, _ = w.Write(rec)
	}))
	defer srv.Close()
	f, err := NewTail(fixedStore{disk.State{Seq: 3, Tip: tip(7, "r")}}, noApplier{}, TailOptions{URL: srv.URL, Token: "t"})
	if err != nil {
		t.Fatal(err)
	}
	err = f.Run(context.Background())
	if !errors.Is(err, ErrDiverged) || !errors.Is(err, ErrNotWritersState) {
		t.Fatalf("Run: %v, want ErrDiverged and ErrNotWritersState", err)
	}
	if st := f.Status(); st.Failed == nil {
		t.Fatalf("status after the divergence: %+v", st)
	}
	if f.Verified() {
		t.Fatal("Verified after the replica's own state differed from the writer's")
	}
}

// TestOwnStateVerified: a restarted replica's store is unverified until the
// writer's record of its seq matches it (Verified gates what the node fills
// into shared tiers).
func TestOwnStateVerified(t *testing.T) {
	tip := chain.Tip{Height: 7, Hash: chain.Hash{'w'}}
	rec, err := chain.AppendChangeCBOR(nil, &chain.Change{Seq: 3, Kind: chain.ChangeApply,
		Block: &chain.Block{Height: 7, Hash: tip.Hash, Txs: []chain.Tx{}}, After: chain.Summary{Tip: tip}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Commit-Seq", "3")
		if r.URL.Query().Get("after") == "2" {
			_, _ = w.Write(rec)
		}
	}))
	defer srv.Close()
	f, err := NewTail(fixedStore{disk.State{Seq: 3, Tip: tip}}, noApplier{}, TailOptions{URL: srv.URL, Token: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if f.Verified() {
		t.Fatal("Verified before the writer answered")
	}
	if err := f.poll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !f.Verified() {
		t.Fatal("not Verified after the writer's record matched the replica's state")
	}
}

// TestWriterBusyIsNotAnOutage: a writer that answers 429 (it serves its most
// change streams) is busy, not unreachable: the poll's error matches ErrBusy
// (and neither ErrDiverged nor ErrNeedBootstrap), and Run logs it as busy
// while it retries.
func TestWriterBusyIsNotAnOutage(t *testing.T) {
	asked := make(chan struct{}, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case asked <- struct{}{}:
		default:
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write([]byte(`{"error":{"code":"too_many_requests","message":"busy"}}`))
	}))
	defer srv.Close()
	var logs syncBuffer
	f, err := NewTail(emptyStore{}, noApplier{}, TailOptions{URL: srv.URL, Token: "t",
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	err = f.poll(context.Background())
	if !errors.Is(err, ErrBusy) || errors.Is(err, ErrDiverged) || errors.Is(err, ErrNeedBootstrap) {
		t.Fatalf("poll of a busy writer: %v; want ErrBusy", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	for !strings.Contains(logs.String(), "writer busy") {
		<-asked // each retry asks again; the log line is written before the next
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if strings.Contains(logs.String(), "writer unreachable") {
		t.Fatalf("a busy writer logged as unreachable:\n%s", logs.String())
	}
}

// failingRelay is a ChangeSource whose relay fails every read, counting
// them on asked.
type failingRelay struct{ asked chan struct{} }

func (r failingRelay) Changes(context.Context, ChangesRequest) (*ChangeBatch, error) {
	select {
	case r.asked <- struct{}{}:
	default:
	}
	return nil, fmt.Errorf("%w: consumer placed out of reach", ErrRelayFailed)
}

func (failingRelay) Checkpoint(context.Context) (*CheckpointDownload, error) {
	return nil, errors.New("no checkpoint")
}

// TestRelayFailureIsNotWriterOutage: a relay that fails (a JetStream
// consumer out of reach) is retried as an outage, counted as a contact
// error, and logged as the relay's failure, not as an unreachable writer:
// the writer may well be up.
func TestRelayFailureIsNotWriterOutage(t *testing.T) {
	src := failingRelay{asked: make(chan struct{}, 16)}
	var logs syncBuffer
	f, err := NewTail(emptyStore{}, noApplier{}, TailOptions{Source: src,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	for strings.Count(logs.String(), `msg="change relay failed`) < 2 {
		<-src.asked // each retry asks again; the log line is written before the next
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if strings.Contains(logs.String(), "writer unreachable") {
		t.Fatalf("a relay failure logged as an unreachable writer:\n%s", logs.String())
	}
	var m dto.Metric
	if err := f.m.contactErrors.Write(&m); err != nil {
		t.Fatal(err)
	}
	if got := m.GetCounter().GetValue(); got < 2 {
		t.Fatalf("contact errors %v after two failed reads, want >= 2", got)
	}
}

// syncBuffer is a bytes.Buffer safe for a logger and a reader at once.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

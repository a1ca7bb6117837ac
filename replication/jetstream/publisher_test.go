package jetstream

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/internal/model"
	"github.com/utxo-cache/utxo-cache/internal/testnats"
	"github.com/utxo-cache/utxo-cache/replication"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
	"github.com/utxo-cache/utxo-cache/writer"
)

// waitFor polls cond (a state in other processes: nothing to wait on) until
// it holds, or fails the test after d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// noLeaks checks, once everything the test started is closed (its
// cleanups run before this one), that no goroutine of it is left.
//
// One goroutine of the NATS client is ignored: an object store put starts
// a watcher of the connection's status and stops it when it ends, and a
// watcher the scheduler had not run yet by then waits forever (nats.go
// v1.55.0, jetstream's resetPendingAcksOnReconnect reads the status
// channel after the put has set it to nil): a few KiB, at most one per put.
func noLeaks(t *testing.T) {
	opts := []goleak.Option{goleak.IgnoreCurrent(),
		goleak.IgnoreTopFunction("github.com/nats-io/nats.go/jetstream.(*jetStream).resetPendingAcksOnReconnect")}
	t.Cleanup(func() { goleak.VerifyNone(t, opts...) })
}

type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func testLogger(t *testing.T) *slog.Logger { return slog.New(slog.NewTextHandler(testLog{t}, nil)) }

type fixture struct {
	store *disk.Store
	w     *writer.Writer
	m     *model.Model
	g     *model.Gen
	seqs  map[uint64]chain.Summary // the writer's figures after each seq
}

func newFixture(t *testing.T, retention uint64) *fixture {
	t.Helper()
	s, err := disk.Open(filepath.Join(t.TempDir(), "store"), disk.Options{LogRetention: retention})
	if err != nil {
		t.Fatal(err)
	}
	w := writer.New(s, writer.Options{})
	t.Cleanup(func() { _ = w.Close(); _ = s.Close() })
	o := s.Options()
	return &fixture{store: s, w: w, m: model.New(o.PruneDepth, o.RollbackWindow), g: model.NewGen(3, model.GenOptions{Addresses: 4}),
		seqs: map[uint64]chain.Summary{}}
}

// publish starts a Publisher of f's store with opts, subscribed to its
// writer and closed by the test's cleanup.
func (f *fixture) publish(t *testing.T, opts Options) *Publisher {
	t.Helper()
	p, err := NewPublisher(f.store, f.w, filepath.Join(t.TempDir(), "staging"), chain.Limits{}, opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	f.w.Subscribe(p)
	return p
}

func (f *fixture) blocks(t *testing.T, n int) {
	t.Helper()
	for range n {
		b := f.g.Block(f.m)
		if _, err := f.m.Apply(b, false); err != nil {
			t.Fatal(err)
		}
		res, err := f.w.Apply(context.Background(), b)
		if err != nil {
			t.Fatal(err)
		}
		if res.Seq == 0 {
			t.Fatal("no seq")
		}
	}
}

// TestPublishAndRead: a store with history before the stream existed
// publishes from its log's first kept change (the stream starts there, so
// stream sequence = commit sequence); a Source reads every change in order,
// and a replica whose next change the stream no longer holds is told
// ErrLogTruncated.
func TestPublishAndRead(t *testing.T) {
	noLeaks(t)
	srv := testnats.Start(t)
	f := newFixture(t, 5)
	f.blocks(t, 8) // the log keeps 4..8
	opts := Options{URLs: srv.URL(), Retention: 5, CheckpointInterval: time.Hour, Logger: testLogger(t)}
	p := f.publish(t, opts)
	waitFor(t, 10*time.Second, "the stream has change 8", func() bool { return p.Status().StreamSeq == 8 })
	f.blocks(t, 3)
	waitFor(t, 10*time.Second, "the stream has change 11", func() bool { return p.Status().StreamSeq == 11 })

	src, err := NewSource(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	ctx := context.Background()
	next := uint64(7)
	for next <= 11 {
		b, err := src.Changes(ctx, replication.ChangesRequest{After: next - 1, Wait: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range b.Changes {
			if c.Seq != next {
				t.Fatalf("change %d, want %d", c.Seq, next)
			}
			next++
		}
		if b.DecodeErr != nil {
			t.Fatal(b.DecodeErr)
		}
	}
	_, err = src.Changes(ctx, replication.ChangesRequest{After: 3, Wait: time.Second})
	if !errors.Is(err, replication.ErrNeedBootstrap) || !errors.Is(err, replication.ErrLogTruncated) {
		t.Fatalf("after 3 (the stream starts at 7): %v, want ErrLogTruncated", err)
	}
	// The checkpoint bucket has one (none existed).
	waitFor(t, 10*time.Second, "a checkpoint", func() bool {
		dl, err := src.Checkpoint(ctx)
		if err != nil {
			return false
		}
		_ = dl.Body.Close()
		return dl.Want.Seq >= 8
	})
}

// readAll reads the changes after after from src until it has the one at
// upto, checking they come in order.
func readAll(t *testing.T, src *Source, after, upto uint64) []*chain.Change {
	t.Helper()
	var out []*chain.Change
	deadline := time.Now().Add(30 * time.Second)
	for next := after + 1; next <= upto; {
		if time.Now().After(deadline) {
			t.Fatalf("change %d not read within 30s", next)
		}
		b, err := src.Changes(context.Background(), replication.ChangesRequest{After: next - 1, Wait: time.Second})
		if err != nil {
			t.Logf("read after %d: %v (retrying)", next-1, err)
			continue
		}
		if b.DecodeErr != nil {
			t.Fatal(b.DecodeErr)
		}
		for _, c := range b.Changes {
			if c.Seq != next {
				t.Fatalf("change %d, want %d", c.Seq, next)
			}
			out = append(out, c)
			next++
		}
	}
	return out
}

// TestOutageDoesNotHoldTheWriter: with the NATS server down, the writer
// applies as usual (the publisher only falls behind, and says so); once the
// server is back, on the same store, the stream gets every change it
// missed, in order, each with the writer's figures.
func TestOutageDoesNotHoldTheWriter(t *testing.T) {
	noLeaks(t)
	srv := testnats.Start(t)
	f := newFixture(t, 1000)
	opts := Options{URLs: srv.URL(), Retention: 1000, CheckpointInterval: time.Hour, Logger: testLogger(t)}
	p := f.publish(t, opts)
	f.blocks(t, 5)
	waitFor(t, 10*time.Second, "the stream has change 5", func() bool { return p.Status().StreamSeq == 5 })

	srv.Kill()
	f.blocks(t, 40) // would block or fail if the writer waited for NATS
	if st := p.Status(); st.StreamSeq != 5 {
		t.Fatalf("stream at %d with NATS down, want 5", st.StreamSeq)
	}
	waitFor(t, 10*time.Second, "the publisher reports the outage", func() bool { return p.Status().Behind > 0 && p.Status().Err != nil })
	srv.Start()
	waitFor(t, 30*time.Second, "the stream has change 45", func() bool { return p.Status().StreamSeq == 45 })
	if st := p.Status(); st.Behind != 0 || st.Err != nil {
		t.Fatalf("caught up, still reported behind: %+v", st)
	}
	src, err := NewSource(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	got := readAll(t, src, 0, 45)
	v, err := f.store.PublishedView()
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	data, n, err := v.Changes(0, 1<<30)
	if err != nil || n != 45 {
		t.Fatalf("the store's log: %d changes, %v", n, err)
	}
	var want replication.ChangeBatch
	replication.DecodeChanges(data, chain.Limits{}.EnsureDefaults(), &want)
	for i, c := range got {
		w := want.Changes[i]
		if c.Seq != w.Seq || c.Kind != w.Kind || c.After != w.After {
			t.Fatalf("stream change %d: %+v, the store's log: %+v", i+1, c.After, w.After)
		}
	}
}

// TestRestoredWriterReplacesStream: a writer whose store is behind the
// stream (restored from an older backup, here another history) replaces
// the stream, which then holds the writer's own changes at their seqs; a
// reader beyond the new stream's end waits rather than reading another
// history's changes.
func TestRestoredWriterReplacesStream(t *testing.T) {
	noLeaks(t)
	srv := testnats.Start(t)
	opts := Options{URLs: srv.URL(), Retention: 1000, CheckpointInterval: time.Hour, Logger: testLogger(t)}
	a := newFixture(t, 1000)
	pa, err := NewPublisher(a.store, a.w, filepath.Join(t.TempDir(), "staging"), chain.Limits{}, opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	a.w.Subscribe(pa)
	a.blocks(t, 10)
	waitFor(t, 10*time.Second, "the stream has change 10", func() bool { return pa.Status().StreamSeq == 10 })
	pa.Close()

	b := newFixture(t, 1000)
	b.g = model.NewGen(99, model.GenOptions{Addresses: 4})
	b.blocks(t, 4)
	pb, err := NewPublisher(b.store, b.w, filepath.Join(t.TempDir(), "staging"), chain.Limits{}, opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pb.Close()
	b.w.Subscribe(pb)
	waitFor(t, 10*time.Second, "the new stream has change 4", func() bool { return pb.Status().StreamSeq == 4 })
	src, err := NewSource(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	got := readAll(t, src, 0, 4)
	if st := b.store.Published(); got[3].After.Digest != st.Digest {
		t.Fatalf("change 4 of the new stream: digest %s, the restored writer's %s", got[3].After.Digest, st.Digest)
	}
	batch, err := src.Changes(context.Background(), replication.ChangesRequest{After: 8, Wait: 200 * time.Millisecond})
	if err != nil || len(batch.Changes) != 0 {
		t.Fatalf("after 8 on a stream at 4: %v, %v; want nothing yet", batch, err)
	}
}

// TestForgedChangeDiverges: a replica that bootstraps from the bucket and
// follows the stream through replication.Tail verifies every change: a
// change in the stream whose figures are not what applying it gives (here
// the writer's own change 6 with one UTXO more in its figures, published by
// someone else) is never published on the replica, and Run stops with
// ErrDiverged.
func TestForgedChangeDiverges(t *testing.T) {
	noLeaks(t)
	srv := testnats.Start(t)
	f := newFixture(t, 1000)
	opts := Options{URLs: srv.URL(), Retention: 1000, CheckpointInterval: time.Hour, Logger: testLogger(t)}
	p := f.publish(t, opts)
	f.blocks(t, 5)
	waitFor(t, 10*time.Second, "the stream has change 5", func() bool { return p.Status().StreamSeq == 5 })

	src, err := NewSource(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "replica")
	var m replication.Manifest
	waitFor(t, 10*time.Second, "a bootstrap from the bucket", func() bool {
		m, err = replication.Bootstrap(ctx, replication.TailOptions{Source: src}, dir, 1<<30, disk.Options{})
		return err == nil // until the publisher has put its first checkpoint
	})
	rs, err := disk.Open(dir, disk.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var tail *replication.Tail
	rw := writer.New(rs, writer.Options{SkipUnknownInputs: true, Verify: func(st disk.State) error { return tail.Verify(st) }})
	defer func() { _ = rw.Close(); _ = rs.Close() }()
	if tail, err = replication.NewTail(rs, rw, replication.TailOptions{Source: src}); err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- tail.Run(runCtx) }()
	waitFor(t, 10*time.Second, "the replica at seq 5", func() bool { return rs.Published().Seq == 5 })
	if st, want := rs.Published(), f.store.Published(); st.Digest != want.Digest || st.Tip != want.Tip || st.UtxoCount != want.UtxoCount {
		t.Fatalf("replica at seq 5 (bootstrapped at %d): %+v, the writer %+v", m.Seq, st, want)
	}

	p.Close() // the stream gets change 6 from the forger only
	f.blocks(t, 1)
	v, err := f.store.PublishedView()
	if err != nil {
		t.Fatal(err)
	}
	data, _, err := v.Changes(5, 1<<30)
	_ = v.Close()
	if err != nil {
		t.Fatal(err)
	}
	c, _, err := chain.DecodeChangeCBOR(data, chain.Limits{}.EnsureDefaults())
	if err != nil {
		t.Fatal(err)
	}
	c.After.UtxoCount++
	forged, err := chain.AppendChangeCBOR(nil, c)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if ack, err := js.Publish(ctx, opts.EnsureDefaults().changesSubject(), forged); err != nil || ack.Sequence != 6 {
		t.Fatalf("publish the forged change: %+v, %v", ack, err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, replication.ErrDiverged) {
			t.Fatalf("Run: %v, want ErrDiverged", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the replica did not stop on the forged change")
	}
	if st := rs.Published(); st.Seq != 5 {
		t.Fatalf("the replica published seq %d, the forged change's", st.Seq)
	}
}

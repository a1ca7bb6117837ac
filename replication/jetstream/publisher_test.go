package jetstream

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
	srv := testnats.Start(t)
	f := newFixture(t, 5)
	f.blocks(t, 8) // the log keeps 4..8
	opts := Options{URLs: srv.URL(), Retention: 5, CheckpointInterval: time.Hour, Logger: testLogger(t)}
	p, err := NewPublisher(f.store, f.w, filepath.Join(t.TempDir(), "staging"), chain.Limits{}, opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	f.w.Subscribe(p)
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

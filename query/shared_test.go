package query_test

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/utxo-cache/utxo-cache/cache"
	"github.com/utxo-cache/utxo-cache/internal/testredis"
	"github.com/utxo-cache/utxo-cache/query"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
	"github.com/utxo-cache/utxo-cache/tiers/redis"
	"github.com/utxo-cache/utxo-cache/writer"
)

// setCounter is a cache.Tier that holds nothing and counts the fills it is asked
// to store.
type setCounter struct {
	mu   sync.Mutex
	keys []string
}

func (*setCounter) Name() string { return "shared" }
func (*setCounter) Get(context.Context, string, string) (cache.Entry, bool) {
	return cache.Entry{}, false
}
func (c *setCounter) Set(_ context.Context, key, _ string, _ cache.Entry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.keys = append(c.keys, key)
}
func (*setCounter) Invalidate(context.Context, uint64, []string) error { return nil }
func (c *setCounter) sets() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.keys)
}

// TestFillSharedGate: answers a node computes from its own store go into the
// shared tiers only while Options.FillShared allows it (on a replica: once
// its store is verified to be the writer's).
func TestFillSharedGate(t *testing.T) {
	store, err := disk.Open(t.TempDir(), disk.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	w := writer.New(store, writer.Options{})
	defer w.Close()
	ctx := context.Background()
	if _, err := w.Apply(ctx, moveBlock(1)); err != nil {
		t.Fatal(err)
	}
	shared := &setCounter{}
	var verified atomic.Bool
	srv := query.New(store, query.Options{Shared: []cache.Tier{shared}, HotAddresses: -1,
		FillShared: verified.Load})
	defer srv.Close()
	if a, err := srv.Balance(ctx, "hot"); err != nil || a.Status != 200 {
		t.Fatalf("balance: %v %v", a.Status, err)
	}
	if n := shared.sets(); n != 0 {
		t.Fatalf("%d fills into the shared tier from an unverified store", n)
	}
	verified.Store(true)
	if a, err := srv.Balance(ctx, "hot"); err != nil || a.Status != 200 {
		t.Fatalf("balance: %v %v", a.Status, err)
	}
	if n := shared.sets(); n != 1 {
		t.Fatalf("%d fills into the shared tier once verified, want 1", n)
	}
}

// moveChain is a store with a writer on it, fed the chain of moveBlock one
// block at a time; both close when the test ends.
type moveChain struct {
	t      *testing.T
	store  *disk.Store
	w      *writer.Writer
	height uint64 // of the last block applied
}

func newMoveChain(t *testing.T) *moveChain {
	store, err := disk.Open(t.TempDir(), disk.Options{PruneDepth: 1000, RollbackWindow: 1000})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	w := writer.New(store, writer.Options{})
	t.Cleanup(func() { _ = w.Close() })
	return &moveChain{t: t, store: store, w: w}
}

// apply applies the next n blocks.
func (c *moveChain) apply(n int) {
	c.t.Helper()
	for range n {
		c.height++
		if _, err := c.w.Apply(context.Background(), moveBlock(c.height)); err != nil {
			c.t.Fatal(err)
		}
	}
}

// redisTierOn is a Redis tier of namespace ns on rs, fenced at store's
// published seq as serve's is, healthy when returned; it closes when the
// test ends.
func redisTierOn(t *testing.T, rs *testredis.Server, store *disk.Store, ns string) *redis.Tier {
	t.Helper()
	rt, err := redis.New(redis.Options{URL: rs.URL(), Namespace: ns, CallTimeout: time.Second,
		StartSeq: store.Published().Seq, PublishedSeq: func() uint64 { return store.Published().Seq },
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	poll(t, "the Redis tier healthy", rt.Healthy)
	return rt
}

package query_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/utxo-cache/utxo-cache/cache"
	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/internal/testredis"
	"github.com/utxo-cache/utxo-cache/query"
	"github.com/utxo-cache/utxo-cache/tiers/redis"
)

// countedTier is the real Redis tier, counting what the server asks of it:
// the calls themselves, at the moment they are made (fills leave the read
// path, so the tier's own counters see them later).
type countedTier struct {
	*redis.Tier
	gets, fills atomic.Int64
}

func (c *countedTier) Get(ctx context.Context, key, guard string) (cache.Entry, bool) {
	c.gets.Add(1)
	return c.Tier.Get(ctx, key, guard)
}

func (c *countedTier) GetMany(ctx context.Context, keys, guards []string, out []cache.Entry, hit []bool) {
	c.gets.Add(int64(len(keys)))
	c.Tier.GetMany(ctx, keys, guards, out, hit)
}

func (c *countedTier) Set(ctx context.Context, key, guard string, e cache.Entry) {
	c.fills.Add(1)
	c.Tier.Set(ctx, key, guard, e)
}

func (c *countedTier) SetAsync(key, guard string, e cache.Entry) {
	c.fills.Add(1)
	c.Tier.SetAsync(key, guard, e)
}

// TestAdmissionByCost holds the Redis tier's cost-based admission to its
// rule over a real store and a real redis-server: an answer cheaper than
// the threshold never costs a round trip or a fill (not on a read, not when
// a change re-warms a hot address); an answer worth one is asked for from
// its second computation, filled then, and served by Redis after; every
// answer equals a fresh disk read throughout.
func TestAdmissionByCost(t *testing.T) {
	rs := testredis.Start(t)
	c := newMoveChain(t)
	store, w, ctx := c.store, c.w, context.Background()
	c.apply(5)
	// The outpoint read: the output of the last block, which the next one
	// spends.
	opHeight := c.height
	fresh := query.New(store, query.Options{HotAddresses: -1})
	defer fresh.Close()

	reads := []namedRead{
		{"balance", func(s *query.Server) (query.Answer, error) { return s.Balance(ctx, "hot") }},
		{"page", func(s *query.Server) (query.Answer, error) { return s.AddressUtxos(ctx, "hot", false, 10, "") }},
		{"outpoint", func(s *query.Server) (query.Answer, error) {
			return s.Utxo(ctx, chain.OutPoint{TxHash: hashOf('t', opHeight)})
		}},
	}
	// The batch: the outpoint read alone (which the next block spends),
	// the one before it (spent), and one that never exists.
	batch := func() []chain.OutPoint {
		return []chain.OutPoint{{TxHash: hashOf('t', opHeight)}, {TxHash: hashOf('t', opHeight-1)}, {TxHash: hashOf('t', 1<<40)}}
	}
	const batchLen = 3
	lookup := []namedRead{{"lookup", func(s *query.Server) (query.Answer, error) { return s.Lookup(ctx, batch()) }}}
	read := func(s *query.Server, when string) (fromRedis int) {
		t.Helper()
		return compareReads(t, s, fresh, reads, when)
	}
	newTier := func(ns string) *countedTier { return &countedTier{Tier: redisTierOn(t, rs, store, ns)} }

	t.Run("cheap answers skip the tier", func(t *testing.T) {
		ct := newTier("cheap")
		reg := prometheus.NewRegistry()
		// Nothing costs an hour: no answer is worth the round trip.
		srv := query.New(store, query.Options{Tiers: []cache.Tier{ct}, Metrics: query.NewMetrics(reg),
			Admission: query.Admission{MinCost: time.Hour}})
		defer srv.Close()
		w.Subscribe(srv)
		// Enough reads to make "hot" a hot address (reads are sampled), so
		// that the blocks below re-warm it: its balance from the change.
		const rounds = 300
		for range rounds {
			read(srv, "cheap")
			compareReads(t, srv, fresh, lookup, "cheap")
		}
		c.apply(3)
		read(srv, "after 3 blocks")
		compareReads(t, srv, fresh, lookup, "after 3 blocks")
		if g, f := ct.gets.Load(), ct.fills.Load(); g != 0 || f != 0 {
			t.Fatalf("the tier was asked %d times and filled %d times for answers not worth a round trip", g, f)
		}
		skipped := counterValue(t, reg, "utxo_cache_tier_skipped_total")
		if want := float64((len(reads) + batchLen) * (rounds + 1)); skipped < want {
			t.Fatalf("utxo_cache_tier_skipped_total = %v, want at least %v (every read)", skipped, want)
		}
	})

	t.Run("expensive answers from the second computation", func(t *testing.T) {
		ct := newTier("dear")
		opHeight = c.height
		// A negative Factor and no MinCost: every answer is worth it.
		srv := query.New(store, query.Options{Tiers: []cache.Tier{ct}, HotAddresses: -1, Admission: query.Admission{Factor: -1}})
		defer srv.Close()
		w.Subscribe(srv)
		n := int64(len(reads))
		if read(srv, "first") != 0 || ct.gets.Load() != 0 || ct.fills.Load() != 0 {
			t.Fatalf("first computation: %d gets, %d fills; want none (marked only)", ct.gets.Load(), ct.fills.Load())
		}
		if read(srv, "second") != 0 || ct.gets.Load() != n || ct.fills.Load() != n {
			t.Fatalf("second computation: %d gets, %d fills; want %d of each", ct.gets.Load(), ct.fills.Load(), n)
		}
		// Fills land off the read path.
		poll(t, "every answer from Redis", func() bool { return read(srv, "third") == len(reads) })

		// A block changes every answer: the entries are invalidated, the
		// keys stay marked, so the next computation fills at once.
		c.apply(1)
		fills := ct.fills.Load()
		if read(srv, "after a block") != 0 || ct.fills.Load() != fills+n {
			t.Fatalf("after a block: %d fills, want %d", ct.fills.Load()-fills, n)
		}
		poll(t, "every answer from Redis after the block", func() bool { return read(srv, "after a block") == len(reads) })
	})

	t.Run("batches by the same rule", func(t *testing.T) {
		ct := newTier("batch")
		opHeight = c.height
		srv := query.New(store, query.Options{Tiers: []cache.Tier{ct}, HotAddresses: -1, Admission: query.Admission{Factor: -1}})
		defer srv.Close()
		w.Subscribe(srv)
		batchRead := func(when string) int { return compareReads(t, srv, fresh, lookup, when) }
		if batchRead("first") != 0 || ct.gets.Load() != 0 || ct.fills.Load() != 0 {
			t.Fatalf("first batch: %d gets, %d fills; want none (marked only)", ct.gets.Load(), ct.fills.Load())
		}
		if batchRead("second") != 0 || ct.gets.Load() != batchLen || ct.fills.Load() != batchLen {
			t.Fatalf("second batch: %d gets, %d fills; want %d of each", ct.gets.Load(), ct.fills.Load(), batchLen)
		}
		poll(t, "the batch from Redis", func() bool { return batchRead("third") == 1 })
		// A single read of a batch's outpoint is not asked of Redis: its
		// answer is one Get of the store, marked apart from batches.
		gets := ct.gets.Load()
		single := []namedRead{{"outpoint", func(s *query.Server) (query.Answer, error) { return s.Utxo(ctx, batch()[0]) }}}
		if compareReads(t, srv, fresh, single, "single") != 0 || ct.gets.Load() != gets {
			t.Fatalf("a single read of a batch's outpoint asked Redis (%d gets)", ct.gets.Load()-gets)
		}
		// A block spends batch()[0]: its entry is invalidated, the rest
		// still serve, and the batch reads it from the store, then fills.
		c.apply(1)
		fills := ct.fills.Load()
		if batchRead("after a block") != 0 || ct.fills.Load() != fills+1 {
			t.Fatalf("after a block: %d fills, want 1 (the spent outpoint's)", ct.fills.Load()-fills)
		}
		poll(t, "the batch from Redis after the block", func() bool { return batchRead("after a block") == 1 })
	})

	t.Run("cheap batches skip the tier", func(t *testing.T) {
		ct := newTier("cheapbatch")
		srv := query.New(store, query.Options{Tiers: []cache.Tier{ct}, HotAddresses: -1, Admission: query.Admission{MinCost: time.Hour}})
		defer srv.Close()
		w.Subscribe(srv)
		for range 50 {
			compareReads(t, srv, fresh, lookup, "cheap batch")
		}
		if g, f := ct.gets.Load(), ct.fills.Load(); g != 0 || f != 0 {
			t.Fatalf("the tier was asked %d times and filled %d times for batches not worth a round trip", g, f)
		}
	})
}

// counterValue returns the value of the one series of counter name on reg.
func counterValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.Metric) == 1 {
			return mf.Metric[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no single series %s on the registry", name)
	return 0
}

package query_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/utxo-cache/utxo-cache/cache"
	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/internal/testredis"
	"github.com/utxo-cache/utxo-cache/query"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
	"github.com/utxo-cache/utxo-cache/tiers/memory"
	"github.com/utxo-cache/utxo-cache/writer"
)

// lookupBatch is a batch over the chain of moveBlock at tip h: the output
// of h (live), of h-1 (spent at h), of 1 (spent long ago), one that never
// exists, and h's output again (a batch may repeat an outpoint).
func lookupBatch(h uint64) []chain.OutPoint {
	return []chain.OutPoint{
		{TxHash: hashOf('t', h)}, {TxHash: hashOf('t', h-1)}, {TxHash: hashOf('t', 1)},
		{TxHash: hashOf('t', 1<<40)}, {TxHash: hashOf('t', h)},
	}
}

// TestLookupThroughTiers: a batch lookup answered from the memory tier's
// entries of single outpoints (and from Redis behind it) is byte for byte
// the batch a server with no tiers reads from the disk, at the same state,
// while blocks change the outpoints; and single reads are served from the
// entries batches filled.
func TestLookupThroughTiers(t *testing.T) {
	rs := testredis.Start(t)
	c := newMoveChain(t)
	store, w, ctx := c.store, c.w, context.Background()
	c.apply(3)
	fresh := query.New(store, query.Options{HotAddresses: -1})
	defer fresh.Close()

	rt := redisTierOn(t, rs, store, "lookup")
	mem, err := memory.New(memory.Options{MaxBytes: 16 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	srv := query.New(store, query.Options{Tiers: []cache.Tier{mem, rt}, HotAddresses: -1, Admission: query.Admission{All: true}})
	defer srv.Close()
	w.Subscribe(srv)
	reads := func() []namedRead {
		h := c.height
		return []namedRead{
			{"lookup", func(s *query.Server) (query.Answer, error) { return s.Lookup(ctx, lookupBatch(h)) }},
			{"outpoint", func(s *query.Server) (query.Answer, error) {
				return s.Utxo(ctx, chain.OutPoint{TxHash: hashOf('t', h-1)})
			}},
		}
	}
	for range 20 {
		memHits := mem.Stats().Hits
		for range 3 {
			compareReads(t, srv, fresh, reads(), fmt.Sprintf("at %d", c.height))
			mem.Wait()
		}
		if mem.Stats().Hits == memHits {
			t.Fatalf("at %d: no batch or single read was answered by the memory tier", c.height)
		}
		c.apply(1)
	}

	// Redis alone: the entries the batches filled serve batches and single
	// reads, from the second read of each state on.
	only := query.New(store, query.Options{Tiers: []cache.Tier{rt}, HotAddresses: -1, Admission: query.Admission{All: true}})
	defer only.Close()
	w.Subscribe(only)
	for range 5 {
		c.apply(1)
		compareReads(t, only, fresh, reads(), fmt.Sprintf("redis alone at %d", c.height))
		poll(t, "every answer from Redis", func() bool {
			return compareReads(t, only, fresh, reads(), fmt.Sprintf("redis alone at %d", c.height)) == 2
		})
	}
}

// movingStore is a store on which a block is applied between a reader's
// load of the published state and its View, once armed.
type movingStore struct {
	*disk.Store
	before func()
}

func (m *movingStore) PublishedView() (*disk.View, error) {
	if f := m.before; f != nil {
		m.before = nil
		f()
	}
	return m.Store.PublishedView()
}

// TestLookupAcrossACommit: when a block is published after a batch found
// some outpoints in a tier and before it reads the others, the tier's
// answers are older than what the disk gives: the whole batch is read at
// the newer state. (Before the rule, the batch held h's output both live
// and as spent in one answer.)
func TestLookupAcrossACommit(t *testing.T) {
	ds, err := disk.Open(t.TempDir(), disk.Options{PruneDepth: 1000, RollbackWindow: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	store := &movingStore{Store: ds}
	w := writer.New(ds, writer.Options{})
	defer w.Close()
	ctx := context.Background()
	for h := uint64(1); h <= 3; h++ {
		if _, err := w.Apply(ctx, moveBlock(h)); err != nil {
			t.Fatal(err)
		}
	}
	mem, err := memory.New(memory.Options{MaxBytes: 16 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	srv := query.New(store, query.Options{Tiers: []cache.Tier{mem}, HotAddresses: -1})
	defer srv.Close()
	w.Subscribe(srv)
	fresh := query.New(ds, query.Options{HotAddresses: -1})
	defer fresh.Close()

	// The output of 3 is live and cached; the output of 4 is not.
	live := chain.OutPoint{TxHash: hashOf('t', 3)}
	if a, err := srv.Utxo(ctx, live); err != nil || a.Status != 200 {
		t.Fatalf("outpoint: %d %v", a.Status, err)
	}
	mem.Wait()
	if a, _ := srv.Utxo(ctx, live); a.Tier != "memory" {
		t.Fatalf("outpoint from the %s tier, want memory", a.Tier)
	}
	batch := []chain.OutPoint{live, {TxHash: hashOf('t', 4)}}
	// Block 4 spends the output of 3 and creates its own: published after
	// the batch found 3 in memory and before it reads 4 from the disk.
	store.before = func() {
		if _, err := w.Apply(ctx, moveBlock(4)); err != nil {
			t.Error(err)
		}
	}
	got, err := srv.Lookup(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	want, err := fresh.Lookup(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	if got.Seq != want.Seq || got.Tip != want.Tip || string(got.AppendBody(nil)) != string(want.AppendBody(nil)) {
		t.Fatalf("batch across a commit:\n got seq %d %s\nwant seq %d %s", got.Seq, got.AppendBody(nil), want.Seq, want.AppendBody(nil))
	}
	var body struct {
		Results []struct {
			Spent *struct{ Height uint64 } `json:"spent"`
		} `json:"results"`
	}
	if err := json.Unmarshal(got.AppendBody(nil), &body); err != nil {
		t.Fatal(err)
	}
	if got.Tip.Height != 4 || len(body.Results) != 2 || body.Results[0].Spent == nil || body.Results[0].Spent.Height != 4 {
		t.Fatalf("batch at tip %d: %s; want the output of 3 spent at 4", got.Tip.Height, got.AppendBody(nil))
	}
}

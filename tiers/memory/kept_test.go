package memory_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/utxo-cache/utxo-cache/cache"
	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/changeset"
	"github.com/utxo-cache/utxo-cache/internal/model"
	"github.com/utxo-cache/utxo-cache/query"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
	"github.com/utxo-cache/utxo-cache/tiers/memory"
	"github.com/utxo-cache/utxo-cache/writer"
)

// The query server peeks into this tier between a commit and its
// invalidation (query/keep.go). Checked here, in a test, so that the tier
// does not import the query server.
var _ query.Peeker = (*memory.Tier)(nil)

// afterPublish is a writer listener subscribed after the server: fn runs on
// the writer goroutine once the server has handled cs's publication.
type afterPublish struct{ fn func(cs *changeset.Set) }

func (*afterPublish) Changed(*changeset.Set)           {}
func (a *afterPublish) AfterPublish(cs *changeset.Set) { a.fn(cs) }

// TestKeptEntriesRealTier runs the kept-entries path (query/keep.go) over
// the real Ristretto tier with readers filling it concurrently, through
// random blocks, catch-up windows and rollbacks. After every publication,
// with the writer held, every first page and balance the tier returns must
// be the disk's answer at the published state.
func TestKeptEntriesRealTier(t *testing.T) {
	type shape struct {
		desc  bool
		limit int
	}
	shapes := []shape{{false, 2}, {false, 3}, {true, 2}, {true, 3}}
	kept := 0.0
	for seed := uint64(1); seed <= 2; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			ctx := context.Background()
			opts := disk.Options{PruneDepth: 4, RollbackWindow: 6}
			store, err := disk.Open(t.TempDir(), opts)
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			w := writer.New(store, writer.Options{LiveMargin: 1})
			defer w.Close()
			mem, err := memory.New(memory.Options{MaxBytes: 64 << 20})
			if err != nil {
				t.Fatal(err)
			}
			defer mem.Close()
			reg := prometheus.NewRegistry()
			srv := query.New(store, query.Options{Tiers: []cache.Tier{mem}, HotAddresses: -1, Metrics: query.NewMetrics(reg)})
			defer srv.Close()
			ref := query.New(store, query.Options{HotAddresses: -1})
			defer ref.Close()
			o := opts.EnsureDefaults()
			g := model.NewGen(seed, model.GenOptions{Addresses: 12, MaxTxs: 6})
			m := model.New(o.PruneDepth, o.RollbackWindow)
			addrs := g.Addresses()

			var failures []string // writer goroutine only
			check := func(cs *changeset.Set) {
				mem.Wait()
				for _, a := range addrs {
					guard := "a|" + a
					for _, p := range shapes {
						order := "a"
						if p.desc {
							order = "d"
						}
						key := fmt.Sprintf("p|%s|%d||%s", order, p.limit, a)
						got, ok := mem.Get(ctx, key, guard)
						if !ok {
							continue
						}
						want, err := ref.AddressUtxos(ctx, a, p.desc, p.limit, "")
						if err != nil {
							failures = append(failures, err.Error())
							continue
						}
						if got.Seq > cs.Seq || got.ETag != want.ETag || !bytes.Equal(got.Body, want.Body) {
							failures = append(failures, fmt.Sprintf("published seq %d: %s at seq %d is %q, disk %q", cs.Seq, key, got.Seq, got.Body, want.Body))
						}
					}
					if got, ok := mem.Get(ctx, "b|"+a, guard); ok {
						want, err := ref.Balance(ctx, a)
						if err != nil {
							failures = append(failures, err.Error())
							continue
						}
						if got.Seq > cs.Seq || !bytes.Equal(got.Body, want.Body) {
							failures = append(failures, fmt.Sprintf("published seq %d: balance of %s at seq %d is %q, disk %q", cs.Seq, a, got.Seq, got.Body, want.Body))
						}
					}
				}
			}
			w.Subscribe(srv)
			w.Subscribe(&afterPublish{fn: check})

			stop := make(chan struct{})
			var wg sync.WaitGroup
			for r := range 2 {
				wg.Go(func() {
					rng := rand.New(rand.NewPCG(seed, uint64(r)))
					for {
						select {
						case <-stop:
							return
						default:
						}
						a := addrs[rng.IntN(len(addrs))]
						p := shapes[rng.IntN(len(shapes))]
						var ans query.Answer
						var err error
						if rng.IntN(5) == 0 {
							ans, err = srv.Balance(ctx, a)
						} else {
							ans, err = srv.AddressUtxos(ctx, a, p.desc, p.limit, "")
						}
						if err != nil {
							t.Error(err)
							return
						}
						ans.Release()
					}
				})
			}
			defer func() { close(stop); wg.Wait() }()

			rng := g.Rand()
			for range 100 {
				tip := m.Tip()
				switch k := rng.IntN(10); {
				case k == 0 && !tip.Empty && tip.Height > m.RollbackFloor()+1:
					lo := max(m.RollbackFloor(), tip.Height-min(tip.Height, m.RollbackWindow()))
					target := lo + rng.Uint64N(tip.Height-lo)
					if _, err := w.Rollback(ctx, target); err != nil {
						t.Fatalf("rollback to %d: %v", target, err)
					}
					if err := m.Rollback(target); err != nil {
						t.Fatal(err)
					}
				case k <= 2:
					blocks := make([]*chain.Block, 4+rng.IntN(4))
					for i := range blocks {
						blocks[i] = g.Block(m)
						if _, err := m.Apply(blocks[i], false); err != nil {
							t.Fatal(err)
						}
					}
					if res, err := w.ApplyBlocks(ctx, blocks, blocks[len(blocks)-1].Height); err != nil || res.Done != len(blocks) {
						t.Fatalf("apply %d blocks: done %d, %v", len(blocks), res.Done, err)
					}
				default:
					b := g.Block(m)
					if _, err := w.Apply(ctx, b); err != nil {
						t.Fatalf("apply block %d: %v", b.Height, err)
					}
					if _, err := m.Apply(b, false); err != nil {
						t.Fatal(err)
					}
				}
				if len(failures) > 0 {
					t.Fatal(failures[0])
				}
			}
			mfs, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			for _, mf := range mfs {
				if mf.GetName() == "utxo_cache_pages_kept_total" {
					kept += mf.GetMetric()[0].GetCounter().GetValue()
				}
			}
		})
	}
	if kept == 0 {
		t.Fatal("no page was kept: the run missed the path under test")
	}
	t.Logf("kept %v first pages", kept)
}

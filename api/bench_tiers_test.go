package api_test

import (
	"log/slog"
	"os"
	"testing"

	"github.com/utxo-cache/utxo-cache/api"
	"github.com/utxo-cache/utxo-cache/cache"
	"github.com/utxo-cache/utxo-cache/internal/testredis"
	"github.com/utxo-cache/utxo-cache/query"
	"github.com/utxo-cache/utxo-cache/tiers/memory"
	"github.com/utxo-cache/utxo-cache/tiers/redis"
)

// BenchmarkTierLookups serves the disk fixture's outpoints (see
// BenchmarkDiskHandlers), alone and in batches of 100, through each tier
// once the tier holds them: tier=disk has none, tier=memory the memory tier
// alone, tier=redis the Redis tier alone under the default admission (the
// cost rule: a batch asks Redis, a single outpoint does not). Before the
// timer starts, every request is served until the tier's hit ratio over a
// pass stops rising; hit-ratio is the tier's over the timed requests. On tier=redis the process's
// CPU per request leaves out redis-server's: compare req/s, whose wall
// time holds the round trip, on an idle machine.
func BenchmarkTierLookups(b *testing.B) {
	f := getDiskFixture(b)
	var reqs []benchRequests
	for _, r := range f.requests() {
		if r.name == "outpoint" || r.name == "lookup100" {
			reqs = append(reqs, r)
		}
	}
	for _, tier := range []string{"disk", "memory", "redis"} {
		b.Run("tier="+tier, func(b *testing.B) {
			store := f.openCopy(b)
			var tiers []cache.Tier
			hits := func() (hits, lookups uint64) { return 0, 0 }
			switch tier {
			case "memory":
				mem, err := memory.New(memory.Options{MaxBytes: 256 << 20})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(mem.Close)
				tiers = append(tiers, mem)
				hits = func() (uint64, uint64) {
					mem.Wait()
					st := mem.Stats()
					return st.Hits, st.Hits + st.Misses
				}
			case "redis":
				rs := testredis.Start(b)
				// A store opened at its published seq, as serve opens its
				// tier: Redis's marker starts there.
				rt, err := redis.New(redis.Options{URL: rs.URL(), Namespace: "bench", Logger: slog.New(slog.DiscardHandler),
					StartSeq: store.Published().Seq, PublishedSeq: func() uint64 { return store.Published().Seq }})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = rt.Close() })
				if !rt.Healthy() {
					b.Fatal("redis tier not healthy")
				}
				tiers = append(tiers, rt)
				hits = func() (uint64, uint64) {
					st := rt.Stats()
					return st.Hits, st.Hits + st.Misses
				}
			}
			// UTXO_BENCH_REDIS_ALL=1 asks Redis for every answer (the rule
			// off), to see what a hit costs.
			reads := query.New(store, query.Options{Tiers: tiers, HotAddresses: -1, Admission: query.Admission{All: os.Getenv("UTXO_BENCH_REDIS_ALL") != ""}})
			b.Cleanup(reads.Close)
			h := api.New(reads, nil, api.Options{})
			for _, r := range reqs {
				b.Run("read="+r.name, func(b *testing.B) {
					w := newDiscardWriter()
					// Passes over every request until the tier's hit ratio
					// stops rising: the rule fills an outpoint on its second
					// read, and two outpoints whose marks share a slot may
					// never be filled.
					last := -1.0
					for pass := 0; pass < 20; pass++ {
						h0, l0 := hits()
						for _, req := range r.reqs {
							serveOK(b, h, w, req)
						}
						h1, l1 := hits()
						if tier == "disk" || (tier == "redis" && r.name == "outpoint") {
							break // no tier, or one a single outpoint does not ask
						}
						ratio := 0.0
						if l1 > l0 {
							ratio = float64(h1-h0) / float64(l1-l0)
						}
						if pass >= 2 && ratio < last+0.01 {
							break
						}
						last = ratio
					}
					h0, l0 := hits()
					serveTimed(b, h, w, r.reqs)
					if h1, l1 := hits(); l1 > l0 {
						b.ReportMetric(float64(h1-h0)/float64(l1-l0), "hit-ratio")
					}
				})
			}
		})
	}
}

package redis

import (
	"bytes"
	"context"
	"log/slog"
	"strconv"
	"testing"

	"github.com/utxo-cache/utxo-cache/cache"
	"github.com/utxo-cache/utxo-cache/internal/testredis"
)

// quiet keeps the tier's log lines out of the benchmark output.
func quiet(o *Options) { o.Logger = slog.New(slog.DiscardHandler) }

// BenchmarkRedisGet measures a hit: one MGET round trip to a local
// redis-server, the floor check and the decode.
//
//	go test -run '^$' -bench 'Redis' -benchmem ./tiers/redis
func BenchmarkRedisGet(b *testing.B) {
	for _, size := range []int{256, 16 << 10} {
		b.Run("hit/body="+strconv.Itoa(size), func(b *testing.B) {
			s := startRedis(b)
			tier := newTier(b, s, quiet)
			ctx := context.Background()
			e := cache.Entry{Seq: 7, Status: 200, ETag: `W/"bench"`, Body: bytes.Repeat([]byte("x"), size)}
			publish(b, tier, 7) // a fill above the marker is refused
			if got := tier.set(ctx, "addr/A?limit=100", "A", &e); got != fillStored {
				b.Fatalf("set: %v", got)
			}
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := tier.Get(ctx, "addr/A?limit=100", "A"); !ok {
					b.Fatal("miss")
				}
			}
		})
	}
}

// BenchmarkRedisGetParallel measures hits from 64 goroutines at once, as a
// loaded server makes them: concurrent Gets share MGETs (getbatch.go).
func BenchmarkRedisGetParallel(b *testing.B) {
	s := startRedis(b)
	tier := newTier(b, s, quiet)
	ctx := context.Background()
	e := cache.Entry{Seq: 7, Status: 200, ETag: `W/"bench"`, Body: bytes.Repeat([]byte("x"), 256)}
	publish(b, tier, 7)
	if got := tier.set(ctx, "addr/A?limit=100", "A", &e); got != fillStored {
		b.Fatalf("set: %v", got)
	}
	b.SetParallelism(32) // 32 x GOMAXPROCS goroutines
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, ok := tier.Get(ctx, "addr/A?limit=100", "A"); !ok {
				b.Error("miss")
				return
			}
		}
	})
}

// BenchmarkRedisSet measures a fill: one setScript round trip.
func BenchmarkRedisSet(b *testing.B) {
	s := startRedis(b)
	tier := newTier(b, s, quiet)
	ctx := context.Background()
	e := cache.Entry{Seq: 7, Status: 200, ETag: `W/"bench"`, Body: bytes.Repeat([]byte("x"), 256)}
	publish(b, tier, 7)
	b.ReportAllocs()
	for b.Loop() {
		if got := tier.set(ctx, "addr/A?limit=100", "A", &e); got != fillStored {
			b.Fatalf("set: %v", got)
		}
	}
}

// BenchmarkRedisInvalidate measures one commit's invalidation of n guards.
func BenchmarkRedisInvalidate(b *testing.B) {
	for _, n := range []int{10, 1000} {
		b.Run("guards="+strconv.Itoa(n), func(b *testing.B) {
			s := startRedis(b)
			tier := newTier(b, s, quiet)
			ctx := context.Background()
			guards := make([]string, n)
			for i := range guards {
				guards[i] = "addr" + strconv.Itoa(i)
			}
			b.ReportAllocs()
			seq := uint64(0)
			for b.Loop() {
				seq++
				if err := tier.Invalidate(ctx, seq, guards); err != nil {
					b.Fatal(err)
				}
			}
			if !tier.Healthy() {
				b.Fatal("degraded")
			}
		})
	}
}

// BenchmarkRedisHitPath compares the hit path on one server and on a Redis
// Cluster (three masters, three replicas, all on this machine): a serial
// Get, and Gets from 32×GOMAXPROCS goroutines over 64 guards (so that the
// cluster's Gets spread over buckets and masters, and coalesced batches
// split by bucket).
//
//	go test -run '^$' -bench 'RedisHitPath' -benchmem ./tiers/redis
func BenchmarkRedisHitPath(b *testing.B) {
	for _, deploy := range []string{deploySingle, deployCluster} {
		b.Run(deploy, func(b *testing.B) {
			var tier *Tier
			if deploy == deploySingle {
				tier = newTier(b, startRedis(b), quiet)
			} else {
				tier = newClusterTier(b, testredis.StartCluster(b), quiet)
			}
			ctx := context.Background()
			e := cache.Entry{Seq: 7, Status: 200, ETag: `W/"bench"`, Body: bytes.Repeat([]byte("x"), 256)}
			publish(b, tier, 7)
			const guards = 64
			for g := range guards {
				if got := tier.set(ctx, "addr/"+strconv.Itoa(g), strconv.Itoa(g), &e); got != fillStored {
					b.Fatalf("set: %v", got)
				}
			}
			b.Run("serial", func(b *testing.B) {
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					g := strconv.Itoa(i % guards)
					i++
					if _, ok := tier.Get(ctx, "addr/"+g, g); !ok {
						b.Fatal("miss")
					}
				}
			})
			b.Run("parallel", func(b *testing.B) {
				b.SetParallelism(32)
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					i := 0
					for pb.Next() {
						g := strconv.Itoa(i % guards)
						i++
						if _, ok := tier.Get(ctx, "addr/"+g, g); !ok {
							b.Error("miss")
							return
						}
					}
				})
			})
		})
	}
}

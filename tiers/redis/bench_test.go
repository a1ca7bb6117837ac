package redis

import (
	"bytes"
	"context"
	"log/slog"
	"strconv"
	"testing"

	"github.com/utxo-cache/utxo-cache/cache"
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

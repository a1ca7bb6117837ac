package memory

import (
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/utxo-cache/utxo-cache/cache"
)

// BenchmarkMemoryGet measures parallel Gets that hit: 1024 cached entries of
// 512 bytes, each goroutine walking the keys from its own offset.
//
//	go test -run '^$' -bench BenchmarkMemoryGet -cpu 1,2 ./tiers/memory
func BenchmarkMemoryGet(b *testing.B) {
	const n = 1024
	tr := newTier(b, Options{MaxBytes: 64 << 20})
	keys, guards := make([]string, n), make([]string, n)
	body := make([]byte, 512)
	for i := range n {
		guards[i] = "bc1qaddress" + strconv.Itoa(i)
		keys[i] = guards[i] + "/utxos"
		tr.Set(ctx, keys[i], guards[i], cache.Entry{Seq: 1, Status: 200, Body: body})
	}
	tr.Wait()
	for i := range n {
		if _, ok := tr.Get(ctx, keys[i], guards[i]); !ok {
			b.Fatalf("key %d not cached", i)
		}
	}
	var offset atomic.Uint64
	var misses atomic.Uint64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := int(offset.Add(97))
		for pb.Next() {
			k := i % n
			if _, ok := tr.Get(ctx, keys[k], guards[k]); !ok {
				misses.Add(1)
			}
			i++
		}
	})
	b.StopTimer()
	if m := misses.Load(); m > 0 {
		b.Fatalf("%d misses in a hit benchmark", m)
	}
}

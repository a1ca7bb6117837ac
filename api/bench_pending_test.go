package api_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/utxo-cache/utxo-cache/api"
	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

// pendingPool funds n pending transactions: outputs of its own, spread
// over 101 addresses, in transactions of 5,000.
func pendingPool(s *stack, n int) (hashes []string) {
	const perTx = 5_000
	var txs []chain.Tx
	for t := range (n + perTx - 1) / perTx {
		outs := make([]chain.Output, perTx)
		for i := range outs {
			outs[i] = out(fmt.Sprintf("addr%d", i%101), uint64(i+1))
		}
		txs = append(txs, tx(fmt.Sprint("pool", t), nil, outs...))
		hashes = append(hashes, op(fmt.Sprint("pool", t), 0).TxHash.String())
	}
	for i := 0; i < len(txs); i += 10 {
		s.apply(txs[i:min(i+10, len(txs))]...)
	}
	return hashes
}

// pendingBody is a two-output pending transaction spending pool output i.
func pendingBodyOf(hashes []string, i int) string {
	return fmt.Sprintf(`{"hash":"%064x","inputs":[{"tx_hash":"%s","index":%d}],"outputs":[{"address":"addr%d","value":%d},{"address":"change","value":1}]}`,
		i+1, hashes[i/5000], i%5000, i%101, i+1)
}

// BenchmarkPendingPosts posts pending transactions (one input, two
// outputs, in JSON) through the whole handler from 64 concurrent clients
// per GOMAXPROCS to a writer on a store in the temp directory, and reports
// posts/s and posts per change (the group commit shared with leases).
//
//	go test ./api -run '^$' -bench PendingPosts -benchtime 20000x
func BenchmarkPendingPosts(b *testing.B) {
	s := newStack(b, stackConfig{noSpec: true, noMemory: true, api: api.Options{WalletToken: walletToken}})
	hashes := pendingPool(s, b.N)
	var next atomic.Int64
	var failed atomic.Int64
	seq0 := s.store.Published().Seq
	b.SetParallelism(64)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := int(next.Add(1) - 1)
			req := httptest.NewRequest(http.MethodPost, "/v1/pending", strings.NewReader(pendingBodyOf(hashes, i)))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+walletToken)
			rec := httptest.NewRecorder()
			s.h.ServeHTTP(rec, req)
			if rec.Code != http.StatusOK {
				failed.Add(1)
			}
		}
	})
	b.StopTimer()
	if n := failed.Load(); n > 0 {
		b.Fatalf("%d posts refused", n)
	}
	changes := s.store.Published().Seq - seq0
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "posts/s")
	b.ReportMetric(float64(b.N)/float64(max(changes, 1)), "posts/change")
}

// BenchmarkPendingPage reads a 100-item page of an address with 100,000
// pending transactions in the store (about 1,000 of them paying to it and
// spending its outputs), with pending=include and without: the target is
// at most 1.5 × the cost without. Both read the store (no memory tier). As
// in BenchmarkDiskHandlers, the request is served again and again and the
// response writer is reused and discards the body, so allocs/op and B/op
// are the handler's own, and the body's size is reported (MB/s, SetBytes).
//
//	go test ./api -run '^$' -bench PendingPage -benchtime 3000x
func BenchmarkPendingPage(b *testing.B) {
	const n = 100_000
	s := newStack(b, stackConfig{noSpec: true, noMemory: true, disk: disk.Options{Pending: disk.PendingOptions{MaxTxs: n}, CacheBytes: 256 << 20, MemTableBytes: 64 << 20},
		api: api.Options{WalletToken: walletToken}})
	hashes := pendingPool(s, n)
	w := s.w
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := ms.HeapInuse
	post := func(i int) {
		p, err := chain.DecodePendingJSON([]byte(pendingBodyOf(hashes, i)), chain.Limits{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := w.Post(b.Context(), p); err != nil {
			b.Fatal(err)
		}
	}
	var done atomic.Int64
	workers := 64
	errs := make(chan struct{}, workers)
	for range workers {
		go func() {
			for i := int(done.Add(1) - 1); i < n; i = int(done.Add(1) - 1) {
				post(i)
			}
			errs <- struct{}{}
		}()
	}
	for range workers {
		<-errs
	}
	runtime.GC()
	runtime.ReadMemStats(&ms)
	b.Logf("heap in use grew by %d MiB with %d pending transactions: %d bytes each", (ms.HeapInuse-before)>>20, n, (ms.HeapInuse-before)/n)
	for _, q := range []string{"pending=exclude", "pending=include", "pending=exclude&order=desc", "pending=include&order=desc"} {
		b.Run(strings.ReplaceAll(q, "&", ","), func(b *testing.B) {
			req := newReplayRequest(http.MethodGet, "/v1/addresses/addr7/utxos?limit=100&"+q, nil)
			w := newDiscardWriter()
			serveOK(b, s.h, w, req) // warm Pebble's block cache
			b.SetBytes(int64(w.n))
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := processCPU(b)
			for range b.N {
				serveOK(b, s.h, w, req)
			}
			// The process's CPU per request (the GC's included): on a
			// shared machine wall time measures the neighbours too.
			b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

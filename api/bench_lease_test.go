package api_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/utxo-cache/utxo-cache/api"
	"github.com/utxo-cache/utxo-cache/chain"
)

// BenchmarkLeases posts leases through the whole handler from many
// concurrent clients (64 goroutines per GOMAXPROCS… b.SetParallelism) to a
// writer on a store in the temp directory, each request one outpoint of
// its own (the pool is reused, as renewals, when b.N outgrows it), and
// reports leases/s: the group commit puts the requests waiting at once into
// one synced change.
//
//	go test ./api -run '^$' -bench Leases -benchtime 20000x
func BenchmarkLeases(b *testing.B) {
	s := newStack(b, stackConfig{noSpec: true, noMemory: true, api: api.Options{WalletToken: walletToken}})
	const pool, perTx = 20_000, 5_000
	var txs []chain.Tx
	for t := range pool / perTx {
		outs := make([]chain.Output, perTx)
		for i := range outs {
			outs[i] = out(fmt.Sprintf("addr%d", i%101), uint64(i+1))
		}
		txs = append(txs, tx(fmt.Sprint("pool", t), nil, outs...))
	}
	s.apply(txs...)
	hashes := make([]string, pool/perTx)
	for t := range hashes {
		hashes[t] = op(fmt.Sprint("pool", t), 0).TxHash.String()
	}
	var next atomic.Uint64
	var failed atomic.Int64
	seq0 := s.store.Published().Seq
	b.SetParallelism(64)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := next.Add(1) % pool
			body := fmt.Sprintf(`{"lease_id":"b%d","outpoints":[{"tx_hash":"%s","index":%d}]}`, i, hashes[i/perTx], i%perTx)
			req := httptest.NewRequest(http.MethodPost, "/v1/leases", strings.NewReader(body))
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
		b.Fatalf("%d leases refused", n)
	}
	changes := s.store.Published().Seq - seq0
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "leases/s")
	b.ReportMetric(float64(b.N)/float64(max(changes, 1)), "leases/change")
}

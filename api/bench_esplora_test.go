package api_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/utxo-cache/utxo-cache/api/esplora"
	"github.com/utxo-cache/utxo-cache/chain"
)

// BenchmarkEsploraRead compares the Esplora UTXO listing with the /v1
// listing of the same outputs (an address with 1000 live outputs, all of
// them or a 100-item page), answered by the memory tier or from the disk,
// each answer written into a new recorder (write=recorder, as every read
// benchmark), into a buffer kept between answers, as a server's connection
// is (write=conn, serveBenchConn), or sent over HTTP on the loopback
// interface to a client in the same process (write=http, serveBenchHTTP)
// or in another one (write=proc, serveBenchProc: cpu-ns/op is then the
// server's alone):
//
//	go test ./api -run '^$' -bench EsploraRead -count 6 | benchstat -col /api -
func BenchmarkEsploraRead(b *testing.B) {
	for _, tier := range []string{"memory", "disk"} {
		b.Run("tier="+tier, func(b *testing.B) {
			s := newStack(b, stackConfig{noSpec: true, hot: -1, noMemory: tier == "disk", esplora: &esplora.Options{}})
			var txs []chain.Tx
			for i := range 10 {
				var outs []chain.Output
				for j := range 100 {
					outs = append(outs, out(espA, uint64(1000*i+j+1)))
				}
				txs = append(txs, tx(fmt.Sprintf("bench-%d", i), nil, outs...))
			}
			s.apply(txs...)
			for _, r := range []struct{ name, v1, api string }{
				{"all1000", "/v1/addresses/" + espA + "/utxos?limit=1000", "/api/address/" + espA + "/utxo"},
				{"page100", "/v1/addresses/" + espA + "/utxos?limit=100", "/api/address/" + espA + "/utxo?limit=100"},
			} {
				for _, w := range benchWriters {
					b.Run(r.name+"/write="+w.name+"/api=v1", func(b *testing.B) { w.serve(b, s.h, httptest.NewRequest("GET", r.v1, nil)) })
					b.Run(r.name+"/write="+w.name+"/api=esplora", func(b *testing.B) { w.serve(b, s.h, httptest.NewRequest("GET", r.api, nil)) })
				}
			}
		})
	}
}

// benchWriters are the ways the front-end benchmarks write answers.
var benchWriters = []struct {
	name  string
	serve func(b *testing.B, h http.Handler, req *http.Request)
}{
	{"recorder", serveBench},
	{"conn", serveBenchConn},
	{"http", serveBenchHTTP},
	{"proc", serveBenchProc},
}

package api_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/utxo-cache/utxo-cache/blockfrost"
	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/internal/textenc"
)

// BenchmarkBlockfrostRead serves a page of 100 of a Cardano address with 100
// live outputs through the whole handler, as Blockfrost's route and as the
// equivalent /v1 read, with the memory tier (a hit) and with the disk tier
// alone (a disk read and encoding per request), each answer written into a
// new recorder, into a kept buffer or over HTTP (write=, as
// BenchmarkEsploraRead):
//
//	go test ./api -run '^$' -bench BlockfrostRead -count 6 | benchstat -
func BenchmarkBlockfrostRead(b *testing.B) {
	raw := append([]byte{0x01}, bytes.Repeat([]byte{0x11}, 56)...)
	addr := textenc.Bech32("addr", textenc.ConvertBits(raw), textenc.Bech32Const)
	outs := make([]chain.Output, 100)
	for i := range outs {
		outs[i] = out(addr, uint64(1000+i))
	}
	for _, tier := range []string{"memory", "disk"} {
		s := newStack(b, stackConfig{noSpec: true, hot: -1, noMemory: tier == "disk", blockfrost: &blockfrost.Options{}})
		s.apply(tx("bfbench", nil, outs...))
		for _, r := range []struct{ name, target string }{
			{"v1", "/v1/addresses/" + addr + "/utxos?limit=100"},
			{"blockfrost", "/api/v0/addresses/" + addr + "/utxos"},
		} {
			for _, w := range benchWriters {
				b.Run("tier="+tier+"/write="+w.name+"/read="+r.name, func(b *testing.B) {
					req := httptest.NewRequest(http.MethodGet, r.target, nil)
					if s.mem != nil {
						s.h.ServeHTTP(httptest.NewRecorder(), req) // fill
						s.mem.Wait()
					}
					w.serve(b, s.h, req)
				})
			}
		}
	}
}

package cardano

import (
	"bytes"
	"errors"
	"testing"

	"github.com/utxo-cache/utxo-cache/chain"
)

// FuzzConvert feeds the adapter mutations of every fixture block (single and
// chunk): it must return a block or an error of its own classes, never panic,
// and a block it returns must have the shape the chain model needs.
//
//	go test -run '^$' -fuzz FuzzConvert -fuzztime 60s -fuzzminimizetime 0 ./cardano/
//
// -fuzzminimizetime 0: minimizing a new interesting input of tens of KB takes
// minutes (its executions are not counted in the progress line, which then
// shows 0/s), so without it a short run does little but minimize.
//
// maxFuzzSeed leaves out the epoch-0 boundary block (650 KB): the
// mutator's cost grows with the input, and it holds no transaction.
const maxFuzzSeed = 128 << 10

func FuzzConvert(f *testing.F) {
	for _, fx := range allBlocks(f) {
		if len(fx.tagged) <= maxFuzzSeed {
			f.Add(fx.tagged)
		}
	}
	a := newAdapter(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := a.Convert(data)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnknownEra) {
				t.Fatalf("error of no class: %v", err)
			}
			return
		}
		if b.Boundary != (b.Era == EraByronBoundary) || (b.Boundary && len(b.Chain.Txs) != 0) {
			t.Fatalf("boundary %v era %s with %d txs", b.Boundary, b.Era, len(b.Chain.Txs))
		}
		for i := range b.Chain.Txs {
			tx := &b.Chain.Txs[i]
			tx.Creates(func(_ uint32, o *chain.Output, _ bool) {
				if o.Address == "" {
					t.Fatalf("tx %d: output without an address", i)
				}
			})
		}
	})
}

// FuzzRenderAddress: any bytes render or fail, never panic, and a rendered
// bech32 or base58 string decodes back to the same bytes.
func FuzzRenderAddress(f *testing.F) {
	f.Add([]byte{0x61, 1, 2, 3})
	f.Add([]byte{0x82, 0xd8, 0x18})
	f.Fuzz(func(t *testing.T, raw []byte) {
		s, err := RenderAddress(raw)
		if err != nil {
			return
		}
		back, err := addressBytes(s)
		if err != nil || !bytes.Equal(back, raw) {
			t.Fatalf("%x renders %q, which decodes to %x (%v)", raw, s, back, err)
		}
	})
}

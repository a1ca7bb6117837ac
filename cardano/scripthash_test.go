package cardano

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/blinklabs-io/gouroboros/cbor"
	"github.com/blinklabs-io/gouroboros/ledger/common"

	"github.com/utxo-cache/utxo-cache/cardano/script"
	"github.com/utxo-cache/utxo-cache/chain"
)

// TestScriptAndDatumHashes checks cardano/script's hashes, which the store
// indexes reference scripts and inline datums by, against gouroboros's own
// (the ledger library's ScriptRef and Datum) for every reference script and
// inline datum of the real blocks: the single blocks and the chunks.
func TestScriptAndDatumHashes(t *testing.T) {
	a := newAdapter(t)
	var blocks [][]byte
	for _, f := range loadFixtures(t) {
		blocks = append(blocks, f.tagged)
	}
	for _, name := range []string{"01285", "01836"} {
		data, err := os.ReadFile(filepath.Join(fixtureDir(), name+".chunk"))
		if err != nil {
			t.Fatal(err)
		}
		c, err := SplitChunk(data, nil)
		if err != nil {
			t.Fatal(err)
		}
		blocks = append(blocks, c.Blocks...)
	}
	refs, datums := 0, 0
	kinds := map[script.Language]int{}
	for _, tagged := range blocks {
		b, err := a.Convert(tagged)
		if err != nil {
			continue // an era this test does not need (Byron, a patched block)
		}
		for _, tx := range b.Chain.Txs {
			outs := tx.Outputs
			if tx.CollateralReturn != nil {
				outs = append(outs[:len(outs):len(outs)], *tx.CollateralReturn)
			}
			for _, o := range outs {
				checkOutputHashes(t, &o, &refs, &datums, kinds)
			}
		}
	}
	if refs == 0 || datums == 0 {
		t.Fatalf("%d reference scripts, %d inline datums: the data has both", refs, datums)
	}
	t.Logf("%d reference scripts (by language: %v), %d inline datums: hashes agree with gouroboros", refs, kinds, datums)
}

func checkOutputHashes(t *testing.T, o *chain.Output, refs, datums *int, kinds map[script.Language]int) {
	t.Helper()
	if o.ScriptRef != nil {
		*refs++
		r, err := script.ParseRef(o.ScriptRef)
		if err != nil {
			t.Fatalf("reference script %x: %v", o.ScriptRef, err)
		}
		kinds[r.Language]++
		wrapped, err := cbor.Encode(cbor.Tag{Number: 24, Content: o.ScriptRef})
		if err != nil {
			t.Fatal(err)
		}
		var sr common.ScriptRef
		if err := sr.UnmarshalCBOR(wrapped); err != nil {
			t.Fatalf("gouroboros reads reference script %x: %v", o.ScriptRef, err)
		}
		if h := sr.Script.Hash(); string(h[:]) != string(r.Hash[:]) {
			t.Fatalf("reference script %x: hash %x, gouroboros %x", o.ScriptRef, r.Hash, h)
		}
	}
	if o.Datum != nil {
		*datums++
		var d common.Datum
		if _, err := cbor.Decode(o.Datum, &d); err != nil {
			t.Fatalf("gouroboros reads datum %x: %v", o.Datum, err)
		}
		if h, want := script.DatumHash(o.Datum), d.Hash(); string(h[:]) != string(want[:]) {
			t.Fatalf("datum %x: hash %x, gouroboros %x", o.Datum, h, want)
		}
	}
}

package disk_test

import (
	"encoding/binary"
	"testing"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

// TestSpenderVinCompat: a spend records the spending input (state 0x04);
// a spent record written before that (state 0x02, as a schema-2 store holds
// them) reads with the input unknown, never as input 0; and a schema-2
// store is raised (to SchemaVersion) by the first block it applies, not by
// opening.
func TestSpenderVinCompat(t *testing.T) {
	dir := t.TempDir()
	st := stOpen(t, dir, disk.Options{})
	blocks := stChain(1, 1, 3)
	// Block 3's spender gets a second input ahead of the one stChain
	// gives it, so that the spend goes through input 1.
	blocks[2].Txs[1].Inputs = append([]chain.OutPoint{{TxHash: blocks[0].Txs[0].Hash, Index: 1}}, blocks[2].Txs[1].Inputs...)
	st.apply(blocks...)
	aliceOf2 := chain.OutPoint{TxHash: blocks[1].Txs[0].Hash, Index: 0} // spent by block 3's input 1
	aliceOf1 := chain.OutPoint{TxHash: blocks[0].Txs[0].Hash, Index: 0} // spent by block 2's input 0

	readSpent := func(op chain.OutPoint) disk.UtxoRef {
		t.Helper()
		v, err := st.s.PublishedView()
		if err != nil {
			t.Fatal(err)
		}
		defer v.Close()
		var got disk.UtxoRef
		if err := v.UtxoFunc(op, func(r *disk.UtxoRef) error { got = *r; return nil }); err != nil {
			t.Fatal(err)
		}
		if !got.Spent {
			t.Fatalf("%s is not spent", op)
		}
		return got
	}
	if r := readSpent(aliceOf2); !r.SpenderVinKnown || r.SpenderVin != 1 || r.SpenderTxHash != blocks[2].Txs[1].Hash || r.SpentHeight != 3 {
		t.Fatalf("spent record of %s: %+v", aliceOf2, r)
	}
	if r := readSpent(aliceOf1); !r.SpenderVinKnown || r.SpenderVin != 0 {
		t.Fatalf("spent record of %s: %+v", aliceOf1, r)
	}
	st.close()

	// Turn the store into what a schema-2 binary wrote: schema row 2, and
	// aliceOf2's record in state 0x02, without the input.
	keySchema := []byte{0x01, 'V'}
	if raw := stGetRaw(t, dir, keySchema); raw[3] != byte(disk.SchemaVersion) {
		t.Fatalf("schema row %x, want version %d", raw, disk.SchemaVersion)
	}
	stSetRaw(t, dir, keySchema, stUnhex(t, "00000002 01 01"))
	key := append([]byte{0x02}, aliceOf2.TxHash[:]...)
	key = binary.BigEndian.AppendUint32(key, aliceOf2.Index)
	rec := stGetRaw(t, dir, key)
	if rec[1] != 0x04 {
		t.Fatalf("record state %x, want 04", rec[1])
	}
	old := append([]byte{rec[0], 0x02}, rec[2:len(rec)-4]...)
	stSetRaw(t, dir, key, old)

	st = stOpen(t, dir, disk.Options{})
	if r := readSpent(aliceOf2); r.SpenderVinKnown || r.SpenderVin != 0 || r.SpenderTxHash != blocks[2].Txs[1].Hash || r.SpentHeight != 3 {
		t.Fatalf("old spent record of %s: %+v, want the input unknown", aliceOf2, r)
	}
	st.close()
	if raw := stGetRaw(t, dir, keySchema); raw[3] != 2 {
		t.Fatalf("schema row %x after an open, want still version 2", raw)
	}
	st = stOpen(t, dir, disk.Options{})
	next := stChain(1, 3, 4)[1] // links to block 3: stChain's hashes are per (tag, height)
	next.Txs = next.Txs[:1]     // its spender's input is block 3's alice, whose hash is the same too
	st.apply(next)
	st.close()
	if raw := stGetRaw(t, dir, keySchema); raw[3] != byte(disk.SchemaVersion) {
		t.Fatalf("schema row %x after a block, want version %d", raw, disk.SchemaVersion)
	}
}

package chain_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/utxo-cache/utxo-cache/chain"
)

func changeHash(b byte) chain.Hash {
	var h chain.Hash
	for i := range h {
		h[i] = b
	}
	return h
}

// TestChangeRoundTrip: every kind of record encodes deterministically and
// decodes to what was encoded, one after another in a CBOR sequence.
func TestChangeRoundTrip(t *testing.T) {
	block := &chain.Block{Height: 7, Hash: changeHash(7), PrevHash: changeHash(6), Txs: []chain.Tx{{
		Hash: changeHash(0x70), Outputs: []chain.Output{{Address: "alice", Value: 5}},
	}}}
	changes := []*chain.Change{
		{Seq: 1, Kind: chain.ChangeApply, Block: block,
			After: chain.Summary{Tip: chain.Tip{Height: 7, Hash: changeHash(7)}, UtxoCount: 1, Digest: chain.Digest(changeHash(0xdd))}},
		{Seq: 2, Kind: chain.ChangeRollback, Target: chain.Tip{Height: 6, Hash: changeHash(6)},
			After: chain.Summary{Tip: chain.Tip{Height: 6, Hash: changeHash(6)}}},
		{Seq: 3, Kind: chain.ChangeRollback, Target: chain.Tip{Empty: true, Height: 2},
			After: chain.Summary{Tip: chain.Tip{Empty: true}}},
	}
	var seq []byte
	for _, c := range changes {
		var err error
		if seq, err = chain.AppendChangeCBOR(seq, c); err != nil {
			t.Fatal(err)
		}
	}
	again, _ := chain.AppendChangeCBOR(nil, changes[1])
	if !bytes.Contains(seq, again) {
		t.Fatal("a record encodes differently twice")
	}
	rest := seq
	for i, want := range changes {
		got, r, err := chain.DecodeChangeCBOR(rest, chain.Limits{})
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		rest = r
		if got.Seq != want.Seq || got.Kind != want.Kind || got.Target != want.Target || got.After != want.After {
			t.Fatalf("record %d: got %+v, want %+v", i, got, want)
		}
		if want.Block != nil && !bytes.Equal(chain.AppendBlockCBOR(nil, got.Block), chain.AppendBlockCBOR(nil, want.Block)) {
			t.Fatalf("record %d: block differs", i)
		}
	}
	if len(rest) != 0 {
		t.Fatalf("%d bytes left", len(rest))
	}
}

// TestChangeRejects: malformed records are ErrInvalidChange, never a panic.
func TestChangeRejects(t *testing.T) {
	good, err := chain.AppendChangeCBOR(nil, &chain.Change{Seq: 2, Kind: chain.ChangeRollback,
		Target: chain.Tip{Height: 1, Hash: changeHash(1)}, After: chain.Summary{Tip: chain.Tip{Height: 1, Hash: changeHash(1)}}})
	if err != nil {
		t.Fatal(err)
	}
	for n := range len(good) {
		if _, _, err := chain.DecodeChangeCBOR(good[:n], chain.Limits{}); !errors.Is(err, chain.ErrInvalidChange) {
			t.Fatalf("cut to %d bytes: %v", n, err)
		}
	}
	for _, bad := range [][]byte{
		{0xa0},                            // {}
		{0xf6},                            // null
		{0xa1, 0x63, 's', 'e', 'q', 0x01}, // seq alone
	} {
		if _, _, err := chain.DecodeChangeCBOR(bad, chain.Limits{}); !errors.Is(err, chain.ErrInvalidChange) {
			t.Fatalf("%x: %v", bad, err)
		}
	}
}

func FuzzDecodeChangeCBOR(f *testing.F) {
	good, _ := chain.AppendChangeCBOR(nil, &chain.Change{Seq: 2, Kind: chain.ChangeRollback,
		Target: chain.Tip{Height: 1, Hash: changeHash(1)}, After: chain.Summary{Tip: chain.Tip{Height: 1, Hash: changeHash(1)}}})
	f.Add(good)
	f.Fuzz(func(t *testing.T, data []byte) {
		c, _, err := chain.DecodeChangeCBOR(data, chain.Limits{})
		if err != nil {
			return
		}
		// What decodes re-encodes and decodes to the same change.
		enc, err := chain.AppendChangeCBOR(nil, c)
		if err != nil {
			t.Fatalf("decoded %+v does not encode: %v", c, err)
		}
		again, _, err := chain.DecodeChangeCBOR(enc, chain.Limits{})
		if err != nil || again.Seq != c.Seq || again.Kind != c.Kind || again.Target != c.Target || again.After != c.After {
			t.Fatalf("round trip: %+v, %v; want %+v", again, err, c)
		}
	})
}

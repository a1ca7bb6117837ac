package disk

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/utxo-cache/utxo-cache/chain"
)

// FuzzValueDecoders feeds arbitrary bytes to every decoder of a stored
// value (record, index value, balance, undo delta, state, schema, settings,
// block-hash row, freeze row, asset quantity) and of the asset row's key,
// whose key holds fields: none may
// panic, a failure must be ErrCorrupt, and a value that decodes must encode
// back to exactly the same bytes (the encodings are canonical, so a
// decoder that accepted two spellings of one value would be caught).
// The golden encodings seed the corpus.
func FuzzValueDecoders(f *testing.F) {
	const fuzzKinds = 11
	for _, c := range goldenCodecs() {
		for _, g := range c.goldens {
			b, err := hex.DecodeString(strings.ReplaceAll(g, " ", ""))
			if err != nil {
				f.Fatal(err)
			}
			for kind := range byte(fuzzKinds) {
				f.Add(kind, b)
			}
		}
	}
	for _, s := range []string{
		"01 0000000000000870 00000000000010e0",
		"02 0000000000000870 00000000000010e0 07 63617264616e6f", // the meta.go example
	} {
		b, _ := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
		f.Add(byte(6), b)
	}
	for _, g := range blockHashRowGoldens {
		b, err := hex.DecodeString(strings.ReplaceAll(g.hex, " ", ""))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(byte(7), b)
	}
	f.Add(byte(9), appendAssetKey(nil, goldDimKey, []byte{0xab, 0xcd}, []byte("n")))
	f.Add(byte(10), appendAssetQuantity(nil, chain.Uint128{Hi: 1, Lo: 2}))
	op := chain.OutPoint{TxHash: chain.Hash{1, 2, 3}, Index: 7}
	f.Fuzz(func(t *testing.T, kind byte, b []byte) {
		var got []byte
		var err error
		switch kind % fuzzKinds {
		case 0:
			var r Record
			if r, err = decodeRecord(op, b); err == nil {
				got = appendRecord(nil, &r)
			}
		case 1:
			// Through the in-place parse: a frozen index value keeps its mark.
			var r UtxoRef
			if err = parseIndexValue(op.Index, b, &r); err == nil {
				rec := r.record()
				got = appendRecord(append([]byte(nil), rec.Utxo.TxHash[:]...), &rec)
			}
		case 2:
			var r balanceRow
			if r, err = decodeBalanceRow(b); err == nil {
				got = appendRow(nil, &r)
			}
		case 3:
			var u undoDelta
			if u, err = decodeUndo(b); err == nil {
				got = appendUndo(nil, &u)
			}
		case 4:
			var s State
			if s, err = decodeState(b); err == nil {
				got = appendState(nil, &s)
				if b[0] == stateVersion1 { // migrated: written back as version 2
					if again, err := decodeState(got); err != nil || again != s {
						t.Fatalf("state %x migrates to %x, which decodes as %+v, %v", b, got, again, err)
					}
					return
				}
			}
		case 5:
			var s schema
			if s, err = decodeSchema(b); err == nil {
				if s.version > SchemaVersion {
					return // reported, not decoded: Open refuses it
				}
				got = appendSchema(nil, &s)
			}
		case 6:
			var s settings
			if s, err = decodeSettings(b); err == nil {
				got = appendSettings(nil, &s)
			}
		case 7:
			var p chain.Point
			if p, err = decodeBlockHashRow(9, b); err == nil {
				got = appendBlockHashRow(nil, p.Hash, p.Slot)
			}
		case 8:
			var fi FreezeInfo
			if fi, err = decodeFreezeRow(b); err == nil {
				got = appendFreezeRow(nil, &fi)
			}
		case 9:
			var policy, name []byte
			if policy, name, err = parseAssetKey(b); err == nil {
				got = appendAssetKey(nil, DimKey(b[1:1+dimKeySize]), policy, name)
			}
		case 10:
			var q chain.Uint128
			if q, err = decodeAssetQuantity(b); err == nil {
				got = appendAssetQuantity(nil, q)
			}
		}
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("kind %d: error %v is not ErrCorrupt", kind%fuzzKinds, err)
			}
			return
		}
		if !bytes.Equal(got, b) {
			t.Fatalf("kind %d: %x decodes, but encodes back as %x", kind%fuzzKinds, b, got)
		}
	})
}

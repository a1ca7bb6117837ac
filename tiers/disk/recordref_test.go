package disk

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/utxo-cache/utxo-cache/chain"
)

// testRand returns the generator of a randomized test: seeded by the
// package's -seed flag (faultfs_test.go), or, without it, by a random seed,
// printed for replay.
func testRand(t *testing.T) *rand.Rand {
	seed := flag.Lookup("seed").Value.(flag.Getter).Get().(uint64)
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("seed %d (replay with -run '%s$' -seed=%d)", seed, t.Name(), seed)
	return rand.New(rand.NewPCG(seed, 0))
}

// randomRecord draws a record over every field's range: empty and non-empty
// variable fields, every flag combination, live and spent.
func randomRecord(rng *rand.Rand) Record {
	blob := func(max int) []byte {
		switch rng.IntN(3) {
		case 0:
			return nil
		case 1:
			return []byte{byte(rng.Uint32())}
		}
		b := make([]byte, 1+rng.IntN(max))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	var r Record
	u := &r.Utxo
	u.OutPoint = chain.OutPoint{TxHash: chain.Hash{byte(rng.Uint32()), 1}, Index: rng.Uint32()}
	u.Height = rng.Uint64() >> rng.IntN(64)
	u.TxPos = rng.Uint32() >> rng.IntN(32)
	u.Flags = byte(rng.IntN(4))
	u.Value = rng.Uint64() >> rng.IntN(64)
	u.Address = string(blob(maxAddressLen))
	for range rng.IntN(4) {
		u.Assets = append(u.Assets, chain.Asset{Policy: blob(maxAssetField), Name: blob(maxAssetField), Quantity: rng.Uint64() >> rng.IntN(64)})
	}
	if rng.IntN(2) == 0 {
		h := chain.Hash{byte(rng.Uint32()), 2}
		u.DatumHash = &h
	}
	u.Datum = blob(300)
	u.ScriptRef = blob(300)
	if rng.IntN(2) == 0 {
		r.Spent = &chain.Spent{TxHash: chain.Hash{byte(rng.Uint32()), 3}, Height: rng.Uint64() >> rng.IntN(64)}
	}
	return r
}

// TestUtxoRefMatchesRecord: a record read in place holds exactly the
// fields of the record that was stored, on randomized records, and every
// truncation of a stored record is refused (ErrCorrupt), never misread.
func TestUtxoRefMatchesRecord(t *testing.T) {
	rng := testRand(t)
	for range 2000 {
		want := randomRecord(rng)
		b := appendRecord(nil, &want)
		var r UtxoRef
		if err := ParseRecord(want.Utxo.OutPoint, b, &r); err != nil {
			t.Fatalf("parse %x: %v", b, err)
		}
		checkRef(t, &r, &want)
		u, spent := r.Utxo()
		if !reflect.DeepEqual(Record{Utxo: u, Spent: spent}, want) {
			t.Fatalf("Utxo() = %+v %+v, want %+v", u, spent, want)
		}
		if want.Spent == nil {
			iv := appendIndexValue(nil, &want.Utxo)
			var ir UtxoRef
			if err := parseIndexValue(want.Utxo.Index, iv, &ir); err != nil {
				t.Fatalf("parse index value %x: %v", iv, err)
			}
			checkRef(t, &ir, &want)
		}
		cut := rng.IntN(len(b))
		if err := ParseRecord(want.Utxo.OutPoint, b[:cut], &r); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("record %x cut at %d: %v, want ErrCorrupt", b, cut, err)
		}
	}
}

// checkRef compares a UtxoRef field by field with the record it was read from.
func checkRef(t *testing.T, r *UtxoRef, want *Record) {
	t.Helper()
	u := &want.Utxo
	nilOrEqual := func(name string, got, want []byte) {
		if (got == nil) != (len(want) == 0) || !bytes.Equal(got, want) {
			t.Fatalf("%s = %x (nil %v), want %x", name, got, got == nil, want)
		}
	}
	if r.OutPoint != u.OutPoint || r.Height != u.Height || r.TxPos != u.TxPos || r.Flags != u.Flags || r.Value != u.Value {
		t.Fatalf("fixed fields %+v, want %+v", r, u)
	}
	nilOrEqual("address", r.Address, []byte(u.Address))
	nilOrEqual("datum", r.Datum, u.Datum)
	nilOrEqual("script_ref", r.ScriptRef, u.ScriptRef)
	if u.DatumHash == nil {
		nilOrEqual("datum_hash", r.DatumHash, nil)
	} else {
		nilOrEqual("datum_hash", r.DatumHash, u.DatumHash[:])
	}
	if r.AssetCount() != len(u.Assets) {
		t.Fatalf("%d assets, want %d", r.AssetCount(), len(u.Assets))
	}
	it := r.Assets()
	for i, a := range u.Assets {
		policy, name, q, ok := it.Next()
		if !ok {
			t.Fatalf("asset %d missing", i)
		}
		nilOrEqual("policy", policy, a.Policy)
		nilOrEqual("name", name, a.Name)
		if q != a.Quantity {
			t.Fatalf("asset %d quantity %d, want %d", i, q, a.Quantity)
		}
	}
	if _, _, _, ok := it.Next(); ok {
		t.Fatal("an asset after the last")
	}
	if r.Spent != (want.Spent != nil) || (want.Spent != nil && (r.SpenderTxHash != want.Spent.TxHash || r.SpentHeight != want.Spent.Height)) {
		t.Fatalf("spent %v %x %d, want %+v", r.Spent, r.SpenderTxHash, r.SpentHeight, want.Spent)
	}
}

// FuzzUtxoRef: reading any bytes in place never panics; a failure is
// ErrCorrupt, and bytes that parse are a canonical record: copied out of the
// ref and encoded again they are the same bytes, with every asset walked.
func FuzzUtxoRef(f *testing.F) {
	for _, g := range []string{
		"01 01 0000000000000009 00000000 01 80e497d012 04 3141317a 00 00 00 00",
	} {
		b, _ := hex.DecodeString(strings.ReplaceAll(g, " ", ""))
		f.Add(b)
	}
	rng := rand.New(rand.NewPCG(1, 1))
	for range 20 {
		r := randomRecord(rng)
		f.Add(appendRecord(nil, &r))
	}
	op := chain.OutPoint{TxHash: chain.Hash{9}, Index: 3}
	f.Fuzz(func(t *testing.T, b []byte) {
		var r UtxoRef
		if err := ParseRecord(op, b, &r); err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not match ErrCorrupt", err)
			}
			return
		}
		u, spent := r.Utxo()
		rec := Record{Utxo: u, Spent: spent}
		if got := appendRecord(nil, &rec); !bytes.Equal(got, b) {
			t.Fatalf("re-encoded %x, stored %x", got, b)
		}
		checkRef(t, &r, &rec)
	})
}

// TestMakeDimKeyLengths: the stack-buffer hashing of MakeDimKey gives
// SHA-256(dim || value) on both sides of its bound.
func TestMakeDimKeyLengths(t *testing.T) {
	for _, n := range []int{0, 1, 34, maxAddressLen - 1, maxAddressLen, maxAddressLen + 1, 4 * maxAddressLen} {
		v := bytes.Repeat([]byte{'a'}, n)
		sum := sha256.Sum256(append([]byte{byte(DimAddress)}, v...))
		if got := MakeDimKey(DimAddress, v); !bytes.Equal(got[:], sum[:dimKeySize]) {
			t.Errorf("value of %d bytes: key %x, want %x", n, got, sum[:dimKeySize])
		}
	}
}

package disk

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/utxo-cache/utxo-cache/chain"
)

// Golden encodings of every key and value format, at their boundary values.
// The hex is written out here, field by field (spaces separate fields), and
// not produced by the code under test: a change to a persisted format fails
// these tests, and must bump that format's version with a migration test
// (CONTRIBUTING.md, byte formats).
//
// Each value golden is checked both ways (encode equals the golden, decoding
// the golden gives the value), then TestGoldenMalformed feeds every decoder
// every truncation of its goldens, a trailing byte, and every single-bit
// flip: a decoder must reject the first two with ErrCorrupt and, whatever
// the input, never panic and never fail with any other error.

// Hex for repeated-byte hashes and fields.
var (
	hexAA = strings.Repeat("aa", 32)
	hexBB = strings.Repeat("bb", 32)
	hexCC = strings.Repeat("cc", 32)
	hexDD = strings.Repeat("dd", 32)
	hex00 = strings.Repeat("00", 32)
	// hexField64 is an asset policy or name of the contract's maximum size.
	hexField64 = strings.Repeat("ab", maxAssetField)
)

// goldHash returns a hash of 32 bytes b.
func goldHash(b byte) chain.Hash {
	var h chain.Hash
	for i := range h {
		h[i] = b
	}
	return h
}

func goldHashPtr(b byte) *chain.Hash { h := goldHash(b); return &h }

// unhex decodes a golden written as hex groups separated by spaces.
func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatalf("bad golden hex %q: %v", s, err)
	}
	return b
}

// goldDimKey is 00 01 02 .. 0f.
var goldDimKey = DimKey{0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f}

const hexDimKey = "000102030405060708090a0b0c0d0e0f"

func TestGoldenKeys(t *testing.T) {
	maxPos := chain.Position{Height: math.MaxUint64, TxPos: math.MaxUint32, Index: math.MaxUint32}
	cases := []struct {
		name string
		got  []byte
		want string
	}{
		{"schema key", keySchema, "01 56"},
		{"state key", keyState, "01 54"},
		{"secret key", keySecret, "01 4b"},
		{"outpoint index 0", appendOutPointKey(nil, chain.OutPoint{TxHash: goldHash(0xaa), Index: 0}), "02 " + hexAA + " 00000000"},
		{"outpoint index max", appendOutPointKey(nil, chain.OutPoint{TxHash: goldHash(0xaa), Index: math.MaxUint32}), "02 " + hexAA + " ffffffff"},
		{"outpoint appends", appendOutPointKey([]byte{0xee}, chain.OutPoint{TxHash: goldHash(0xbb), Index: 0x01020304}), "ee 02 " + hexBB + " 01020304"},
		{"index key zero position", appendIndexKey(nil, goldDimKey, chain.Position{}), "03 " + hexDimKey + " 0000000000000000 00000000 00000000"},
		{"index key max position", appendIndexKey(nil, goldDimKey, maxPos), "03 " + hexDimKey + " ffffffffffffffff ffffffff ffffffff"},
		{"index key fields in order", appendIndexKey(nil, goldDimKey, chain.Position{Height: 0x0102030405060708, TxPos: 0x090a0b0c, Index: 0x0d0e0f10}),
			"03 " + hexDimKey + " 0102030405060708 090a0b0c 0d0e0f10"},
		{"balance key", appendBalanceKey(nil, goldDimKey), "04 " + hexDimKey},
		// Asset rows: the policy zero-padded to 64 bytes, its length, the name.
		{"asset key", appendAssetKey(nil, goldDimKey, []byte{0xab, 0xcd}, []byte("n")),
			"04 " + hexDimKey + " abcd" + strings.Repeat("00", 62) + " 02 6e"},
		{"asset key, empty policy and name", appendAssetKey(nil, goldDimKey, nil, nil),
			"04 " + hexDimKey + " " + strings.Repeat("00", 64) + " 00"},
		{"asset key, policy of 64 bytes", appendAssetKey(nil, goldDimKey, bytes.Repeat([]byte{0xff}, 64), []byte{1}),
			"04 " + hexDimKey + " " + strings.Repeat("ff", 64) + " 40 01"},
		{"asset quantity", appendAssetQuantity(nil, chain.Uint128{Hi: 1, Lo: 2}), "0000000000000001 0000000000000002"},
		{"spent-at height 0", heightKey(prefixSpentAt, 0), "05 0000000000000000"},
		{"undo height 0", heightKey(prefixUndo, 0), "06 0000000000000000"},
		{"undo height max", heightKey(prefixUndo, math.MaxUint64), "06 ffffffffffffffff"},
		{"block hash height", heightKey(prefixBlockHash, 0x0102030405060708), "07 0102030405060708"},
		{"hash to height", hashBlockKey(goldHash(0xcc)), "08 " + hexCC},
		// Dimension keys: SHA-256(dimension id || value)[:16], computed
		// independently (python3 hashlib).
		{"address dim key", func() []byte { k := AddressKey("1A1z"); return k[:] }(), "7b96634aec6d9ed0befbfebc586acad1"},
		{"empty address dim key", func() []byte { k := AddressKey(""); return k[:] }(), "4bf5122f344554c53bde2ebb8cd2b7e3"},
		{"asset policy dim key", func() []byte { k := MakeDimKey(DimAssetPolicy, unhex(t, strings.Repeat("ab", 28))); return k[:] }(),
			"85bdf4fef58777b8f8d7d0acde586352"},
	}
	for _, c := range cases {
		if want := unhex(t, c.want); !bytes.Equal(c.got, want) {
			t.Errorf("%s:\n got %x\nwant %x", c.name, c.got, want)
		}
	}
}

func TestGoldenOutPointKeyDecode(t *testing.T) {
	for _, op := range []chain.OutPoint{
		{TxHash: goldHash(0xaa), Index: 0},
		{TxHash: goldHash(0xaa), Index: math.MaxUint32},
	} {
		got, ok := decodeOutPointKey(appendOutPointKey(nil, op))
		if !ok || got != op {
			t.Errorf("round trip of %s: %s %v", op, got, ok)
		}
	}
	good := unhex(t, "02 "+hexAA+" 00000001")
	for name, k := range map[string][]byte{
		"empty":          nil,
		"short":          good[:len(good)-1],
		"long":           append(append([]byte(nil), good...), 0),
		"wrong prefix":   append([]byte{prefixIndex}, good[1:]...),
		"index key size": appendIndexKey(nil, goldDimKey, chain.Position{}),
	} {
		if op, ok := decodeOutPointKey(k); ok {
			t.Errorf("%s: decodeOutPointKey(%x) = %s, want rejected", name, k, op)
		}
	}
}

func TestGoldenIndexPositionDecode(t *testing.T) {
	for _, p := range []chain.Position{
		{},
		{Height: math.MaxUint64, TxPos: math.MaxUint32, Index: math.MaxUint32},
		{Height: 1, TxPos: 2, Index: 3},
	} {
		got, ok := decodeIndexPosition(appendIndexKey(nil, goldDimKey, p))
		if !ok || got != p {
			t.Errorf("round trip of %+v: %+v %v", p, got, ok)
		}
	}
	good := unhex(t, "03 "+hexDimKey+" 0000000000000009 00000001 00000002")
	if p, ok := decodeIndexPosition(good); !ok || p != (chain.Position{Height: 9, TxPos: 1, Index: 2}) {
		t.Errorf("golden decodes to %+v %v", p, ok)
	}
	for name, k := range map[string][]byte{
		"empty":        nil,
		"short":        good[:len(good)-1],
		"long":         append(append([]byte(nil), good...), 0),
		"wrong prefix": append([]byte{prefixBalance}, good[1:]...),
	} {
		if p, ok := decodeIndexPosition(k); ok {
			t.Errorf("%s: decodeIndexPosition(%x) = %+v, want rejected", name, k, p)
		}
	}
}

func TestGoldenIndexBounds(t *testing.T) {
	allFF := DimKey{}
	for i := range allFF {
		allFF[i] = 0xff
	}
	lastFF := goldDimKey
	lastFF[15] = 0xff
	cases := []struct {
		name   string
		dk     DimKey
		lo, hi string
	}{
		{"no carry", goldDimKey, "03 " + hexDimKey, "03 000102030405060708090a0b0c0d0e10"},
		{"carry one byte", lastFF, "03 000102030405060708090a0b0c0d0eff", "03 000102030405060708090a0b0c0d0f00"},
		{"all zero", DimKey{}, "03 00000000000000000000000000000000", "03 00000000000000000000000000000001"},
		// Every byte carries: no 17-byte key is above all of dk's keys, so
		// the bound is the next keyspace.
		{"all 0xff carries into the prefix", allFF, "03 ffffffffffffffffffffffffffffffff", "04"},
	}
	maxPos := chain.Position{Height: math.MaxUint64, TxPos: math.MaxUint32, Index: math.MaxUint32}
	for _, c := range cases {
		lo, hi := indexBounds(nil, c.dk)
		if want := unhex(t, c.lo); !bytes.Equal(lo, want) {
			t.Errorf("%s: lo %x, want %x", c.name, lo, want)
		}
		if want := unhex(t, c.hi); !bytes.Equal(hi, want) {
			t.Errorf("%s: hi %x, want %x", c.name, hi, want)
		}
		// Every index key of dk is inside [lo, hi).
		for _, p := range []chain.Position{{}, maxPos} {
			k := appendIndexKey(nil, c.dk, p)
			if bytes.Compare(k, lo) < 0 || bytes.Compare(k, hi) >= 0 {
				t.Errorf("%s: key %x outside [%x, %x)", c.name, k, lo, hi)
			}
		}
	}
}

// recordGoldens are 0x02 values for the outpoint goldOp.
var goldOp = chain.OutPoint{TxHash: goldHash(0xaa), Index: 7}

var recordGoldens = []struct {
	name string
	rec  Record
	hex  string
}{
	{
		// The worked example of record.go's doc comment.
		name: "doc example",
		rec: Record{Utxo: chain.Utxo{OutPoint: goldOp, Height: 9, Flags: chain.FlagCoinbase,
			Output: chain.Output{Address: "1A1z", Value: 5_000_000_000}}},
		hex: "01 01 0000000000000009 00000000 01 80e497d012 04 3141317a 00 00 00 00",
	},
	{
		name: "value 0",
		rec:  Record{Utxo: chain.Utxo{OutPoint: goldOp, Output: chain.Output{Address: "a"}}},
		hex:  "01 01 0000000000000000 00000000 00 00 01 61 00 00 00 00",
	},
	{
		name: "max fixed fields and uvarint",
		rec: Record{Utxo: chain.Utxo{OutPoint: goldOp, Height: math.MaxUint64, TxPos: math.MaxUint32,
			Flags: chain.FlagCoinbase | chain.FlagCollateralReturn, Output: chain.Output{Address: "a", Value: math.MaxUint64}}},
		hex: "01 01 ffffffffffffffff ffffffff 03 ffffffffffffffffff01 01 61 00 00 00 00",
	},
	{
		name: "collateral return",
		rec: Record{Utxo: chain.Utxo{OutPoint: goldOp, Height: 1, TxPos: 2, Flags: chain.FlagCollateralReturn,
			Output: chain.Output{Address: "a", Value: 127}}},
		hex: "01 01 0000000000000001 00000002 02 7f 01 61 00 00 00 00",
	},
	{
		name: "assets",
		rec: Record{Utxo: chain.Utxo{OutPoint: goldOp, Output: chain.Output{Address: "a", Value: 128, Assets: []chain.Asset{
			{Policy: []byte{0x01, 0x02}, Quantity: 1}, // empty name
			{Policy: bytes.Repeat([]byte{0xab}, maxAssetField), Name: []byte("name"), Quantity: math.MaxUint64},
		}}}},
		hex: "01 01 0000000000000000 00000000 00 8001 01 61" +
			" 02  02 0102 00 01  40 " + hexField64 + " 04 6e616d65 ffffffffffffffffff01" +
			" 00 00 00",
	},
	{
		name: "datum hash present",
		rec:  Record{Utxo: chain.Utxo{OutPoint: goldOp, Output: chain.Output{Address: "a", DatumHash: goldHashPtr(0xdd)}}},
		hex:  "01 01 0000000000000000 00000000 00 00 01 61 00 01 " + hexDD + " 00 00",
	},
	{
		name: "datum and script ref",
		rec: Record{Utxo: chain.Utxo{OutPoint: goldOp, Output: chain.Output{Address: "a",
			Datum: []byte{0xd1, 0xd2}, ScriptRef: []byte{0xc0, 0xff, 0xee}}}},
		hex: "01 01 0000000000000000 00000000 00 00 01 61 00 00 02 d1d2 03 c0ffee",
	},
	{
		name: "spent",
		rec: Record{
			Utxo: chain.Utxo{OutPoint: goldOp, Height: 9, Flags: chain.FlagCoinbase,
				Output: chain.Output{Address: "1A1z", Value: 5_000_000_000}},
			Spent: &chain.Spent{TxHash: goldHash(0xbb), Height: 0x0102030405060708},
		},
		hex: "01 02 0000000000000009 00000000 01 80e497d012 04 3141317a 00 00 00 00 " + hexBB + " 0102030405060708",
	},
	{
		// State 0x03: live and frozen (freeze.go), the layout of a live record.
		name: "frozen coinbase",
		rec: Record{Utxo: chain.Utxo{OutPoint: goldOp, Height: 9, Flags: chain.FlagCoinbase,
			Output: chain.Output{Address: "1A1z", Value: 5_000_000_000}}, Frozen: true},
		hex: "01 03 0000000000000009 00000000 01 80e497d012 04 3141317a 00 00 00 00",
	},
	{
		name: "spent at max height, everything present",
		rec: Record{
			Utxo: chain.Utxo{OutPoint: goldOp, Output: chain.Output{Address: "a", Value: 1,
				Assets:    []chain.Asset{{Policy: []byte{0x01}, Name: []byte{0x02}, Quantity: 3}},
				DatumHash: goldHashPtr(0xdd), Datum: []byte{0xd1}, ScriptRef: []byte{0xc0}}},
			Spent: &chain.Spent{TxHash: goldHash(0xbb), Height: math.MaxUint64},
		},
		hex: "01 02 0000000000000000 00000000 00 01 01 61 01 01 01 01 02 03 01 " + hexDD + " 01 d1 01 c0 " +
			hexBB + " ffffffffffffffff",
	}, {
		// State 0x04 (schema 3): spent, with the spending input's index;
		// the second example of record.go's doc comment.
		name: "spent, with the spending input",
		rec: Record{
			Utxo: chain.Utxo{OutPoint: goldOp, Height: 9, Flags: chain.FlagCoinbase,
				Output: chain.Output{Address: "1A1z", Value: 5_000_000_000}},
			Spent:    &chain.Spent{TxHash: goldHash(0x22), Height: 0x10},
			SpentVin: 3, SpentVinKnown: true,
		},
		hex: "01 04 0000000000000009 00000000 01 80e497d012 04 3141317a 00 00 00 00 " + strings.Repeat("22", 32) + " 0000000000000010 00000003",
	},
	{
		name: "spent by the last possible input",
		rec: Record{
			Utxo:     chain.Utxo{OutPoint: goldOp, Output: chain.Output{Address: "a"}},
			Spent:    &chain.Spent{TxHash: goldHash(0xbb), Height: 1},
			SpentVin: math.MaxUint32, SpentVinKnown: true,
		},
		hex: "01 04 0000000000000000 00000000 00 00 01 61 00 00 00 00 " + hexBB + " 0000000000000001 ffffffff",
	},
}

func TestGoldenRecord(t *testing.T) {
	for _, g := range recordGoldens {
		want := unhex(t, g.hex)
		if got := appendRecord(nil, &g.rec); !bytes.Equal(got, want) {
			t.Errorf("%s: encode\n got %x\nwant %x", g.name, got, want)
		}
		if got := appendRecord([]byte{0xee}, &g.rec); !bytes.Equal(got[1:], want) || got[0] != 0xee {
			t.Errorf("%s: encode does not append to dst: %x", g.name, got)
		}
		got, err := decodeRecord(goldOp, want)
		if err != nil {
			t.Errorf("%s: decode: %v", g.name, err)
			continue
		}
		if !reflect.DeepEqual(got, g.rec) {
			t.Errorf("%s: decode\n got %#v\nwant %#v", g.name, got, g.rec)
		}
	}
}

// TestRecordDecodeCopies: a decoded record does not alias the buffer, which
// Pebble reuses once the getter is closed.
func TestRecordDecodeCopies(t *testing.T) {
	g := recordGoldens[len(recordGoldens)-1]
	b := unhex(t, g.hex)
	r, err := decodeRecord(goldOp, b)
	if err != nil {
		t.Fatal(err)
	}
	for i := range b {
		b[i] = 0x5a
	}
	if !reflect.DeepEqual(r, g.rec) {
		t.Fatalf("decoded record changed with its buffer: %#v", r)
	}
}

// TestRecordLimits: the decoder accepts every field at its contract limit
// and rejects one byte more, so a corrupt length cannot make it allocate
// without bound.
func TestRecordLimits(t *testing.T) {
	enc := func(o chain.Output) []byte {
		return appendRecord(nil, &Record{Utxo: chain.Utxo{OutPoint: goldOp, Output: o}})
	}
	cases := []struct {
		name  string
		at    chain.Output
		above chain.Output
	}{
		{"address", chain.Output{Address: strings.Repeat("a", maxAddressLen)}, chain.Output{Address: strings.Repeat("a", maxAddressLen+1)}},
		{"asset policy",
			chain.Output{Address: "a", Assets: []chain.Asset{{Policy: make([]byte, maxAssetField), Quantity: 1}}},
			chain.Output{Address: "a", Assets: []chain.Asset{{Policy: make([]byte, maxAssetField+1), Quantity: 1}}}},
		{"asset name",
			chain.Output{Address: "a", Assets: []chain.Asset{{Name: make([]byte, maxAssetField), Quantity: 1}}},
			chain.Output{Address: "a", Assets: []chain.Asset{{Name: make([]byte, maxAssetField+1), Quantity: 1}}}},
		{"datum", chain.Output{Address: "a", Datum: make([]byte, maxBlobLen)}, chain.Output{Address: "a", Datum: make([]byte, maxBlobLen+1)}},
		{"script ref", chain.Output{Address: "a", ScriptRef: make([]byte, maxBlobLen)}, chain.Output{Address: "a", ScriptRef: make([]byte, maxBlobLen+1)}},
	}
	dec := func(b []byte) error { _, err := decodeRecord(goldOp, b); return err }
	for _, c := range cases {
		if err := decodeNoPanic(t, dec, enc(c.at)); err != nil {
			t.Errorf("%s at the limit: %v", c.name, err)
		}
		if err := decodeNoPanic(t, dec, enc(c.above)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s above the limit: err %v, want ErrCorrupt", c.name, err)
		}
	}
}

func TestGoldenIndexValue(t *testing.T) {
	u := recordGoldens[0].rec.Utxo // the doc example
	want := unhex(t, hexAA+" "+recordGoldens[0].hex)
	if got := appendIndexValue(nil, &u); !bytes.Equal(got, want) {
		t.Errorf("encode\n got %x\nwant %x", got, want)
	}
	got, err := decodeIndexValue(goldOp.Index, want)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	if !reflect.DeepEqual(got, u) {
		t.Errorf("decode\n got %#v\nwant %#v", got, u)
	}
	// The output index comes from the key, not the value.
	if got, err := decodeIndexValue(math.MaxUint32, want); err != nil || got.OutPoint != (chain.OutPoint{TxHash: goldHash(0xaa), Index: math.MaxUint32}) {
		t.Errorf("decode with index max: %s %v", got.OutPoint, err)
	}
	// Index rows exist only for live outputs.
	spent := unhex(t, hexAA+" "+recordGoldens[7].hex)
	if _, err := decodeIndexValue(goldOp.Index, spent); !errors.Is(err, ErrCorrupt) {
		t.Errorf("spent record as an index value: err %v, want ErrCorrupt", err)
	}
}

var balanceGoldens = []struct {
	name string
	bal  chain.Balance
	hex  string
}{
	{
		name: "one output",
		bal:  chain.Balance{Count: 1, Value: chain.U128(5_000_000_000)},
		hex:  "01 01 0000000000000000 000000012a05f200 00",
	},
	{
		name: "value past 2^64, assets sorted",
		bal: chain.Balance{Count: 3, Value: chain.Uint128{Hi: 2}, Assets: []chain.AssetSum{
			{Policy: []byte{0x01}, Name: []byte{0x01}, Quantity: chain.Uint128{Hi: 1}},
			{Policy: []byte{0x01}, Name: []byte{0x02}, Quantity: chain.U128(1)},
			{Policy: []byte{0x02}, Name: []byte{0x01}, Quantity: chain.Uint128{Hi: 1, Lo: math.MaxUint64 - 1}},
		}},
		hex: "01 03 0000000000000002 0000000000000000 03" +
			" 01 01 01 01 0000000000000001 0000000000000000" +
			" 01 01 01 02 0000000000000000 0000000000000001" +
			" 01 02 01 01 0000000000000001 fffffffffffffffe",
	},
	{
		name: "empty policy and name, max count",
		bal: chain.Balance{Count: math.MaxUint64, Value: chain.Uint128{Hi: math.MaxUint64, Lo: math.MaxUint64},
			Assets: []chain.AssetSum{{Quantity: chain.U128(5)}}},
		hex: "01 ffffffffffffffffff01 ffffffffffffffff ffffffffffffffff 01 00 00 0000000000000000 0000000000000005",
	},
	{
		name: "max-size asset fields",
		bal: chain.Balance{Count: 1, Value: chain.U128(1), Assets: []chain.AssetSum{
			{Policy: bytes.Repeat([]byte{0xab}, maxAssetField), Name: bytes.Repeat([]byte{0xab}, maxAssetField), Quantity: chain.U128(1)}}},
		hex: "01 01 0000000000000000 0000000000000001 01 40 " + hexField64 + " 40 " + hexField64 + " 0000000000000000 0000000000000001",
	},
}

func TestGoldenBalance(t *testing.T) {
	for _, g := range balanceGoldens {
		want := unhex(t, g.hex)
		if got := appendBalance(nil, &g.bal); !bytes.Equal(got, want) {
			t.Errorf("%s: encode\n got %x\nwant %x", g.name, got, want)
		}
		got, err := decodeBalance(want)
		if err != nil {
			t.Errorf("%s: decode: %v", g.name, err)
			continue
		}
		if !reflect.DeepEqual(got, g.bal) {
			t.Errorf("%s: decode\n got %#v\nwant %#v", g.name, got, g.bal)
		}
	}
}

// balanceCounterGoldens are balance rows of version 2: a balance and the
// value's address counters (the first is balance.go's example).
var balanceCounterGoldens = []struct {
	name string
	row  balanceRow
	hex  string
}{
	{
		name: "balance.go's example",
		row: balanceRow{bal: chain.Balance{Count: 1, Value: chain.U128(5000)},
			ctr: counterFigures{tx: 2, fundedCount: 3, fundedSum: chain.U128(6000), spentCount: 2, spentSum: chain.U128(1000)}},
		hex: "02 01 0000000000000000 0000000000001388 00 02 03 00 f02e 02 00 e807",
	},
	{
		name: "no outputs left, counters alone",
		row: balanceRow{ctr: counterFigures{tx: 1, fundedCount: 1, fundedSum: chain.U128(7),
			spentCount: 1, spentSum: chain.U128(7)}},
		hex: "02 00 0000000000000000 0000000000000000 00 01 01 00 07 01 00 07",
	},
	{
		name: "version 3: assets in 2 asset rows, zero counters",
		row:  balanceRow{bal: chain.Balance{Count: 3, Value: chain.U128(0x1388)}, assetRows: 2},
		hex:  "03 03 0000000000000000 0000000000001388 02 00 00 00 00 00 00 00",
	},
	{
		name: "version 3 with counters",
		row: balanceRow{bal: chain.Balance{Count: 1, Value: chain.U128(5000)}, assetRows: 300,
			ctr: counterFigures{tx: 2, fundedCount: 3, fundedSum: chain.U128(6000), spentCount: 2, spentSum: chain.U128(1000)}},
		hex: "03 01 0000000000000000 0000000000001388 ac02 02 03 00 f02e 02 00 e807",
	},
	{
		name: "sums past 2^64, with an asset",
		row: balanceRow{bal: chain.Balance{Count: 1, Value: chain.U128(1), Assets: []chain.AssetSum{{Policy: []byte{0xab}, Quantity: chain.U128(2)}}},
			ctr: counterFigures{tx: 1, fundedCount: 1, fundedSum: chain.Uint128{Hi: 1, Lo: 0}, spentCount: 0, spentSum: chain.Uint128{Hi: 2, Lo: 1}}},
		hex: "02 01 0000000000000000 0000000000000001 01 01ab 00 0000000000000000 0000000000000002" +
			" 01 01 01 00 00 02 01",
	},
}

// TestGoldenBalanceCounters: version 2 and 3 balance rows, field by field; a
// version 1 row (every balanceGoldens entry) reads as all-zero counters,
// and a balance without counters is still written as version 1.
func TestGoldenBalanceCounters(t *testing.T) {
	for _, g := range balanceCounterGoldens {
		want := unhex(t, g.hex)
		if got := appendRow(nil, &g.row); !bytes.Equal(got, want) {
			t.Errorf("%s: encode\n got %x\nwant %x", g.name, got, want)
		}
		got, err := decodeBalanceRow(want)
		if err != nil {
			t.Errorf("%s: decode: %v", g.name, err)
			continue
		}
		if len(got.bal.Assets) == 0 && len(g.row.bal.Assets) == 0 {
			got.bal.Assets = g.row.bal.Assets
		}
		if !reflect.DeepEqual(got, g.row) {
			t.Errorf("%s: decode\n got %#v\nwant %#v", g.name, got, g.row)
		}
	}
	for _, g := range balanceGoldens {
		want := unhex(t, g.hex)
		if got := appendBalanceRow(nil, &g.bal, &counterFigures{}); !bytes.Equal(got, want) {
			t.Errorf("%s with zero counters: encode\n got %x\nwant %x", g.name, got, want)
		}
		got, err := decodeBalanceRow(want)
		if err != nil || !got.ctr.zero() {
			t.Errorf("%s: version 1 read as counters %+v, %v", g.name, got.ctr, err)
		}
	}
}

// TestBalanceDeltaSums: the balance golden "value past 2^64, assets sorted"
// is what three outputs sum to, whatever the order of their assets, and
// removing them again leaves the zero balance. A removal the stored row
// cannot cover is corruption.
func TestBalanceDeltaSums(t *testing.T) {
	us := []chain.Utxo{
		{Output: chain.Output{Value: math.MaxUint64, Assets: []chain.Asset{{Policy: []byte{0x02}, Name: []byte{0x01}, Quantity: math.MaxUint64}}}},
		{Output: chain.Output{Value: math.MaxUint64, Assets: []chain.Asset{
			{Policy: []byte{0x01}, Name: []byte{0x02}, Quantity: 1},
			{Policy: []byte{0x01}, Name: []byte{0x01}, Quantity: math.MaxUint64},
		}}},
		{Output: chain.Output{Value: 2, Assets: []chain.Asset{
			{Policy: []byte{0x02}, Name: []byte{0x01}, Quantity: math.MaxUint64},
			{Policy: []byte{0x01}, Name: []byte{0x01}, Quantity: 1},
		}}},
	}
	var add balanceDelta
	for i := range us {
		add.apply(&us[i], +1, &assetFilter{})
	}
	sum, err := add.applyTo(chain.Balance{})
	if err != nil {
		t.Fatal(err)
	}
	want := balanceGoldens[1]
	if !reflect.DeepEqual(sum, want.bal) {
		t.Fatalf("sum\n got %#v\nwant %#v", sum, want.bal)
	}
	if got := appendBalance(nil, &sum); !bytes.Equal(got, unhex(t, want.hex)) {
		t.Fatalf("sum encodes to %x, want %s", got, want.hex)
	}

	var sub balanceDelta
	for i := len(us) - 1; i >= 0; i-- {
		sub.apply(&us[i], -1, &assetFilter{})
	}
	zero, err := sub.applyTo(sum)
	if err != nil {
		t.Fatal(err)
	}
	if zero.Count != 0 || !zero.Value.IsZero() || len(zero.Assets) != 0 {
		t.Fatalf("after removing every output: %+v", zero)
	}
	if _, err := sub.applyTo(chain.Balance{}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("removal from the zero balance: err %v, want ErrCorrupt", err)
	}
	// Count covered, value not.
	var one balanceDelta
	one.apply(&chain.Utxo{Output: chain.Output{Value: 10}}, -1, &assetFilter{})
	if _, err := one.applyTo(chain.Balance{Count: 1, Value: chain.U128(9)}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("value below zero: err %v, want ErrCorrupt", err)
	}
	// Count and value covered, the asset not.
	var asset balanceDelta
	asset.apply(&chain.Utxo{Output: chain.Output{Value: 1, Assets: []chain.Asset{{Policy: []byte{1}, Quantity: 2}}}}, -1, &assetFilter{})
	have := chain.Balance{Count: 1, Value: chain.U128(1), Assets: []chain.AssetSum{{Policy: []byte{1}, Quantity: chain.U128(1)}}}
	if _, err := asset.applyTo(have); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("asset below zero: err %v, want ErrCorrupt", err)
	}
}

var undoGoldens = []struct {
	name string
	undo undoDelta
	hex  string
}{
	{
		name: "first block of a store, nothing written",
		undo: undoDelta{prev: chain.Tip{Empty: true}, entries: []undoEntry{}},
		hex:  "01  01 0000000000000000 " + hex00 + "  00  00",
	},
	{
		name: "each kind",
		undo: undoDelta{
			prev:    chain.Tip{Height: 0x0102030405060708, Hash: goldHash(0xcc)},
			skipped: 300,
			entries: []undoEntry{
				{op: chain.OutPoint{TxHash: goldHash(0xaa), Index: 0}, kind: undoAbsent},
				{op: chain.OutPoint{TxHash: goldHash(0xbb), Index: math.MaxUint32}, kind: undoSpentHere},
				{op: chain.OutPoint{TxHash: goldHash(0xcc), Index: 1}, kind: undoFullRecord,
					before: appendRecord(nil, &recordGoldens[1].rec)},
			},
		},
		hex: "01  00 0102030405060708 " + hexCC + "  ac02  03" +
			"  " + hexAA + " 00000000 01" +
			"  " + hexBB + " ffffffff 02" +
			"  " + hexCC + " 00000001 03 16 " + recordGoldens[1].hex,
	},
	{
		name: "full record of a spent row, max height tip",
		undo: undoDelta{
			prev:    chain.Tip{Height: math.MaxUint64, Hash: goldHash(0xdd)},
			skipped: math.MaxUint64,
			entries: []undoEntry{{op: goldOp, kind: undoFullRecord, before: appendRecord(nil, &recordGoldens[7].rec)}},
		},
		hex: "01  00 ffffffffffffffff " + hexDD + "  ffffffffffffffffff01  01" +
			"  " + hexAA + " 00000007 03 45 " + recordGoldens[7].hex,
	},
}

func TestGoldenUndo(t *testing.T) {
	for _, g := range undoGoldens {
		want := unhex(t, g.hex)
		if got := appendUndo(nil, &g.undo); !bytes.Equal(got, want) {
			t.Errorf("%s: encode\n got %x\nwant %x", g.name, got, want)
		}
		got, err := decodeUndo(want)
		if err != nil {
			t.Errorf("%s: decode: %v", g.name, err)
			continue
		}
		if !reflect.DeepEqual(got, g.undo) {
			t.Errorf("%s: decode\n got %#v\nwant %#v", g.name, got, g.undo)
		}
	}
}

var stateGoldens = []struct {
	name  string
	state State
	hex   string
}{
	{
		name:  "new store",
		state: State{Tip: chain.Tip{Empty: true}},
		hex: "02  01 0000000000000000 " + hex00 + "  0000000000000000 " + hex00 +
			"  0000000000000000 0000000000000000 00000000 0000000000000000 0000000000000000 0000000000000000  00 0000000000000000",
	},
	{
		name: "every field",
		state: State{
			Tip:            chain.Tip{Height: math.MaxUint64, Hash: goldHash(0xaa)},
			UtxoCount:      0x0102030405060708,
			Digest:         chain.Digest(goldHash(0xdd)),
			SkippedInputs:  1,
			PruneHeight:    2,
			PruneOffset:    math.MaxUint32,
			UndoFloor:      3,
			MaxHeight:      math.MaxUint64,
			Seq:            4,
			RollingBack:    true,
			RollbackTarget: math.MaxUint64 - 1,
		},
		hex: "02  00 ffffffffffffffff " + hexAA + "  0102030405060708 " + hexDD +
			"  0000000000000001 0000000000000002 ffffffff 0000000000000003 ffffffffffffffff 0000000000000004" +
			"  01 fffffffffffffffe",
	},
}

// TestStateVersion1 is the migration test of the state row: a version-1 row
// (written before rollbacks recorded their progress) decodes with no
// rollback in progress, and is written back as version 2.
func TestStateVersion1(t *testing.T) {
	v1 := unhex(t, "01  00 0000000000000007 "+hexAA+"  0000000000000003 "+hexDD+
		"  0000000000000000 0000000000000002 00000001 0000000000000004 0000000000000009 000000000000000b")
	got, err := decodeState(v1)
	if err != nil {
		t.Fatal(err)
	}
	want := State{Tip: chain.Tip{Height: 7, Hash: goldHash(0xaa)}, UtxoCount: 3, Digest: chain.Digest(goldHash(0xdd)),
		PruneHeight: 2, PruneOffset: 1, UndoFloor: 4, MaxHeight: 9, Seq: 11}
	if got != want {
		t.Fatalf("version 1 decodes as\n %#v\nwant %#v", got, want)
	}
	again := appendState(nil, &got)
	if again[0] != stateVersion || !bytes.Equal(again[1:len(v1)], v1[1:]) || !bytes.Equal(again[len(v1):], make([]byte, 9)) {
		t.Fatalf("version 1 re-encodes as %x", again)
	}
}

func TestGoldenState(t *testing.T) {
	for _, g := range stateGoldens {
		want := unhex(t, g.hex)
		if got := appendState(nil, &g.state); !bytes.Equal(got, want) {
			t.Errorf("%s: encode\n got %x\nwant %x", g.name, got, want)
		}
		got, err := decodeState(want)
		if err != nil {
			t.Errorf("%s: decode: %v", g.name, err)
			continue
		}
		if got != g.state {
			t.Errorf("%s: decode\n got %#v\nwant %#v", g.name, got, g.state)
		}
	}
}

var schemaGoldens = []struct {
	name   string
	schema schema
	hex    string
}{
	// Version SchemaVersion on purpose: bumping it must update these goldens.
	{"address only", schema{version: SchemaVersion, dims: []Dimension{DimAddress}}, "00000004 01 01"},
	{"version 3, before asset rows", schema{version: 3, dims: []Dimension{DimAddress}}, "00000003 01 01"},
	{"version 2, before spent records named their input", schema{version: 2, dims: []Dimension{DimAddress}}, "00000002 01 01"},
	{"version 1, before freezes", schema{version: 1, dims: []Dimension{DimAddress}}, "00000001 01 01"},
	{"address and asset policy", schema{version: SchemaVersion, dims: []Dimension{DimAddress, DimAssetPolicy}}, "00000004 02 01 02"},
	{"the Cardano indexes", schema{version: SchemaVersion, dims: []Dimension{DimAddress, DimAssetPolicy, DimPaymentCredential, DimStakeCredential, DimAsset}}, "00000004 05 01 02 03 04 05"},
}

// TestGoldenFreezeRow writes freeze.go's example field by field.
func TestGoldenFreezeRow(t *testing.T) {
	want := unhex(t, "01 0000000000000007 05 6672617564")
	fi := FreezeInfo{Seq: 7, Reason: "fraud"}
	if got := appendFreezeRow(nil, &fi); !bytes.Equal(got, want) {
		t.Fatalf("encode\n got %x\nwant %x", got, want)
	}
	got, err := decodeFreezeRow(want)
	if err != nil || got != fi {
		t.Fatalf("decode: %+v, %v", got, err)
	}
	for _, bad := range []string{"02 0000000000000007 05 6672617564", "01 0000000000000007 06 6672617564", "01 0000000000000007 05 6672617564 00", "01 00"} {
		if _, err := decodeFreezeRow(unhex(t, bad)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("decode %s: err %v, want ErrCorrupt", bad, err)
		}
	}
}

func TestGoldenSchema(t *testing.T) {
	for _, g := range schemaGoldens {
		want := unhex(t, g.hex)
		if got := appendSchema(nil, &g.schema); !bytes.Equal(got, want) {
			t.Errorf("%s: encode\n got %x\nwant %x", g.name, got, want)
		}
		got, err := decodeSchema(want)
		if err != nil {
			t.Errorf("%s: decode: %v", g.name, err)
			continue
		}
		if !reflect.DeepEqual(got, g.schema) {
			t.Errorf("%s: decode\n got %#v\nwant %#v", g.name, got, g.schema)
		}
	}
	// A newer version is reported, whatever follows it: Open turns it into
	// ErrNewerSchema rather than ErrCorrupt.
	for _, h := range []string{"00000005 01 01", "00000005", "ffffffff ff ff ff"} {
		s, err := decodeSchema(unhex(t, h))
		if err != nil || s.version <= SchemaVersion {
			t.Errorf("newer schema %s: version %d, err %v", h, s.version, err)
		}
	}
}

// errDecodePanicked stands for a decoder panic (already reported).
var errDecodePanicked = errors.New("decoder panicked")

// decodeNoPanic runs dec on b and reports a panic as a test failure.
func decodeNoPanic(t *testing.T, dec func([]byte) error, b []byte) (err error) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("decode of %x panicked: %v", b, r)
			err = errDecodePanicked
		}
	}()
	return dec(b)
}

// goldenCodec is one value decoder with its goldens and hand-made bad inputs.
type goldenCodec struct {
	name    string
	decode  func([]byte) error
	goldens []string
	bad     []badInput
}

// badInput must fail with ErrCorrupt, for the reason why (a substring of
// the error): each is a valid value but for the one defect it names.
type badInput struct {
	name, hex, why string
}

func goldenCodecs() []goldenCodec {
	const (
		recHead = "01 01 0000000000000000 00000000 00 " // version, live, height, tx_pos, flags
		recTail = " 00 00 00"                           // no datum hash, datum, script_ref
	)
	rec := goldenCodec{
		name:   "record",
		decode: func(b []byte) error { _, err := decodeRecord(goldOp, b); return err },
		bad: []badInput{
			{"well formed, for reference", recHead + "00 01 61 00" + recTail, ""},
			{"version 0", "00 01 0000000000000000 00000000 00 00 01 61 00" + recTail, "unknown version"},
			{"version 2", "02 01 0000000000000000 00000000 00 00 01 61 00" + recTail, "unknown version"},
			{"state 0", "01 00 0000000000000000 00000000 00 00 01 61 00" + recTail, "unknown state"},
			{"state 5", "01 05 0000000000000000 00000000 00 00 01 61 00" + recTail, "unknown state"},
			{"datum hash flag 2", recHead + "00 01 61 00 02 " + hexDD + " 00 00", "bad datum hash flag"},
			{"unknown flag bit", "01 01 0000000000000000 00000000 04 00 01 61 00" + recTail, "unknown flag bits"},
			{"value uvarint not canonical", recHead + "8000 01 61 00" + recTail, "non-canonical uvarint"},
			{"value uvarint overflows", recHead + "ffffffffffffffffff02 01 61 00" + recTail, "bad uvarint"},
			{"value uvarint of 11 bytes", recHead + "ffffffffffffffffffff01 01 61 00" + recTail, "bad uvarint"},
			{"value uvarint unterminated", recHead + "ffff", "bad uvarint"},
			{"address over 1024 bytes", recHead + "00 8108 " + strings.Repeat("61", maxAddressLen+1) + " 00" + recTail, "length out of range"},
			{"address longer than the rest", recHead + "00 09 61 00" + recTail, "length out of range"},
			{"asset count out of range", recHead + "00 01 61 03 00 00 01" + recTail, "count out of range"},
			{"asset policy over 64 bytes", recHead + "00 01 61 01 41 " + strings.Repeat("ab", maxAssetField+1) + " 00 01" + recTail, "length out of range"},
			{"asset name over 64 bytes", recHead + "00 01 61 01 00 41 " + strings.Repeat("ab", maxAssetField+1) + " 01" + recTail, "length out of range"},
			{"datum over 64 KiB", recHead + "00 01 61 00 00 818004" + strings.Repeat("00", maxBlobLen+1) + " 00", "length out of range"},
			{"spent without spender", "01 02 0000000000000000 00000000 00 00 01 61 00" + recTail, "short bytes"},
			{"spender hash cut", "01 02 0000000000000000 00000000 00 00 01 61 00" + recTail + " " + hexBB[:62], "short bytes"},
			{"spender height cut", "01 02 0000000000000000 00000000 00 00 01 61 00" + recTail + " " + hexBB + " 00000000000000", "short uint64"},
			{"trailing byte", recHead + "00 01 61 00" + recTail + " 00", "1 trailing bytes"},
		},
	}
	for _, g := range recordGoldens {
		rec.goldens = append(rec.goldens, g.hex)
	}

	idx := goldenCodec{
		name:   "index value",
		decode: func(b []byte) error { _, err := decodeIndexValue(goldOp.Index, b); return err },
		goldens: []string{
			hexAA + " " + recordGoldens[0].hex,
			hexAA + " " + recordGoldens[4].hex,
		},
		bad: []badInput{
			{"spent record", hexAA + " " + recordGoldens[7].hex, "spent record"},
			{"tx hash only", hexAA, "short byte"},
			{"short tx hash", hexAA[:62], "short bytes"},
			{"record version 2", hexAA + " 02" + recordGoldens[0].hex[2:], "unknown version"},
			{"record without tx hash", recordGoldens[0].hex, "short"},
		},
	}

	const balHead = "01 01 0000000000000000 0000000000000001 " // version, count 1, value 1
	bal := goldenCodec{
		name:   "balance",
		decode: func(b []byte) error { _, err := decodeBalanceRow(b); return err },
		bad: []badInput{
			{"well formed, for reference", balHead + "01 00 00 0000000000000000 0000000000000001", ""},
			{"version 0", "00 01 0000000000000000 0000000000000001 00", "unknown version"},
			{"version 4", "04 01 0000000000000000 0000000000000001 00", "unknown version"},
			{"version 3 without counters", "03 01 0000000000000000 0000000000000001 01", "bad uvarint"},
			{"version 3 of no asset rows", "03 01 0000000000000000 0000000000000001 00 00 00 00 00 00 00 00", "no asset rows or no outputs"},
			{"version 3 of no outputs", "03 00 0000000000000000 0000000000000000 01 00 00 00 00 00 00 00", "no asset rows or no outputs"},
			{"version 3, trailing byte", "03 01 0000000000000000 0000000000000001 01 00 00 00 00 00 00 00 00", "trailing"},
			{"version 2 without counters", "02 01 0000000000000000 0000000000000001 00", "bad uvarint"},
			{"version 2 counters cut", "02 01 0000000000000000 0000000000000001 00 01 01 00", "bad uvarint"},
			{"version 2, all-zero counters", "02 01 0000000000000000 0000000000000001 00 00 00 00 00 00 00 00", "all-zero counters"},
			{"version 2, no outputs but a value", "02 00 0000000000000000 0000000000000001 00 01 01 00 01 00 00 00", "no outputs but a value"},
			{"version 2, trailing byte", "02 00 0000000000000000 0000000000000000 00 01 01 00 01 00 00 00 00", "1 trailing bytes"},
			{"count uvarint overflows", "01 ffffffffffffffffff02 0000000000000000 0000000000000001 00", "bad uvarint"},
			{"value cut", "01 01 0000000000000000 00000000000000", "short uint64"},
			{"asset count out of range", balHead + "02 00 00 0000000000000000 0000000000000001", "count out of range"},
			{"asset policy over 64 bytes", balHead + "01 41 " + strings.Repeat("ab", maxAssetField+1) + " 00 0000000000000000 0000000000000001", "length out of range"},
			{"asset name over 64 bytes", balHead + "01 00 41 " + strings.Repeat("ab", maxAssetField+1) + " 0000000000000000 0000000000000001", "length out of range"},
			{"trailing byte", balHead + "00 00", "1 trailing bytes"},
		},
	}
	for _, g := range balanceGoldens {
		bal.goldens = append(bal.goldens, g.hex)
	}
	for _, g := range balanceCounterGoldens {
		bal.goldens = append(bal.goldens, g.hex)
	}

	const undoHead = "01 00 0000000000000001 " // version, prev tip not empty, height 1
	undo := goldenCodec{
		name:   "undo delta",
		decode: func(b []byte) error { _, err := decodeUndo(b); return err },
		bad: []badInput{
			{"well formed, for reference", undoHead + hexCC + " 00 01 " + hexAA + " 00000000 03 02 0101", ""},
			{"version 0", "00 01 0000000000000000 " + hex00 + " 00 00", "unknown version"},
			{"version 2", "02 01 0000000000000000 " + hex00 + " 00 00", "unknown version"},
			{"empty flag 2", "01 02 0000000000000000 " + hex00 + " 00 00", "bad empty flag"},
			{"entry kind 0", undoHead + hexCC + " 00 01 " + hexAA + " 00000000 00", "unknown entry kind"},
			{"entry kind 4", undoHead + hexCC + " 00 01 " + hexAA + " 00000000 04", "unknown entry kind"},
			{"entry count out of range", undoHead + hexCC + " 00 02 " + hexAA + " 00000000 01", "count out of range"},
			{"full record past the end", undoHead + hexCC + " 00 01 " + hexAA + " 00000000 03 05 0101", "length out of range"},
			{"full record length missing", undoHead + hexCC + " 00 01 " + hexAA + " 00000000 03", "bad uvarint"},
			{"skipped uvarint overflows", undoHead + hexCC + " ffffffffffffffffff02 00", "bad uvarint"},
			{"trailing byte", undoHead + hexCC + " 00 00 00", "1 trailing bytes"},
		},
	}
	for _, g := range undoGoldens {
		undo.goldens = append(undo.goldens, g.hex)
	}

	const stateRest1 = "  0000000000000000 " + "0000000000000000000000000000000000000000000000000000000000000000" +
		"  0000000000000000 0000000000000000 00000000 0000000000000000 0000000000000000 0000000000000000"
	const stateRest = stateRest1 + "  00 0000000000000000"
	state := goldenCodec{
		name:   "state",
		decode: func(b []byte) error { _, err := decodeState(b); return err },
		bad: []badInput{
			{"well formed, for reference", "02  01 0000000000000000 " + hex00 + stateRest, ""},
			{"version 1, for reference", "01  01 0000000000000000 " + hex00 + stateRest1, ""},
			{"version 0", "00  01 0000000000000000 " + hex00 + stateRest, "unknown version"},
			{"version 3", "03  01 0000000000000000 " + hex00 + stateRest, "unknown version"},
			{"version 1 with version 2 fields", "01  01 0000000000000000 " + hex00 + stateRest, "9 trailing bytes"},
			{"empty flag 2", "02  02 0000000000000000 " + hex00 + stateRest, "bad empty flag"},
			{"seq cut", "01  01 0000000000000000 " + hex00 + stateRest1[:len(stateRest1)-2], "short uint64"},
			{"rolling-back flag 2", "02  01 0000000000000000 " + hex00 + stateRest1 + "  02 0000000000000000", "bad rolling-back flag"},
			{"target without rollback", "02  01 0000000000000000 " + hex00 + stateRest1 + "  00 0000000000000001", "without a rollback in progress"},
			{"target cut", "02  01 0000000000000000 " + hex00 + stateRest[:len(stateRest)-2], "short uint64"},
			{"trailing byte", "02  01 0000000000000000 " + hex00 + stateRest + " 00", "1 trailing bytes"},
		},
	}
	for _, g := range stateGoldens {
		state.goldens = append(state.goldens, g.hex)
	}

	sch := goldenCodec{
		name:   "schema",
		decode: func(b []byte) error { _, err := decodeSchema(b); return err },
		bad: []badInput{
			{"well formed, for reference", "00000001 02 01 02", ""},
			{"unknown dimension 0", "00000001 01 00", "unknown dimension 0"},
			{"unknown dimension 9", "00000001 02 01 09", "unknown dimension 9"},
			{"version 0", "00000000 01 01", "schema version 0"},
			{"no dimensions", "00000001 00", "no dimensions"},
			{"address not first", "00000001 02 02 01", "address dimension is not first"},
			{"dimension count too high", "00000001 03 01 02", "count out of range"},
			{"count uvarint overflows", "00000001 ffffffffffffffffff02 01", "bad uvarint"},
			{"short version", "000001", "short uint32"},
			{"trailing byte", "00000001 01 01 00", "1 trailing bytes"},
		},
	}
	for _, g := range schemaGoldens {
		sch.goldens = append(sch.goldens, g.hex)
	}
	return []goldenCodec{rec, idx, bal, undo, state, sch}
}

// TestGoldenMalformed: every decoder rejects its hand-made bad inputs, every
// proper prefix of each golden and each golden with a trailing byte, with an
// error matching ErrCorrupt; and no single-bit flip of a golden makes it
// panic or fail with another error.
func TestGoldenMalformed(t *testing.T) {
	for _, c := range goldenCodecs() {
		t.Run(c.name, func(t *testing.T) {
			for _, bad := range c.bad {
				err := decodeNoPanic(t, c.decode, unhex(t, bad.hex))
				switch {
				case bad.why == "" && err != nil:
					t.Errorf("%s: %v", bad.name, err)
				case bad.why != "" && (!errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), bad.why)):
					t.Errorf("%s: err %v, want ErrCorrupt for %q", bad.name, err, bad.why)
				}
			}
			for _, h := range c.goldens {
				g := unhex(t, h)
				if err := decodeNoPanic(t, c.decode, g); err != nil {
					t.Fatalf("golden %x: %v", g, err)
				}
				for n := range len(g) {
					if err := decodeNoPanic(t, c.decode, g[:n:n]); !errors.Is(err, ErrCorrupt) {
						t.Errorf("golden cut to %d of %d bytes (%x): err %v, want ErrCorrupt", n, len(g), g[:n], err)
					}
				}
				long := append(append([]byte(nil), g...), 0x00)
				if err := decodeNoPanic(t, c.decode, long); !errors.Is(err, ErrCorrupt) {
					t.Errorf("golden with a trailing byte (%x): err %v, want ErrCorrupt", long, err)
				}
				flipped := make([]byte, len(g))
				for i := range g {
					for bit := range 8 {
						copy(flipped, g)
						flipped[i] ^= 1 << bit
						if err := decodeNoPanic(t, c.decode, flipped); err != nil && !errors.Is(err, ErrCorrupt) {
							t.Errorf("golden with bit %d of byte %d flipped (%x): err %v, want nil or ErrCorrupt", bit, i, flipped, err)
						}
					}
				}
			}
		})
	}
}

// TestCorruptRecordNamesOutPoint: a record that does not decode names its
// outpoint, so an operator can find the damaged row.
func TestCorruptRecordNamesOutPoint(t *testing.T) {
	_, err := decodeRecord(goldOp, []byte{0x02})
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), goldOp.String()) {
		t.Fatalf("err %v, want ErrCorrupt naming %s", err, goldOp)
	}
}

// blockHashRowGoldens are the block-hash rows (keys.go), written field by
// field: the hash, then the slot when it is not 0.
var blockHashRowGoldens = []struct {
	name string
	hash chain.Hash
	slot uint64
	hex  string
}{
	{"without a slot (and every row of an older store)", chain.Hash{0x11, 0x22}, 0, "1122" + strings.Repeat("00", 30)},
	{"slot 0x1234", chain.Hash{0x11, 0x22}, 0x1234, "1122" + strings.Repeat("00", 30) + " 0000000000001234"},
}

func TestBlockHashRowGolden(t *testing.T) {
	for _, g := range blockHashRowGoldens {
		want, err := hex.DecodeString(strings.ReplaceAll(g.hex, " ", ""))
		if err != nil {
			t.Fatal(err)
		}
		if got := appendBlockHashRow(nil, g.hash, g.slot); !bytes.Equal(got, want) {
			t.Errorf("%s: %x, want %x", g.name, got, want)
		}
		p, err := decodeBlockHashRow(7, want)
		if err != nil || p != (chain.Point{Height: 7, Slot: g.slot, Hash: g.hash}) {
			t.Errorf("%s: decodes to %v, %v", g.name, p, err)
		}
	}
	for _, bad := range []string{"", "11", strings.Repeat("11", 33), strings.Repeat("11", 32) + "0000000000000000", strings.Repeat("11", 41)} {
		b, _ := hex.DecodeString(bad)
		if _, err := decodeBlockHashRow(7, b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%q: %v, want ErrCorrupt", bad, err)
		}
	}
}

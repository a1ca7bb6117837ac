package chain

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// A small document model for codec tests: one tree, written once per case,
// encoded to both JSON and CBOR by a test encoder that knows nothing about
// the schema (so duplicate keys, wrong types and odd values are expressible).
// Hex fields are tHex: a hex string in JSON, a byte string in CBOR. tRaw is
// encoding-specific; a case whose tree holds a tRaw without an encoding is
// skipped for that encoding.
type (
	tObj []tKV // ordered, may repeat keys
	tKV  struct {
		k string
		v any
	}
	tArr  []any
	tHex  []byte
	tStr  string
	tUint uint64
	tInt  int64
	tNull struct{}
	tRaw  struct {
		json             string
		cbor             []byte
		hasJSON, hasCBOR bool
	}
)

func rawJSON(s string) tRaw           { return tRaw{json: s, hasJSON: true} }
func rawCBOR(b ...byte) tRaw          { return tRaw{cbor: b, hasCBOR: true} }
func rawBoth(s string, b []byte) tRaw { return tRaw{json: s, cbor: b, hasJSON: true, hasCBOR: true} }

// encJSON encodes a tree as JSON text; ok is false if it needs a tRaw
// without JSON.
func encJSON(v any) (out []byte, ok bool) {
	ok = true
	var w func(v any)
	w = func(v any) {
		switch v := v.(type) {
		case tObj:
			out = append(out, '{')
			for i, kv := range v {
				if i > 0 {
					out = append(out, ',')
				}
				k, _ := json.Marshal(kv.k)
				out = append(append(out, k...), ':')
				w(kv.v)
			}
			out = append(out, '}')
		case tArr:
			out = append(out, '[')
			for i, e := range v {
				if i > 0 {
					out = append(out, ',')
				}
				w(e)
			}
			out = append(out, ']')
		case tHex:
			out = append(out, '"')
			out = hex.AppendEncode(out, v)
			out = append(out, '"')
		case tStr:
			s, _ := json.Marshal(string(v))
			out = append(out, s...)
		case tUint:
			out = strconv.AppendUint(out, uint64(v), 10)
		case tInt:
			out = strconv.AppendInt(out, int64(v), 10)
		case bool:
			out = strconv.AppendBool(out, v)
		case tNull:
			out = append(out, "null"...)
		case tRaw:
			ok = ok && v.hasJSON
			out = append(out, v.json...)
		default:
			panic(fmt.Sprintf("encJSON: %T", v))
		}
	}
	w(v)
	return out, ok
}

// encCBOR encodes a tree as CBOR (shortest heads, keys in the given order).
func encCBOR(v any) (out []byte, ok bool) {
	ok = true
	var w func(v any)
	w = func(v any) {
		switch v := v.(type) {
		case tObj:
			out = appendCBORHead(out, cborMap, uint64(len(v)))
			for _, kv := range v {
				out = appendCBORText(out, kv.k)
				w(kv.v)
			}
		case tArr:
			out = appendCBORHead(out, cborArray, uint64(len(v)))
			for _, e := range v {
				w(e)
			}
		case tHex:
			out = appendCBORBytes(out, v)
		case tStr:
			out = appendCBORText(out, string(v))
		case tUint:
			out = appendCBORHead(out, cborUint, uint64(v))
		case tInt:
			out = appendCBORInt(out, int64(v))
		case bool:
			out = append(out, map[bool]byte{false: cborFalse, true: cborTrue}[v])
		case tNull:
			out = append(out, cborNull)
		case tRaw:
			ok = ok && v.hasCBOR
			out = append(out, v.cbor...)
		default:
			panic(fmt.Sprintf("encCBOR: %T", v))
		}
	}
	w(v)
	return out, ok
}

// edit applies op to the value at a dotted path ("txs.0.outputs.1.value",
// "" for the root). op gets the old value (nil if absent) and returns the new
// one, or keep == false to delete it.
func edit(node any, path string, op func(old any) (v any, keep bool)) any {
	if path == "" {
		v, _ := op(node)
		return v
	}
	seg, rest, _ := strings.Cut(path, ".")
	switch n := node.(type) {
	case tObj:
		for i, kv := range n {
			if kv.k != seg {
				continue
			}
			if rest != "" {
				n[i].v = edit(kv.v, rest, op)
				return n
			}
			v, keep := op(kv.v)
			if !keep {
				return append(n[:i:i], n[i+1:]...)
			}
			n[i].v = v
			return n
		}
		if rest != "" {
			panic("edit: no field " + seg)
		}
		if v, keep := op(nil); keep {
			return append(n, tKV{seg, v})
		}
		return n
	case tArr:
		i, err := strconv.Atoi(seg)
		if err != nil || i >= len(n) {
			panic("edit: bad index " + seg)
		}
		if rest != "" {
			n[i] = edit(n[i], rest, op)
			return n
		}
		v, keep := op(n[i])
		if !keep {
			return append(n[:i:i], n[i+1:]...)
		}
		n[i] = v
		return n
	}
	panic(fmt.Sprintf("edit: %T at %q", node, seg))
}

func set(doc any, path string, v any) any {
	return edit(doc, path, func(any) (any, bool) { return v, true })
}

func del(doc any, path string) any {
	return edit(doc, path, func(any) (any, bool) { return nil, false })
}

// addKV appends key: v to the object at path, even if key is already there.
func addKV(doc any, path, key string, v any) any {
	return edit(doc, path, func(old any) (any, bool) { return append(old.(tObj), tKV{key, v}), true })
}

// get returns the value at path.
func get(doc any, path string) any {
	var got any
	edit(doc, path, func(old any) (any, bool) { got = old; return old, true })
	return got
}

func fill(b byte, n int) []byte { return bytes.Repeat([]byte{b}, n) }

func fillHash(b byte) Hash { return Hash(fill(b, HashSize)) }

func outPointDoc(b byte, index uint64) tObj {
	return tObj{{"tx_hash", tHex(fill(b, 32))}, {"index", tUint(index)}}
}

func assetDoc(policy, name []byte, qty any) tObj {
	return tObj{{"policy", tHex(policy)}, {"name", tHex(name)}, {"quantity", qty}}
}

func minimalDoc() tObj {
	return tObj{{"height", tUint(0)}, {"hash", tHex(fill(0x11, 32))}, {"txs", tArr{}}}
}

// fullDoc has every field of the contract, its assets out of order, some
// defaults spelled out and amounts as both numbers and strings; fullBlock is
// what it decodes to.
func fullDoc() tObj {
	return tObj{
		{"height", tUint(42)},
		{"hash", tHex(fill(0xb1, 32))},
		{"prev_hash", tHex(fill(0xb0, 32))},
		{"time", tInt(1_700_000_000)},
		{"slot", tUint(98_765_432)},
		{"txs", tArr{
			tObj{
				{"hash", tHex(fill(0x01, 32))},
				{"inputs", tArr{outPointDoc(0xa0, 0), outPointDoc(0xa1, 7)}},
				{"outputs", tArr{
					tObj{
						{"address", tStr("addr_test1qz2fxv2umyhttkxyxp8x0dlpdt3k6cwng5pxj3jhsydzer")},
						{"value", tUint(1_000_000)},
						{"assets", tArr{
							assetDoc(fill(0xc2, 28), []byte("tok"), tUint(5)),
							assetDoc(fill(0xc1, 28), nil, tStr("1")),
						}},
						{"datum_hash", tHex(fill(0xd0, 32))},
						{"datum", tHex([]byte{0xd8, 0x79, 0x80})},
						{"script_ref", tHex([]byte{0x82, 0x01, 0x4e})},
					},
					tObj{{"address", tStr("1BoatSLRHtKNngkdXEeobR76b53LETtpyT")}, {"value", tStr("18446744073709551615")}},
				}},
			},
			tObj{
				{"hash", tHex(fill(0x02, 32))},
				{"inputs", tArr{outPointDoc(0x01, 1)}},
				{"outputs", tArr{tObj{{"address", tStr("addr2")}, {"value", tUint(10)}}}},
				{"collateral_inputs", tArr{outPointDoc(0xa2, 3)}},
				{"collateral_return", tObj{{"address", tStr("addr_collateral")}, {"value", tUint(4_000_000)}}},
				{"valid", false},
				{"coinbase", false},
			},
			tObj{
				{"coinbase", true},
				{"valid", true},
				{"outputs", tArr{tObj{{"value", tUint(50)}, {"address", tStr("miner")}}}},
				{"inputs", tArr{}},
				{"hash", tHex(fill(0x03, 32))},
			},
		}},
	}
}

func fullBlock() *Block {
	dh := fillHash(0xd0)
	return &Block{
		Height:   42,
		Hash:     fillHash(0xb1),
		PrevHash: fillHash(0xb0),
		Time:     1_700_000_000,
		Slot:     98_765_432,
		Txs: []Tx{
			{
				Hash:   fillHash(0x01),
				Inputs: []OutPoint{{fillHash(0xa0), 0}, {fillHash(0xa1), 7}},
				Outputs: []Output{
					{
						Address: "addr_test1qz2fxv2umyhttkxyxp8x0dlpdt3k6cwng5pxj3jhsydzer",
						Value:   1_000_000,
						Assets: []Asset{ // sorted by the decoder
							{Policy: fill(0xc1, 28), Name: nil, Quantity: 1},
							{Policy: fill(0xc2, 28), Name: []byte("tok"), Quantity: 5},
						},
						DatumHash: &dh,
						Datum:     []byte{0xd8, 0x79, 0x80},
						ScriptRef: []byte{0x82, 0x01, 0x4e},
					},
					{Address: "1BoatSLRHtKNngkdXEeobR76b53LETtpyT", Value: 1<<64 - 1},
				},
			},
			{
				Hash:             fillHash(0x02),
				Inputs:           []OutPoint{{fillHash(0x01), 1}},
				Outputs:          []Output{{Address: "addr2", Value: 10}},
				CollateralInputs: []OutPoint{{fillHash(0xa2), 3}},
				CollateralReturn: &Output{Address: "addr_collateral", Value: 4_000_000},
				Invalid:          true,
			},
			{
				Hash:     fillHash(0x03),
				Outputs:  []Output{{Address: "miner", Value: 50}},
				Coinbase: true,
			},
		},
	}
}

func TestDocEncoderSanity(t *testing.T) {
	j, ok := encJSON(minimalDoc())
	if !ok || string(j) != `{"height":0,"hash":"`+strings.Repeat("11", 32)+`","txs":[]}` {
		t.Fatalf("encJSON = %s, %v", j, ok)
	}
	if _, ok := encCBOR(tObj{{"x", rawJSON("1")}}); ok {
		t.Fatal("encCBOR accepted a JSON-only raw value")
	}
}

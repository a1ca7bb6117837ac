package chain

import (
	"bytes"
	"encoding/hex"
	"strconv"
	"testing"
)

// canonicalBlock embeds a block in a record as its canonical encoding.
type canonicalBlock struct{ b *Block }

func (c canonicalBlock) MarshalCBOR() ([]byte, error) { return AppendBlockCBOR(nil, c.b), nil }

func TestMarshalDeterministic(t *testing.T) {
	mustMarshal := func(v any) []byte {
		t.Helper()
		b, err := MarshalDeterministic(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}

	// The example of cbor_deterministic.go.
	got := hex.EncodeToString(mustMarshal(map[string]uint64{"b": 1, "a": 2, "aa": 3}))
	if want := "a3" + "6161" + "02" + "6162" + "01" + "626161" + "03"; got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}

	// Map iteration order is random: many maps built in different orders
	// encode to the same bytes, keys sorted shorter first, then bytewise.
	keys := make([]string, 40)
	for i := range keys {
		keys[i] = strconv.Itoa(i * 7919 % 1000)
	}
	var first []byte
	for round := range 20 {
		m := map[string]any{}
		for i := range keys {
			k := keys[(i+round*7)%len(keys)] // a different insertion order per round
			m[k] = map[string]int{"y": len(k) % 2, "x": len(k)}
		}
		enc := mustMarshal(m)
		if first == nil {
			first = enc
		} else if !bytes.Equal(enc, first) {
			t.Fatalf("round %d encodes differently:\n%x\n%x", round, enc, first)
		}
	}

	// A struct encodes as the map of its tagged fields, in the same order.
	type rec struct {
		Seq  uint64 `cbor:"seq"`
		Kind string `cbor:"kind"`
	}
	if s, m := mustMarshal(rec{Seq: 7, Kind: "apply"}), mustMarshal(map[string]any{"kind": "apply", "seq": 7}); !bytes.Equal(s, m) {
		t.Fatalf("struct %x, map %x", s, m)
	}

	// A block embedded through MarshalCBOR is kept byte for byte.
	blk := fullBlock()
	enc := mustMarshal(map[string]any{"block": canonicalBlock{blk}})
	want := append([]byte{0xa1, 0x65, 'b', 'l', 'o', 'c', 'k'}, AppendBlockCBOR(nil, blk)...)
	if !bytes.Equal(enc, want) {
		t.Fatalf("embedded block changed:\n got %s\nwant %s", clipHex(enc), clipHex(want))
	}

	if _, err := MarshalDeterministic(make(chan int)); err == nil {
		t.Fatal("a channel encoded")
	}
}

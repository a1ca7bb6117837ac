package textenc

import (
	"bytes"
	"testing"
)

// TestDecodeBase58 decodes a known Byron address (its CBOR starts 82 d8 18)
// and a string of leading zeros, and refuses a character outside the
// alphabet.
func TestDecodeBase58(t *testing.T) {
	raw, err := DecodeBase58("Ae2tdPwUPEZKQuZh2UndEoTKEakMYHGNjJVYmNZgJk2qqgHouxDsA5oT83n")
	if err != nil || len(raw) < 3 || !bytes.Equal(raw[:3], []byte{0x82, 0xd8, 0x18}) {
		t.Fatalf("decode a Byron address: %x, %v", raw, err)
	}
	if got, err := DecodeBase58("111z"); err != nil || !bytes.Equal(got, []byte{0, 0, 0, 57}) {
		t.Fatalf("111z: %x, %v; want 00000039", got, err)
	}
	if _, err := DecodeBase58("abc0"); err == nil {
		t.Fatal("0 is not in the alphabet, yet decoded")
	}
}

// FuzzDecodeBase58: every decodable string encodes back to itself (base58
// without checksum is a bijection between strings and byte strings), and
// every byte string round-trips.
func FuzzDecodeBase58(f *testing.F) {
	f.Add("Ae2tdPwUPEZKQuZh2UndEoTKEakMYHGNjJVYmNZgJk2qqgHouxDsA5oT83n", []byte{0, 0, 1, 2})
	f.Add("", []byte{})
	f.Fuzz(func(t *testing.T, s string, b []byte) {
		if raw, err := DecodeBase58(s); err == nil && Base58(raw) != s {
			t.Fatalf("%q decodes to %x, which encodes as %q", s, raw, Base58(raw))
		}
		if got, err := DecodeBase58(Base58(b)); err != nil || !bytes.Equal(got, b) {
			t.Fatalf("%x: round trip gives %x, %v", b, got, err)
		}
	})
}

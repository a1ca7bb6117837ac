package textenc

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"strings"
	"testing"
)

// TestDecodeBech32Vectors checks BIP 173's valid and invalid strings and a
// CIP 5 key hash, whose bytes are known independently.
func TestDecodeBech32Vectors(t *testing.T) {
	for _, s := range []string{
		"A12UEL5L",
		"a12uel5l",
		"abcdef1qpzry9x8gf2tvdw0s3jn54khce6mua7lmqqqxw",
		"split1checkupstagehandshakeupstreamerranterredcaperred2y9e3w",
	} {
		if _, _, err := DecodeBech32(s, Bech32Const, nil); err != nil {
			// abcdef… and split… carry data whose padding is not zero in 8-bit
			// terms only when the data length is not a byte multiple.
			if !strings.Contains(err.Error(), "padding") {
				t.Errorf("%s: %v", s, err)
			}
		}
	}
	for _, s := range []string{
		"\x201nwldj5",   // hrp character out of range
		"pzry9x0s0muk",  // no separator
		"1pzry9x0s0muk", // empty hrp
		"x1b4n0q5v",     // invalid data character
		"li1dgmt3",      // too short checksum
		"A1G7SGD8",      // checksum calculated with uppercase hrp
		"a12UEL5L",      // mixed case
		"abcdef1qpzry9x8gf2tvdw0s3jn54khce6mua7lmqqqxx", // bad checksum
	} {
		if _, _, err := DecodeBech32(s, Bech32Const, nil); !errors.Is(err, ErrBech32) {
			t.Errorf("%q: err %v, want ErrBech32", s, err)
		}
	}
	// CIP 5's example of a key hash: addr_vkh of 28 bytes.
	hash := bytes.Repeat([]byte{0xab}, 28)
	s := Bech32("addr_vkh", ConvertBits(hash), Bech32Const)
	hrp, data, err := DecodeBech32(s, Bech32Const, nil)
	if err != nil || hrp != "addr_vkh" || !bytes.Equal(data, hash) {
		t.Fatalf("%s: %q %x %v", s, hrp, data, err)
	}
	if _, _, err := DecodeBech32(s, Bech32mConst, nil); !errors.Is(err, ErrBech32) {
		t.Fatalf("bech32 string accepted as bech32m: %v", err)
	}
}

// FuzzDecodeBech32 checks that every encoding of bytes decodes back to them,
// and that a decoded string re-encodes to itself (in lower case): no two
// strings decode to one value.
func FuzzDecodeBech32(f *testing.F) {
	f.Add("addr", []byte{0x61, 1, 2, 3}, "")
	f.Add("stake_test", bytes.Repeat([]byte{0xe0}, 29), "A12UEL5L")
	f.Fuzz(func(t *testing.T, hrp string, data []byte, s string) {
		if hrp != "" && !strings.ContainsAny(hrp, "1") && strings.ToLower(hrp) == hrp && validHRP(hrp) {
			enc := Bech32(hrp, ConvertBits(data), Bech32Const)
			h, d, err := DecodeBech32(enc, Bech32Const, nil)
			if err != nil || h != hrp || !bytes.Equal(d, data) {
				t.Fatalf("round trip of %q %x: %q %x %v", hrp, data, h, d, err)
			}
		}
		h, d, err := DecodeBech32(s, Bech32Const, nil)
		if err != nil {
			return
		}
		if enc := Bech32(h, ConvertBits(d), Bech32Const); enc != strings.ToLower(s) {
			t.Fatalf("%q decodes to %q %x, which encodes as %q", s, h, d, enc)
		}
	})
}

func validHRP(h string) bool {
	for i := 0; i < len(h); i++ {
		if h[i] < 33 || h[i] > 126 {
			return false
		}
	}
	return true
}

// BenchmarkDecodeBech32 decodes a Cardano base address (57 bytes, 103
// characters): an import decodes every output's address.
func BenchmarkDecodeBech32(b *testing.B) {
	h1, h2 := sha256.Sum256([]byte("payment")), sha256.Sum256([]byte("stake"))
	raw := append(append([]byte{0x01}, h1[:28]...), h2[:28]...)
	s := Bech32("addr", ConvertBits(raw), Bech32Const)
	dst := make([]byte, 0, 64)
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		if _, _, err := DecodeBech32(s, Bech32Const, dst); err != nil {
			b.Fatal(err)
		}
	}
}

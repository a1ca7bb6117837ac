package credential

import (
	"bytes"
	"errors"
	"testing"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/internal/textenc"
)

func hash(b byte) []byte { return bytes.Repeat([]byte{b}, HashLen) }

func addr(hrp string, raw []byte) string {
	return textenc.Bech32(hrp, textenc.ConvertBits(raw), textenc.Bech32Const)
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// TestValuesByHeaderType derives the credentials of one address of each
// header type, written byte by byte here, and compares them with the
// table of the package doc.
func TestValuesByHeaderType(t *testing.T) {
	pay, stk := hash(0x11), hash(0x22)
	ptr := []byte{0x81, 0x00, 0x02, 0x03} // slot, tx index, cert index
	for _, tc := range []struct {
		name           string
		address        string
		payment, stake []byte // nil: none
	}{
		{"base key/key", addr("addr", cat([]byte{0x01}, pay, stk)), cat([]byte{0}, pay), cat([]byte{0}, stk)},
		{"base script/key", addr("addr", cat([]byte{0x11}, pay, stk)), cat([]byte{1}, pay), cat([]byte{0}, stk)},
		{"base key/script", addr("addr_test", cat([]byte{0x20}, pay, stk)), cat([]byte{0}, pay), cat([]byte{1}, stk)},
		{"base script/script", addr("addr", cat([]byte{0x31}, pay, stk)), cat([]byte{1}, pay), cat([]byte{1}, stk)},
		{"pointer key", addr("addr", cat([]byte{0x41}, pay, ptr)), cat([]byte{0}, pay), nil},
		{"pointer script", addr("addr", cat([]byte{0x51}, pay, ptr)), cat([]byte{1}, pay), nil},
		{"enterprise key", addr("addr", cat([]byte{0x61}, pay)), cat([]byte{0}, pay), nil},
		{"enterprise script", addr("addr_test", cat([]byte{0x70}, pay)), cat([]byte{1}, pay), nil},
		{"short base", addr("addr", cat([]byte{0x01}, pay, stk[:10])), cat([]byte{0}, pay), nil},
		{"truncated", addr("addr", cat([]byte{0x61}, pay[:27])), nil, nil},
		{"reward address as an output", addr("stake", cat([]byte{0xe1}, stk)), nil, nil},
		{"byron", "Ae2tdPwUPEZFRbyhz3cpfC2CumGzNkFBN2L42rcUc2yjQpEkxDbkPodpMAi", nil, nil},
		{"bitcoin bech32", "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4", nil, nil},
		{"bad checksum", addr("addr", cat([]byte{0x61}, pay))[:50] + "qqqqqqqq", nil, nil},
	} {
		u := &chain.Utxo{Output: chain.Output{Address: tc.address}}
		var gotP, gotS [][]byte
		PaymentValues(u, func(v []byte) { gotP = append(gotP, bytes.Clone(v)) })
		StakeValues(u, func(v []byte) { gotS = append(gotS, bytes.Clone(v)) })
		check := func(what string, got [][]byte, want []byte) {
			switch {
			case want == nil && len(got) != 0:
				t.Errorf("%s: %s %x, want none", tc.name, what, got)
			case want != nil && (len(got) != 1 || !bytes.Equal(got[0], want)):
				t.Errorf("%s: %s %x, want %x", tc.name, what, got, want)
			}
		}
		check("payment", gotP, tc.payment)
		check("stake", gotS, tc.stake)
	}
}

// TestParse checks the accepted strings against the values they name and
// the refused ones.
func TestParse(t *testing.T) {
	h := hash(0x5a)
	for _, tc := range []struct {
		s     string
		stake bool
		want  []byte
	}{
		{addr("addr_vkh", h), false, cat([]byte{0}, h)},
		{addr("script", h), false, cat([]byte{1}, h)},
		{addr("stake", cat([]byte{0xe1}, h)), true, cat([]byte{0}, h)},
		{addr("stake_test", cat([]byte{0xf0}, h)), true, cat([]byte{1}, h)},
		{addr("stake_vkh", h), true, cat([]byte{0}, h)},
		{addr("script", h), true, cat([]byte{1}, h)},
	} {
		parse := ParsePayment
		if tc.stake {
			parse = ParseStake
		}
		got, err := parse(tc.s)
		if err != nil || !bytes.Equal(got, tc.want) {
			t.Errorf("%s: %x %v, want %x", tc.s, got, err, tc.want)
		}
	}
	for _, tc := range []struct {
		s     string
		stake bool
	}{
		{"", false},
		{addr("addr_vkh", h[:27]), false},
		{addr("stake_vkh", h), false},
		{addr("addr", cat([]byte{0x61}, h)), false},
		{addr("addr_vkh", h)[:20], false},
		{addr("stake", cat([]byte{0x61}, h)), true},
		{addr("stake", h), true},
		{addr("stake", nil), true},
		{addr("addr_vkh", h), true},
		{addr("script", cat(h, []byte{1})), true},
	} {
		parse := ParsePayment
		if tc.stake {
			parse = ParseStake
		}
		if v, err := parse(tc.s); !errors.Is(err, ErrInvalid) {
			t.Errorf("%q (stake %v): %x %v, want ErrInvalid", tc.s, tc.stake, v, err)
		}
	}
}

// FuzzParse checks that a parsed credential is 29 bytes of a known kind and
// that rendering it back in the parsed prefix's form parses to it again.
func FuzzParse(f *testing.F) {
	f.Add(addr("addr_vkh", hash(1)))
	f.Add(addr("stake", cat([]byte{0xe0}, hash(2))))
	f.Add("script1")
	f.Fuzz(func(t *testing.T, s string) {
		for _, parse := range []func(string) ([]byte, error){ParsePayment, ParseStake} {
			v, err := parse(s)
			if err != nil {
				continue
			}
			if len(v) != ValueLen || v[0] > 1 {
				t.Fatalf("%q: value %x", s, v)
			}
			hrp := "stake_vkh"
			if v[0] == 1 {
				hrp = "script"
			}
			if again, err := ParseStake(addr(hrp, v[1:])); err != nil || !bytes.Equal(again, v) {
				t.Fatalf("%q: %x, re-rendered parses to %x %v", s, v, again, err)
			}
		}
		u := &chain.Utxo{Output: chain.Output{Address: s}}
		PaymentValues(u, func(v []byte) {
			if len(v) != ValueLen || v[0] > 1 {
				t.Fatalf("%q: payment value %x", s, v)
			}
		})
		StakeValues(u, func(v []byte) {
			if len(v) != ValueLen || v[0] > 1 {
				t.Fatalf("%q: stake value %x", s, v)
			}
		})
	})
}

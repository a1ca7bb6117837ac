// Package textenc renders bytes as the text encodings addresses use:
// base58 (Bitcoin's alphabet, no checksum of its own) and bech32/bech32m,
// and decodes bech32/bech32m (DecodeBech32).
// It is one copy for every chain adapter and generator, with no chain
// knowledge: a checksum or a version byte is the caller's.
package textenc

import (
	"fmt"
	"math/bits"
	"strings"
)

// base58Alphabet is Bitcoin's base58 alphabet (no 0, O, I or l).
const base58Alphabet = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"

// Base58 encodes in as a big-endian number in base 58, each leading
// zero byte as '1' (Bitcoin's base58). The number is held in 64-bit limbs and
// divided by 58^10 per pass, ten digits at a time.
func Base58(in []byte) string {
	zeros := 0
	for zeros < len(in) && in[zeros] == 0 {
		zeros++
	}
	rest := in[zeros:]

	var limbStack [8]uint64
	limbs := limbStack[:0]
	if n := (len(rest) + 7) / 8; n <= len(limbStack) {
		limbs = limbStack[:n]
	} else {
		limbs = make([]uint64, n)
	}
	for i, b := range rest {
		pos := len(rest) - 1 - i // significance of the byte
		limbs[len(limbs)-1-pos/8] |= uint64(b) << (8 * (pos % 8))
	}

	// log(256)/log(58) < 1.37, plus up to nine digits of the last pass.
	var digitStack [64]byte
	digits := digitStack[:0] // little-endian
	if size := len(rest)*137/100 + 10; size > len(digitStack) {
		digits = make([]byte, 0, size)
	}
	const tenDigits = 58 * 58 * 58 * 58 * 58 * 58 * 58 * 58 * 58 * 58 // 4.3e17 < 2^64
	for len(limbs) > 0 {
		var rem uint64
		for i := range limbs {
			limbs[i], rem = bits.Div64(rem, limbs[i], tenDigits)
		}
		for range 10 {
			digits = append(digits, byte(rem%58))
			rem /= 58
		}
		for len(limbs) > 0 && limbs[0] == 0 {
			limbs = limbs[1:]
		}
	}
	for len(digits) > 0 && digits[len(digits)-1] == 0 {
		digits = digits[:len(digits)-1]
	}

	out := make([]byte, zeros+len(digits))
	for i := range zeros {
		out[i] = '1'
	}
	for i, d := range digits {
		out[len(out)-1-i] = base58Alphabet[d]
	}
	return string(out)
}

const bech32Charset = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"

// Checksum constants of BIP 173 (bech32) and BIP 350 (bech32m).
const (
	Bech32Const  = 1
	Bech32mConst = 0x2bc830a3
)

// ConvertBits regroups 8-bit bytes into 5-bit groups, zero-padding the last.
func ConvertBits(in []byte) []byte {
	out := make([]byte, 0, (len(in)*8+4)/5)
	acc, bits := uint32(0), 0
	for _, b := range in {
		acc = acc<<8 | uint32(b)
		bits += 8
		for bits >= 5 {
			bits -= 5
			out = append(out, byte(acc>>bits)&31)
		}
	}
	if bits > 0 {
		out = append(out, byte(acc<<(5-bits))&31)
	}
	return out
}

// bech32Gen is BIP 173's generator: the terms a checksum step XORs in, one
// per bit it shifts out.
var bech32Gen = [5]uint32{0x3b6a57b2, 0x26508e6d, 0x1ea119fa, 0x3d4233dd, 0x2a1462b3}

func bech32Polymod(values []byte) uint32 {
	chk := uint32(1)
	for _, v := range values {
		top := chk >> 25
		chk = (chk&0x1ffffff)<<5 ^ uint32(v)
		for i := range bech32Gen {
			if (top>>i)&1 == 1 {
				chk ^= bech32Gen[i]
			}
		}
	}
	return chk
}

// Bech32 renders hrp, "1", the 5-bit data and its 6-character checksum
// (constant: Bech32Const or Bech32mConst), with no length limit: Cardano
// addresses exceed BIP 173's 90 characters (CIP 5).
func Bech32(hrp string, data []byte, constant uint32) string {
	values := make([]byte, 0, 2*len(hrp)+1+len(data)+6)
	for i := 0; i < len(hrp); i++ {
		values = append(values, hrp[i]>>5)
	}
	values = append(values, 0)
	for i := 0; i < len(hrp); i++ {
		values = append(values, hrp[i]&31)
	}
	values = append(values, data...)
	values = append(values, 0, 0, 0, 0, 0, 0)
	mod := bech32Polymod(values) ^ constant

	out := make([]byte, 0, len(hrp)+1+len(data)+6)
	out = append(out, hrp...)
	out = append(out, '1')
	for _, d := range data {
		out = append(out, bech32Charset[d])
	}
	for i := range 6 {
		out = append(out, bech32Charset[(mod>>(5*(5-i)))&31])
	}
	return string(out)
}

// DecodeBase58 decodes Bitcoin's base58 (Base58's inverse): each leading '1'
// is a zero byte. A character outside the alphabet is an error.
func DecodeBase58(s string) ([]byte, error) {
	zeros := 0
	for zeros < len(s) && s[zeros] == '1' {
		zeros++
	}
	// Big-endian bytes of the number, built digit by digit: out = out*58 + d.
	out := make([]byte, 0, len(s)*733/1000+1) // log(58)/log(256) < 0.733
	for i := zeros; i < len(s); i++ {
		d := strings.IndexByte(base58Alphabet, s[i])
		if d < 0 {
			return nil, fmt.Errorf("base58: invalid character %q at %d", s[i], i)
		}
		carry := d
		for j := len(out) - 1; j >= 0; j-- {
			carry += int(out[j]) * 58
			out[j] = byte(carry)
			carry >>= 8
		}
		for carry > 0 {
			out = append([]byte{byte(carry)}, out...)
			carry >>= 8
		}
	}
	return append(make([]byte, zeros, zeros+len(out)), out...), nil
}

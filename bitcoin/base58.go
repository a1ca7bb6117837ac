package bitcoin

import (
	"crypto/sha256"
	"math/bits"
)

// base58Alphabet is Bitcoin's base58 alphabet (no 0, O, I or l).
const base58Alphabet = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"

// base58Check encodes version || payload || checksum in base58, the checksum
// being the first 4 bytes of SHA-256(SHA-256(version || payload)). It is the
// legacy address encoding, written here because btcutil's goes through
// math/big and allocates a dozen times per address; the tests compare the two
// on every fixture output and on random payloads.
func base58Check(version byte, payload []byte) string {
	var in [1 + 32 + 4]byte // version, payload (20 bytes for addresses), checksum
	if len(payload) > 32 {
		panic("bitcoin: base58Check payload over 32 bytes")
	}
	n := 1 + len(payload)
	in[0] = version
	copy(in[1:], payload)
	first := sha256.Sum256(in[:n])
	second := sha256.Sum256(first[:])
	copy(in[n:], second[:4])
	return base58Encode(in[:n+4])
}

// base58Encode encodes in as a big-endian number in base 58, each leading
// zero byte as '1' (Bitcoin's base58). The number is held in 64-bit limbs and
// divided by 58^10 per pass, ten digits at a time.
func base58Encode(in []byte) string {
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

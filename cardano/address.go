package cardano

import (
	"fmt"
	"math/big"
	"strings"
)

// RenderAddress returns the address string of an output's raw address bytes,
// a pure function of those bytes (the package doc's table): base58 for Byron
// (header type 8), bech32 with "addr" (network id 1) or "addr_test" (any
// other network id) for the Shelley types 0..7. Types 14 and 15 (reward
// addresses) cannot hold outputs, and 9..13 are undefined: both are errors.
// The bytes are never parsed into parts and re-serialised, so an address
// whose fields a parser would normalise (a pointer address with overflowing
// pointer values) keeps its exact bytes.
func RenderAddress(raw []byte) (string, error) {
	if len(raw) == 0 {
		return "", fmt.Errorf("empty address")
	}
	switch typ := raw[0] >> 4; {
	case typ <= 7:
		hrp := "addr_test"
		if raw[0]&0x0f == 1 {
			hrp = "addr"
		}
		return bech32Encode(hrp, raw), nil
	case typ == 8:
		return base58Encode(raw), nil
	default:
		return "", fmt.Errorf("address of header type %d cannot hold an output", typ)
	}
}

const base58Alphabet = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"

// base58Encode is Bitcoin's base58 (no checksum: a Byron address carries its
// own CRC inside its CBOR).
func base58Encode(b []byte) string {
	var sb strings.Builder
	zeros := 0
	for zeros < len(b) && b[zeros] == 0 {
		zeros++
	}
	n := new(big.Int).SetBytes(b)
	radix, mod := big.NewInt(58), new(big.Int)
	var digits []byte
	for n.Sign() > 0 {
		n.DivMod(n, radix, mod)
		digits = append(digits, base58Alphabet[mod.Int64()])
	}
	for range zeros {
		sb.WriteByte('1')
	}
	for i := len(digits) - 1; i >= 0; i-- {
		sb.WriteByte(digits[i])
	}
	return sb.String()
}

const bech32Charset = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"

// bech32Encode encodes data (8-bit bytes) with the BIP-173 checksum and no
// length limit: Cardano addresses may exceed BIP-173's 90 characters (CIP-5).
func bech32Encode(hrp string, data []byte) string {
	// 8-bit to 5-bit groups, padded.
	five := make([]byte, 0, (len(data)*8+4)/5)
	var acc, bits uint
	for _, b := range data {
		acc = acc<<8 | uint(b)
		bits += 8
		for bits >= 5 {
			bits -= 5
			five = append(five, byte(acc>>bits)&31)
		}
	}
	if bits > 0 {
		five = append(five, byte(acc<<(5-bits))&31)
	}
	values := make([]byte, 0, 2*len(hrp)+1+len(five)+6)
	for i := 0; i < len(hrp); i++ {
		values = append(values, hrp[i]>>5)
	}
	values = append(values, 0)
	for i := 0; i < len(hrp); i++ {
		values = append(values, hrp[i]&31)
	}
	values = append(values, five...)
	values = append(values, 0, 0, 0, 0, 0, 0)
	mod := bech32Polymod(values) ^ 1

	var sb strings.Builder
	sb.Grow(len(hrp) + 1 + len(five) + 6)
	sb.WriteString(hrp)
	sb.WriteByte('1')
	for _, v := range five {
		sb.WriteByte(bech32Charset[v])
	}
	for i := range 6 {
		sb.WriteByte(bech32Charset[(mod>>(5*(5-i)))&31])
	}
	return sb.String()
}

func bech32Polymod(values []byte) uint32 {
	gen := [5]uint32{0x3b6a57b2, 0x26508e6d, 0x1ea119fa, 0x3d4233dd, 0x2a1462b3}
	chk := uint32(1)
	for _, v := range values {
		top := chk >> 25
		chk = (chk&0x1ffffff)<<5 ^ uint32(v)
		for i := range 5 {
			if (top>>i)&1 == 1 {
				chk ^= gen[i]
			}
		}
	}
	return chk
}

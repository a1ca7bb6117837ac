package workload

import (
	"crypto/sha256"
	"crypto/sha512"
	"encoding/binary"
)

// address is one generated address and whether it is locked by a script
// (Cardano script addresses receive outputs with datums).
type address struct {
	s      string
	script bool
}

// addressDomain separates the address spaces a seed derives: the ranked
// ordinary addresses and the hot ones.
type addressDomain byte

const (
	domainOrdinary addressDomain = 'o'
	domainHot      addressDomain = 'h'
)

// deriveAddress returns the address of rank i in a domain: a pure function of
// (profile, seed, domain, i), so addresses need not be stored to be stable.
// The strings are well-formed (base58check, bech32/bech32m with valid
// checksums) and of realistic lengths, but no key is behind them.
func deriveAddress(p Profile, seed int64, d addressDomain, i int) address {
	var in [18]byte
	binary.BigEndian.PutUint64(in[0:], uint64(seed))
	in[8] = byte(p)
	in[9] = byte(d)
	binary.BigEndian.PutUint64(in[10:], uint64(i))
	h := sha512.Sum512(in[:])
	if p == Cardano {
		return cardanoAddress(h, d == domainHot)
	}
	return bitcoinAddress(h)
}

// bitcoinAddress picks a mainnet address kind with roughly today's output
// shares and encodes h's bytes as its payload:
//
//	kind     share  form                       length
//	P2WPKH   45%    bc1q + bech32              42
//	P2PKH    25%    base58check, version 0x00  33-34, starts with 1
//	P2SH     15%    base58check, version 0x05  34, starts with 3
//	P2TR     10%    bc1p + bech32m             62
//	P2WSH     5%    bc1q + bech32              62
func bitcoinAddress(h [64]byte) address {
	k := int(h[0]) * 100 / 256
	payload := h[1:]
	switch {
	case k < 45:
		return address{s: segwitAddress("bc", 0, payload[:20])}
	case k < 70:
		return address{s: base58Check(0x00, payload[:20])}
	case k < 85:
		return address{s: base58Check(0x05, payload[:20]), script: true}
	case k < 95:
		return address{s: segwitAddress("bc", 1, payload[:32]), script: true}
	default:
		return address{s: segwitAddress("bc", 0, payload[:32]), script: true}
	}
}

// cardanoAddress encodes a Shelley mainnet address (CIP-19): a header byte
// (address type << 4 | network 1) and 28-byte credential hashes, bech32 with
// hrp "addr":
//
//	type                      share  header  length  prefix
//	base, key/key             75%    0x01    103     addr1q
//	base, script/key (DEXes)  15%    0x11    103     addr1z
//	enterprise, key           10%    0x61    58      addr1v
//
// Hot (exchange) addresses are always key/key base addresses.
func cardanoAddress(h [64]byte, hot bool) address {
	k := int(h[0]) * 100 / 256
	payload := make([]byte, 0, 57)
	switch {
	case hot || k < 75:
		payload = append(append(payload, 0x01), h[1:57]...)
		return address{s: bech32Encode("addr", convertBits(payload), bech32Const)}
	case k < 90:
		payload = append(append(payload, 0x11), h[1:57]...)
		return address{s: bech32Encode("addr", convertBits(payload), bech32Const), script: true}
	default:
		payload = append(append(payload, 0x61), h[1:29]...)
		return address{s: bech32Encode("addr", convertBits(payload), bech32Const)}
	}
}

const base58Alphabet = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"

// base58Check encodes version || payload || first 4 bytes of SHA-256d.
func base58Check(version byte, payload []byte) string {
	b := append([]byte{version}, payload...)
	first := sha256.Sum256(b)
	second := sha256.Sum256(first[:])
	b = append(b, second[:4]...)

	zeros := 0
	for zeros < len(b) && b[zeros] == 0 {
		zeros++
	}
	// Repeated division by 58 of the big-endian number b.
	num := append([]byte(nil), b...)
	var out []byte
	for start := zeros; start < len(num); {
		rem := 0
		for i := start; i < len(num); i++ {
			acc := rem*256 + int(num[i])
			num[i] = byte(acc / 58)
			rem = acc % 58
		}
		out = append(out, base58Alphabet[rem])
		for start < len(num) && num[start] == 0 {
			start++
		}
	}
	for range zeros {
		out = append(out, '1')
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return string(out)
}

const bech32Charset = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"

// Checksum constants of BIP 173 (bech32) and BIP 350 (bech32m).
const (
	bech32Const  = 1
	bech32mConst = 0x2bc830a3
)

// segwitAddress encodes a segwit v0 (bech32) or v1+ (bech32m) address.
func segwitAddress(hrp string, version byte, program []byte) string {
	data := append([]byte{version}, convertBits(program)...)
	c := uint32(bech32Const)
	if version > 0 {
		c = bech32mConst
	}
	return bech32Encode(hrp, data, c)
}

// convertBits regroups 8-bit bytes into 5-bit groups, zero-padding the last.
func convertBits(in []byte) []byte {
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

func bech32Polymod(values []byte) uint32 {
	gen := [5]uint32{0x3b6a57b2, 0x26508e6d, 0x1ea119fa, 0x3d4233dd, 0x2a1462b3}
	chk := uint32(1)
	for _, v := range values {
		top := chk >> 25
		chk = (chk&0x1ffffff)<<5 ^ uint32(v)
		for i := range gen {
			if (top>>i)&1 == 1 {
				chk ^= gen[i]
			}
		}
	}
	return chk
}

// bech32Encode renders hrp, "1", the 5-bit data and its 6-character checksum.
func bech32Encode(hrp string, data []byte, constant uint32) string {
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

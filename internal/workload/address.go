package workload

import (
	"crypto/sha256"
	"crypto/sha512"
	"encoding/binary"

	"github.com/utxo-cache/utxo-cache/internal/textenc"
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
		return address{s: textenc.Bech32("addr", textenc.ConvertBits(payload), textenc.Bech32Const)}
	case k < 90:
		payload = append(append(payload, 0x11), h[1:57]...)
		return address{s: textenc.Bech32("addr", textenc.ConvertBits(payload), textenc.Bech32Const), script: true}
	default:
		payload = append(append(payload, 0x61), h[1:29]...)
		return address{s: textenc.Bech32("addr", textenc.ConvertBits(payload), textenc.Bech32Const)}
	}
}

// base58Check encodes version || payload || first 4 bytes of SHA-256d.
func base58Check(version byte, payload []byte) string {
	b := append([]byte{version}, payload...)
	first := sha256.Sum256(b)
	second := sha256.Sum256(first[:])
	return textenc.Base58(append(b, second[:4]...))
}

// segwitAddress encodes a segwit v0 (bech32) or v1+ (bech32m) address.
func segwitAddress(hrp string, version byte, program []byte) string {
	data := append([]byte{version}, textenc.ConvertBits(program)...)
	c := uint32(textenc.Bech32Const)
	if version > 0 {
		c = textenc.Bech32mConst
	}
	return textenc.Bech32(hrp, data, c)
}

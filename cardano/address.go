package cardano

import (
	"fmt"

	"github.com/utxo-cache/utxo-cache/internal/textenc"
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
		return textenc.Bech32(hrp, textenc.ConvertBits(raw), textenc.Bech32Const), nil
	case typ == 8:
		return textenc.Base58(raw), nil
	default:
		return "", fmt.Errorf("address of header type %d cannot hold an output", typ)
	}
}

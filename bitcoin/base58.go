package bitcoin

import (
	"crypto/sha256"

	"github.com/utxo-cache/utxo-cache/internal/textenc"
)

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
	return textenc.Base58(in[:n+4])
}

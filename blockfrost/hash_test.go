package blockfrost_test

import (
	"encoding/hex"

	"golang.org/x/crypto/blake2b"
)

// blake224 is the ledger's script hash of tagged bytes, computed here
// apart from cardano/script.
func blake224(b []byte) string {
	h, _ := blake2b.New(28, nil)
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

package bitcoin

import (
	"crypto/sha256"

	"github.com/utxo-cache/utxo-cache/chain"
)

// bip30TxDomain separates the pseudo-transaction hash. A txid is a double
// SHA-256 of a serialized transaction; this is a single SHA-256 digest of a
// string no transaction starts with, so it cannot collide with a real txid.
const bip30TxDomain = "utxo-cache/bitcoin/bip30-replace\x00"

// BIP30TxHash is the hash of the pseudo-transaction that starts the block with
// hash block and spends the outputs of the earlier coinbase its coinbase
// duplicates: SHA-256("utxo-cache/bitcoin/bip30-replace" 0x00 block), with
// block in display order.
func BIP30TxHash(block chain.Hash) chain.Hash {
	h := sha256.New()
	h.Write([]byte(bip30TxDomain))
	h.Write(block[:])
	var out chain.Hash
	h.Sum(out[:0])
	return out
}

// duplicateCoinbase is a BIP30 exception: the coinbase at a height repeats
// the txid of the coinbase at firstHeight, whose outputs it overwrites.
type duplicateCoinbase struct {
	txid        chain.Hash
	firstHeight uint64
}

// mainnetDuplicateCoinbases are the two BIP30 exceptions of mainnet (Bitcoin
// Core's IsBIP30Repeat; btcd's isBIP0030Node), keyed by the later height.
var mainnetDuplicateCoinbases = map[uint64]duplicateCoinbase{
	91842: {txid: mustHash("d5d27987d2a3dfc724e359870c6644b40e497bdc0589a033220fe15429d88599"), firstHeight: 91812},
	91880: {txid: mustHash("e3bf3d07d4b0375638d5f1db5255fe07ba2c4cb067cd81b84ee974b6585fb468"), firstHeight: 91722},
}

func mustHash(s string) chain.Hash {
	h, err := chain.ParseHash(s)
	if err != nil {
		panic("bitcoin: bad hash literal " + s)
	}
	return h
}

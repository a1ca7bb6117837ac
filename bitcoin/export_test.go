package bitcoin

import "github.com/utxo-cache/utxo-cache/chain"

// IsPseudoTx reports whether tx is the pseudo-transaction the adapter adds to
// block for a BIP30 duplicate coinbase (it carries no outputs and is not a
// Bitcoin transaction).
func IsPseudoTx(block *chain.Block, tx *chain.Tx) bool {
	return tx.Hash == BIP30TxHash(block.Hash)
}

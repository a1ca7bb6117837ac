package cardano

import (
	"fmt"

	"github.com/blinklabs-io/gouroboros/ledger"

	"github.com/utxo-cache/utxo-cache/chain"
)

// ConvertTx turns one transaction in Cardano's CBOR (what a node's
// submission takes: [body, witnesses, is_valid, auxiliary data] from
// Shelley on) into the block format's Tx, as Convert does for a block's:
// the hash of the body, inputs, outputs byte-exact, collateral. The era is
// inferred from the transaction's shape; a Byron transaction is refused
// (ErrUnsupported: none is submitted today). Errors wrap ErrCorrupt or
// ErrUnsupported; it never panics.
func (a *Adapter) ConvertTx(raw []byte) (tx chain.Tx, err error) {
	defer func() {
		if r := recover(); r != nil {
			tx, err = chain.Tx{}, fmt.Errorf("%w: transaction: decoder panicked: %v", ErrCorrupt, r)
		}
	}()
	t, err := ledger.DetermineTransactionType(raw)
	if err != nil {
		return chain.Tx{}, fmt.Errorf("%w: transaction: %v", ErrCorrupt, err)
	}
	era := Era(t + 1) // the library's transaction types are the era tags less one
	switch {
	case era == EraByron:
		return chain.Tx{}, fmt.Errorf("%w: a Byron transaction", ErrUnsupported)
	case era > EraConway:
		return chain.Tx{}, fmt.Errorf("%w: transaction of type %d", ErrUnknownEra, t)
	}
	ltx, err := ledger.NewTransactionFromCbor(t, raw)
	if err != nil {
		return chain.Tx{}, fmt.Errorf("%w: %s transaction: %v", ErrCorrupt, era, err)
	}
	if err := convertTx(&tx, ltx, era); err != nil {
		return chain.Tx{}, fmt.Errorf("%w: %s transaction %s: %v", ErrCorrupt, era, tx.Hash, err)
	}
	return tx, nil
}

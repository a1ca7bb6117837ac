package bitcoin

import (
	"bytes"
	"fmt"

	"github.com/btcsuite/btcd/chaincfg/chainhash"
	"github.com/btcsuite/btcd/wire"

	"github.com/utxo-cache/utxo-cache/chain"
)

// MaxTxBytes bounds one serialized loose transaction, witness included: a
// transaction larger than a block can never be mined.
const MaxTxBytes = MaxBlockBytes

// DecodeTx decodes one serialized transaction, witness included: what
// Bitcoin Core's REST interface serves at /rest/tx/<txid>.bin and what a
// wallet broadcasts. The transaction must use every byte of raw and be at
// most MaxTxBytes long; anything else fails with ErrInvalidTx. The result
// does not retain raw.
func DecodeTx(raw []byte) (*wire.MsgTx, error) {
	if len(raw) > MaxTxBytes {
		return nil, fmt.Errorf("%w: %d bytes, over %d", ErrInvalidTx, len(raw), MaxTxBytes)
	}
	r := bytes.NewReader(raw)
	mtx := new(wire.MsgTx)
	if err := mtx.Deserialize(r); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidTx, err)
	}
	if r.Len() != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes after the transaction", ErrInvalidTx, r.Len())
	}
	return mtx, nil
}

// ConvertTx maps a loose transaction (one of a mempool, not yet in a block)
// to a chain.Tx as Convert maps a block's: the txid in display order, its
// inputs, and its outputs keeping their Bitcoin indexes, the unspendable
// ones marked with no address. A coinbase, a transaction without inputs
// and one spending the null outpoint fail with ErrInvalidTx: none can be
// outside a block. The result shares no memory with mtx.
func (a *Adapter) ConvertTx(mtx *wire.MsgTx) (*chain.Tx, error) {
	var ser bytes.Buffer
	if err := mtx.SerializeNoWitness(&ser); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidTx, err)
	}
	id := chainhash.DoubleHashH(ser.Bytes())
	tx := &chain.Tx{Hash: displayHash(&id)}
	switch {
	case isCoinbase(mtx):
		return nil, fmt.Errorf("%w: %s is a coinbase transaction", ErrInvalidTx, tx.Hash)
	case len(mtx.TxIn) == 0:
		return nil, fmt.Errorf("%w: %s has no inputs", ErrInvalidTx, tx.Hash)
	}
	if _, _, err := a.appendTxIO(tx, mtx, false, nil, nil); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidTx, err)
	}
	return tx, nil
}

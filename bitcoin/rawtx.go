package bitcoin

import (
	"bytes"
	"fmt"

	"github.com/btcsuite/btcd/chaincfg/chainhash"
	"github.com/btcsuite/btcd/wire"

	"github.com/utxo-cache/utxo-cache/chain"
)

// ConvertTx turns one serialized Bitcoin transaction (with or without
// witness data, as Bitcoin Core's sendrawtransaction takes it) into the
// block format's Tx, as Convert does for a block's: the txid in display
// order, inputs as outpoints, outputs with their addresses. It refuses a
// coinbase, trailing bytes, and an output that is provably unspendable (an
// OP_RETURN): the block format cannot carry it outside a block, where its
// index is kept without an output (post such a transaction in the block
// format without it, or wait for its block). Errors wrap ErrInvalidBlock.
func (a *Adapter) ConvertTx(raw []byte) (chain.Tx, error) {
	var mtx wire.MsgTx
	r := bytes.NewReader(raw)
	if err := mtx.Deserialize(r); err != nil {
		return chain.Tx{}, fmt.Errorf("%w: transaction does not deserialize: %v", ErrInvalidBlock, err)
	}
	if r.Len() != 0 {
		return chain.Tx{}, fmt.Errorf("%w: %d bytes after the transaction", ErrInvalidBlock, r.Len())
	}
	if isCoinbase(&mtx) {
		return chain.Tx{}, fmt.Errorf("%w: a coinbase transaction", ErrInvalidBlock)
	}
	var ser bytes.Buffer
	if err := mtx.SerializeNoWitness(&ser); err != nil {
		return chain.Tx{}, fmt.Errorf("%w: %v", ErrInvalidBlock, err)
	}
	txid := chainhash.DoubleHashH(ser.Bytes())
	tx := chain.Tx{Hash: displayHash(&txid), Inputs: make([]chain.OutPoint, len(mtx.TxIn)), Outputs: make([]chain.Output, len(mtx.TxOut))}
	for i, in := range mtx.TxIn {
		tx.Inputs[i] = chain.OutPoint{TxHash: displayHash(&in.PreviousOutPoint.Hash), Index: in.PreviousOutPoint.Index}
	}
	for j, out := range mtx.TxOut {
		if out.Value < 0 || uint64(out.Value) > 21_000_000*100_000_000 {
			return chain.Tx{}, fmt.Errorf("%w: output %d has value %d", ErrInvalidBlock, j, out.Value)
		}
		if isUnspendable(out.PkScript) {
			return chain.Tx{}, fmt.Errorf("%w: output %d is unspendable (OP_RETURN): the block format carries no such output outside a block", ErrInvalidBlock, j)
		}
		tx.Outputs[j] = chain.Output{Address: a.Address(out.PkScript), Value: uint64(out.Value)}
	}
	return tx, nil
}

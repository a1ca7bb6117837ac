package bitcoin

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/btcsuite/btcd/btcutil"
	"github.com/btcsuite/btcd/chaincfg"
	"github.com/btcsuite/btcd/chaincfg/chainhash"
	"github.com/btcsuite/btcd/wire"

	"github.com/utxo-cache/utxo-cache/chain"
)

// Options configure an Adapter. The zero value is valid: mainnet.
type Options struct {
	// Network selects the address encodings, the genesis block and the BIP30
	// exceptions. Default Mainnet.
	Network Network
}

// EnsureDefaults returns o with every unset field set to its default.
func (o Options) EnsureDefaults() Options {
	if o.Network == "" {
		o.Network = Mainnet
	}
	return o
}

// Validate reports an unsupported setting.
func (o Options) Validate() error {
	_, err := o.Network.params()
	return err
}

// Adapter converts Bitcoin blocks of one network into chain blocks. It is
// immutable after NewAdapter and safe for concurrent use.
type Adapter struct {
	network    Network
	params     *chaincfg.Params
	duplicates map[uint64]duplicateCoinbase // BIP30 exceptions by later height
}

// NewAdapter returns an adapter for opts.Network.
func NewAdapter(opts Options) (*Adapter, error) {
	opts = opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	params, _ := opts.Network.params()
	a := &Adapter{network: opts.Network, params: params}
	if opts.Network == Mainnet {
		a.duplicates = mainnetDuplicateCoinbases
	}
	return a, nil
}

// Network returns the adapter's network.
func (a *Adapter) Network() Network { return a.network }

// Address returns the address an output with this script is listed under
// (the table in the package doc). It does not consider spendability: Convert
// marks an unspendable output chain.Output.Unspendable, with no address.
func (a *Adapter) Address(pkScript []byte) string { return scriptAddress(pkScript, a.params) }

// Convert maps blk, which the caller places at height, to a chain.Block that
// reproduces Bitcoin Core's UTXO set when applied after the blocks before it
// (the package doc lists the rules: display-order hashes, addresses,
// unspendable outputs, the genesis coinbase, the BIP30 duplicates and the
// pseudo-transaction they add). Every transaction's Outputs mirror its
// Bitcoin outputs one for one, so output i has index i. The result shares no
// memory with blk.
//
// Convert checks the structure it relies on: a coinbase first and only first,
// inputs on every other transaction, values within 21 million BTC, the merkle
// root over the txids, that height 0 is the network's genesis block, and
// that a block placed at or above the network's BIP34 activation height
// begins its coinbase with that height (bip34.go). It
// does not validate scripts, proof of work or amounts spent; it trusts the
// block source (a node's block files) for consensus validity.
func (a *Adapter) Convert(blk *wire.MsgBlock, height uint64) (*chain.Block, error) {
	if len(blk.Transactions) == 0 {
		return nil, fmt.Errorf("%w: block at height %d has no transactions", ErrInvalidBlock, height)
	}
	wireHash := blk.BlockHash()
	b := &chain.Block{
		Height:   height,
		Hash:     displayHash(&wireHash),
		PrevHash: displayHash(&blk.Header.PrevBlock),
		Time:     blk.Header.Timestamp.Unix(),
	}
	genesis := wireHash == *a.params.GenesisHash
	switch {
	case genesis && height != 0:
		return nil, fmt.Errorf("%w: genesis block %s given height %d", ErrInvalidBlock, b.Hash, height)
	case !genesis && height == 0:
		return nil, fmt.Errorf("%w: block %s at height 0 is not the %s genesis block", ErrInvalidBlock, b.Hash, a.network)
	}

	// One backing array each for the block's inputs and outputs.
	var nIn, nOut int
	for _, mtx := range blk.Transactions {
		nIn += len(mtx.TxIn)
		nOut += len(mtx.TxOut)
	}
	ins := make([]chain.OutPoint, 0, nIn)
	outs := make([]chain.Output, 0, nOut)
	b.Txs = make([]chain.Tx, 0, len(blk.Transactions)+1)
	txids := make([]chainhash.Hash, len(blk.Transactions))
	var ser bytes.Buffer

	for i, mtx := range blk.Transactions {
		ser.Reset()
		if err := mtx.SerializeNoWitness(&ser); err != nil {
			return nil, fmt.Errorf("%w: height %d tx %d: %v", ErrInvalidBlock, height, i, err)
		}
		txids[i] = chainhash.DoubleHashH(ser.Bytes())
		tx := chain.Tx{Hash: displayHash(&txids[i]), Coinbase: isCoinbase(mtx)}
		switch {
		case i == 0 && !tx.Coinbase:
			return nil, fmt.Errorf("%w: height %d: first transaction %s is not a coinbase", ErrInvalidBlock, height, tx.Hash)
		case i > 0 && tx.Coinbase:
			return nil, fmt.Errorf("%w: height %d: transaction %d (%s) is a second coinbase", ErrInvalidBlock, height, i, tx.Hash)
		case !tx.Coinbase && len(mtx.TxIn) == 0:
			return nil, fmt.Errorf("%w: height %d: transaction %s has no inputs", ErrInvalidBlock, height, tx.Hash)
		}

		var err error
		if ins, outs, err = a.appendTxIO(&tx, mtx, genesis && i == 0, ins, outs); err != nil {
			return nil, fmt.Errorf("%w: height %d: %v", ErrInvalidBlock, height, err)
		}
		b.Txs = append(b.Txs, tx)
	}

	if root := merkleRoot(txids); root != blk.Header.MerkleRoot {
		return nil, fmt.Errorf("%w: height %d block %s: merkle root %s does not match its transactions (%s)",
			ErrInvalidBlock, height, b.Hash, blk.Header.MerkleRoot, root)
	}
	if err := a.checkCoinbaseHeight(blk, height); err != nil {
		return nil, err
	}

	if dup, ok := a.duplicates[height]; ok && b.Txs[0].Hash == dup.txid {
		b.Txs = slices.Insert(b.Txs, 0, chain.Tx{Hash: BIP30TxHash(b.Hash), Inputs: liveOutputs(&b.Txs[0])})
	}
	return b, nil
}

// appendTxIO fills tx's Inputs (unless it is a coinbase) and Outputs from
// mtx, appending to the backing arrays ins and outs and returning them: the
// one place that maps a Bitcoin transaction's inputs and outputs, for blocks
// and for loose transactions. Every output keeps its Bitcoin index; the
// unspendable ones (and, with unspendable set, all of them: the genesis
// coinbase's) are marked, with no address. Errors describe the transaction
// and wrap no sentinel: the caller says what it was converting.
func (a *Adapter) appendTxIO(tx *chain.Tx, mtx *wire.MsgTx, unspendable bool, ins []chain.OutPoint, outs []chain.Output) ([]chain.OutPoint, []chain.Output, error) {
	if !tx.Coinbase {
		start := len(ins)
		for _, in := range mtx.TxIn {
			prev := &in.PreviousOutPoint
			if prev.Index == wire.MaxPrevOutIndex && prev.Hash == (chainhash.Hash{}) {
				return ins, outs, fmt.Errorf("transaction %s spends the null outpoint", tx.Hash)
			}
			ins = append(ins, chain.OutPoint{TxHash: displayHash(&prev.Hash), Index: prev.Index})
		}
		tx.Inputs = ins[start:len(ins):len(ins)]
	}
	start := len(outs)
	for j, out := range mtx.TxOut {
		if out.Value < 0 || out.Value > btcutil.MaxSatoshi {
			return ins, outs, fmt.Errorf("output %s:%d has value %d", tx.Hash, j, out.Value)
		}
		if unspendable || isUnspendable(out.PkScript) {
			outs = append(outs, chain.Output{Value: uint64(out.Value), Unspendable: true})
			continue
		}
		outs = append(outs, chain.Output{Address: a.Address(out.PkScript), Value: uint64(out.Value)})
	}
	if len(outs) > start {
		tx.Outputs = outs[start:len(outs):len(outs)]
	}
	return ins, outs, nil
}

// liveOutputs returns the outpoints tx leaves in the UTXO set: those it
// creates.
func liveOutputs(tx *chain.Tx) []chain.OutPoint {
	var ops []chain.OutPoint
	tx.Creates(func(index uint32, _ *chain.Output, _ bool) {
		ops = append(ops, chain.OutPoint{TxHash: tx.Hash, Index: index})
	})
	return ops
}

// isCoinbase reports whether mtx has the coinbase shape: one input spending
// the null outpoint.
func isCoinbase(mtx *wire.MsgTx) bool {
	if len(mtx.TxIn) != 1 {
		return false
	}
	prev := &mtx.TxIn[0].PreviousOutPoint
	return prev.Index == wire.MaxPrevOutIndex && prev.Hash == (chainhash.Hash{})
}

// displayHash converts a wire-order hash to display order (byte-reversed).
func displayHash(h *chainhash.Hash) chain.Hash {
	var out chain.Hash
	for i := range h {
		out[i] = h[chainhash.HashSize-1-i]
	}
	return out
}

// merkleRoot computes the Bitcoin merkle root of txids (wire order),
// duplicating the last hash of an odd level. It overwrites txids.
func merkleRoot(txids []chainhash.Hash) chainhash.Hash {
	if len(txids) == 0 {
		return chainhash.Hash{}
	}
	var pair [2 * chainhash.HashSize]byte
	for n := len(txids); n > 1; n = (n + 1) / 2 {
		for i := 0; i < n; i += 2 {
			j := min(i+1, n-1)
			copy(pair[:chainhash.HashSize], txids[i][:])
			copy(pair[chainhash.HashSize:], txids[j][:])
			txids[i/2] = chainhash.DoubleHashH(pair[:])
		}
	}
	return txids[0]
}

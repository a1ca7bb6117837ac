package esplora

import (
	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

// Mempool is the seam to the service's pending transactions: what the
// Esplora answers need of them. The front end always includes the mempool,
// as Esplora does: an address's UTXO listing adds the outputs pending
// transactions create and leaves out the confirmed outputs they spend, its
// mempool_stats count them, and an outspend names a pending spender.
//
// Every method reads from v, the snapshot of the answer, so an answer is
// one state of both the chain and the pending set. For the cached answers
// to stay exact, a change of the pending set must invalidate, before it is
// published, the guards of what it touches (query.AddressGuard of each
// address it funds or spends from, query.IndexGuard of its script hashes,
// query.OutPointGuard of each outpoint it spends), as a block's change set
// does: the writer's change sets name them when pending transactions are
// applied through it.
//
// Implementations must be safe for concurrent use. NoMempool is the
// implementation of a service that keeps no pending transactions.
type Mempool interface {
	// Pending returns the pending state of the outputs listed under value
	// in dimension dim (disk.DimAddress with the address, or
	// disk.DimScriptHash with the 32-byte hash).
	Pending(v *disk.View, dim disk.Dimension, value []byte) (Pending, error)
	// Spender returns the pending transaction spending op and the index of
	// its input that does, and false when no pending transaction spends op.
	Spender(v *disk.View, op chain.OutPoint) (txid chain.Hash, vin uint32, ok bool, err error)
}

// Pending is the pending state of one address or script hash.
type Pending struct {
	// Outputs are the outputs pending transactions create under the value
	// that no pending transaction spends, in posting order.
	Outputs []PendingOutput
	// Spent holds the confirmed outputs of the value that pending
	// transactions spend.
	Spent map[chain.OutPoint]struct{}
	// Stats are the value's mempool_stats: the pending transactions that
	// fund or spend it.
	Stats Stats
}

// PendingOutput is one output a pending transaction creates.
type PendingOutput struct {
	OutPoint chain.OutPoint
	Value    uint64
}

// Stats are Esplora's chain_stats or mempool_stats of an address: the
// distinct transactions that fund or spend it, and the outputs they fund
// and spend, counted and summed (satoshis).
type Stats struct {
	TxCount        uint64
	FundedTxoCount uint64
	FundedTxoSum   chain.Uint128
	SpentTxoCount  uint64
	SpentTxoSum    chain.Uint128
}

// NoMempool is the Mempool of a service that keeps no pending
// transactions: every pending state is empty, which is then exact.
type NoMempool struct{}

// Pending returns the empty pending state.
func (NoMempool) Pending(*disk.View, disk.Dimension, []byte) (Pending, error) { return Pending{}, nil }

// Spender reports no pending spender.
func (NoMempool) Spender(*disk.View, chain.OutPoint) (chain.Hash, uint32, bool, error) {
	return chain.Hash{}, 0, false, nil
}

package node

import (
	"github.com/utxo-cache/utxo-cache/api/esplora"
	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/query"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

// esploraFrontend returns the Esplora front end of a Bitcoin store (one
// whose recorded chain is "bitcoin"), nil for any other: the API mounts it
// under /api/. Its answers include the store's pending transactions
// (pendingMempool), read from each answer's own snapshot.
func esploraFrontend(store *disk.Store, reads *query.Server, utxosLimit int) (*esplora.Frontend, error) {
	if store.Chain() != "bitcoin" {
		return nil, nil
	}
	return esplora.New(reads, esplora.Options{UtxosLimit: utxosLimit, Mempool: pendingMempool{}})
}

// pendingMempool is esplora.Mempool over the store's pending set. The
// guards esplora.Mempool asks for hold: a change of the pending set names,
// in its change set, the addresses, index values and outpoints of what its
// transactions spend and create (disk's addPendingTouched), so a cached
// Esplora answer is invalidated by it as by a block.
type pendingMempool struct{}

// Pending reads the pending state of value from v (query.PendingOf): the
// unconfirmed outputs no other pending transaction spends, in posting
// order; every output of the value pending transactions spend; and the
// mempool_stats over them, with tx_count the distinct pending transactions
// that fund or spend the value.
func (pendingMempool) Pending(v *disk.View, dim disk.Dimension, value []byte) (esplora.Pending, error) {
	p, err := query.PendingOf(v, dim, value)
	if err != nil {
		return esplora.Pending{}, err
	}
	var out esplora.Pending
	txs := make(map[chain.Hash]struct{}, len(p.Funded)+len(p.Spent))
	if len(p.Spent) > 0 {
		out.Spent = make(map[chain.OutPoint]struct{}, len(p.Spent))
	}
	for i := range p.Spent {
		s := &p.Spent[i]
		out.Spent[s.Utxo.OutPoint] = struct{}{}
		txs[s.By.TxHash] = struct{}{}
	}
	for i := range p.Funded {
		u := &p.Funded[i].Utxo
		txs[u.TxHash] = struct{}{}
		if _, spent := out.Spent[u.OutPoint]; !spent {
			out.Outputs = append(out.Outputs, esplora.PendingOutput{OutPoint: u.OutPoint, Value: u.Value})
		}
	}
	out.Stats = esplora.Stats{
		TxCount:        uint64(len(txs)),
		FundedTxoCount: uint64(len(p.Funded)),
		FundedTxoSum:   p.FundedSum.Value,
		SpentTxoCount:  uint64(len(p.Spent)),
		SpentTxoSum:    p.SpentSum.Value,
	}
	return out, nil
}

// Spender reads the pending transaction that spends op from v.
func (pendingMempool) Spender(v *disk.View, op chain.OutPoint) (chain.Hash, uint32, bool, error) {
	s, ok, err := v.PendingSpender(op)
	if err != nil || !ok {
		return chain.Hash{}, 0, false, err
	}
	return s.TxHash, s.Input, true, nil
}

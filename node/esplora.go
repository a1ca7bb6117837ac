package node

import (
	"github.com/utxo-cache/utxo-cache/api/esplora"
	"github.com/utxo-cache/utxo-cache/query"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

// esploraFrontend returns the Esplora front end of a Bitcoin store (one
// whose recorded chain is "bitcoin"), nil for any other: the API mounts it
// under /api/.
//
// The mempool seam: the front end's answers include pending transactions
// through esplora.Mempool. This node keeps none yet, so it passes
// esplora.NoMempool, which is exact for it. A node that keeps pending
// transactions passes an implementation reading them from the answer's
// snapshot (esplora.Mempool's doc: what each method returns, and the
// guards a change of the pending set must invalidate).
func esploraFrontend(store *disk.Store, reads *query.Server, utxosLimit int) (*esplora.Frontend, error) {
	if store.Chain() != "bitcoin" {
		return nil, nil
	}
	return esplora.New(reads, esplora.Options{UtxosLimit: utxosLimit, Mempool: esplora.NoMempool{}})
}

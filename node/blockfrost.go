package node

import (
	"github.com/utxo-cache/utxo-cache/blockfrost"
	"github.com/utxo-cache/utxo-cache/query"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

// blockfrostOption returns the Blockfrost front end of a Cardano store (the
// chain the store records: disk.Store.Chain), nil for any other store,
// whose outputs are not Cardano's.
func blockfrostOption(store *disk.Store, reads *query.Server, projectID string) *blockfrost.FrontEnd {
	if store.Chain() != "cardano" {
		return nil
	}
	return blockfrost.New(reads, blockfrost.Options{ProjectID: projectID})
}

// Package changeset defines what one commit of the store changed: the value
// the store returns for every apply, catch-up window and rollback, and that
// the writer hands to its subscribers (the query server, which invalidates
// and refills the cache tiers, and replication). It is a leaf: it names only
// chain types, so each of those packages reads a change set without
// importing the one that produced it.
package changeset

import "github.com/utxo-cache/utxo-cache/chain"

// Set says what a commit or rollback changed, for the cache tiers to
// invalidate: every address whose listing or balance changed and every
// outpoint whose lookup answer changed (created, spent, restored, or whose
// spent record just passed or came back within the store's prune depth).
type Set struct {
	OldTip, NewTip chain.Tip
	Seq            uint64 // the store's commit sequence (disk.State.Seq) after the change
	Rollback       bool
	Addresses      []string
	OutPoints      []chain.OutPoint
	Created, Spent int // live outputs added and removed
	Skipped        int // unknown inputs skipped (apply only)
	// Balances holds the balance of addresses of Addresses after the
	// change: the balance row the change itself wrote, so exactly what the
	// store's View.Balance(DimAddress, address) answers at Seq (the zero
	// Balance when no output is left). An address of Addresses missing from
	// it has no balance known here: an address holding native assets, whose
	// sums are rows of their own, is given only when the change read or
	// wrote all of them (a block reads those of an address of up to 64
	// assets; a catch-up window reads none it does not move). Read-only:
	// its values share memory with
	// the store's balance cache.
	Balances map[string]chain.Balance
	// Spans[i] holds the lowest and highest index positions among the
	// outputs the change added to or removed from Addresses[i] (their live
	// rows: an output created and spent inside the change is in neither).
	// Nil when not known (a rollback: its batches are merged): a reader must
	// then take every position of those addresses as changed.
	Spans []PositionSpan
	// Outputs lists, when Spans is set, every output the change added to or
	// removed from the listing of an address of Addresses (Outputs[j].Address
	// indexes Addresses), in no particular order. Read-only: the Utxos are
	// the writer's.
	Outputs []AddressOutput
	// IndexKeys lists, once each, the index key of every value of a
	// dimension other than the address (a payment or stake credential, an
	// asset policy, an asset) whose listing or balance the change touched:
	// the store's key of the value (disk.DimKey, a hash of the dimension and
	// the value), so readers key their cached answers by it. Empty for a
	// store that indexes addresses only.
	IndexKeys [][16]byte
}

// AddressOutput is one output a change added to an address's listing, or
// removed from it.
type AddressOutput struct {
	Address int32 // index in Set.Addresses
	Added   bool
	Utxo    *chain.Utxo
}

// PositionSpan is the closed range [Lo, Hi] of index positions a change
// touched in one address's chain order.
type PositionSpan struct{ Lo, Hi chain.Position }

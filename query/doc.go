// Package query answers the contract's reads (docs/api.md): it computes an
// answer from one disk snapshot, encodes it once as JSON, and reads through
// the cache tiers (memory, then Redis, then disk), filling upwards, with
// concurrent misses on one key collapsed into one disk read. After every
// acknowledged change it invalidates exactly the affected guards (addresses
// and outpoints) in every tier before publishing the new tip; once the change
// is published it re-warms the addresses readers poll most: their balances
// straight from the change set (the rows the writer committed, no disk read),
// and, from the disk, the first pages read of them since their last warming.
//
// A disk read encodes its answer straight from the stored bytes
// (disk.UtxoRef) into a pooled buffer, with no intermediate chain.Utxo; the
// buffer goes back to the pool when the answer is released after it is
// written (Answer.Release), or at once when a cache tier keeps a copy.
//
// It knows no HTTP framework: the api package turns its answers into
// responses.
package query

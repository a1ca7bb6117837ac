// Package query answers the contract's reads (docs/api.md): it computes an
// answer from one disk snapshot, encodes it once as JSON, and reads through
// the cache tiers (memory, then Redis, then disk), filling upwards, with
// concurrent misses on one key collapsed into one disk read. After every
// acknowledged change it invalidates exactly the affected guards (addresses
// and outpoints) in every tier before publishing the new tip.
//
// It knows no HTTP framework: the api package turns its answers into
// responses.
package query

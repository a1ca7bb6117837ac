// Package chain is the domain model of utxo-cache: blocks, transactions,
// outpoints, outputs and the values derived from them (tips, balances, the
// UTXO-set digest), with the contract's rejection classes as sentinel errors.
//
// It owns the external block format of docs/blocks.md (strict JSON and CBOR
// decoding, size limits), the JSON bodies of the API's other requests
// (lookup, rollback: request.go, decoded by the same strict walk), the digest
// of docs/digest.md and the deterministic CBOR encoding of the replication
// change-log records (change.go, MarshalDeterministic). It depends on no
// storage, cache or HTTP library; its one third-party library is
// fxamacker/cbor, which no other package imports. Every other package speaks
// in these types.
package chain

// Package chain is the domain model of utxo-cache: blocks, transactions,
// outpoints, outputs and the values derived from them (tips, balances, the
// UTXO-set digest), with the contract's rejection classes as sentinel errors.
//
// It owns the external block format of ../shared/CONTRACT.md §1 (strict JSON and
// CBOR decoding, size limits), the JSON bodies of the API's other requests
// (lookup, rollback: request.go, decoded by the same strict walk) and the
// digest of §5. It depends on no storage,
// cache or HTTP library; every other package speaks in these types.
package chain

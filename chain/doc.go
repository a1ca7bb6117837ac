// Package chain is the domain model of utxo-cache: blocks, transactions,
// outpoints, outputs and the values derived from them (tips, balances, the
// UTXO-set digest), with the contract's rejection classes as sentinel errors.
//
// It owns the external block format of docs/blocks.md (strict JSON and
// CBOR decoding, size limits) and the digest of docs/digest.md. It depends on no storage,
// cache or HTTP library; every other package speaks in these types.
package chain

// Package bitcoin turns Bitcoin blocks into the chain model: it reads Bitcoin
// Core block files, orders their blocks into a chain by parent links, and
// converts each wire.MsgBlock into a chain.Block whose application reproduces
// Bitcoin Core's UTXO set exactly (same outpoints, values and creation
// heights; `gettxoutsetinfo` counts).
//
// It is the only package that imports btcd (wire, txscript, chaincfg,
// btcutil). Its API takes *wire.MsgBlock because that is what its own readers
// produce; callers pass those values through without looking inside.
//
// # Hashes
//
// Block and transaction hashes are stored in display order: the byte-reversed
// order of the wire format, so that chain.Hash.String() is the txid or block
// hash an explorer shows (block 170's second transaction is
// f4184fc596403b9d638783cf57adfe4c75c605f6356fbc91338530e9831e9e16).
//
// # Addresses
//
// The contract's address is an opaque string of at most 1024 bytes. An output
// script maps to:
//
//	P2PKH, P2SH                 base58check address of the network
//	P2WPKH, P2WSH (v0)          bech32 address
//	P2TR (v1, 32 bytes)         bech32m address
//	other witness programs      bech32m address, as Bitcoin Core encodes
//	 (v1..v16, 2..40 bytes)      "witness unknown" (P2A anchors: bc1pfeessrawgf)
//	P2PK (33 or 65-byte key)    the P2PKH address of the key bytes exactly as
//	                            they appear in the script (compressed keys give
//	                            the compressed-key address), so that an early
//	                            coinbase and a later P2PKH payment to the same
//	                            key share one address; the key is not checked to
//	                            be a curve point, as in Bitcoin Core's solver
//	anything else               "script:" + hex(SHA-256(script))
//
// The fallback covers bare multisig, malformed and exotic scripts. Rationale:
// a script may be 10,000 bytes, too long to be an address itself; SHA-256
// gives a fixed 71-byte string; the same script always yields the same string,
// so every output locked by one script shares one address and one balance; the
// ':' cannot occur in base58 or bech32, so it never collides with a real
// address. The digest is in natural byte order (Electrum's "script hash" is
// the same digest byte-reversed). Bare multisig deliberately is not attributed
// to any one of its keys.
//
// # Unspendable outputs
//
// Bitcoin Core never adds provably unspendable outputs to its UTXO set: those
// whose script starts with OP_RETURN or is longer than 10,000 bytes
// (CScript::IsUnspendable). This is narrower than txscript.IsUnspendable,
// which also counts scripts that fail to parse; Core keeps those, and so do we.
// The genesis coinbase output is treated the same way: Core never added it.
//
// Convert keeps every Bitcoin output in Tx.Outputs at its Bitcoin index and
// marks the unspendable ones chain.Output.Unspendable, with their real value
// and no address: the writer never creates, indexes or counts them
// (chain.Tx.Creates skips them), so a lookup of such an outpoint answers
// "not found", as Core's gettxout does. Trailing unspendable outputs (the
// common case: an OP_RETURN or the witness commitment at the end) are kept
// and marked too, rather than trimmed, so that len(Tx.Outputs) is always the
// Bitcoin output count and no caller has to know which ones were dropped; an
// Output costs about 100 bytes.
//
// Unspendable is not part of the JSON/CBOR block format: a converted block
// with such an output cannot be exported as docs/blocks.md blocks. Its empty
// address makes chain.ValidateBlock (and so the stream writers) refuse it
// rather than silently turning the output into a spendable one.
//
// # Duplicate coinbases (BIP30)
//
// Before BIP30 two mainnet coinbases repeated earlier ones: block 91842's
// coinbase has the txid of block 91812's (d5d27987…88599) and block 91880's
// that of block 91722's (e3bf3d07…fb468). Core overwrote the earlier, still
// unspent, outputs: its UTXO set holds them once, created at the later height.
// Creating a live outpoint again is rejected by the contract, so at exactly
// those two heights on mainnet, and only when the coinbase has the listed
// txid, the adapter puts first in the block a pseudo-transaction, hash
// BIP30TxHash(block hash), that spends the earlier coinbase's outputs; the
// coinbase (now at position 1) then creates them afresh. The result is Core's
// set, heights included. A writer applying transactions in order accepts it:
// the outpoint is no longer live when the coinbase recreates it.
//
// The pseudo-transaction carries no outputs and never a real txid (its hash
// is a single SHA-256 digest of a domain-separated string): its hash is
// BIP30TxHash of the block's hash.
//
// # Heights (BIP34)
//
// From a network's BIP34 activation height on, a coinbase begins with its
// block's height; Convert refuses a block placed at another height, and
// Adapter.CheckHeight lets a caller that chooses heights refuse one early
// (bip34.go has the encoding and each network's activation height).
//
// # Size
//
// Real Bitcoin transactions reach about 24,000 inputs and 111,000 outputs
// within the 4 MWU block limit, beyond chain.Limits' defaults (10,000). Those
// limits bound the JSON/CBOR decoders only; converted blocks go to the writer
// directly, which enforces no count limit.
//
// # Block files
//
// BlockReader reads Bitcoin Core's blk*.dat format, records of
//
//	magic   uint32 little-endian   network magic (mainnet f9 be b4 d9)
//	length  uint32 little-endian   size of the block, at most 4,000,000
//	block   length bytes           the serialized block, witness included
//
// ending at end of file or at zero padding (Core preallocates its files), and
// files holding one raw block with no record header. OrderByParent orders the
// blocks read into one chain and assigns heights.
package bitcoin

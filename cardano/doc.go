// Package cardano turns Cardano blocks into the chain model: an era-tagged
// block `[tag, block]`, as a node serves it and an ImmutableDB chunk stores
// it, of any era from Byron to Conway, becomes a chain.Block plus the slot
// and era the model has no field for (Block).
//
// It is the only package that imports gouroboros. The library decodes each
// era and checks each block's body hash against its header (kept on: a block
// whose body does not match is refused). Everything that must stay
// byte-exact (addresses, inline datums, reference scripts, datum hashes) is
// cut from each output's own CBOR bytes, never taken from the library's
// re-encoding of parsed parts.
//
// # The mapping
//
//	chain.Block.Height    the header's block number
//	chain.Block.Hash      the header hash (blake2b-256 of the header; for
//	                      Byron, of [tag, header])
//	chain.Block.PrevHash  the header's parent hash (Linker: across a
//	                      boundary block, the boundary block's parent)
//	chain.Block.Time      0: a slot becomes a time only with the network's
//	                      genesis parameters; Block.Slot keeps the slot
//	chain.Tx              every transaction, in block order; Hash is the
//	                      transaction id (blake2b-256 of the body as sent)
//	Tx.Inputs             the body's inputs, in the library's order
//	Tx.Outputs[i]         output i of the body
//	Tx.CollateralInputs   the collateral inputs (Alonzo on)
//	Tx.CollateralReturn   the collateral return (Babbage on), set on every
//	                      transaction that has one; the chain model creates
//	                      it, at index len(Outputs), only when Invalid
//	Tx.Invalid            listed in the block's invalid transactions
//	                      (phase-2 invalid): then only the collateral inputs
//	                      are spent and only the collateral return created
//	Output.Value          lovelace
//	Output.Assets         native assets, sorted by (policy, name) bytes;
//	                      a zero quantity (possible before Babbage) is
//	                      dropped, as the model refuses it
//	Output.DatumHash      the datum hash (Alonzo array form, or datum
//	                      option 0)
//	Output.Datum          the inline datum: the bytes inside its tag 24,
//	                      the datum's CBOR exactly as sent (and hashed)
//	Output.ScriptRef      the reference script: the bytes inside its tag 24,
//	                      the CBOR [type, script] exactly as sent
//
// No transaction is a coinbase: Cardano has none (rewards are withdrawn by
// ordinary transactions, which do not create outputs of their own).
//
// # Addresses
//
// The address string is a pure function of the output's raw address bytes
// (RenderAddress), by the header byte's type (high nibble) and network id
// (low nibble):
//
//	types 0..7   Shelley base, pointer, enterprise: bech32 of the raw bytes,
//	             "addr" for network 1 (mainnet), "addr_test" otherwise,
//	             with no length limit (CIP-5)
//	type 8       Byron: base58 (no checksum) of the raw bytes, the
//	             address's CBOR; in the Byron era the CBOR item itself
//	types 14, 15 reward addresses: they hold no outputs; an error
//	types 9..13  undefined; an error
//
// A parser that splits an address into parts and re-serialises it changes
// some real addresses: a pointer address whose pointer values overflow
// 64 bits (a real 219-byte one is in the tests' data) comes back shorter.
// Rendering from the bytes keeps one address per byte string.
//
// The chain model bounds an address to 1024 bytes (chain.MaxAddressLen):
// bech32 reaches it at about 630 address bytes, base58 at about 750. Convert
// refuses a block with a longer address (ErrUnsupported) rather than store an
// output no address query could reach. The other fixed sizes hold for every
// block the ledger accepts: policies are 28 bytes, asset names at most 32,
// datums and reference scripts fit in a transaction (16 KiB today). Assets
// per output are bounded only by the ledger's maximum value size (5000 bytes
// today), which could exceed chain.DefaultMaxAssetsPerOutput (1000); that
// limit binds the block decoders, not converted blocks.
//
// # Byron boundary blocks
//
// Boundary blocks carry no transactions and share their parent's block
// number; the next main block names the boundary block as its parent. The
// store's heights rise by one per block and our height is the block number,
// so a boundary block is never applied: Convert returns it with Boundary set
// and Linker holds it back, giving the next block the boundary block's
// parent as PrevHash (linker.go has a worked example). Its slot and hash
// remain a valid chain point for a follower.
//
// # ImmutableDB chunks
//
// SplitChunk cuts a chunk file into its blocks, checked against the chunk's
// secondary index (offsets and CRCs; chunk.go documents the 56-byte entry).
// A chunk that ends inside a block stops at the last complete block and says
// so (Chunk.Truncated); an index that lists blocks past the chunk's end is
// not an error (Chunk.Listed).
//
// # Genesis outputs
//
// ByronGenesisTxs and ShelleyGenesisTxs turn a genesis file's balances
// into pseudo-transactions, one output each at index 0, with the ledger's
// id: blake2b-256 of the output's address bytes (genesis.go). GenesisBlock
// puts them in the block that seeds a store: height 0, hash the Byron
// genesis hash, which the chain's first main block names as its parent
// (through the epoch-0 boundary block, as the Linker passes it on).
//
// # Errors
//
// Bad bytes never panic: a panic inside the library becomes ErrCorrupt.
// Every error names the block as well as the package can: its era, and its
// slot and hash whenever its header decodes; callers add the file and
// offset.
package cardano

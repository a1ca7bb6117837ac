package chain

import (
	"encoding/hex"
	"fmt"
)

// HashSize is the size of block and transaction hashes.
const HashSize = 32

// Hash is a 32-byte block or transaction hash, in the byte order the block
// producer gave it (the contract treats hashes as opaque bytes; hex renders
// them in that order).
type Hash [HashSize]byte

// String renders the hash as 64 lowercase hex characters.
func (h Hash) String() string { return hex.EncodeToString(h[:]) }

// IsZero reports whether every byte is zero.
func (h Hash) IsZero() bool { return h == Hash{} }

// ParseHash parses 64 hex characters (either case).
func ParseHash(s string) (Hash, error) {
	var h Hash
	if len(s) != 2*HashSize {
		return h, fmt.Errorf("hash must be %d hex characters, got %d", 2*HashSize, len(s))
	}
	if _, err := hex.Decode(h[:], []byte(s)); err != nil {
		return h, fmt.Errorf("hash is not hex: %w", err)
	}
	return h, nil
}

// OutPoint names one output of one transaction.
type OutPoint struct {
	TxHash Hash
	Index  uint32
}

// String renders the outpoint as "txhash:index".
func (o OutPoint) String() string { return fmt.Sprintf("%s:%d", o.TxHash, o.Index) }

// Asset is a quantity of one native asset carried by an output, identified by
// its policy and name (both opaque bytes, 0..64 long).
type Asset struct {
	Policy   []byte
	Name     []byte
	Quantity uint64
}

// Output is a transaction output as the block producer describes it.
// DatumHash is nil when absent; Datum and ScriptRef are nil when absent.
type Output struct {
	Address   string
	Value     uint64
	Assets    []Asset
	DatumHash *Hash
	Datum     []byte
	ScriptRef []byte

	// Unspendable is set by in-process producers (the Bitcoin adapter) for a
	// provably unspendable output: it keeps its index but is never created,
	// indexed or counted (Tx.Creates skips it). It is not part of the
	// JSON/CBOR block format: the encoders drop it, so such a block does not
	// survive an encode/decode round trip (the adapter leaves its Address
	// empty, which ValidateBlock and the stream writers refuse).
	Unspendable bool
}

// Tx is one transaction of a block.
//
// A valid transaction (Invalid == false) spends Inputs and creates Outputs at
// indexes 0..len(Outputs)-1. A phase-2-invalid transaction (Invalid == true)
// spends only CollateralInputs and creates only CollateralReturn, at index
// len(Outputs). The zero value of Invalid is the contract's default valid: true.
type Tx struct {
	Hash             Hash
	Inputs           []OutPoint
	Outputs          []Output
	CollateralInputs []OutPoint
	CollateralReturn *Output
	Invalid          bool
	Coinbase         bool
}

// Spends returns the outpoints the transaction consumes when applied.
func (tx *Tx) Spends() []OutPoint {
	if tx.Invalid {
		return tx.CollateralInputs
	}
	return tx.Inputs
}

// Creates calls fn for every output the transaction creates when applied,
// with its output index and whether it is a collateral return. Outputs with
// Unspendable set are skipped; the others keep their index.
func (tx *Tx) Creates(fn func(index uint32, out *Output, collateralReturn bool)) {
	if tx.Invalid {
		if cr := tx.CollateralReturn; cr != nil && !cr.Unspendable {
			fn(uint32(len(tx.Outputs)), cr, true)
		}
		return
	}
	for i := range tx.Outputs {
		if !tx.Outputs[i].Unspendable {
			fn(uint32(i), &tx.Outputs[i], false)
		}
	}
}

// Block is one block in chain order. PrevHash is the zero hash when the
// producer omitted it (allowed only for the first block of an empty store).
//
// Slot is the block's slot number on a chain that has slots (Cardano: the
// header's absolute slot; a chain point is (Slot, Hash)), and 0 on a chain
// that has none (Bitcoin). The store keeps it beside the block's hash, so a
// follower can name recent points to its node; it takes no part in applying
// the block, in the UTXO set or in its digest.
type Block struct {
	Height   uint64
	Hash     Hash
	PrevHash Hash
	Time     int64
	Slot     uint64
	Txs      []Tx
}

// Point names one block of a chain by its height, hash and slot: what a
// Cardano node needs to find where two chains meet (its points are
// (Slot, Hash)). Slot is 0 on a chain without slots.
type Point struct {
	Height uint64
	Slot   uint64
	Hash   Hash
}

// String renders the point as "height/slot/hash".
func (p Point) String() string { return fmt.Sprintf("%d/%d/%s", p.Height, p.Slot, p.Hash) }

// Tip identifies the newest applied block. The zero Tip with Empty set is the
// tip of a store that has applied nothing.
type Tip struct {
	Height uint64
	Hash   Hash
	Empty  bool
}

// String renders the tip as "height/hash", or "empty".
func (t Tip) String() string {
	if t.Empty {
		return "empty"
	}
	return fmt.Sprintf("%d/%s", t.Height, t.Hash)
}

// Flags of a stored UTXO. The values are persisted and part of the digest
// (docs/digest.md): never renumber them.
const (
	FlagCoinbase         uint8 = 1 << 0
	FlagCollateralReturn uint8 = 1 << 1
)

// Utxo is an output as the store knows it: the output, where it lives, and
// where in chain order it was created.
type Utxo struct {
	OutPoint
	Output
	Height uint64 // height of the creating block
	TxPos  uint32 // position of the creating transaction in its block
	Flags  uint8  // FlagCoinbase | FlagCollateralReturn
}

// NewUtxo is the UTXO that output index of tx, at position pos of block b,
// becomes when the block is applied (a collateral return when collateral):
// its assets in canonical order (copied when out's are not), its flags set.
// The writer and a bulk load both build an output's UTXO with it.
func NewUtxo(b *Block, pos uint32, tx *Tx, index uint32, out *Output, collateral bool) Utxo {
	u := Utxo{OutPoint: OutPoint{TxHash: tx.Hash, Index: index}, Output: *out, Height: b.Height, TxPos: pos}
	if len(u.Assets) > 1 && !AssetsSorted(u.Assets) {
		u.Assets = append([]Asset(nil), u.Assets...)
		SortAssets(u.Assets)
	}
	if tx.Coinbase {
		u.Flags |= FlagCoinbase
	}
	if collateral {
		u.Flags |= FlagCollateralReturn
	}
	return u
}

// Coinbase reports whether a coinbase transaction created the output.
func (u *Utxo) Coinbase() bool { return u.Flags&FlagCoinbase != 0 }

// CollateralReturn reports whether the output is a collateral return.
func (u *Utxo) CollateralReturn() bool { return u.Flags&FlagCollateralReturn != 0 }

// Spent says which transaction spent an output and at what height.
type Spent struct {
	TxHash Hash
	Height uint64
}

package disk

import (
	"encoding/binary"
	"fmt"

	"github.com/utxo-cache/utxo-cache/chain"
)

// UtxoRef is a stored UTXO record read in place: the fixed fields decoded,
// the variable ones aliasing the stored bytes (Pebble's value buffer). It is
// what the read path encodes answers from without building a chain.Utxo: no
// copy and no allocation per record.
//
// A UtxoRef is valid only during the callback that receives it (View.UtxoFunc,
// View.ListFunc): its slices point into memory Pebble reuses afterwards.
// Callers that keep anything must copy it. It has passed every check of the
// strict decoder (decodeRecord is built on the same parse), so its
// accessors cannot fail.
type UtxoRef struct {
	OutPoint chain.OutPoint
	Height   uint64
	TxPos    uint32
	Flags    byte
	Value    uint64
	// Address, Datum and ScriptRef are nil when empty, as in chain.Utxo.
	Address   []byte
	Datum     []byte
	ScriptRef []byte
	// DatumHash is nil or 32 bytes.
	DatumHash []byte
	// Frozen reports a live output an operator froze (freeze.go).
	Frozen bool
	// Spent reports a spent record; SpenderTxHash and SpentHeight are then set,
	// and SpenderVin when SpenderVinKnown (Record.SpentVin).
	Spent           bool
	SpenderTxHash   chain.Hash
	SpentHeight     uint64
	SpenderVin      uint32
	SpenderVinKnown bool

	assetCount int
	assets     []byte // the encoded assets: assetCount × (policy, name, quantity)
	// key is the scratch buffer of the Pebble key the View reads r at: a
	// buffer on the stack would escape into Pebble's Get, one allocation per
	// read, where r is allocated once per batch.
	key [outPointKeyLen]byte
}

// Assets returns an iterator over the output's assets, in stored order.
func (r *UtxoRef) Assets() AssetIter { return AssetIter{b: r.assets, n: r.assetCount} }

// Coinbase reports whether a coinbase transaction created the output.
func (r *UtxoRef) Coinbase() bool { return r.Flags&chain.FlagCoinbase != 0 }

// CollateralReturn reports whether the output is a collateral return.
func (r *UtxoRef) CollateralReturn() bool { return r.Flags&chain.FlagCollateralReturn != 0 }

// AssetIter walks the assets of a UtxoRef. The slices it returns alias the
// stored bytes, like the UtxoRef's, and are nil when empty.
type AssetIter struct {
	b []byte
	n int
}

// Next returns the next asset, or ok false after the last.
func (it *AssetIter) Next() (policy, name []byte, quantity uint64, ok bool) {
	if it.n == 0 {
		return nil, nil, 0, false
	}
	it.n--
	policy, it.b = splitLenBytes(it.b)
	name, it.b = splitLenBytes(it.b)
	quantity, n := binary.Uvarint(it.b)
	it.b = it.b[n:]
	return policy, name, quantity, true
}

// splitLenBytes splits a length-prefixed field the parse has validated; a
// zero length gives nil.
func splitLenBytes(b []byte) (field, rest []byte) {
	n, k := binary.Uvarint(b)
	if n == 0 {
		return nil, b[k:]
	}
	end := k + int(n)
	return b[k:end:end], b[end:]
}

// parseRecord reads a record (the 0x02 value layout of record.go) from d
// into r, checking everything decodeRecord promises: known version, state
// and flag bits, canonical uvarints, lengths and counts within the contract's
// limits, a valid datum-hash flag. It does not check for trailing bytes
// (d.done does). r.OutPoint is left to the caller.
func parseRecord(d *decbuf, r *UtxoRef) {
	if v := d.byte1(); d.err() == nil && v != recordVersion {
		d.fail("unknown version")
	}
	state := d.byte1()
	if d.err() == nil && state != stateLive && state != stateSpent && state != stateFrozen && state != stateSpentVin {
		d.fail("unknown state")
	}
	r.Frozen = state == stateFrozen
	r.Height = d.u64()
	r.TxPos = d.u32()
	r.Flags = d.byte1()
	if d.err() == nil && r.Flags&^(chain.FlagCoinbase|chain.FlagCollateralReturn) != 0 {
		d.fail("unknown flag bits")
	}
	r.Value = d.uvarint()
	r.Address = d.lenRef(maxAddressLen)
	r.assetCount = d.count(3)
	start := d.b
	for range r.assetCount {
		d.lenRef(maxAssetField)
		d.lenRef(maxAssetField)
		d.uvarint()
	}
	if d.err() != nil {
		r.assetCount = 0
	}
	r.assets = start[:len(start)-len(d.b)]
	switch d.byte1() {
	case 0:
		r.DatumHash = nil
	case 1:
		r.DatumHash = d.fixed(chain.HashSize)
	default:
		d.fail("bad datum hash flag")
	}
	r.Datum = d.lenRef(maxBlobLen)
	r.ScriptRef = d.lenRef(maxBlobLen)
	r.Spent = state == stateSpent || state == stateSpentVin
	r.SpenderVinKnown = state == stateSpentVin
	r.SpenderVin = 0
	if r.Spent {
		copy(r.SpenderTxHash[:], d.fixed(chain.HashSize))
		r.SpentHeight = d.u64()
		if r.SpenderVinKnown {
			r.SpenderVin = d.u32()
		}
	} else {
		r.SpenderTxHash, r.SpentHeight = chain.Hash{}, 0
	}
}

// ParseRecord reads a stored outpoint record (the 0x02 value of op, layout
// in record.go) in place into r, with the strict decoder's checks: an error
// matches ErrCorrupt. r aliases b. For tests and tools that hold raw values;
// reads get UtxoRefs from a View.
func ParseRecord(op chain.OutPoint, b []byte, r *UtxoRef) error { return parseRecordValue(op, b, r) }

// IndexRef fills r with u exactly as a View's listing parses u's index row
// (what a page answer encodes), encoding the row into buf[:0]; it returns
// the buffer, which r aliases until the next call with it. For tests that
// hold an encoding of a chain.Utxo to the one of its stored form.
func IndexRef(buf []byte, u *chain.Utxo, r *UtxoRef) ([]byte, error) {
	buf = appendIndexValue(buf[:0], u)
	return buf, parseIndexValue(u.OutPoint.Index, buf, r)
}

// parseRecordValue parses a whole 0x02 value for op into r.
func parseRecordValue(op chain.OutPoint, b []byte, r *UtxoRef) error {
	r.OutPoint = op
	// The error names r.OutPoint, not op: a pointer to the parameter would
	// move it to the heap on every call.
	d := decbuf{b: b, ctx: "utxo record", op: &r.OutPoint}
	parseRecord(&d, r)
	return d.done()
}

// parseIndexValue parses a whole 0x03 value (tx hash, then a live record)
// whose key holds output index idx into r. A spent record there is
// corruption: index rows exist only for live outputs.
func parseIndexValue(idx uint32, b []byte, r *UtxoRef) error {
	d := decbuf{b: b, ctx: "index value"}
	copy(r.OutPoint.TxHash[:], d.fixed(chain.HashSize))
	r.OutPoint.Index = idx
	parseRecord(&d, r)
	if err := d.done(); err != nil {
		return err
	}
	if r.Spent {
		return fmt.Errorf("index value of %s is a spent record: %w", r.OutPoint, ErrCorrupt)
	}
	return nil
}

// Utxo copies r into a chain.Utxo, and its spender when spent, that own
// their bytes: what a caller keeps beyond the callback.
func (r *UtxoRef) Utxo() (chain.Utxo, *chain.Spent) {
	rec := r.record()
	return rec.Utxo, rec.Spent
}

// record copies r into a Record that owns its bytes.
func (r *UtxoRef) record() Record {
	var rec Record
	u := &rec.Utxo
	u.OutPoint = r.OutPoint
	u.Height = r.Height
	u.TxPos = r.TxPos
	u.Flags = r.Flags
	u.Value = r.Value
	u.Address = string(r.Address)
	if r.assetCount > 0 {
		u.Assets = make([]chain.Asset, 0, r.assetCount)
		for it := r.Assets(); ; {
			policy, name, q, ok := it.Next()
			if !ok {
				break
			}
			u.Assets = append(u.Assets, chain.Asset{Policy: cloneOrNil(policy), Name: cloneOrNil(name), Quantity: q})
		}
	}
	if r.DatumHash != nil {
		var h chain.Hash
		copy(h[:], r.DatumHash)
		u.DatumHash = &h
	}
	u.Datum = cloneOrNil(r.Datum)
	u.ScriptRef = cloneOrNil(r.ScriptRef)
	if r.Spent {
		rec.Spent = &chain.Spent{TxHash: r.SpenderTxHash, Height: r.SpentHeight}
		rec.SpentVin, rec.SpentVinKnown = r.SpenderVin, r.SpenderVinKnown
	}
	rec.Frozen = r.Frozen
	return rec
}

func cloneOrNil(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte(nil), b...)
}

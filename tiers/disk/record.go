package disk

import (
	"encoding/binary"

	"github.com/utxo-cache/utxo-cache/chain"
)

// Record is the value of a 0x02 outpoint row: a UTXO, live or spent.
//
// Layout (version 1):
//
//	version      1 byte  = 0x01
//	state        1 byte  0x01 live, 0x02 spent, 0x03 live and frozen (freeze.go),
//	                     0x04 spent, with the spending input's index
//	height       uint64  created height
//	tx_pos       uint32  position of the creating tx in its block
//	flags        1 byte  chain.FlagCoinbase | chain.FlagCollateralReturn; other bits corrupt
//	value        uvarint
//	address      uvarint length, bytes
//	assets       uvarint count, then per asset: uvarint len, policy,
//	             uvarint len, name, uvarint quantity
//	datum_hash   1 byte presence (0 or 1), then 32 bytes when present
//	datum        uvarint length, bytes
//	script_ref   uvarint length, bytes
//	spender      (states 0x02, 0x04) tx hash 32 bytes, spent height uint64
//	spender_vin  (state 0x04 only) uint32: the index of the spender's input
//	             that spends the output
//
// State 0x04 (schema version 3, meta.go) is what a spend writes since
// spent records name the spending input; a record spent by an older binary
// keeps state 0x02 and reads with the input unknown (Record.SpentVinKnown
// false), which the Esplora front end answers as a 404 rather than guess.
// Example of a spent record, the output above spent by the tx 2222…22 at
// height 0x10 through its input 3:
//
//	01 04 0000000000000009 00000000 01 80e497d012 04 3141317a 00 00 00 00
//	   2222…22 0000000000000010 00000003
//
// Example: a live coinbase output of 50 BTC to "1A1z", created at height 9 by
// the tx at position 0:
//
//	01 01 0000000000000009 00000000 01 80e497d012 04 3141317a 00 00 00 00
//
// The same record as an index (0x03) value is prefixed with the tx hash; the
// output index is in the key.
type Record struct {
	Utxo  chain.Utxo
	Spent *chain.Spent // nil while live
	// Frozen marks a live output an operator froze (freeze.go); never set
	// with Spent: spending an output ends its freeze.
	Frozen bool
	// SpentVin is the index of the spender's input that spends the output,
	// when SpentVinKnown (a spent record of state 0x04); a record spent by a
	// binary from before spending inputs were kept has it unknown.
	SpentVin      uint32
	SpentVinKnown bool
}

const (
	recordVersion byte = 0x01
	stateLive     byte = 0x01
	stateSpent    byte = 0x02
	// stateFrozen is a live output that is frozen: the same layout as
	// stateLive. Added in schema version 2 (meta.go).
	stateFrozen byte = 0x03
	// stateSpentVin is a spent record that names the spending input. Added
	// in schema version 3 (meta.go).
	stateSpentVin byte = 0x04
)

// The block format's fixed sizes (chain/limits.go) bound what a decoder
// accepts, so a corrupt length cannot make it allocate without bound.
const (
	maxAddressLen = chain.MaxAddressLen
	maxAssetField = max(chain.MaxPolicyLen, chain.MaxAssetNameLen)
	maxBlobLen    = max(chain.MaxDatumLen, chain.MaxScriptRefLen)
)

// appendRecord appends r's encoding (without the outpoint, which is the key).
func appendRecord(dst []byte, r *Record) []byte {
	u := &r.Utxo
	state := stateLive
	switch {
	case r.Spent != nil && r.SpentVinKnown:
		state = stateSpentVin
	case r.Spent != nil:
		state = stateSpent
	case r.Frozen:
		state = stateFrozen
	}
	dst = append(dst, recordVersion, state)
	dst = binary.BigEndian.AppendUint64(dst, u.Height)
	dst = binary.BigEndian.AppendUint32(dst, u.TxPos)
	dst = append(dst, u.Flags)
	dst = binary.AppendUvarint(dst, u.Value)
	dst = appendLenBytes(dst, []byte(u.Address))
	dst = binary.AppendUvarint(dst, uint64(len(u.Assets)))
	for _, a := range u.Assets {
		dst = appendLenBytes(dst, a.Policy)
		dst = appendLenBytes(dst, a.Name)
		dst = binary.AppendUvarint(dst, a.Quantity)
	}
	if u.DatumHash != nil {
		dst = append(dst, 1)
		dst = append(dst, u.DatumHash[:]...)
	} else {
		dst = append(dst, 0)
	}
	dst = appendLenBytes(dst, u.Datum)
	dst = appendLenBytes(dst, u.ScriptRef)
	if r.Spent != nil {
		dst = append(dst, r.Spent.TxHash[:]...)
		dst = binary.BigEndian.AppendUint64(dst, r.Spent.Height)
		if r.SpentVinKnown {
			dst = binary.BigEndian.AppendUint32(dst, r.SpentVin)
		}
	}
	return dst
}

// decodeRecord decodes a 0x02 value for outpoint op. It copies what it keeps,
// so b may be reused by the caller. The checks are parseRecord's: the
// in-place read of the answer path and this decoder accept the same values.
func decodeRecord(op chain.OutPoint, b []byte) (Record, error) {
	var r UtxoRef
	if err := parseRecordValue(op, b, &r); err != nil {
		return Record{}, err
	}
	return r.record(), nil
}

// appendIndexValue appends a 0x03 value: the tx hash, then the live record.
func appendIndexValue(dst []byte, u *chain.Utxo) []byte {
	dst = append(dst, u.TxHash[:]...)
	return appendRecord(dst, &Record{Utxo: *u})
}

// decodeIndexValue decodes a 0x03 value whose key holds output index idx.
// Index rows exist only for live outputs: a spent record there is corruption.
func decodeIndexValue(idx uint32, b []byte) (chain.Utxo, error) {
	var r UtxoRef
	if err := parseIndexValue(idx, b, &r); err != nil {
		return chain.Utxo{}, err
	}
	return r.record().Utxo, nil
}

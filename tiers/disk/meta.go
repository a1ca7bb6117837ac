package disk

import (
	"encoding/binary"
	"fmt"

	"github.com/utxo-cache/utxo-cache/chain"
)

// SchemaVersion is the on-disk format this code writes. A store written by a
// newer version is refused on open; older versions would be migrated here.
const SchemaVersion uint32 = 1

// State is the state row (0x01 'T'), written in every block's batch, so it is
// always consistent with the rest of the store.
//
// Layout (version 1):
//
//	version          1 byte = 0x01
//	empty            1 byte (1: nothing applied yet)
//	tip height       uint64
//	tip hash         32 bytes
//	utxo count       uint64
//	utxo digest      32 bytes
//	skipped inputs   uint64  (unknown inputs skipped, when the writer allows it)
//	prune height     uint64  lowest spent-at height whose records are not all pruned
//	prune offset     uint32  records of that height already pruned
//	undo floor       uint64  lowest height whose undo delta may still exist
//	max height       uint64  highest tip ever applied
//	seq              uint64  committed batches so far (applies and rolled-back blocks)
//
// Seq orders every state the store has been in, rollbacks included: it never
// decreases, so caches tag answers with the Seq of the snapshot they were
// computed from and discard them once a change with a higher Seq touched them.
type State struct {
	Tip           chain.Tip
	UtxoCount     uint64
	Digest        chain.Digest
	SkippedInputs uint64
	PruneHeight   uint64
	PruneOffset   uint32
	UndoFloor     uint64
	MaxHeight     uint64
	Seq           uint64
}

const stateVersion byte = 0x01

func appendState(dst []byte, s *State) []byte {
	dst = append(dst, stateVersion)
	dst = appendTip(dst, s.Tip)
	dst = binary.BigEndian.AppendUint64(dst, s.UtxoCount)
	dst = append(dst, s.Digest[:]...)
	dst = binary.BigEndian.AppendUint64(dst, s.SkippedInputs)
	dst = binary.BigEndian.AppendUint64(dst, s.PruneHeight)
	dst = binary.BigEndian.AppendUint32(dst, s.PruneOffset)
	dst = binary.BigEndian.AppendUint64(dst, s.UndoFloor)
	dst = binary.BigEndian.AppendUint64(dst, s.MaxHeight)
	return binary.BigEndian.AppendUint64(dst, s.Seq)
}

func decodeState(b []byte) (State, error) {
	d := decbuf{b: b, ctx: "state"}
	var s State
	if v := d.byte1(); d.err() == nil && v != stateVersion {
		d.fail("unknown version")
	}
	s.Tip = d.tip()
	s.UtxoCount = d.u64()
	copy(s.Digest[:], d.fixed(32))
	s.SkippedInputs = d.u64()
	s.PruneHeight = d.u64()
	s.PruneOffset = d.u32()
	s.UndoFloor = d.u64()
	s.MaxHeight = d.u64()
	s.Seq = d.u64()
	return s, d.done()
}

// schema is the schema row (0x01 'V'): the format version and the enabled
// index dimensions, which a store keeps for life (changing them needs a
// reindex).
//
// Layout: uint32 version, uvarint count, one byte per dimension id.
type schema struct {
	version uint32
	dims    []Dimension
}

func appendSchema(dst []byte, s *schema) []byte {
	dst = binary.BigEndian.AppendUint32(dst, s.version)
	dst = binary.AppendUvarint(dst, uint64(len(s.dims)))
	for _, d := range s.dims {
		dst = append(dst, byte(d))
	}
	return dst
}

func decodeSchema(b []byte) (schema, error) {
	d := decbuf{b: b, ctx: "schema"}
	var s schema
	s.version = d.u32()
	if s.version > SchemaVersion {
		// Report the version even if the rest is in a format we cannot read.
		return s, nil
	}
	if s.version == 0 && d.err() == nil {
		d.fail("schema version 0")
	}
	n := d.count(1)
	for i := range n {
		dim := Dimension(d.byte1())
		if _, ok := dimensions[dim]; !ok && d.err() == nil {
			d.fail(fmt.Sprintf("unknown dimension %d", dim))
		}
		if i == 0 && dim != DimAddress && d.err() == nil {
			d.fail("the address dimension is not first")
		}
		s.dims = append(s.dims, dim)
	}
	if n == 0 && d.err() == nil {
		d.fail("no dimensions")
	}
	return s, d.done()
}

// appendTip appends a tip: 1 byte empty flag, uint64 height, 32 bytes hash.
// The state row and undo deltas share this layout.
func appendTip(dst []byte, t chain.Tip) []byte {
	var empty byte
	if t.Empty {
		empty = 1
	}
	dst = append(dst, empty)
	dst = binary.BigEndian.AppendUint64(dst, t.Height)
	return append(dst, t.Hash[:]...)
}

// tip reads what appendTip wrote.
func (d *decbuf) tip() chain.Tip {
	var t chain.Tip
	switch d.byte1() {
	case 0:
	case 1:
		t.Empty = true
	default:
		d.fail("bad empty flag")
	}
	t.Height = d.u64()
	copy(t.Hash[:], d.fixed(chain.HashSize))
	return t
}

package disk

import (
	"encoding/binary"

	"github.com/utxo-cache/utxo-cache/chain"
)

// UndoMode chooses how undo deltas record the outputs a block spent.
type UndoMode uint8

const (
	// UndoCompact records only the outpoints a block spent; a rollback rebuilds
	// each spent output from its spent record, which retention keeps on disk
	// for as long as a rollback can need it. Smallest deltas. The default.
	UndoCompact UndoMode = 1
	// UndoSelfContained records every spent output in full in the delta (the
	// Yaci design): a rollback reads nothing but the delta, so it stays exact
	// even if spent records are lost or pruned by other means, at the cost of
	// larger deltas.
	UndoSelfContained UndoMode = 2
)

// An undo delta (0x06 height) lists, for every outpoint row the block wrote,
// the row as it was before the block. Rolling back writes those rows back and
// reverses the derived data (index, balances, count, digest) by comparing
// each row's state after and before the block, so it needs no per-index log.
//
// Layout (version 1):
//
//	version    1 byte = 0x01
//	prev tip   1 byte empty flag, uint64 height, 32 bytes hash
//	skipped    uvarint  inputs skipped by this block
//	entries    uvarint count, then per entry:
//	           tx hash 32 bytes, output index uint32, kind 1 byte, then
//	             kind 0x01 absent: the row did not exist
//	             kind 0x02 spent here: the row was live and this block spent it;
//	                       the before-image is the current (spent) row made live
//	             kind 0x03 full: uvarint length, then the row's bytes (record.go)
type undoDelta struct {
	prev    chain.Tip
	skipped uint64
	entries []undoEntry
}

type undoEntry struct {
	op     chain.OutPoint
	kind   byte
	before []byte // kind full: the row's encoding
}

const (
	undoVersion     byte = 0x01
	undoAbsent      byte = 0x01
	undoSpentHere   byte = 0x02
	undoFullRecord  byte = 0x03
	undoEntryMinLen      = chain.HashSize + 4 + 1
)

func appendUndo(dst []byte, u *undoDelta) []byte {
	dst = append(dst, undoVersion)
	dst = appendTip(dst, u.prev)
	dst = binary.AppendUvarint(dst, u.skipped)
	dst = binary.AppendUvarint(dst, uint64(len(u.entries)))
	for _, e := range u.entries {
		dst = append(dst, e.op.TxHash[:]...)
		dst = binary.BigEndian.AppendUint32(dst, e.op.Index)
		dst = append(dst, e.kind)
		if e.kind == undoFullRecord {
			dst = appendLenBytes(dst, e.before)
		}
	}
	return dst
}

func decodeUndo(b []byte) (undoDelta, error) {
	d := decbuf{b: b, ctx: "undo delta"}
	var u undoDelta
	if v := d.byte1(); d.err() == nil && v != undoVersion {
		d.fail("unknown version")
	}
	u.prev = d.tip()
	u.skipped = d.uvarint()
	n := d.count(undoEntryMinLen)
	u.entries = make([]undoEntry, 0, n)
	for range n {
		var e undoEntry
		copy(e.op.TxHash[:], d.fixed(chain.HashSize))
		e.op.Index = d.u32()
		e.kind = d.byte1()
		switch e.kind {
		case undoAbsent, undoSpentHere:
		case undoFullRecord:
			e.before = d.lenBytes(len(d.b))
		default:
			d.fail("unknown entry kind")
		}
		u.entries = append(u.entries, e)
	}
	return u, d.done()
}

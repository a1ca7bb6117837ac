package disk

import (
	"encoding/binary"
	"fmt"

	"github.com/utxo-cache/utxo-cache/chain"
)

// SchemaVersion is the on-disk format this code writes. A store written by a
// newer version is refused on open; older versions would be migrated here.
//
// Version 2 adds frozen outputs (record state 0x03, freeze rows 0x0a:
// freeze.go) and nothing else, so a version 1 store is a version 2 store
// that holds no freeze: it is read as it is, and its schema row is raised
// in the batch of its first freeze, from when a binary that predates
// freezes refuses it (ErrNewerSchema) instead of reading a frozen record
// as corrupt.
//
// Version 3 adds spent records that name the spending input (record state
// 0x04: record.go), and nothing else. A version 1 or 2 store is read as it
// is (its spent records, state 0x02, read with the input unknown).
//
// Version 4 adds asset rows (balanceasset.go) and balance rows of version 3
// that count them (balance.go); a balance row that lists its assets is
// still read, and split into asset rows when a change touches its value.
// A store of version 1 to 3 is read as it is, and its schema row is raised
// to 4 in the batch of the first block or rollback it applies with this
// code (which may write spent records of state 0x04 and asset rows), from
// when a binary that predates them refuses it (ErrNewerSchema) instead of
// reading a balance without its assets. A new store is created at version
// 4.
const SchemaVersion uint32 = schemaAssetRows

// schemaFrozen is the first schema version that may hold frozen outputs.
const schemaFrozen uint32 = 2

// schemaSpenderVin is the first schema version whose spent records may
// name the spending input.
const schemaSpenderVin uint32 = 3

// schemaAssetRows is the first schema version that may hold asset rows.
const schemaAssetRows uint32 = 4

// raiseSchema adds to b the schema row of SchemaVersion when the store's
// is older, and reports whether it did: b is a block's or a rollback's
// batch, which may write spent records of state 0x04 and asset rows. The
// caller sets s.schemaVersion once b is committed. Writer goroutine only.
func (s *Store) raiseSchema(b *keyBatch) bool {
	if s.schemaVersion >= SchemaVersion {
		return false
	}
	sc := schema{version: SchemaVersion, dims: s.dims}
	_ = b.Set(keySchema, appendSchema(nil, &sc), nil)
	return true
}

// State is the state row (0x01 'T'), written in every block's batch, so it is
// always consistent with the rest of the store.
//
// Layout (version 2; version 1 lacks the last two fields and decodes with no
// rollback in progress):
//
//	version          1 byte = 0x02
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
//	seq              uint64  the commit sequence: changes (applies, rollbacks) so far
//	rolling back     1 byte  1: a multi-block rollback is in progress (0 or 1)
//	rollback target  uint64  its target height (0 when none is in progress)
//
// Seq numbers the changes of the store: each applied block and each rollback,
// however many blocks it reverts, is one change (docs/consistency.md). It never
// decreases, so caches tag answers with the Seq of the snapshot they were
// computed from and discard them once a change with a higher Seq touched them.
//
// A rollback of several blocks commits one batch per block; every batch but
// the last records the rollback in progress and keeps Seq, the last clears it
// and raises Seq. A store opened with a rollback in progress is not at any
// state of its sequence, so Open completes the rollback first (see
// Store.RollbackTo): a crash in the middle of a rollback ends, after restart,
// in the rollback's target state, never in between.
//
// Worked example: tip 10, seq 7; rollback to 8. Batch 1 reverts block 10:
// tip 9, seq 7, rolling back to 8. (A crash here: Open reverts block 9.)
// Batch 2 reverts block 9: tip 8, seq 8, nothing in progress.
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
	// RollingBack is set while a multi-block rollback to RollbackTarget is
	// in progress (only between its batches, or after a crash in one).
	RollingBack    bool
	RollbackTarget uint64
}

const (
	stateVersion1 byte = 0x01
	stateVersion  byte = 0x02
)

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
	dst = binary.BigEndian.AppendUint64(dst, s.Seq)
	var rolling byte
	if s.RollingBack {
		rolling = 1
	}
	dst = append(dst, rolling)
	return binary.BigEndian.AppendUint64(dst, s.RollbackTarget)
}

func decodeState(b []byte) (State, error) {
	d := decbuf{b: b, ctx: "state"}
	var s State
	version := d.byte1()
	if d.err() == nil && version != stateVersion && version != stateVersion1 {
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
	if version == stateVersion {
		switch d.byte1() {
		case 0:
		case 1:
			s.RollingBack = true
		default:
			d.fail("bad rolling-back flag")
		}
		s.RollbackTarget = d.u64()
		if !s.RollingBack && s.RollbackTarget != 0 && d.err() == nil {
			d.fail("rollback target without a rollback in progress")
		}
	}
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

// settings is the settings row (0x01 'S'): the options that shape what is on
// disk, recorded when the store is created and whenever an Open changes them,
// so that a store keeps them without the operator passing them every time.
//
// Layout (version 2; version 1, written while no chain is recorded, so that
// older binaries still open such a store, lacks the chain and decodes with
// none):
//
//	version          1 byte = 0x02 (0x01: no chain)
//	prune depth      uint64
//	rollback window  uint64
//	chain length     1 byte (1 to 32)
//	chain name       that many bytes (Chain.validate)
//
// Example: prune depth 2160, rollback window 4320, chain "cardano":
//
//	02 0000000000000870 00000000000010e0 07 63617264616e6f
type settings struct {
	pruneDepth     uint64
	rollbackWindow uint64
	chain          Chain
}

const (
	settingsVersion1 byte = 0x01
	settingsVersion  byte = 0x02
)

func appendSettings(dst []byte, s *settings) []byte {
	version := settingsVersion
	if s.chain == "" {
		version = settingsVersion1
	}
	dst = append(dst, version)
	dst = binary.BigEndian.AppendUint64(dst, s.pruneDepth)
	dst = binary.BigEndian.AppendUint64(dst, s.rollbackWindow)
	if version == settingsVersion1 {
		return dst
	}
	dst = append(dst, byte(len(s.chain)))
	return append(dst, s.chain...)
}

func decodeSettings(b []byte) (settings, error) {
	d := decbuf{b: b, ctx: "settings"}
	var s settings
	version := d.byte1()
	if d.err() == nil && version != settingsVersion && version != settingsVersion1 {
		d.fail("unknown version")
	}
	s.pruneDepth = d.u64()
	s.rollbackWindow = d.u64()
	if d.err() == nil && (s.pruneDepth == 0 || s.rollbackWindow == 0) {
		d.fail("zero setting")
	}
	if version == settingsVersion && d.err() == nil {
		n := int(d.byte1())
		s.chain = Chain(d.fixed(n))
		if d.err() == nil && (n == 0 || s.chain.validate() != nil) {
			d.fail("bad chain name")
		}
	}
	return s, d.done()
}

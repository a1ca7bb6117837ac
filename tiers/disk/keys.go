package disk

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"

	"github.com/utxo-cache/utxo-cache/chain"
)

// Keyspace prefixes. The values are persisted: never renumber them.
const (
	prefixMeta      byte = 0x01
	prefixUtxo      byte = 0x02
	prefixIndex     byte = 0x03
	prefixBalance   byte = 0x04
	prefixSpentAt   byte = 0x05
	prefixUndo      byte = 0x06
	prefixBlockHash byte = 0x07
	prefixHashBlock byte = 0x08
	prefixChangeLog byte = 0x09
)

const (
	outPointKeyLen = 1 + chain.HashSize + 4
	dimKeySize     = 16
	indexPosLen    = 8 + 4 + 4 // height, tx position, output index
	indexKeyLen    = 1 + dimKeySize + indexPosLen
	heightKeyLen   = 1 + 8
)

var (
	keySchema = []byte{prefixMeta, 'V'}
	keyState  = []byte{prefixMeta, 'T'}
	keySecret = []byte{prefixMeta, 'K'}
	// keySettings holds the settings row (meta.go); added in schema 1
	// without a version bump: a store without it records it on open.
	keySettings = []byte{prefixMeta, 'S'}
	// keyRollbackMoves holds, while a rollback of several blocks is in
	// progress (State.RollingBack), the pending moves of its batches
	// committed so far (rollback.go): its change record needs them all.
	keyRollbackMoves = []byte{prefixMeta, 'R'}
)

// DimKey is the fixed-size hash of an index dimension value: the first 16 bytes
// of SHA-256(dimension id || value). 128 bits make an accidental collision
// between two values negligible (birthday bound 2^64) and a crafted one
// infeasible, so the index stores no value beside it.
type DimKey [dimKeySize]byte

// MakeDimKey hashes a dimension value.
func MakeDimKey(dim Dimension, value []byte) DimKey { return dimKeyOf(dim, value) }

// dimKeyOf is MakeDimKey for a value held as bytes or as a string, with no
// allocation either way.
func dimKeyOf[V string | []byte](dim Dimension, value V) DimKey {
	var k DimKey
	// The contract bounds a value (an address) to maxAddressLen bytes: hash
	// those from the stack, with no allocation on the read path.
	var buf [1 + maxAddressLen]byte
	if len(value) <= maxAddressLen {
		buf[0] = byte(dim)
		n := copy(buf[1:], value)
		sum := sha256.Sum256(buf[:1+n])
		copy(k[:], sum[:])
		return k
	}
	h := sha256.New()
	h.Write([]byte{byte(dim)})
	h.Write([]byte(value))
	var sum [sha256.Size]byte
	copy(k[:], h.Sum(sum[:0]))
	return k
}

func appendOutPointKey(dst []byte, op chain.OutPoint) []byte {
	dst = append(dst, prefixUtxo)
	dst = append(dst, op.TxHash[:]...)
	return binary.BigEndian.AppendUint32(dst, op.Index)
}

func decodeOutPointKey(k []byte) (chain.OutPoint, bool) {
	var op chain.OutPoint
	if len(k) != outPointKeyLen || k[0] != prefixUtxo {
		return op, false
	}
	copy(op.TxHash[:], k[1:33])
	op.Index = binary.BigEndian.Uint32(k[33:])
	return op, true
}

func appendIndexKey(dst []byte, dk DimKey, p chain.Position) []byte {
	dst = append(dst, prefixIndex)
	dst = append(dst, dk[:]...)
	dst = binary.BigEndian.AppendUint64(dst, p.Height)
	dst = binary.BigEndian.AppendUint32(dst, p.TxPos)
	return binary.BigEndian.AppendUint32(dst, p.Index)
}

func decodeIndexPosition(k []byte) (chain.Position, bool) {
	if len(k) != indexKeyLen || k[0] != prefixIndex {
		return chain.Position{}, false
	}
	s := k[1+dimKeySize:]
	return chain.Position{
		Height: binary.BigEndian.Uint64(s),
		TxPos:  binary.BigEndian.Uint32(s[8:]),
		Index:  binary.BigEndian.Uint32(s[12:]),
	}, true
}

// indexBounds returns the bounds [lo, hi) of every index key of dk, appended
// to buf one after the other.
func indexBounds(buf []byte, dk DimKey) (lo, hi []byte) {
	buf = append(buf, prefixIndex)
	buf = append(buf, dk[:]...)
	lo = buf[:len(buf):len(buf)]
	buf = append(buf, prefixIndex)
	buf = append(buf, dk[:]...)
	hi = buf[len(lo):]
	for i := len(hi) - 1; i > 0; i-- { // increment the 16-byte dim key
		hi[i]++
		if hi[i] != 0 {
			return lo, hi
		}
	}
	hi[0]++ // dk was all 0xff: up to the end of the keyspace
	return lo, hi[:1:1]
}

func appendBalanceKey(dst []byte, dk DimKey) []byte {
	dst = append(dst, prefixBalance)
	return append(dst, dk[:]...)
}

func heightKey(prefix byte, h uint64) []byte {
	k := make([]byte, 0, heightKeyLen)
	k = append(k, prefix)
	return binary.BigEndian.AppendUint64(k, h)
}

func hashBlockKey(h chain.Hash) []byte {
	return append([]byte{prefixHashBlock}, h[:]...)
}

// The block-hash row (prefixBlockHash, height → the block): the block's hash,
// followed by its slot when it has one.
//
//	offset  size  field
//	0       32    hash
//	32      8     slot, big-endian; absent when the slot is 0
//
// A store from before slots were kept has only 32-byte rows; they read as
// slot 0, so such a store opens and serves unchanged. Example, the block
// 1111…11 at slot 0x1234: 1111…11 0000000000001234.
const blockHashRowSlotLen = chain.HashSize + 8

func appendBlockHashRow(dst []byte, h chain.Hash, slot uint64) []byte {
	dst = append(dst, h[:]...)
	if slot != 0 {
		dst = binary.BigEndian.AppendUint64(dst, slot)
	}
	return dst
}

func decodeBlockHashRow(height uint64, v []byte) (chain.Point, error) {
	p := chain.Point{Height: height}
	switch len(v) {
	case chain.HashSize:
	case blockHashRowSlotLen:
		p.Slot = binary.BigEndian.Uint64(v[chain.HashSize:])
		if p.Slot == 0 {
			return p, fmt.Errorf("disk: block hash row at %d with a zero slot: %w", height, ErrCorrupt)
		}
	default:
		return p, fmt.Errorf("disk: block hash row at %d of %d bytes: %w", height, len(v), ErrCorrupt)
	}
	copy(p.Hash[:], v)
	return p, nil
}

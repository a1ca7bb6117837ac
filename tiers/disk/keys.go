package disk

import (
	"crypto/sha256"
	"encoding/binary"

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

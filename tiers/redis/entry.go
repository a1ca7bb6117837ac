package redis

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/utxo-cache/utxo-cache/cache"
	"github.com/utxo-cache/utxo-cache/chain"
)

// errCorruptEntry marks an encoded entry that does not decode.
var errCorruptEntry = errors.New("redis: corrupt cache entry")

// Entry encoding, the value of an entry key (see Tier, "Keys"), version 1:
//
//	version  1 byte = 0x01
//	seq      uint64
//	tip      1 byte empty flag, uint64 height, 32 bytes hash
//	status   uint16
//	etag     uvarint length, bytes
//	body     the rest
const entryVersion byte = 0x01

// appendEntry appends e's encoding to dst.
func appendEntry(dst []byte, e *cache.Entry) []byte {
	dst = append(dst, entryVersion)
	dst = binary.BigEndian.AppendUint64(dst, e.Seq)
	if e.Tip.Empty {
		dst = append(dst, 1)
	} else {
		dst = append(dst, 0)
	}
	dst = binary.BigEndian.AppendUint64(dst, e.Tip.Height)
	dst = append(dst, e.Tip.Hash[:]...)
	dst = binary.BigEndian.AppendUint16(dst, uint16(e.Status))
	dst = binary.AppendUvarint(dst, uint64(len(e.ETag)))
	dst = append(dst, e.ETag...)
	return append(dst, e.Body...)
}

// decodeEntry decodes an encoded entry; Body aliases b.
func decodeEntry(b []byte) (cache.Entry, error) {
	const fixed = 1 + 8 + 1 + 8 + chain.HashSize + 2
	if len(b) < fixed || b[0] != entryVersion || b[9] > 1 {
		return cache.Entry{}, fmt.Errorf("entry of %d bytes: %w", len(b), errCorruptEntry)
	}
	e := cache.Entry{Seq: binary.BigEndian.Uint64(b[1:])}
	e.Tip.Empty = b[9] == 1
	e.Tip.Height = binary.BigEndian.Uint64(b[10:])
	copy(e.Tip.Hash[:], b[18:])
	e.Status = int(binary.BigEndian.Uint16(b[18+chain.HashSize:]))
	n, k := binary.Uvarint(b[fixed:])
	if k <= 0 || n > uint64(len(b)-fixed-k) {
		return cache.Entry{}, fmt.Errorf("entry etag length: %w", errCorruptEntry)
	}
	rest := b[fixed+k:]
	e.ETag = string(rest[:n])
	e.Body = rest[n:]
	return e, nil
}

package cardano

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/blinklabs-io/gouroboros/cbor"

	"github.com/utxo-cache/utxo-cache/chain"
)

// An ImmutableDB chunk (`NNNNN.chunk`) is the chunk's blocks back to back,
// each a binary era-tagged block `[tag, block]`, with no framing of its own.
// Its secondary index (`NNNNN.secondary`) has one 56-byte entry per block, in
// chain order, all integers big-endian:
//
//	offset   0  uint64    block offset in the chunk
//	offset   8  uint16    header offset within the block
//	offset  10  uint16    header size
//	offset  12  uint32    CRC-32 (IEEE) of the block's bytes
//	offset  16  [32]byte  header hash
//	offset  48  uint64    slot, or the epoch of a boundary block
//
// First entry of testdata's 02019.secondary:
//
//	0000000000000000 0003 0359 f7d6ad7b
//	80d02d3c9a576af65e4f36b95a57ae528b62c14836282fbd8d6a93aa1fef557f
//	000000000299712e  (slot 43610414)
//
// The primary index (`.primary`) maps relative slots to secondary entries;
// the reader does not need it.
const secondaryEntrySize = 56

// SecondaryEntry is one entry of a chunk's secondary index.
type SecondaryEntry struct {
	Offset       uint64
	HeaderOffset uint16
	HeaderSize   uint16
	CRC          uint32
	HeaderHash   chain.Hash
	SlotOrEpoch  uint64
}

// ParseSecondary decodes a secondary index file. A length that is not a
// multiple of the entry size is corrupt.
func ParseSecondary(data []byte) ([]SecondaryEntry, error) {
	if len(data)%secondaryEntrySize != 0 {
		return nil, fmt.Errorf("%w: secondary index of %d bytes is not a multiple of %d", ErrCorrupt, len(data), secondaryEntrySize)
	}
	entries := make([]SecondaryEntry, len(data)/secondaryEntrySize)
	for i := range entries {
		e := data[i*secondaryEntrySize:]
		entries[i] = SecondaryEntry{
			Offset:       binary.BigEndian.Uint64(e[0:]),
			HeaderOffset: binary.BigEndian.Uint16(e[8:]),
			HeaderSize:   binary.BigEndian.Uint16(e[10:]),
			CRC:          binary.BigEndian.Uint32(e[12:]),
			HeaderHash:   chain.Hash(e[16:48]),
			SlotOrEpoch:  binary.BigEndian.Uint64(e[48:]),
		}
	}
	return entries, nil
}

// Chunk is what SplitChunk found in a chunk file.
type Chunk struct {
	// Blocks are the complete blocks, in order, each a sub-slice of the
	// chunk's bytes (binary era-tagged, ready for Adapter.Convert).
	Blocks [][]byte
	// Offsets are the blocks' offsets in the chunk.
	Offsets []uint64
	// Truncated reports that the chunk ends inside a block: Blocks stops at
	// the last complete one, and TrailingBytes bytes follow it.
	Truncated     bool
	TrailingBytes int
	// Listed is the number of blocks the secondary index lists (-1 without
	// an index). More listed than found is not an error: a node that stopped
	// mid-write, or a copy cut short, leaves such a chunk.
	Listed int
}

// Summary says what was found, for logs: "5 blocks; ends mid-block (16123
// trailing bytes); the index lists 15".
func (c *Chunk) Summary() string {
	s := fmt.Sprintf("%d blocks", len(c.Blocks))
	if c.Truncated {
		s += fmt.Sprintf("; ends mid-block (%d trailing bytes)", c.TrailingBytes)
	}
	if c.Listed >= 0 && c.Listed != len(c.Blocks) {
		s += fmt.Sprintf("; the index lists %d", c.Listed)
	}
	return s
}

// SplitChunk cuts a chunk file into its blocks. Each block is one CBOR item;
// a tail that is not a complete item ends the chunk (Truncated), anything
// else malformed is ErrCorrupt naming the offset. With a secondary index
// (secondary may be nil), every complete block must sit at the offset its
// entry gives and match its CRC, and there must be no more blocks than
// entries.
func SplitChunk(data, secondary []byte) (*Chunk, error) {
	c := &Chunk{Listed: -1}
	var entries []SecondaryEntry
	if secondary != nil {
		var err error
		if entries, err = ParseSecondary(secondary); err != nil {
			return nil, err
		}
		c.Listed = len(entries)
	}
	for pos := 0; pos < len(data); {
		n, complete := itemLength(data[pos:])
		if !complete {
			c.Truncated, c.TrailingBytes = true, len(data)-pos
			break
		}
		if n < 0 {
			return nil, fmt.Errorf("%w: chunk offset %d: not a CBOR item", ErrCorrupt, pos)
		}
		blk := data[pos : pos+n]
		i := len(c.Blocks)
		if entries != nil {
			switch {
			case i >= len(entries):
				return nil, fmt.Errorf("%w: chunk offset %d: block %d is not in the index of %d entries", ErrCorrupt, pos, i, len(entries))
			case entries[i].Offset != uint64(pos):
				return nil, fmt.Errorf("%w: chunk offset %d: block %d listed at offset %d", ErrCorrupt, pos, i, entries[i].Offset)
			case crc32.ChecksumIEEE(blk) != entries[i].CRC:
				return nil, fmt.Errorf("%w: chunk offset %d: block %d CRC %08x, index says %08x", ErrCorrupt, pos, i, crc32.ChecksumIEEE(blk), entries[i].CRC)
			}
		}
		c.Blocks = append(c.Blocks, blk)
		c.Offsets = append(c.Offsets, uint64(pos))
		pos += n
	}
	return c, nil
}

// itemLength returns the length of the CBOR item at the start of b.
// complete is false when b ends inside the item; n < 0 when the item is
// malformed.
func itemLength(b []byte) (n int, complete bool) {
	var raw cbor.RawMessage
	read, err := cbor.Decode(b, &raw)
	if err == nil {
		return read, true
	}
	if isTruncation(err) {
		return 0, false
	}
	return -1, true
}

func isTruncation(err error) bool {
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
}

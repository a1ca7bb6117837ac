package disk

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/utxo-cache/utxo-cache/chain"
)

// prefixBlockTime keys the block-time rows: height[8] → the block's time.
// Written with the block-hash row (0x07) of every block applied, deleted
// with it by a rollback, never pruned: with 0x07 it is the header table of
// the whole best chain the store has applied (the Esplora front end's block
// heights, hashes and times). A store from before these rows has none for
// the blocks it applied then (BlockAt reports the time unknown).
const prefixBlockTime byte = 0x15

// The block-time row (version 1):
//
//	offset  size  field
//	0       1     version = 0x01
//	1       8     block time, Unix seconds, big-endian two's complement
//
// Example, the Bitcoin genesis block (time 1231006505 = 0x495fab29):
// 01 00000000495fab29.
const (
	blockTimeVersion byte = 0x01
	blockTimeRowLen       = 1 + 8
)

func appendBlockTimeRow(dst []byte, t int64) []byte {
	dst = append(dst, blockTimeVersion)
	return binary.BigEndian.AppendUint64(dst, uint64(t))
}

// decodeBlockTimeRow decodes a block-time row, strictly.
func decodeBlockTimeRow(height uint64, v []byte) (int64, error) {
	if len(v) != blockTimeRowLen || v[0] != blockTimeVersion {
		return 0, fmt.Errorf("disk: block time row at %d of %d bytes (version %x): %w", height, len(v), firstByte(v), ErrCorrupt)
	}
	return int64(binary.BigEndian.Uint64(v[1:])), nil
}

func firstByte(v []byte) byte {
	if len(v) == 0 {
		return 0
	}
	return v[0]
}

// BlockHeader is one block of the store's best chain as the header table
// keeps it.
type BlockHeader struct {
	Height uint64
	Hash   chain.Hash
	// Time is the block's time (Unix seconds); TimeKnown is false for a
	// block applied by a store from before block times were kept.
	Time      int64
	TimeKnown bool
}

// BlockAt returns the block at height on the view's chain, and false when
// the chain has none there (above the tip, or below the store's first
// block).
func (v *View) BlockAt(height uint64) (BlockHeader, bool, error) {
	h := BlockHeader{Height: height}
	val, closer, err := v.snap.Get(heightKey(prefixBlockHash, height))
	if errors.Is(err, pebble.ErrNotFound) {
		return h, false, nil
	}
	if err != nil {
		return h, false, fmt.Errorf("disk: read block hash: %w", err)
	}
	p, err := decodeBlockHashRow(height, val)
	closer.Close()
	if err != nil {
		return h, false, err
	}
	h.Hash = p.Hash
	val, closer, err = v.snap.Get(heightKey(prefixBlockTime, height))
	switch {
	case errors.Is(err, pebble.ErrNotFound):
		return h, true, nil
	case err != nil:
		return h, false, fmt.Errorf("disk: read block time: %w", err)
	}
	h.Time, err = decodeBlockTimeRow(height, val)
	closer.Close()
	if err != nil {
		return h, false, err
	}
	h.TimeKnown = true
	return h, true, nil
}

// HeightOf returns the height of the block with hash h on the view's chain,
// and false when h is no block of it (never applied, or rolled back).
func (v *View) HeightOf(h chain.Hash) (uint64, bool, error) {
	val, closer, err := v.snap.Get(hashBlockKey(h))
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("disk: read block height: %w", err)
	}
	defer closer.Close()
	if len(val) != 8 {
		return 0, false, fmt.Errorf("disk: block height row of %s of %d bytes: %w", h, len(val), ErrCorrupt)
	}
	return binary.BigEndian.Uint64(val), true, nil
}

package bitcoin

import (
	"bytes"
	"fmt"

	"github.com/btcsuite/btcd/wire"

	"github.com/utxo-cache/utxo-cache/chain"
)

// MaxBlockBytes bounds one serialized block, witness included: consensus
// MAX_BLOCK_SERIALIZED_SIZE, 4,000,000 bytes.
const MaxBlockBytes = wire.MaxBlockPayload

// DecodeBlock decodes one serialized block, witness included: a record's
// body in a blk*.dat file, or what Bitcoin Core's REST interface serves at
// /rest/block/<hash>.bin. The block must use every byte of raw and be at most
// MaxBlockBytes long; anything else fails with ErrCorrupt. The block does not
// retain raw.
func DecodeBlock(raw []byte) (*wire.MsgBlock, error) {
	if len(raw) > MaxBlockBytes {
		return nil, fmt.Errorf("%w: block of %d bytes, over %d", ErrCorrupt, len(raw), MaxBlockBytes)
	}
	blk, err := decodeBlock(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return blk, nil
}

// AppendBlock appends the serialization of blk, witness included, to dst:
// the inverse of DecodeBlock.
func AppendBlock(dst []byte, blk *wire.MsgBlock) []byte {
	buf := bytes.NewBuffer(dst)
	// Serialize fails only when its writer does; a bytes.Buffer does not.
	_ = blk.Serialize(buf)
	return buf.Bytes()
}

// BlockHashes returns blk's hash and its parent's, in display order (as
// Convert gives them), without converting the block.
func BlockHashes(blk *wire.MsgBlock) (hash, prev chain.Hash) {
	h := blk.BlockHash()
	return displayHash(&h), displayHash(&blk.Header.PrevBlock)
}

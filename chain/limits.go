package chain

import "fmt"

// Fixed sizes of the block format (docs/blocks.md). They are part of the external contract, not
// settings: every reader and writer of blocks enforces the same values.
const (
	// MinAddressLen and MaxAddressLen bound an output's address, in bytes of
	// its UTF-8 form.
	MinAddressLen = 1
	MaxAddressLen = 1024
	// MaxPolicyLen and MaxAssetNameLen bound an asset's policy and name, in
	// bytes (both may be empty).
	MaxPolicyLen    = 64
	MaxAssetNameLen = 64
	// MaxDatumLen and MaxScriptRefLen bound an inline datum and a reference
	// script, in bytes (64 KiB).
	MaxDatumLen     = 64 << 10
	MaxScriptRefLen = 64 << 10
)

// Defaults of Limits.
const (
	DefaultMaxBlockBytes      = 64 << 20 // 64 MiB
	DefaultMaxBlockMemory     = 1 << 30  // 1 GiB
	DefaultMaxTxs             = 100_000
	DefaultMaxInputsPerTx     = 10_000
	DefaultMaxOutputsPerTx    = 10_000
	DefaultMaxAssetsPerOutput = 1_000
)

// Limits bounds what a block decoder accepts, so that a hostile or broken
// producer cannot make it allocate without bound. Unlike the contract's fixed
// sizes (MaxAddressLen and friends) these are operator settings.
//
// The zero value of each field (or any value ≤ 0) means its default; use
// EnsureDefaults to read the effective values. A block that exceeds a limit is
// rejected with an error that wraps ErrTooLarge (HTTP 413), not
// ErrInvalidBlock.
type Limits struct {
	// MaxBlockBytes bounds one encoded block: a JSON document or JSONL line
	// (without its line terminator), or one CBOR data item. Default 64 MiB.
	MaxBlockBytes int
	// MaxTxs bounds the transactions of one block. Default 100 000.
	MaxTxs int
	// MaxInputsPerTx bounds inputs, and separately collateral inputs, of one
	// transaction. Default 10 000.
	MaxInputsPerTx int
	// MaxOutputsPerTx bounds the outputs of one transaction (the collateral
	// return is not counted). Default 10 000.
	MaxOutputsPerTx int
	// MaxAssetsPerOutput bounds the assets of one output. Default 1 000.
	MaxAssetsPerOutput int
	// MaxBlockMemory bounds the heap one block may take on its way through
	// a node, as BlockMemory estimates it from the block's transactions,
	// inputs, outputs and variable-length bytes: in bytes, not counting its
	// encoded form (MaxBlockBytes). The decoders count as they go and refuse
	// a block the moment it goes over (ErrTooLarge), so an oversized block
	// costs no more than the budget to refuse. Default 1 GiB. Its zero value
	// already means the default, so EnsureDefaults leaves it as it is;
	// BlockMemoryLimit gives the effective value.
	MaxBlockMemory int
}

// BlockMemoryLimit is the effective MaxBlockMemory: its default when ≤ 0.
func (l Limits) BlockMemoryLimit() int {
	if l.MaxBlockMemory <= 0 {
		return DefaultMaxBlockMemory
	}
	return l.MaxBlockMemory
}

// Heap a block takes on its way through a node, per item, in bytes: the
// decoded block, the writer's overlay of the rows it touches, the commit's
// batch (the rows, index entries, balances, undo delta and change-log
// record, sorted, and Pebble's copy), and the change set and cache guards
// its invalidation builds before the publish. TestBlockMemory
// (tiers/disk/block_memory_test.go) measures them, a block of outputs each
// to its own address and a block that spends them, and holds BlockMemory
// above what it measures; the figures it logs are in docs/blocks.md.
const (
	BlockMemoryPerTx     = 512
	BlockMemoryPerInput  = 4608 // an input or a collateral input; see BlockMemory
	BlockMemoryPerOutput = 2560 // an output or a collateral return
	BlockMemoryPerAsset  = 512
	// BlockMemoryPerByte is per byte of an address, datum, reference
	// script, asset policy or asset name: each is copied into the decoded
	// block, the row, the batch, Pebble's copy, the change-log record and
	// (an address) the cache guards.
	BlockMemoryPerByte = 8
)

// BlockMemory estimates the heap b takes on its way through a node (see
// Limits.MaxBlockMemory): what the decoders and ValidateBlock compare with
// the limit.
//
// An input is charged as spending an output of ordinary size (an address
// of up to 1 KiB, no large datum or script): what the output it spends
// holds is known only once the writer reads it. Spending outputs with large
// datums or reference scripts costs their bytes once more, bytes that the
// blocks which created them were charged for.
func BlockMemory(b *Block) int64 {
	n := int64(0)
	for i := range b.Txs {
		tx := &b.Txs[i]
		n += BlockMemoryPerTx + int64(len(tx.Inputs)+len(tx.CollateralInputs))*BlockMemoryPerInput
		for j := range tx.Outputs {
			n += outputMemory(&tx.Outputs[j])
		}
		if tx.CollateralReturn != nil {
			n += outputMemory(tx.CollateralReturn)
		}
	}
	return n
}

// outputMemory is o's share of BlockMemory.
func outputMemory(o *Output) int64 {
	n := int64(len(o.Address) + len(o.Datum) + len(o.ScriptRef))
	for _, a := range o.Assets {
		n += int64(len(a.Policy) + len(a.Name))
	}
	return BlockMemoryPerOutput + int64(len(o.Assets))*BlockMemoryPerAsset + n*BlockMemoryPerByte
}

// CheckBlockMemory reports, as too large (ErrTooLarge), a block whose
// BlockMemory is over lim's block memory limit: the check of ValidateBlock,
// for blocks that no decoder counted (the Bitcoin adapter's).
func CheckBlockMemory(b *Block, lim Limits) error {
	if need, limit := BlockMemory(b), lim.BlockMemoryLimit(); need > int64(limit) {
		return overMemory(need, limit, false)
	}
	return nil
}

// overMemory is the error of a block whose estimate (so far, while decoding)
// went past limit.
func overMemory(need int64, limit int, sofar bool) error {
	what := "needs"
	if sofar {
		what = "needs, up to here,"
	}
	const mib = 1 << 20
	return fmt.Errorf("block %s about %.1f MiB (%d bytes) of memory to apply, over the limit of %.1f MiB (%d bytes): %w",
		what, float64(need)/mib, need, float64(limit)/mib, limit, ErrTooLarge)
}

// EnsureDefaults returns l with every field ≤ 0 replaced by its default.
func (l Limits) EnsureDefaults() Limits {
	orDefault := func(v, def int) int {
		if v <= 0 {
			return def
		}
		return v
	}
	return Limits{
		MaxBlockBytes:      orDefault(l.MaxBlockBytes, DefaultMaxBlockBytes),
		MaxTxs:             orDefault(l.MaxTxs, DefaultMaxTxs),
		MaxInputsPerTx:     orDefault(l.MaxInputsPerTx, DefaultMaxInputsPerTx),
		MaxOutputsPerTx:    orDefault(l.MaxOutputsPerTx, DefaultMaxOutputsPerTx),
		MaxAssetsPerOutput: orDefault(l.MaxAssetsPerOutput, DefaultMaxAssetsPerOutput),
		MaxBlockMemory:     l.MaxBlockMemory,
	}
}

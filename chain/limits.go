package chain

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
// WithDefaults to read the effective values. A block that exceeds a limit is
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
}

// WithDefaults returns l with every field ≤ 0 replaced by its default.
func (l Limits) WithDefaults() Limits {
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
	}
}

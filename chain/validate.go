package chain

import (
	"fmt"
	"slices"
	"unicode/utf8"
)

// ValidateBlock checks b against the field rules of docs/blocks.md that its Go
// types do not already guarantee (address, policy, name, datum and script
// sizes, positive and unique asset quantities) and against lim. It does not
// check chain rules (height, prev_hash, spends): those need the store. A
// block whose BlockMemory is over lim.MaxBlockMemory is too large.
//
// A rule violation wraps ErrInvalidBlock, a count over lim wraps ErrTooLarge;
// both name the offending field as a path such as
// "txs[3].outputs[1].address". Both decoders run it on every block they
// return; producers can run it before encoding. It does not modify b.
func ValidateBlock(b *Block, lim Limits) error {
	lim = lim.EnsureDefaults()
	if len(b.Txs) > lim.MaxTxs {
		return tooMany("txs", len(b.Txs), lim.MaxTxs)
	}
	if err := CheckBlockMemory(b, lim); err != nil {
		return err
	}
	for i := range b.Txs {
		if err := validateTx(&b.Txs[i], lim); err != nil {
			return fmt.Errorf("txs[%d].%w", i, err)
		}
	}
	return nil
}

func validateTx(tx *Tx, lim Limits) error {
	if len(tx.Inputs) > lim.MaxInputsPerTx {
		return tooMany("inputs", len(tx.Inputs), lim.MaxInputsPerTx)
	}
	if len(tx.CollateralInputs) > lim.MaxInputsPerTx {
		return tooMany("collateral_inputs", len(tx.CollateralInputs), lim.MaxInputsPerTx)
	}
	if len(tx.Outputs) > lim.MaxOutputsPerTx {
		return tooMany("outputs", len(tx.Outputs), lim.MaxOutputsPerTx)
	}
	for j := range tx.Outputs {
		if err := validateOutput(&tx.Outputs[j], lim); err != nil {
			return fmt.Errorf("outputs[%d].%w", j, err)
		}
	}
	if tx.CollateralReturn != nil {
		if err := validateOutput(tx.CollateralReturn, lim); err != nil {
			return fmt.Errorf("collateral_return.%w", err)
		}
	}
	return nil
}

func validateOutput(o *Output, lim Limits) error {
	if o.Unspendable {
		// Set by an in-process producer (the Bitcoin adapter), never by a
		// decoder of the block format: the output keeps its index, has no
		// address, and is never created.
		if o.Address != "" || len(o.Assets) > 0 {
			return invalidField("address", "an unspendable output has no address and no assets")
		}
		return nil
	}
	if n := len(o.Address); n < MinAddressLen || n > MaxAddressLen {
		return invalidField("address", "length %d outside %d..%d", n, MinAddressLen, MaxAddressLen)
	}
	if !utf8.ValidString(o.Address) {
		return invalidField("address", "not valid UTF-8")
	}
	if len(o.Assets) > lim.MaxAssetsPerOutput {
		return tooMany("assets", len(o.Assets), lim.MaxAssetsPerOutput)
	}
	for k, a := range o.Assets {
		if len(a.Policy) > MaxPolicyLen {
			return invalidField(fmt.Sprintf("assets[%d].policy", k), "length %d over %d", len(a.Policy), MaxPolicyLen)
		}
		if len(a.Name) > MaxAssetNameLen {
			return invalidField(fmt.Sprintf("assets[%d].name", k), "length %d over %d", len(a.Name), MaxAssetNameLen)
		}
		if a.Quantity == 0 {
			return invalidField(fmt.Sprintf("assets[%d].quantity", k), "must be > 0")
		}
	}
	if err := checkAssetsUnique(o.Assets); err != nil {
		return err
	}
	if len(o.Datum) > MaxDatumLen {
		return invalidField("datum", "length %d over %d", len(o.Datum), MaxDatumLen)
	}
	if len(o.ScriptRef) > MaxScriptRefLen {
		return invalidField("script_ref", "length %d over %d", len(o.ScriptRef), MaxScriptRefLen)
	}
	return nil
}

// checkAssetsUnique rejects two assets with the same (policy, name). Sorted
// input (what the decoders produce) is checked in one pass; anything else is
// checked on a sorted copy, so a hand-built block is never reordered and
// 1 000 assets cost n log n, not n².
func checkAssetsUnique(assets []Asset) error {
	if AssetsSorted(assets) {
		return nil
	}
	sorted := slices.Clone(assets)
	SortAssets(sorted)
	for k := 1; k < len(sorted); k++ {
		if CompareAssets(sorted[k-1], sorted[k]) == 0 {
			return invalidField("assets", "duplicate asset policy=%x name=%x", sorted[k].Policy, sorted[k].Name)
		}
	}
	return nil
}

// invalidField returns "field: msg: invalid block".
func invalidField(field, format string, args ...any) error {
	return fmt.Errorf("%s: %s: %w", field, fmt.Sprintf(format, args...), ErrInvalidBlock)
}

// tooMany returns "field: n entries over limit max: too large".
func tooMany(field string, n, max int) error {
	return fmt.Errorf("%s: %d entries over limit %d: %w", field, n, max, ErrTooLarge)
}

// CheckLinkage enforces that b extends tip: the next height and the tip's
// hash as parent. The first block of an empty store may start at any height
// and may omit its parent; any other block without one (the zero hash) is
// invalid (docs/blocks.md: a required field missing), not merely misplaced.
// The writer and a bulk load check each block with it.
func CheckLinkage(tip Tip, b *Block) error {
	if tip.Empty {
		return nil
	}
	if b.Height != tip.Height+1 {
		return fmt.Errorf("block %d does not extend the tip %s: want height %d: %w",
			b.Height, tip, tip.Height+1, ErrNotNextBlock)
	}
	if b.PrevHash.IsZero() {
		return fmt.Errorf("block %d has no prev_hash: it is required unless the store is empty: %w",
			b.Height, ErrInvalidBlock)
	}
	if b.PrevHash != tip.Hash {
		return fmt.Errorf("block %d has prev_hash %s, the tip is %s: %w",
			b.Height, b.PrevHash, tip, ErrNotNextBlock)
	}
	return nil
}

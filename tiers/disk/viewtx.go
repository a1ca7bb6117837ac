package disk

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/utxo-cache/utxo-cache/chain"
)

// PointAt returns the block at height on the view's chain (its hash and
// slot), found false for a height above the view's tip or below the store's
// first block. It reads the block-hash row from the view's snapshot, so the
// answer belongs to the same chain as every other read of the view.
func (v *View) PointAt(height uint64) (p chain.Point, found bool, err error) {
	if v.state.Tip.Empty || height > v.state.Tip.Height {
		return p, false, nil
	}
	val, closer, err := v.snap.Get(heightKey(prefixBlockHash, height))
	if errors.Is(err, pebble.ErrNotFound) {
		return p, false, nil
	}
	if err != nil {
		return p, false, fmt.Errorf("disk: read block hash: %w", err)
	}
	defer closer.Close()
	p, err = decodeBlockHashRow(height, val)
	return p, err == nil, err
}

// TxOutputsFunc calls fn, in output-index order, with each output of the
// transaction tx the view holds: the live ones and the spent ones whose
// spent record is kept (younger than PruneDepth blocks, as Utxo answers
// them). An output spent longer ago than that, and one never created, is
// not handed to fn: the store cannot say which of the two it is. One
// iterator over the transaction's outpoint keys serves the call; fn must
// not keep r or its slices (see UtxoRef), and its error stops the walk and
// is returned.
func (v *View) TxOutputsFunc(tx chain.Hash, fn func(r *UtxoRef) error) error {
	lo := appendOutPointKey(make([]byte, 0, 2*outPointKeyLen), chain.OutPoint{TxHash: tx})
	hi := append(lo[len(lo):], prefixUtxo)
	hi = append(hi, tx[:]...)
	hi = append(hi, 0xff, 0xff, 0xff, 0xff, 0) // past index 2^32-1
	it, err := v.snap.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return fmt.Errorf("disk: tx outputs: %w", err)
	}
	defer it.Close()
	var r UtxoRef
	for valid := it.First(); valid; valid = it.Next() {
		op, ok := decodeOutPointKey(it.Key())
		if !ok {
			return fmt.Errorf("disk: outpoint key %x: %w", it.Key(), ErrCorrupt)
		}
		raw, err := it.ValueAndErr()
		if err != nil {
			return fmt.Errorf("disk: tx outputs: %w", err)
		}
		if err := parseRecordValue(op, raw, &r); err != nil {
			return err
		}
		if r.Spent && v.state.Tip.Height-r.SpentHeight > v.s.opts.PruneDepth {
			continue
		}
		if err := fn(&r); err != nil {
			return err
		}
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("disk: tx outputs: %w", err)
	}
	return nil
}

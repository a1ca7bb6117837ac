package disk

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/utxo-cache/utxo-cache/chain"
)

// # Asset rows
//
// The sum of one asset in one balance is a row of its own, right after the
// value's balance row (0x04 dim_key[16]) in the keyspace:
//
//	0x04  dim_key[16]  policy, zero-padded to chain.MaxPolicyLen  len(policy)[1]  name
//	      value: quantity, uint64 hi, uint64 lo (never zero: a sum that reaches
//	      zero is deleted)
//
// The padded policy and its length keep the rows of one value in the order
// of compareAsset (policy, then name, bytewise), so a balance reads them in
// its answer's order, in one scan, after its balance row (version 3,
// balance.go), which counts them.
//
// Why rows of their own: a balance that listed every asset in its row (the
// layout of versions 1 and 2, still read) was read, merged and rewritten
// whole whenever an output of its value moved. The rows of an NFT
// collection's policy, of a busy address and of its credentials carry
// thousands of names, hundreds of KiB each, and an import rewrote them in
// every catch-up window: two thirds of a window's batch at 2M UTXOs, and
// more as the chain grew. With a row per asset, a change writes the balance
// row and the rows of the assets it moves, whatever else the value holds.
// A row of version 1 or 2 that lists assets is split into asset rows the
// first time a change touches its value.

// assetKeyLen is the length of an asset row's key less its name.
const assetKeyLen = 1 + dimKeySize + chain.MaxPolicyLen + 1

// appendAssetKey appends the key of the row of asset (policy, name) in the
// balance of dk.
func appendAssetKey(dst []byte, dk DimKey, policy, name []byte) []byte {
	dst = appendBalanceKey(dst, dk)
	dst = append(dst, policy...)
	var pad [chain.MaxPolicyLen]byte
	dst = append(dst, pad[:chain.MaxPolicyLen-len(policy)]...)
	dst = append(dst, byte(len(policy)))
	return append(dst, name...)
}

// parseAssetKey returns the policy and name of an asset row's key (aliasing
// it), strictly: a length out of range, or padding that is not zero, is
// corrupt.
func parseAssetKey(k []byte) (policy, name []byte, err error) {
	if len(k) < assetKeyLen || k[0] != prefixBalance {
		return nil, nil, fmt.Errorf("disk: asset row key of %d bytes: %w", len(k), ErrCorrupt)
	}
	padded := k[1+dimKeySize : 1+dimKeySize+chain.MaxPolicyLen]
	n := int(k[assetKeyLen-1])
	name = k[assetKeyLen:]
	if n > chain.MaxPolicyLen || len(name) > chain.MaxAssetNameLen {
		return nil, nil, fmt.Errorf("disk: asset row key: policy of %d bytes, name of %d: %w", n, len(name), ErrCorrupt)
	}
	for _, c := range padded[n:] {
		if c != 0 {
			return nil, nil, fmt.Errorf("disk: asset row key: padding not zero: %w", ErrCorrupt)
		}
	}
	return padded[:n:n], name, nil
}

func appendAssetQuantity(dst []byte, q chain.Uint128) []byte {
	dst = binary.BigEndian.AppendUint64(dst, q.Hi)
	return binary.BigEndian.AppendUint64(dst, q.Lo)
}

// decodeAssetQuantity decodes an asset row's value: 16 bytes, not zero.
func decodeAssetQuantity(v []byte) (chain.Uint128, error) {
	if len(v) != 16 {
		return chain.Uint128{}, fmt.Errorf("disk: asset row of %d bytes: %w", len(v), ErrCorrupt)
	}
	q := chain.Uint128{Hi: binary.BigEndian.Uint64(v), Lo: binary.BigEndian.Uint64(v[8:])}
	if q.IsZero() {
		return q, fmt.Errorf("disk: asset row of quantity zero: %w", ErrCorrupt)
	}
	return q, nil
}

// readAssetRows returns the n asset rows of the balance of dk, in
// (policy, name) order, from r. Fewer or more rows than n is corrupt: the
// balance row counts them.
func readAssetRows(r pebble.Reader, dk DimKey, n uint64) ([]chain.AssetSum, error) {
	lo := appendBalanceKey(make([]byte, 0, 1+dimKeySize+1), dk)
	hi := prefixEnd(lo)
	lo = append(lo, 0) // past the balance row itself
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return nil, fmt.Errorf("disk: read asset rows: %w", err)
	}
	out := make([]chain.AssetSum, 0, min(n, 1<<16))
	for ok := it.First(); ok; ok = it.Next() {
		if uint64(len(out)) == n {
			return nil, errors.Join(fmt.Errorf("disk: balance %x: more than the %d asset rows its row counts: %w", dk, n, ErrCorrupt), it.Close())
		}
		policy, name, err := parseAssetKey(it.Key())
		var q chain.Uint128
		if err == nil {
			var v []byte
			if v, err = it.ValueAndErr(); err == nil {
				q, err = decodeAssetQuantity(v)
			}
		}
		if err != nil {
			return nil, errors.Join(fmt.Errorf("disk: balance %x: %w", dk, err), it.Close())
		}
		out = append(out, chain.AssetSum{Policy: cloneOrNil(policy), Name: cloneOrNil(name), Quantity: q})
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return nil, fmt.Errorf("disk: read asset rows: %w", err)
	}
	if uint64(len(out)) != n {
		return nil, fmt.Errorf("disk: balance %x: %d asset rows, its row counts %d: %w", dk, len(out), n, ErrCorrupt)
	}
	return out, nil
}

// prefixEnd returns the least key above every key that starts with p, or
// nil when there is none (p all 0xff).
func prefixEnd(p []byte) []byte {
	end := bytes.Clone(p)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] != 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

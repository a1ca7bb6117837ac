package disk

import "github.com/utxo-cache/utxo-cache/chain"

// Dimension identifies one index dimension: a function from an output to the
// values it is listed under. The values are persisted in index and balance
// keys (through DimKey) and in the schema row: never renumber them.
type Dimension uint8

const (
	// DimAddress lists outputs by their address. Always enabled.
	DimAddress Dimension = 1
	// DimAssetPolicy lists outputs by each asset policy they carry. Optional.
	DimAssetPolicy Dimension = 2
)

// dimensions is the table of known dimensions. Adding a dimension is adding a
// row: indexing, balances, listing and rollback are generic over it.
var dimensions = map[Dimension]struct {
	name string
	// values calls yield once per distinct value u is listed under.
	values func(u *chain.Utxo, yield func(value []byte))
}{
	DimAddress: {
		name:   "address",
		values: func(u *chain.Utxo, yield func([]byte)) { yield([]byte(u.Address)) },
	},
	DimAssetPolicy: {
		name: "asset_policy",
		values: func(u *chain.Utxo, yield func([]byte)) {
			for i, a := range u.Assets {
				if !policySeen(u.Assets[:i], a.Policy) {
					yield(a.Policy)
				}
			}
		},
	},
}

func policySeen(assets []chain.Asset, policy []byte) bool {
	for _, a := range assets {
		if string(a.Policy) == string(policy) {
			return true
		}
	}
	return false
}

// appendDimKeys appends to dst the dimension keys u is indexed under, given
// the enabled dimensions (DimAddress first): the address's key is computed
// without an allocation, the block's hottest path.
func appendDimKeys(dst []DimKey, dims []Dimension, u *chain.Utxo) []DimKey {
	for _, d := range dims {
		if d == DimAddress {
			dst = append(dst, dimKeyOf(DimAddress, u.Address))
			continue
		}
		dst = appendOtherDimKeys(dst, d, u)
	}
	return dst
}

// appendOtherDimKeys appends the keys of u under dimension d through the
// dimensions table.
func appendOtherDimKeys(dst []DimKey, d Dimension, u *chain.Utxo) []DimKey {
	dimensions[d].values(u, func(v []byte) { dst = append(dst, MakeDimKey(d, v)) })
	return dst
}

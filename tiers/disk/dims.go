package disk

import (
	"fmt"
	"slices"
	"strings"

	"github.com/utxo-cache/utxo-cache/chain"
)

// Dimension identifies one index dimension: a function from an output to the
// values it is listed under. The values are persisted in index and balance
// keys (through DimKey) and in the schema row: never renumber them.
type Dimension uint8

const (
	// DimAddress lists outputs by their address. Always enabled.
	DimAddress Dimension = 1
	// DimAssetPolicy lists outputs by each asset policy they carry (the
	// policy's bytes). Optional.
	DimAssetPolicy Dimension = 2
	// DimPaymentCredential lists outputs by the payment credential of their
	// address. Optional; its values come from the chain adapter (Derivers).
	DimPaymentCredential Dimension = 3
	// DimStakeCredential lists outputs by the stake credential of their
	// address. Optional; its values come from the chain adapter (Derivers).
	DimStakeCredential Dimension = 4
	// DimAsset lists outputs by each asset they carry: the value is
	// AssetValue(policy, name). Optional.
	DimAsset Dimension = 5
	// DimScriptHash lists outputs by the SHA-256 of their output script (32
	// bytes, natural byte order): Esplora's script hash. Optional; its
	// values come from the chain adapter (Derivers), which knows how an
	// address maps to a script.
	DimScriptHash Dimension = 6
	// DimReferenceScriptHash lists outputs by the hash of the reference
	// script they carry. Optional; its values come from the chain adapter
	// (Derivers): for Cardano, blake2b-224 of the script's language tag
	// then its bytes.
	DimReferenceScriptHash Dimension = 7
	// DimDatumHash lists outputs by the hash of the inline datum they carry.
	// Optional; its values come from the chain adapter (Derivers): for
	// Cardano, blake2b-256 of the datum's CBOR as sent. An output that names
	// a datum by its hash only, without carrying it, is not listed.
	DimDatumHash Dimension = 8
)

// ValuesFunc calls yield once per distinct value u is listed under in one
// dimension (not at all when u is listed under none). It must be a pure
// function of u: the store calls it when u becomes live and again when it
// stops being live (a spend, a rollback), and both calls must name the same
// values, or index rows and balances drift. It must not keep value after
// yield returns, nor fail: an output it cannot read has no value.
type ValuesFunc func(u *chain.Utxo, yield func(value []byte))

// Derivers gives the values of the dimensions whose meaning depends on the
// chain's address format (DimPaymentCredential, DimStakeCredential): the
// store knows no address format, so the chain adapter provides them and the
// assembly (node, cmd/utxo-cache) injects them through Options.
type Derivers map[Dimension]ValuesFunc

// dimensions is the table of known dimensions. Adding a dimension is adding a
// row (and, for one the store computes itself, a case of appendDimKeys):
// indexing, balances, listing and rollback are generic over it.
var dimensions = map[Dimension]struct {
	name string
	// derived is set for a dimension whose values come from
	// Options.Derivers; the others appendDimKeys computes from the output:
	// the address, each distinct policy, each distinct asset.
	derived bool
}{
	DimAddress:             {name: "address"},
	DimAssetPolicy:         {name: "asset_policy"},
	DimPaymentCredential:   {name: "payment_credential", derived: true},
	DimStakeCredential:     {name: "stake_credential", derived: true},
	DimAsset:               {name: "asset"},
	DimScriptHash:          {name: "script_hash", derived: true},
	DimReferenceScriptHash: {name: "reference_script_hash", derived: true},
	DimDatumHash:           {name: "datum_hash", derived: true},
}

// AppendAssetValue appends the DimAsset value of the asset (policy, name):
// one byte len(policy), the policy, then the name, so that no two assets
// share a value whatever their lengths. The policy must be shorter than 256
// bytes (chain.MaxPolicyLen bounds it lower).
func AppendAssetValue(dst, policy, name []byte) []byte {
	dst = append(dst, byte(len(policy)))
	dst = append(dst, policy...)
	return append(dst, name...)
}

func policySeen(assets []chain.Asset, policy []byte) bool {
	for _, a := range assets {
		if string(a.Policy) == string(policy) {
			return true
		}
	}
	return false
}

func assetSeen(assets []chain.Asset, x chain.Asset) bool {
	for _, a := range assets {
		if string(a.Policy) == string(x.Policy) && string(a.Name) == string(x.Name) {
			return true
		}
	}
	return false
}

// String returns the dimension's name ("address", "payment_credential", …).
func (d Dimension) String() string {
	if row, ok := dimensions[d]; ok {
		return row.name
	}
	return fmt.Sprintf("dimension(%d)", uint8(d))
}

// ParseDimension returns the dimension named name (String's names).
func ParseDimension(name string) (Dimension, error) {
	for d, row := range dimensions {
		if row.name == name {
			return d, nil
		}
	}
	return 0, fmt.Errorf("disk: unknown index dimension %q", name)
}

// dimNames renders a set of dimensions for a message: "address, asset".
func dimNames(dims []Dimension) string {
	names := make([]string, len(dims))
	for i, d := range dims {
		names[i] = d.String()
	}
	return strings.Join(names, ", ")
}

// normalDims returns DimAddress followed by the other dimensions of dims,
// sorted and without duplicates: the schema row's order.
func normalDims(dims []Dimension) []Dimension {
	out := []Dimension{DimAddress}
	for _, d := range dims {
		if d != DimAddress {
			out = append(out, d)
		}
	}
	slices.Sort(out[1:])
	return slices.Compact(out)
}

// dimFuncs returns, for each dimension of dims (DimAddress first), the
// function of its values: the injected one for a derived dimension, nil for
// the dimensions appendDimKeys computes itself (DimAddress, DimAssetPolicy,
// DimAsset). A derived dimension with no deriver is named in missing.
func dimFuncs(dims []Dimension, inj Derivers) (funcs []ValuesFunc, missing []Dimension) {
	funcs = make([]ValuesFunc, len(dims))
	for i, d := range dims {
		switch {
		case !dimensions[d].derived:
		case inj[d] != nil:
			funcs[i] = inj[d]
		default:
			missing = append(missing, d)
		}
	}
	return funcs, missing
}

// assetFilter says which of an output's assets count in the balance of one
// of its dimension values: all of them (an address, a credential), those of
// one policy (DimAssetPolicy), or one asset (DimAsset). The slices are the
// output's own.
type assetFilter struct {
	kind         uint8 // filterAll, filterPolicy, filterAsset
	policy, name []byte
}

const (
	filterAll uint8 = iota
	filterPolicy
	filterAsset
)

func (f *assetFilter) keep(a *chain.Asset) bool {
	switch f.kind {
	case filterPolicy:
		return string(a.Policy) == string(f.policy)
	case filterAsset:
		return string(a.Policy) == string(f.policy) && string(a.Name) == string(f.name)
	}
	return true
}

// appendDimKeys appends to keys the dimension keys u is indexed under, given
// the enabled dimensions and their functions (dimFuncs: DimAddress first),
// and to filters the balance filter of each key. The address's key is
// computed without an allocation, the block's hottest path, and a store that
// indexes only addresses pays nothing more.
//
// The balance of a policy sums the assets of that policy only, and the
// balance of an asset that asset only (with the count and value of the
// outputs that carry them): summing every asset of the outputs would make a
// popular policy's balance row grow with every asset its outputs also carry,
// and rewrite it whole each time one of them moves.
func appendDimKeys(keys []DimKey, filters []assetFilter, dims []Dimension, funcs []ValuesFunc, u *chain.Utxo) ([]DimKey, []assetFilter) {
	keys = append(keys, dimKeyOf(DimAddress, u.Address))
	filters = append(filters, assetFilter{})
	for i := 1; i < len(dims); i++ {
		switch d := dims[i]; d {
		case DimAssetPolicy:
			for j, a := range u.Assets {
				if !policySeen(u.Assets[:j], a.Policy) {
					keys = append(keys, MakeDimKey(d, a.Policy))
					filters = append(filters, assetFilter{kind: filterPolicy, policy: a.Policy})
				}
			}
		case DimAsset:
			var buf [1 + chain.MaxPolicyLen + chain.MaxAssetNameLen]byte
			for j, a := range u.Assets {
				if !assetSeen(u.Assets[:j], a) {
					keys = append(keys, MakeDimKey(d, AppendAssetValue(buf[:0], a.Policy, a.Name)))
					filters = append(filters, assetFilter{kind: filterAsset, policy: a.Policy, name: a.Name})
				}
			}
		default:
			funcs[i](u, func(v []byte) {
				keys = append(keys, MakeDimKey(d, v))
				filters = append(filters, assetFilter{})
			})
		}
	}
	return keys, filters
}

// ValuesOf returns the function of dimension d's values: the table's, or
// inj's for a dimension whose values come from the chain adapter; nil when
// neither knows d. Readers outside the store (event streams) use it to list
// an output under the same values the store indexes it by.
func ValuesOf(d Dimension, inj Derivers) ValuesFunc {
	switch d {
	case DimAddress:
		return func(u *chain.Utxo, yield func([]byte)) { yield([]byte(u.Address)) }
	case DimAssetPolicy:
		return func(u *chain.Utxo, yield func([]byte)) {
			for j, a := range u.Assets {
				if !policySeen(u.Assets[:j], a.Policy) {
					yield(a.Policy)
				}
			}
		}
	case DimAsset:
		return func(u *chain.Utxo, yield func([]byte)) {
			for j, a := range u.Assets {
				if !assetSeen(u.Assets[:j], a) {
					yield(AppendAssetValue(nil, a.Policy, a.Name))
				}
			}
		}
	}
	if dimensions[d].derived {
		return inj[d]
	}
	return nil
}

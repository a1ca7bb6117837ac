package disk

import (
	"slices"
	"testing"

	"github.com/utxo-cache/utxo-cache/chain"
)

// TestValuesOfMatchesIndexKeys: the values ValuesOf gives readers outside
// the store (event streams) are exactly the keys the store indexes an
// output under, in the same order, for every dimension it computes itself
// and for an injected one.
func TestValuesOfMatchesIndexKeys(t *testing.T) {
	p1, p2 := []byte{1, 1}, []byte{2}
	u := chain.Utxo{Output: chain.Output{Address: "addr", Value: 1, Assets: []chain.Asset{
		{Policy: p1, Name: []byte("a"), Quantity: 1},
		{Policy: p1, Name: []byte("b"), Quantity: 2},
		{Policy: p2, Name: nil, Quantity: 3},
	}}}
	inj := Derivers{DimPaymentCredential: func(u *chain.Utxo, yield func([]byte)) { yield([]byte("cred:" + u.Address)) }}
	dims := []Dimension{DimAddress, DimAssetPolicy, DimPaymentCredential, DimAsset}
	funcs, missing := dimFuncs(dims, inj)
	if len(missing) > 0 {
		t.Fatalf("missing derivers %v", missing)
	}
	keys, _ := appendDimKeys(nil, nil, dims, funcs, &u)
	var want []DimKey
	for _, d := range dims {
		f := ValuesOf(d, inj)
		if f == nil {
			t.Fatalf("ValuesOf(%s) is nil", d)
		}
		f(&u, func(v []byte) { want = append(want, MakeDimKey(d, v)) })
	}
	if !slices.Equal(keys, want) {
		t.Fatalf("the store indexes under %v, ValuesOf gives %v", keys, want)
	}
	if ValuesOf(DimStakeCredential, inj) != nil {
		t.Fatal("ValuesOf of a derived dimension without a deriver is not nil")
	}
}

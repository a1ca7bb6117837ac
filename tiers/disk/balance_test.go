package disk

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/utxo-cache/utxo-cache/chain"
)

// TestBalanceDeltaAssets applies random deltas to random rows and holds
// the result to sums kept per asset in a map and sorted afterwards, the
// plain way: assets added, removed, brought to zero and created, rows of
// none to hundreds of assets. The stored row is never written to (the
// balance cache shares it).
func TestBalanceDeltaAssets(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	policies := [][]byte{{0x01}, {0x02, 0x00}, {0x02}, {0xff}}
	names := [][]byte{nil, {0x00}, {0x41}, {0x41, 0x42}, {0x7a}}
	for round := range 2000 {
		want := map[string]chain.AssetSum{}
		key := func(p, n []byte) string { return fmt.Sprintf("%x|%x", p, n) }
		var have chain.Balance
		for range rng.IntN(12) {
			p, n := policies[rng.IntN(len(policies))], names[rng.IntN(len(names))]
			want[key(p, n)] = chain.AssetSum{Policy: p, Name: n, Quantity: chain.U128(uint64(1 + rng.IntN(50)))}
		}
		for _, a := range want {
			have.Assets = append(have.Assets, a)
		}
		sort.Slice(have.Assets, func(i, j int) bool {
			return compareAsset(have.Assets[i].Policy, have.Assets[i].Name, have.Assets[j].Policy, have.Assets[j].Name) < 0
		})
		have.Count, have.Value = 100, chain.U128(1000)
		stored := append([]chain.AssetSum(nil), have.Assets...)

		var d balanceDelta
		for range rng.IntN(8) {
			p, n := policies[rng.IntN(len(policies))], names[rng.IntN(len(names))]
			q := uint64(rng.IntN(40))
			sign := 1
			if cur := want[key(p, n)].Quantity; rng.IntN(2) == 0 && cur.Lo >= q {
				sign = -1
			}
			u := &chain.Utxo{Output: chain.Output{Value: 1, Assets: []chain.Asset{{Policy: p, Name: n, Quantity: q}}}}
			d.apply(u, sign, &assetFilter{})
			s := want[key(p, n)]
			s.Policy, s.Name = p, n
			if sign > 0 {
				s.Quantity = s.Quantity.AddU64(q)
			} else {
				s.Quantity, _ = s.Quantity.Sub(chain.U128(q))
			}
			want[key(p, n)] = s
		}
		got, err := d.applyTo(have)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		var wantList []chain.AssetSum
		for _, s := range want {
			if !s.Quantity.IsZero() {
				wantList = append(wantList, s)
			}
		}
		sort.Slice(wantList, func(i, j int) bool {
			return compareAsset(wantList[i].Policy, wantList[i].Name, wantList[j].Policy, wantList[j].Name) < 0
		})
		if len(got.Assets) != len(wantList) {
			t.Fatalf("round %d: %d assets, want %d: %v, want %v", round, len(got.Assets), len(wantList), got.Assets, wantList)
		}
		for i := range wantList {
			g, w := got.Assets[i], wantList[i]
			if !bytes.Equal(g.Policy, w.Policy) || !bytes.Equal(g.Name, w.Name) || g.Quantity != w.Quantity {
				t.Fatalf("round %d: asset %d is %x.%x %v, want %x.%x %v", round, i, g.Policy, g.Name, g.Quantity, w.Policy, w.Name, w.Quantity)
			}
		}
		for i := range stored {
			if have.Assets[i].Quantity != stored[i].Quantity || !bytes.Equal(have.Assets[i].Name, stored[i].Name) {
				t.Fatalf("round %d: the stored row's asset %d was written to", round, i)
			}
		}
		// The row written round-trips, and a row of these assets out of
		// order is refused.
		row, err := decodeBalanceRow(appendBalance(nil, &got))
		if err != nil || len(row.bal.Assets) != len(got.Assets) {
			t.Fatalf("round %d: round trip: %v", round, err)
		}
		if n := len(got.Assets); n >= 2 {
			swapped := got
			swapped.Assets = append([]chain.AssetSum(nil), got.Assets...)
			swapped.Assets[0], swapped.Assets[n-1] = swapped.Assets[n-1], swapped.Assets[0]
			if _, err := decodeBalanceRow(appendBalance(nil, &swapped)); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("round %d: a row of assets out of order: %v, want ErrCorrupt", round, err)
			}
		}
	}
}

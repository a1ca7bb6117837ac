package disk_test

import (
	"slices"
	"testing"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

// TestListSkip checks offset pages (ListQuery.Skip) against the whole
// listing read in one page: every (skip, limit, order) gives the slice of
// the listing it names, and a skip past the end gives nothing.
func TestListSkip(t *testing.T) {
	st := stOpen(t, t.TempDir(), disk.Options{PruneDepth: 100})
	st.apply(stChain(1, 0, 30)...) // bob: 31 live outputs
	v, err := st.s.PublishedView()
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	for _, desc := range []bool{false, true} {
		all, _, err := v.List(disk.ListQuery{Dim: disk.DimAddress, Value: []byte("bob"), Desc: desc, Limit: 1000})
		if err != nil || len(all) != 31 {
			t.Fatalf("whole listing: %d outputs, %v", len(all), err)
		}
		for _, limit := range []int{1, 3, 10, 31, 40} {
			for skip := 0; skip <= 35; skip++ {
				got, next, err := v.List(disk.ListQuery{Dim: disk.DimAddress, Value: []byte("bob"), Desc: desc, Limit: limit, Skip: skip})
				if err != nil {
					t.Fatal(err)
				}
				want := all[min(skip, len(all)):min(skip+limit, len(all))]
				if !slices.EqualFunc(got, want, func(a, b chain.Utxo) bool { return a.OutPoint == b.OutPoint }) {
					t.Fatalf("desc %v, skip %d, limit %d: %d outputs, want %d", desc, skip, limit, len(got), len(want))
				}
				if (next != nil) != (skip+limit < len(all)) {
					t.Fatalf("desc %v, skip %d, limit %d: next %v", desc, skip, limit, next)
				}
			}
		}
	}
}

// TestTxOutputsAndPointAt checks a transaction's held outputs (live, and
// spent within the prune depth) and the block rows a view reads.
func TestTxOutputsAndPointAt(t *testing.T) {
	st := stOpen(t, t.TempDir(), disk.Options{PruneDepth: 3})
	blocks := stChain(2, 0, 10)
	st.apply(blocks...)
	v, err := st.s.PublishedView()
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	outputs := func(tx chain.Hash) (ops []uint32, spent []bool) {
		t.Helper()
		err := v.TxOutputsFunc(tx, func(r *disk.UtxoRef) error {
			ops, spent = append(ops, r.OutPoint.Index), append(spent, r.Spent)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return ops, spent
	}
	// Block h's coinbase pays alice (spent at h+1) and bob (live).
	for h := uint64(0); h <= 10; h++ {
		ops, spent := outputs(blocks[h].Txs[0].Hash)
		switch {
		case h == 10: // alice's output of the tip is live
			if !slices.Equal(ops, []uint32{0, 1}) || spent[0] || spent[1] {
				t.Fatalf("tip's coinbase: %v %v", ops, spent)
			}
		case 10-(h+1) <= 3: // spent within the prune depth: held
			if !slices.Equal(ops, []uint32{0, 1}) || !spent[0] || spent[1] {
				t.Fatalf("coinbase %d: %v %v", h, ops, spent)
			}
		default: // spent and pruned: absent
			if !slices.Equal(ops, []uint32{1}) {
				t.Fatalf("coinbase %d: %v %v", h, ops, spent)
			}
		}
	}
	if ops, _ := outputs(stHash(9, 9, 9)); ops != nil {
		t.Fatalf("unknown tx: %v", ops)
	}
	for h := uint64(0); h <= 11; h++ {
		p, found, err := v.PointAt(h)
		if err != nil || found != (h <= 10) || (found && p.Hash != blocks[h].Hash) {
			t.Fatalf("PointAt(%d): %v %v %v", h, p, found, err)
		}
	}
}

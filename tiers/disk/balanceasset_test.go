package disk_test

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/utxo-cache/utxo-cache/cardano/credential"
	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/internal/workload"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
	"github.com/utxo-cache/utxo-cache/writer"
)

// cardanoIndexes is a store of every Cardano index.
var cardanoIndexes = disk.Options{
	Dimensions: []disk.Dimension{disk.DimAddress, disk.DimPaymentCredential, disk.DimStakeCredential, disk.DimAssetPolicy, disk.DimAsset},
	Derivers:   disk.Derivers{disk.DimPaymentCredential: credential.PaymentValues, disk.DimStakeCredential: credential.StakeValues},
}

// liveSet is the live outputs of a chain as its blocks say, kept apart from
// the store: the facts balances are checked against.
type liveSet map[chain.OutPoint]chain.Output

func (l liveSet) apply(b *chain.Block) {
	for i := range b.Txs {
		tx := &b.Txs[i]
		for _, op := range tx.Spends() {
			delete(l, op)
		}
		tx.Creates(func(index uint32, out *chain.Output, _ bool) {
			l[chain.OutPoint{TxHash: tx.Hash, Index: index}] = *out
		})
	}
}

// balances sums l into the balance of every value of every dimension of
// cardanoIndexes: an address's and a credential's hold every asset of
// their outputs, a policy's the assets of that policy, an asset's that
// asset. Values seen before and empty now are in seen, with no balance.
func (l liveSet) balances(seen map[string]bool) map[string]chain.Balance {
	type sums struct {
		count  uint64
		value  chain.Uint128
		assets map[[2]string]chain.Uint128
	}
	all := map[string]*sums{}
	add := func(key string, u *chain.Output, keep func(a *chain.Asset) bool) {
		s := all[key]
		if s == nil {
			s = &sums{assets: map[[2]string]chain.Uint128{}}
			all[key] = s
		}
		s.count++
		s.value = s.value.AddU64(u.Value)
		for i := range u.Assets {
			if a := &u.Assets[i]; keep(a) {
				k := [2]string{string(a.Policy), string(a.Name)}
				s.assets[k] = s.assets[k].AddU64(a.Quantity)
			}
		}
	}
	every := func(*chain.Asset) bool { return true }
	for op, out := range l {
		u := chain.Utxo{OutPoint: op, Output: out}
		add(valueKey(disk.DimAddress, []byte(out.Address)), &out, every)
		credential.PaymentValues(&u, func(v []byte) { add(valueKey(disk.DimPaymentCredential, v), &out, every) })
		credential.StakeValues(&u, func(v []byte) { add(valueKey(disk.DimStakeCredential, v), &out, every) })
		policies, assets := map[string]bool{}, map[[2]string]bool{}
		for i := range out.Assets {
			a := &out.Assets[i]
			if !policies[string(a.Policy)] {
				policies[string(a.Policy)] = true
				add(valueKey(disk.DimAssetPolicy, a.Policy), &out, func(b *chain.Asset) bool { return bytes.Equal(b.Policy, a.Policy) })
			}
			if k := [2]string{string(a.Policy), string(a.Name)}; !assets[k] {
				assets[k] = true
				add(valueKey(disk.DimAsset, disk.AppendAssetValue(nil, a.Policy, a.Name)), &out, func(b *chain.Asset) bool {
					return bytes.Equal(b.Policy, a.Policy) && bytes.Equal(b.Name, a.Name)
				})
			}
		}
	}
	out := make(map[string]chain.Balance, len(all))
	for key, s := range all {
		seen[key] = true
		b := chain.Balance{Count: s.count, Value: s.value}
		for _, k := range slices.SortedFunc(maps.Keys(s.assets), func(x, y [2]string) int {
			return cmp.Or(strings.Compare(x[0], y[0]), strings.Compare(x[1], y[1]))
		}) {
			if q := s.assets[k]; !q.IsZero() {
				b.Assets = append(b.Assets, chain.AssetSum{Policy: []byte(k[0]), Name: []byte(k[1]), Quantity: q})
			}
		}
		out[key] = b
	}
	return out
}

// valueKey names a dimension value in the maps of liveSet.balances.
func valueKey(d disk.Dimension, v []byte) string { return fmt.Sprintf("%d|%s", d, v) }

// checkBalances holds every balance st answers to l's, for every value in
// seen (so values emptied since read as the zero balance).
func checkBalances(t *testing.T, what string, st *disk.Store, l liveSet, seen map[string]bool) {
	t.Helper()
	want := l.balances(seen)
	v, err := st.PublishedView()
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	bad := 0
	for key := range seen {
		var d disk.Dimension
		var value string
		if _, err := fmt.Sscanf(key[:2], "%d|", &d); err != nil {
			t.Fatal(err)
		}
		value = key[2:]
		got, err := v.Balance(d, []byte(value))
		if err != nil {
			t.Fatalf("%s: balance of dimension %d value %x: %v", what, d, value, err)
		}
		w := want[key]
		if !balanceEqual(got, w) {
			if bad++; bad <= 5 {
				t.Errorf("%s: dimension %d value %x: balance count %d value %v, %d assets; want count %d value %v, %d assets",
					what, d, value, got.Count, got.Value, len(got.Assets), w.Count, w.Value, len(w.Assets))
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%s: %d of %d balances differ", what, bad, len(seen))
	}
}

func balanceEqual(a, b chain.Balance) bool {
	return a.Count == b.Count && a.Value == b.Value && slices.EqualFunc(a.Assets, b.Assets, func(x, y chain.AssetSum) bool {
		return bytes.Equal(x.Policy, y.Policy) && bytes.Equal(x.Name, y.Name) && x.Quantity == y.Quantity
	})
}

// TestAssetRows holds the balances of a store of every Cardano index to
// sums of the live outputs computed here from the blocks, for every value
// any output had: across catch-up windows and single blocks, a rollback
// and its blocks applied again, a reopen; then across a store written
// before asset rows (its balance rows list their assets, schema 3), which
// reads as it is and is split value by value as blocks touch them, its
// schema raised to 4 by the first block.
func TestAssetRows(t *testing.T) {
	ctx := context.Background()
	gen, err := workload.New(workload.Options{Seed: 21, Profile: workload.Cardano, TxsPerBlock: 40})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	open := func() (*disk.Store, *writer.Writer) {
		st, err := disk.Open(dir, cardanoIndexes)
		if err != nil {
			t.Fatal(err)
		}
		return st, writer.New(st, writer.Options{WindowBlocks: 8, LiveMargin: 1})
	}
	st, w := open()
	closeAll := func() {
		w.Close()
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
	}
	defer func() { closeAll() }()
	live, seen := liveSet{}, map[string]bool{}
	apply := func(blocks ...*chain.Block) {
		t.Helper()
		if _, err := w.ApplyBlocks(ctx, blocks, blocks[len(blocks)-1].Height); err != nil {
			t.Fatal(err)
		}
		for _, b := range blocks {
			live.apply(b)
		}
	}
	for gen.Live() < 3000 {
		apply(gen.NextSeed(500))
	}
	var blocks []*chain.Block
	for range 30 {
		blocks = append(blocks, gen.Next())
	}
	apply(blocks[:20]...) // windows of up to 8, the last block alone
	checkBalances(t, "after windows", st, live, seen)
	before := maps.Clone(live)
	apply(blocks[20:]...)
	checkBalances(t, "after 10 more blocks", st, live, seen)
	if _, err := w.Rollback(ctx, blocks[19].Height); err != nil {
		t.Fatal(err)
	}
	checkBalances(t, "after a rollback of 10 blocks", st, before, seen)
	for _, b := range blocks[20:] {
		if _, err := w.Apply(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	checkBalances(t, "after the blocks again", st, live, seen)
	if v := disk.StoredSchemaVersion(t, st); v != disk.SchemaVersion {
		t.Fatalf("schema version %d, want %d", v, disk.SchemaVersion)
	}

	// A store written before asset rows.
	closeAll()
	if n := disk.DowngradeAssetRows(t, dir); n < 100 {
		t.Fatalf("%d balance rows listed assets; want the test to reach more", n)
	}
	st, w = open()
	if v := disk.StoredSchemaVersion(t, st); v != 3 {
		t.Fatalf("downgraded store: schema version %d, want 3", v)
	}
	checkBalances(t, "rows listing their assets", st, live, seen)
	var split int
	disk.OnBatchBuilt(st, func() {
		for _, k := range disk.BatchPointKeys(st) {
			if disk.IsAssetRowKey(k) {
				split++
			}
		}
	})
	for range 5 {
		apply(gen.Next())
	}
	disk.OnBatchBuilt(st, nil)
	if split == 0 {
		t.Fatal("no asset row written: the rows listing assets were not split")
	}
	if v := disk.StoredSchemaVersion(t, st); v != disk.SchemaVersion {
		t.Fatalf("schema version %d after a block, want %d", v, disk.SchemaVersion)
	}
	checkBalances(t, "5 blocks on rows listing their assets", st, live, seen)
	closeAll()
	st, w = open()
	checkBalances(t, "reopened", st, live, seen)
}

// TestAssetRowsWriteWhatMoves: a block that moves one asset of an address
// holding a thousand writes the address's balance row and that asset's row,
// not the thousand (a balance row that listed every asset was rewritten
// whole); the balance reads every asset, in order.
func TestAssetRowsWriteWhatMoves(t *testing.T) {
	ctx := context.Background()
	st, err := disk.Open(t.TempDir(), disk.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	w := writer.New(st, writer.Options{})
	defer w.Close()
	policy := bytes.Repeat([]byte{0xab}, 28)
	var assets []chain.Asset
	for i := range 1000 {
		assets = append(assets, chain.Asset{Policy: policy, Name: fmt.Appendf(nil, "nft%04d", 999-i), Quantity: 1})
	}
	b1 := &chain.Block{Height: 0, Hash: chain.Hash{1}, Txs: []chain.Tx{{Hash: chain.Hash{0x11}, Coinbase: true,
		Outputs: []chain.Output{{Address: "addr", Value: 5, Assets: assets}}}}}
	b2 := &chain.Block{Height: 1, Hash: chain.Hash{2}, PrevHash: b1.Hash, Txs: []chain.Tx{{Hash: chain.Hash{0x22}, Coinbase: true,
		Outputs: []chain.Output{{Address: "addr", Value: 7, Assets: []chain.Asset{{Policy: policy, Name: []byte("nft0500"), Quantity: 2}}}}}}}
	if _, err := w.Apply(ctx, b1); err != nil {
		t.Fatal(err)
	}
	var balanceRows, assetRows int
	disk.OnBatchBuilt(st, func() {
		for _, k := range disk.BatchPointKeys(st) {
			switch {
			case disk.IsBalanceRowKey(k):
				balanceRows++
			case disk.IsAssetRowKey(k):
				assetRows++
			}
		}
	})
	if _, err := w.Apply(ctx, b2); err != nil {
		t.Fatal(err)
	}
	disk.OnBatchBuilt(st, nil)
	if balanceRows != 1 || assetRows != 1 {
		t.Fatalf("the block wrote %d balance rows and %d asset rows; want 1 and 1", balanceRows, assetRows)
	}
	v, err := st.PublishedView()
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	got, err := v.Balance(disk.DimAddress, []byte("addr"))
	if err != nil {
		t.Fatal(err)
	}
	if got.Count != 2 || got.Value != chain.U128(12) || len(got.Assets) != 1000 {
		t.Fatalf("balance: count %d value %v, %d assets; want 2, 12, 1000", got.Count, got.Value, len(got.Assets))
	}
	for i, a := range got.Assets {
		want := uint64(1)
		if i == 500 {
			want = 3
		}
		if !bytes.Equal(a.Policy, policy) || string(a.Name) != fmt.Sprintf("nft%04d", i) || a.Quantity != chain.U128(want) {
			t.Fatalf("asset %d: %x %q %v; want %x nft%04d %d", i, a.Policy, a.Name, a.Quantity, policy, i, want)
		}
	}
}

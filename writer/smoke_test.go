package writer

import (
	"context"
	"errors"
	"testing"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

func h(b byte) chain.Hash { var x chain.Hash; x[0] = b; x[31] = 1; return x }

func TestSmokeApplyRollback(t *testing.T) {
	st, err := disk.Open(t.TempDir(), disk.Options{PruneDepth: 2, RollbackWindow: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	w := New(st, Options{})
	defer w.Close()
	ctx := context.Background()
	b1 := &chain.Block{Height: 1, Hash: h(1), Txs: []chain.Tx{
		{Hash: h(10), Coinbase: true, Outputs: []chain.Output{{Address: "alice", Value: 50}}},
		{Hash: h(11), Inputs: []chain.OutPoint{{TxHash: h(10)}}, Outputs: []chain.Output{{Address: "bob", Value: 20}, {Address: "alice", Value: 30}}},
	}}
	if _, err := w.Apply(ctx, b1); err != nil {
		t.Fatal(err)
	}
	if r, err := w.Apply(ctx, b1); err != nil || r.Applied {
		t.Fatalf("re-apply: %v %v", r, err)
	}
	b2 := &chain.Block{Height: 2, Hash: h(2), PrevHash: h(1), Txs: []chain.Tx{
		{Hash: h(12), Inputs: []chain.OutPoint{{TxHash: h(11), Index: 1}}, Outputs: []chain.Output{{Address: "carol", Value: 30}}},
	}}
	if _, err := w.Apply(ctx, b2); err != nil {
		t.Fatal(err)
	}
	_, err = w.Apply(ctx, &chain.Block{Height: 3, Hash: h(3), PrevHash: h(2), Txs: []chain.Tx{{Hash: h(13), Inputs: []chain.OutPoint{{TxHash: h(11), Index: 1}}}}})
	if !errors.Is(err, chain.ErrUnknownInput) {
		t.Fatalf("want unknown input, got %v", err)
	}
	v, _ := st.NewView()
	if v.State().UtxoCount != 2 {
		t.Fatalf("count %d", v.State().UtxoCount)
	}
	bal, _ := v.Balance(disk.DimAddress, []byte("alice"))
	if bal.Count != 0 {
		t.Fatalf("alice %+v", bal)
	}
	_, sp, err := v.Utxo(chain.OutPoint{TxHash: h(11), Index: 1})
	if err != nil || sp == nil || sp.Height != 2 {
		t.Fatalf("spent %v %v", sp, err)
	}
	v.Close()
	if _, err := w.Rollback(ctx, 0); !errors.Is(err, chain.ErrInvalidArgument) && err != nil {
		t.Fatalf("rollback 0: %v", err)
	}
	v, _ = st.NewView()
	defer v.Close()
	if !v.State().Tip.Empty || v.State().UtxoCount != 0 || v.State().Digest != (chain.Digest{}) {
		t.Fatalf("after rollback: %+v", v.State())
	}
	list, next, err := v.List(disk.ListQuery{Dim: disk.DimAddress, Value: []byte("bob"), Limit: 10})
	if err != nil || len(list) != 0 || next != nil {
		t.Fatal(list, next, err)
	}
}

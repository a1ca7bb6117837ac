package writer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/internal/model"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

// TestCatchUpShortOfTarget: a producer's target is a promise of blocks not
// yet checked (ingest takes the height of its backlog's last record). When
// the block at the target is refused, the store stops at the last good
// block, and that state must be exactly the one the blocks applied one by
// one leave: every outpoint answer (spent records within prune depth
// included), every rollback within the window, and the change log.
func TestCatchUpShortOfTarget(t *testing.T) {
	const prune, window = 10, 20
	opts := disk.Options{PruneDepth: prune, RollbackWindow: window}
	one, err := disk.Open(storeDir(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	caught, err := disk.Open(storeDir(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer caught.Close()
	w1 := New(one, Options{})
	defer w1.Close()
	w2 := New(caught, Options{LiveMargin: 1})
	defer w2.Close()

	ctx := context.Background()
	m := model.New(prune, window)
	g := model.NewGen(1, model.GenOptions{})
	var blocks []*chain.Block
	var outpoints []chain.OutPoint
	for range 60 {
		b := g.Block(m)
		if _, err := m.Apply(b, false); err != nil {
			t.Fatal(err)
		}
		blocks = append(blocks, b)
		for i := range b.Txs {
			b.Txs[i].Creates(func(index uint32, _ *chain.Output, _ bool) {
				outpoints = append(outpoints, chain.OutPoint{TxHash: b.Txs[i].Hash, Index: index})
			})
		}
		if _, err := w1.Apply(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	last := blocks[len(blocks)-1]
	bogus := &chain.Block{Height: last.Height + 10*window, Hash: chain.Hash{1}, PrevHash: last.Hash}
	res, err := w2.ApplyBlocks(ctx, append(blocks, bogus), bogus.Height)
	if err == nil || res.Done != len(blocks) || res.Windows == 0 {
		t.Fatalf("ApplyBlocks: %+v, %v; want the good blocks in windows and the bogus one refused", res, err)
	}

	a, b := one.State(), caught.State()
	if a.Seq != b.Seq || a.Tip != b.Tip || a.UtxoCount != b.UtxoCount || a.Digest != b.Digest {
		t.Fatalf("states differ: one by one %+v, caught up %+v", a, b)
	}
	for h := a.Tip.Height; h+window >= a.Tip.Height && h > 0; h-- {
		e1, e2 := one.CheckRollback(h-1), caught.CheckRollback(h-1)
		if fmt.Sprint(e1) != fmt.Sprint(e2) {
			t.Errorf("rollback to %d: one by one %v, caught up %v", h-1, e1, e2)
		}
	}
	v1, err := one.PublishedView()
	if err != nil {
		t.Fatal(err)
	}
	defer v1.Close()
	v2, err := caught.PublishedView()
	if err != nil {
		t.Fatal(err)
	}
	defer v2.Close()
	for _, op := range outpoints {
		u1, s1, e1 := v1.Utxo(op)
		u2, s2, e2 := v2.Utxo(op)
		if fmt.Sprint(u1, s1, e1) != fmt.Sprint(u2, s2, e2) {
			t.Errorf("outpoint %s: one by one %v %v %v, caught up %v %v %v", op, u1, s1, e1, u2, s2, e2)
		}
	}
	for after := uint64(0); after < a.Seq; after++ {
		c1, _, e1 := v1.Changes(after, 1<<20)
		c2, _, e2 := v2.Changes(after, 1<<20)
		if !bytes.Equal(c1, c2) || fmt.Sprint(e1) != fmt.Sprint(e2) {
			t.Errorf("changes after %d: one by one %d bytes %v, caught up %d bytes %v", after, len(c1), e1, len(c2), e2)
		}
	}
}

// TestGuardAfterValidation: on a nearly full disk an invalid block gets its
// own error, not insufficient storage; only a valid one is refused for room.
func TestGuardAfterValidation(t *testing.T) {
	st, err := disk.Open(storeDir(t), disk.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	space := &testSpace{}
	space.avail.Store(1 << 40)
	w := New(st, Options{Space: space, Reserve: 1 << 20})
	defer w.Close()
	ctx := context.Background()
	m := model.New(2160, 4320)
	g := model.NewGen(1, model.GenOptions{})
	for range 5 {
		b := g.Block(m)
		if _, err := m.Apply(b, false); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Apply(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	space.avail.Store(1 << 19) // below the reserve
	seen := 0
	for range 200 {
		bad, fault := g.BadBlock(m)
		want := fault.Want()
		if !errors.Is(want, chain.ErrUnknownInput) && !errors.Is(want, chain.ErrDoubleSpend) {
			continue
		}
		seen++
		if _, err := w.Apply(ctx, bad); !errors.Is(err, want) || errors.Is(err, ErrInsufficientStorage) {
			t.Fatalf("%s on a full disk: %v, want %v", fault, err, want)
		}
	}
	if seen == 0 {
		t.Fatal("the generator made no unknown-input or double-spend block")
	}
	if _, err := w.Apply(ctx, g.Block(m)); !errors.Is(err, ErrInsufficientStorage) {
		t.Fatalf("a valid block on a full disk: %v, want ErrInsufficientStorage", err)
	}
}

package n2n

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"testing"

	"github.com/utxo-cache/utxo-cache/cardano"
	"github.com/utxo-cache/utxo-cache/chain"
)

// TestRollbackToBoundary: a Byron boundary block is never stored, so a roll
// backward to one is a rollback to its parent, after which the block that
// follows the boundary block links again (to the parent, as the Linker
// gives it). A roll backward to a boundary block the session did not link
// through is too deep: the store does not know it.
func TestRollbackToBoundary(t *testing.T) {
	ctx := context.Background()
	store, w := openStore(t)
	h := func(parts ...any) chain.Hash { return sha256.Sum256(fmt.Append(nil, parts...)) }
	var prev chain.Hash
	for height := uint64(10); height <= 14; height++ {
		b := &chain.Block{Height: height, Hash: h("b", height), PrevHash: prev, Slot: 100 * height,
			Txs: []chain.Tx{{Hash: h("t", height), Outputs: []chain.Output{{Address: "a", Value: 1}}}}}
		if _, err := w.Apply(ctx, b); err != nil {
			t.Fatal(err)
		}
		prev = b.Hash
	}
	f := New(Options{Address: "127.0.0.1:1", Magic: 1, Writer: w, Points: store})
	s := &session{f: f, linker: cardano.NewLinker(w.Tip())}
	ebb := &cardano.Block{Era: cardano.EraByronBoundary, Slot: 1250, Boundary: true,
		Chain: chain.Block{Height: 12, Hash: h("ebb"), PrevHash: h("b", 12), Txs: []chain.Tx{}}}
	s.noteBoundary(ebb)

	if err := s.rollBack(ctx, Point{Slot: 1250, Hash: ebb.Chain.Hash}); err != nil {
		t.Fatal(err)
	}
	if tip := w.Tip(); tip.Height != 12 || tip.Hash != h("b", 12) {
		t.Fatalf("tip %s after a roll backward to the boundary block after 12", tip)
	}
	next := &cardano.Block{Era: cardano.EraByron, Slot: 1251,
		Chain: chain.Block{Height: 13, Hash: h("b'", 13), PrevHash: ebb.Chain.Hash, Txs: []chain.Tx{}}}
	out, apply, err := s.linker.Next(next)
	if err != nil || !apply || out.PrevHash != h("b", 12) {
		t.Fatalf("the block after the boundary block: %v %v %v", out.PrevHash, apply, err)
	}

	err = s.rollBack(ctx, Point{Slot: 1, Hash: h("another ebb")})
	if !errors.Is(err, ErrRollbackTooDeep) || reasonOf(err) != ReasonRollbackTooDeep {
		t.Fatalf("roll backward to an unknown point: %v, want ErrRollbackTooDeep", err)
	}
	if tip := w.Tip(); tip.Height != 12 {
		t.Fatalf("a refused roll backward moved the tip to %s", tip)
	}
}

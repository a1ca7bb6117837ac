package disk_test

import (
	"context"
	"testing"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

// TestHeaderTable: the block-time and block-hash rows name every block of
// the chain, whether applied one by one or in a catch-up window, and a
// rollback takes exactly the rolled-back blocks' rows away.
func TestHeaderTable(t *testing.T) {
	st := stOpen(t, t.TempDir(), disk.Options{RollbackWindow: 10})
	blocks := stChain(1, 0, 9)
	for _, b := range blocks {
		b.Time = 1_600_000_000 + int64(b.Height)*600
	}
	st.apply(blocks[:4]...)
	if _, err := st.w.ApplyBlocks(context.Background(), blocks[4:], 9); err != nil {
		t.Fatal(err)
	}
	check := func(tip uint64) {
		t.Helper()
		v, err := st.s.PublishedView()
		if err != nil {
			t.Fatal(err)
		}
		defer v.Close()
		for _, b := range blocks {
			h, ok, err := v.BlockAt(b.Height)
			if err != nil {
				t.Fatal(err)
			}
			if b.Height > tip {
				if ok {
					t.Errorf("tip %d: block at %d still listed: %+v", tip, b.Height, h)
				}
			} else if want := (disk.BlockHeader{Height: b.Height, Hash: b.Hash, Time: b.Time, TimeKnown: true}); !ok || h != want {
				t.Errorf("tip %d: BlockAt(%d) = %+v, %v; want %+v", tip, b.Height, h, ok, want)
			}
			height, ok, err := v.HeightOf(b.Hash)
			if err != nil || ok != (b.Height <= tip) || (ok && height != b.Height) {
				t.Errorf("tip %d: HeightOf(block %d) = %d, %v, %v", tip, b.Height, height, ok, err)
			}
		}
		if _, ok, err := v.HeightOf(chain.Hash{0xee}); ok || err != nil {
			t.Errorf("HeightOf(unknown) = %v, %v", ok, err)
		}
	}
	check(9)
	if _, err := st.w.Rollback(context.Background(), 6); err != nil {
		t.Fatal(err)
	}
	check(6)
}

package disk_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

// The slot is kept with the block's hash (keys.go, the block-hash row):
// applied alone and in catch-up windows, read back as points, removed by a
// rollback, and read as 0 from a row written before slots were kept.

// slotOf is the slot the tests give block h: far apart and never 0, like a
// real chain's (slots advance by about 20 per block).
func slotOf(h uint64) uint64 { return 1_000_000 + 20*h + h%7 }

func slotChain(tag byte, from, to uint64) []*chain.Block {
	blocks := stChain(tag, from, to)
	for _, b := range blocks {
		b.Slot = slotOf(b.Height) + uint64(tag)
	}
	return blocks
}

func wantPoint(t *testing.T, s *disk.Store, b *chain.Block) {
	t.Helper()
	p, found, err := s.PointAt(b.Height)
	if err != nil || !found {
		t.Fatalf("PointAt(%d): found %v, %v", b.Height, found, err)
	}
	if want := (chain.Point{Height: b.Height, Slot: b.Slot, Hash: b.Hash}); p != want {
		t.Fatalf("PointAt(%d) = %s, want %s", b.Height, p, want)
	}
	if h, found, err := s.HashAt(b.Height); err != nil || !found || h != b.Hash {
		t.Fatalf("HashAt(%d) = %s %v %v, want %s", b.Height, h, found, err, b.Hash)
	}
}

func TestSlotKeptAppliedAndRolledBack(t *testing.T) {
	ctx := context.Background()
	st := stOpen(t, t.TempDir(), disk.Options{RollbackWindow: 10})
	blocks := slotChain(1, 0, 40)
	// 0..29 in catch-up windows (the target is far above them), the rest
	// alone.
	res, err := st.w.ApplyBlocks(ctx, blocks[:30], 100_000)
	if err != nil || res.Applied != 30 {
		t.Fatalf("ApplyBlocks: %+v %v", res, err)
	}
	if res.Windows == 0 {
		t.Fatalf("ApplyBlocks used no window: %+v", res)
	}
	st.apply(blocks[30:]...)
	for _, b := range blocks {
		wantPoint(t, st.s, b)
	}

	// The recent points: the tip, then 1, 2, 4, 8 below it, then the floor
	// of the window (40-10 = 30), newest first.
	pts, err := st.s.RecentPoints()
	if err != nil {
		t.Fatal(err)
	}
	var want []chain.Point
	for _, h := range []uint64{40, 39, 38, 36, 32, 30} {
		want = append(want, chain.Point{Height: h, Slot: blocks[h].Slot, Hash: blocks[h].Hash})
	}
	if !reflect.DeepEqual(pts, want) {
		t.Fatalf("RecentPoints:\n got %v\nwant %v", pts, want)
	}

	// Roll back to 35: the rows above it go; a fork with other slots takes
	// their place.
	if _, err := st.w.Rollback(ctx, 35); err != nil {
		t.Fatal(err)
	}
	for h := uint64(36); h <= 40; h++ {
		if p, found, err := st.s.PointAt(h); err != nil || found {
			t.Fatalf("PointAt(%d) after the rollback: %s %v %v", h, p, found, err)
		}
	}
	wantPoint(t, st.s, blocks[35])
	fork := slotChain(2, 36, 38)
	fork[0].PrevHash = blocks[35].Hash
	fork[0].Txs = fork[0].Txs[:1] // its spend would name the other chain's output
	st.apply(fork...)
	for _, b := range fork {
		wantPoint(t, st.s, b)
	}
}

func TestSlotZeroAndOldRows(t *testing.T) {
	dir := t.TempDir()
	st := stOpen(t, dir, disk.Options{})
	blocks := stChain(3, 0, 3) // no slots: a Bitcoin-like chain
	blocks[2].Slot = 77
	st.apply(blocks...)
	for _, b := range blocks {
		wantPoint(t, st.s, b)
	}
	st.close()

	// A store from before slots: its rows are the bare hash. Written by
	// hand here: key 07 || height, value the 32-byte hash.
	key := stUnhex(t, "07 0000000000000002")
	if got := stGetRaw(t, dir, key); len(got) != 40 {
		t.Fatalf("row with a slot is %d bytes, want 40", len(got))
	}
	stSetRaw(t, dir, key, blocks[2].Hash[:])
	st = stOpen(t, dir, disk.Options{})
	blocks[2].Slot = 0
	wantPoint(t, st.s, blocks[2])
	pts, err := st.s.RecentPoints()
	if err != nil || len(pts) != 4 || pts[0].Hash != blocks[3].Hash || pts[1] != (chain.Point{Height: 2, Hash: blocks[2].Hash}) {
		t.Fatalf("RecentPoints over an old row: %v %v", pts, err)
	}
	st.close()

	// A row of any other length is corruption, reported, not guessed at.
	stSetRaw(t, dir, key, append(blocks[2].Hash[:], 1, 2, 3))
	st = stOpen(t, dir, disk.Options{})
	if _, _, err := st.s.PointAt(2); !errors.Is(err, disk.ErrCorrupt) {
		t.Fatalf("PointAt over a 35-byte row: %v, want ErrCorrupt", err)
	}
}

func TestRecentPointsEmptyAndMidChain(t *testing.T) {
	st := stOpen(t, t.TempDir(), disk.Options{RollbackWindow: 1000})
	if pts, err := st.s.RecentPoints(); err != nil || len(pts) != 0 {
		t.Fatalf("empty store: %v %v", pts, err)
	}
	// A store that starts at height 500 (as one started mid-chain does):
	// the points stop at its first block.
	blocks := slotChain(4, 500, 505)
	blocks[0].Txs = blocks[0].Txs[:1]
	st.apply(blocks...)
	pts, err := st.s.RecentPoints()
	if err != nil {
		t.Fatal(err)
	}
	var heights []uint64
	for _, p := range pts {
		heights = append(heights, p.Height)
	}
	if !reflect.DeepEqual(heights, []uint64{505, 504, 503, 501}) {
		t.Fatalf("RecentPoints heights %v, want [505 504 503 501]", heights)
	}
}

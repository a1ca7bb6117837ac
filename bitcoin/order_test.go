package bitcoin

import (
	"errors"
	"math/big"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/btcsuite/btcd/wire"
)

func hashes(blocks []*wire.MsgBlock) []string {
	out := make([]string, len(blocks))
	for i, b := range blocks {
		out[i] = b.BlockHash().String()[56:] // the last 8 hex digits tell these apart
	}
	return out
}

// TestOrderByParentReorg orders genesis..4 plus the branch 3A-4A-5A built on
// block 2: the branch is longer (same difficulty), so it is the main chain
// and blocks 3 and 4 are stale, whatever the input order.
func TestOrderByParentReorg(t *testing.T) {
	main := loadFixture(t, fixture0To4)
	a3, a4, a5 := loadFixture(t, fixture3A)[0], loadFixture(t, fixture4A)[0], loadFixture(t, fixture5A)[0]
	want := hashes([]*wire.MsgBlock{main[0], main[1], main[2], a3, a4, a5})
	wantStale := hashes([]*wire.MsgBlock{main[3], main[4]})

	all := append(append([]*wire.MsgBlock{}, main...), a3, a4, a5)
	seed := rand.Uint64()
	rng := rand.New(rand.NewPCG(seed, 0))
	for round := range 20 {
		in := append([]*wire.MsgBlock{}, all...)
		if round > 0 {
			rng.Shuffle(len(in), func(i, j int) { in[i], in[j] = in[j], in[i] })
		}
		ord, err := OrderByParent(in, OrderOptions{})
		if err != nil {
			t.Fatalf("seed %d round %d: %v", seed, round, err)
		}
		if got := hashes(ord.Blocks); !slices.Equal(got, want) {
			t.Fatalf("seed %d round %d: main %v, want %v", seed, round, got, want)
		}
		stale := hashes(ord.Stale)
		if len(stale) != 2 || !(slices.Equal(stale, wantStale) || slices.Equal(stale, []string{wantStale[1], wantStale[0]})) {
			t.Fatalf("seed %d round %d: stale %v, want %v", seed, round, stale, wantStale)
		}
	}

	// The reorganised chain converts and replays: 6 coinbases, 5 counted.
	a := mainnetAdapter(t)
	ord, _ := OrderByParent(all, OrderOptions{})
	m := newModel()
	for i, blk := range ord.Blocks {
		b, err := a.Convert(blk, ord.Height(i))
		if err != nil {
			t.Fatal(err)
		}
		if err := m.apply(b); err != nil {
			t.Fatalf("height %d: %v", ord.Height(i), err)
		}
	}
	if m.tip.Height != 5 {
		t.Fatalf("tip %s", m.tip)
	}
}

func TestOrderByParentTies(t *testing.T) {
	main := loadFixture(t, fixture0To4)
	a3 := loadFixture(t, fixture3A)[0]
	// Tips 3 and 3A have equal work: the first given wins.
	ord, err := OrderByParent([]*wire.MsgBlock{main[0], main[1], main[2], main[3], a3}, OrderOptions{})
	if err != nil || ord.Blocks[3] != main[3] || len(ord.Stale) != 1 || ord.Stale[0] != a3 {
		t.Fatalf("3 before 3A: %v %v", hashes(ord.Blocks), err)
	}
	ord, err = OrderByParent([]*wire.MsgBlock{a3, main[3], main[2], main[1], main[0]}, OrderOptions{})
	if err != nil || ord.Blocks[3] != a3 || ord.Stale[0] != main[3] {
		t.Fatalf("3A before 3: %v %v", hashes(ord.Blocks), err)
	}
	// A block given twice counts once.
	ord, err = OrderByParent([]*wire.MsgBlock{main[0], main[1], main[1], main[0]}, OrderOptions{})
	if err != nil || len(ord.Blocks) != 2 || len(ord.Stale) != 0 {
		t.Fatalf("duplicates: %v stale %d, %v", hashes(ord.Blocks), len(ord.Stale), err)
	}
}

func TestOrderByParentErrors(t *testing.T) {
	main := loadFixture(t, fixture0To4)
	// Block 2 missing: 3 and 4 do not connect to 0-1.
	if _, err := OrderByParent([]*wire.MsgBlock{main[0], main[1], main[3], main[4]}, OrderOptions{}); !errors.Is(err, ErrNotConnected) {
		t.Errorf("gap: %v, want ErrNotConnected", err)
	}
	ord, err := OrderByParent(nil, OrderOptions{StartHeight: 7})
	if err != nil || len(ord.Blocks) != 0 || ord.StartHeight != 7 {
		t.Errorf("empty: %+v %v", ord, err)
	}
	// A set starting mid-chain gets its heights from StartHeight.
	ord, err = OrderByParent([]*wire.MsgBlock{main[4], main[3]}, OrderOptions{StartHeight: 3})
	if err != nil || ord.Blocks[0] != main[3] || ord.Height(1) != 4 {
		t.Errorf("mid-chain: %v %v", hashes(ord.Blocks), err)
	}
}

func TestBlockWork(t *testing.T) {
	// Difficulty 1 (0x1d00ffff): 2^256 / (0xffff·2^208 + 1) = 4295032833.
	if got := blockWork(0x1d00ffff); got.Cmp(big.NewInt(4295032833)) != 0 {
		t.Errorf("work(1d00ffff) = %s", got)
	}
	// Regtest's 0x207fffff: 2.
	if got := blockWork(0x207fffff); got.Cmp(big.NewInt(2)) != 0 {
		t.Errorf("work(207fffff) = %s", got)
	}
	for _, bits := range []uint32{0, 0x01003456, 0x04923456} { // zero, underflowing, negative
		if got := blockWork(bits); got.Sign() != 0 {
			t.Errorf("work(%08x) = %s, want 0", bits, got)
		}
	}
}

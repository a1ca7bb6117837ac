package bitcoin

import (
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/btcsuite/btcd/chaincfg/chainhash"
	"github.com/btcsuite/btcd/wire"
)

// TestScriptHeightGolden pins the encoding of a height at the boundaries of
// Core's CScript() << height: the small-number opcodes, one to four bytes,
// and a zero byte added when the top bit would read as a sign.
func TestScriptHeightGolden(t *testing.T) {
	for _, c := range []struct {
		height uint64
		hex    string
	}{
		{0, "00"}, {1, "51"}, {16, "60"}, {17, "0111"}, {127, "017f"}, {128, "028000"},
		{255, "02ff00"}, {256, "020001"}, {32767, "02ff7f"}, {32768, "03008000"},
		{227931, "035b7a03"}, // mainnet's first BIP34 block
		{277647, "038f3c04"},
		{8388607, "03ffff7f"}, {8388608, "0400008000"},
		{1<<64 - 1, "09ffffffffffffffff00"},
	} {
		got := hex.EncodeToString(appendScriptHeight(nil, c.height))
		if got != c.hex {
			t.Errorf("height %d: %s, want %s", c.height, got, c.hex)
		}
		if h, ok := scriptHeight(appendScriptHeight(nil, c.height)); !ok || h != c.height {
			t.Errorf("height %d decodes as %d, %v", c.height, h, ok)
		}
	}
	for _, bad := range []string{"", "4c01ff", "0180", "02ff80", "03ffff", "0a00000000000000000000"} {
		b, _ := hex.DecodeString(bad)
		if h, ok := scriptHeight(b); ok {
			t.Errorf("script %q decodes as height %d", bad, h)
		}
	}
}

// TestCheckHeightRealBlocks: block 277647 carries its height, so it cannot be
// placed anywhere else; the two modern blocks carry theirs; early blocks
// carry none and fit any height below activation, but none above it.
func TestCheckHeightRealBlocks(t *testing.T) {
	a := mainnetAdapter(t)
	blk := loadFixture(t, fixture277647)[0]
	if h, ok := a.CoinbaseHeight(blk); !ok || h != 277647 {
		t.Fatalf("CoinbaseHeight of block 277647: %d, %v", h, ok)
	}
	if err := a.CheckHeight(blk, 277647); err != nil {
		t.Fatal(err)
	}
	for _, h := range []uint64{0, 100, 227930, 227931, 277646, 277648, 1 << 40} {
		err := a.CheckHeight(blk, h)
		if !errors.Is(err, ErrInvalidBlock) || !strings.Contains(err.Error(), "at height 277647") {
			t.Errorf("block 277647 placed at %d: %v", h, err)
		}
	}
	// Convert applies Core's rule only: at or above activation.
	if _, err := a.Convert(blk, 277648); !errors.Is(err, ErrInvalidBlock) || !strings.Contains(err.Error(), "277648") {
		t.Errorf("Convert at 277648: %v", err)
	}
	if _, err := a.Convert(blk, 100); err != nil {
		t.Errorf("Convert at 100 (below activation, CheckHeight's business): %v", err)
	}

	for file, height := range map[string]uint64{fixtureLarge: 574200, fixtureSmall: 540107} {
		if h, ok := a.CoinbaseHeight(loadFixture(t, file)[0]); !ok || h != height {
			t.Errorf("%.20s: CoinbaseHeight %d, %v; want %d", file, h, ok, height)
		}
	}

	early := loadFixture(t, fixture0To4)[1]
	if h, ok := a.CoinbaseHeight(early); ok {
		t.Errorf("block 1 (version 1) binds itself to height %d", h)
	}
	for _, h := range []uint64{1, 100, 227930} {
		if err := a.CheckHeight(early, h); err != nil {
			t.Errorf("block 1 at %d, below activation: %v", h, err)
		}
	}
	err := a.CheckHeight(early, 227931)
	if !errors.Is(err, ErrInvalidBlock) || !strings.Contains(err.Error(), "does not begin with its height") {
		t.Errorf("block 1 at 227931: %v", err)
	}
}

// TestCheckHeightNetworks: the activation height of each network.
func TestCheckHeightNetworks(t *testing.T) {
	block := func(script []byte) *wire.MsgBlock {
		cb := wire.NewMsgTx(1)
		cb.AddTxIn(wire.NewTxIn(wire.NewOutPoint(&chainhash.Hash{}, wire.MaxPrevOutIndex), script, nil))
		cb.AddTxOut(wire.NewTxOut(50e8, p2pkh1))
		return synthBlock(chainhash.Hash{7}, cb)
	}
	noHeight := block([]byte{0x01, 0xaa}) // reads as height 170
	for _, c := range []struct {
		network Network
		first   uint64
	}{{Mainnet, 227931}, {Testnet, 21111}, {Signet, 1}, {Regtest, 1}} {
		a, err := NewAdapter(Options{Network: c.network})
		if err != nil {
			t.Fatal(err)
		}
		if c.first > 1 {
			if err := a.CheckHeight(noHeight, c.first-1); err != nil {
				t.Errorf("%s: below activation: %v", c.network, err)
			}
		}
		if err := a.CheckHeight(noHeight, c.first); !errors.Is(err, ErrInvalidBlock) {
			t.Errorf("%s: at activation without the height: %v", c.network, err)
		}
		at := block(appendScriptHeight([]byte(nil), c.first+5))
		if err := a.CheckHeight(at, c.first+5); err != nil {
			t.Errorf("%s: height %d: %v", c.network, c.first+5, err)
		}
		if _, err := a.Convert(at, c.first+5); err != nil {
			t.Errorf("%s: Convert at %d: %v", c.network, c.first+5, err)
		}
		err = a.CheckHeight(at, c.first+6)
		if !errors.Is(err, ErrInvalidBlock) || !strings.Contains(err.Error(), "not at height") {
			t.Errorf("%s: height %d block at %d: %v", c.network, c.first+5, c.first+6, err)
		}
	}
}

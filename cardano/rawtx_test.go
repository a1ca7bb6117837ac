package cardano

import (
	"errors"
	"reflect"
	"testing"

	"github.com/blinklabs-io/gouroboros/ledger"
	"github.com/blinklabs-io/gouroboros/ledger/common"
)

// TestConvertTx: every transaction of the fixture blocks from Shelley on,
// as a standalone transaction (the library's encoding of it), converts to
// the transaction Convert made of its block.
func TestConvertTx(t *testing.T) {
	a := newAdapter(t)
	n := 0
	for _, f := range loadFixtures(t) {
		era, inner, err := splitTagged(f.tagged)
		if err != nil || era < EraShelley {
			continue
		}
		b, err := a.Convert(f.tagged)
		if err != nil {
			t.Fatal(err)
		}
		lb, err := ledger.NewBlockFromCbor(uint(era), inner, common.VerifyConfig{SkipBodyHashValidation: true})
		if err != nil {
			t.Fatal(err)
		}
		for i, ltx := range lb.Transactions() {
			got, err := a.ConvertTx(ltx.Cbor())
			if err != nil {
				t.Fatalf("%s tx %d: %v", f.name, i, err)
			}
			if !reflect.DeepEqual(got, b.Chain.Txs[i]) {
				t.Fatalf("%s tx %d:\n got %+v\nwant %+v", f.name, i, got, b.Chain.Txs[i])
			}
			n++
		}
	}
	if n == 0 {
		t.Fatal("no transaction converted")
	}
	for _, bad := range [][]byte{nil, {0x83}, {0xff}, {0x84, 0xa0}} {
		if _, err := a.ConvertTx(bad); !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsupported) && !errors.Is(err, ErrUnknownEra) {
			t.Errorf("%x: %v", bad, err)
		}
	}
	t.Logf("%d transactions", n)
}

// FuzzConvertTx: no bytes panic ConvertTx; a failure is one of its classes.
func FuzzConvertTx(f *testing.F) {
	for _, fx := range loadFixtures(f)[40:] {
		era, inner, err := splitTagged(fx.tagged)
		if err != nil || era < EraShelley {
			continue
		}
		if lb, err := ledger.NewBlockFromCbor(uint(era), inner, common.VerifyConfig{SkipBodyHashValidation: true}); err == nil && len(lb.Transactions()) > 0 {
			f.Add(lb.Transactions()[0].Cbor())
		}
	}
	a := newAdapter(f)
	f.Fuzz(func(t *testing.T, raw []byte) {
		if _, err := a.ConvertTx(raw); err != nil && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsupported) && !errors.Is(err, ErrUnknownEra) {
			t.Fatalf("error %v is of no class", err)
		}
	})
}

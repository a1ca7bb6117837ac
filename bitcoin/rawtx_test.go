package bitcoin

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

// TestConvertTx: every non-coinbase transaction of a modern block (segwit
// ones included), serialized as sendrawtransaction takes it, converts to
// the transaction Convert made of the block, unless it has an unspendable
// output, which ConvertTx refuses; a coinbase, trailing bytes and
// truncations are refused.
func TestConvertTx(t *testing.T) {
	a := mainnetAdapter(t)
	blk := loadFixture(t, fixtureSmall)[0]
	b, err := a.Convert(blk, 540107)
	if err != nil {
		t.Fatal(err)
	}
	converted, refused := 0, 0
	for i, mtx := range blk.Transactions {
		var raw bytes.Buffer
		if err := mtx.Serialize(&raw); err != nil {
			t.Fatal(err)
		}
		tx, err := a.ConvertTx(raw.Bytes())
		if i == 0 {
			if !errors.Is(err, ErrInvalidBlock) {
				t.Fatalf("the coinbase converts: %v", err)
			}
			continue
		}
		want := b.Txs[i]
		unspendable := false
		for _, o := range want.Outputs {
			unspendable = unspendable || o.Unspendable
		}
		if unspendable {
			if !errors.Is(err, ErrInvalidBlock) {
				t.Fatalf("tx %d with an unspendable output: %v", i, err)
			}
			refused++
			continue
		}
		if err != nil || !reflect.DeepEqual(tx.Inputs, want.Inputs) || tx.Hash != want.Hash || !reflect.DeepEqual(tx.Outputs, want.Outputs) {
			t.Fatalf("tx %d: %+v %v, want %+v", i, tx, err, want)
		}
		converted++
		if i == 1 {
			if _, err := a.ConvertTx(append(raw.Bytes(), 0)); !errors.Is(err, ErrInvalidBlock) {
				t.Fatalf("a trailing byte: %v", err)
			}
			for n := range raw.Len() {
				if _, err := a.ConvertTx(raw.Bytes()[:n]); !errors.Is(err, ErrInvalidBlock) {
					t.Fatalf("a truncation to %d bytes: %v", n, err)
				}
			}
		}
	}
	if converted < 100 || refused == 0 {
		t.Fatalf("converted %d, refused %d", converted, refused)
	}
}

// FuzzConvertTx: arbitrary bytes never panic ConvertTx; a failure is
// ErrInvalidBlock, and what converts is a transaction with inputs.
func FuzzConvertTx(f *testing.F) {
	blk := loadFixture(f, fixtureSmall)[0]
	for _, mtx := range blk.Transactions[:4] {
		var raw bytes.Buffer
		if err := mtx.Serialize(&raw); err != nil {
			f.Fatal(err)
		}
		f.Add(raw.Bytes())
	}
	a := mainnetAdapter(f)
	f.Fuzz(func(t *testing.T, raw []byte) {
		tx, err := a.ConvertTx(raw)
		if err != nil {
			if !errors.Is(err, ErrInvalidBlock) {
				t.Fatalf("error %v is not ErrInvalidBlock", err)
			}
			return
		}
		if len(tx.Inputs) == 0 && len(tx.Outputs) == 0 && tx.Hash.IsZero() {
			t.Fatalf("%x converts to nothing", raw)
		}
	})
}

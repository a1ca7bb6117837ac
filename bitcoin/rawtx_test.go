package bitcoin

import (
	"bytes"
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/btcsuite/btcd/wire"
)

func serializeTx(t testing.TB, mtx *wire.MsgTx) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := mtx.Serialize(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestConvertTxMatchesBlocks: every non-coinbase transaction of a modern
// block (segwit, witness included in the bytes), serialized alone as a node
// serves it at /rest/tx/<txid>.bin, converts to the transaction the block's
// conversion holds: the same txid (which Convert checked against the
// header's merkle root), inputs and outputs.
func TestConvertTxMatchesBlocks(t *testing.T) {
	a := mainnetAdapter(t)
	blk := loadFixture(t, fixtureLarge)[0]
	b, err := a.Convert(blk, 574200)
	if err != nil {
		t.Fatal(err)
	}
	witness := 0
	for i, mtx := range blk.Transactions[1:] {
		raw := serializeTx(t, mtx)
		if mtx.HasWitness() {
			witness++
		}
		dec, err := DecodeTx(raw)
		if err != nil {
			t.Fatalf("tx %d: %v", i+1, err)
		}
		got, err := a.ConvertTx(dec)
		if err != nil {
			t.Fatalf("tx %d: %v", i+1, err)
		}
		want := b.Txs[i+1]
		if got.Hash != want.Hash || !slices.Equal(got.Inputs, want.Inputs) || !reflect.DeepEqual(got.Outputs, want.Outputs) || got.Coinbase {
			t.Fatalf("tx %d converts to %+v, the block holds %+v", i+1, got, want)
		}
	}
	if witness == 0 {
		t.Fatal("the fixture has no segwit transaction: the test does not check the witness is left out of the txid")
	}
}

// TestConvertTxBlock170: the first transaction between people, as a node
// would serve it alone: its txid, its input (block 9's coinbase) and its
// two outputs, 10 BTC to Hal Finney and 40 BTC back to Satoshi.
func TestConvertTxBlock170(t *testing.T) {
	raw := serializeTx(t, loadFixture(t, fixtureChain14131)[170].Transactions[1])
	dec, err := DecodeTx(raw)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := mainnetAdapter(t).ConvertTx(dec)
	if err != nil {
		t.Fatal(err)
	}
	if tx.Hash.String() != "f4184fc596403b9d638783cf57adfe4c75c605f6356fbc91338530e9831e9e16" {
		t.Fatalf("txid %s", tx.Hash)
	}
	if len(tx.Inputs) != 1 || tx.Inputs[0].TxHash.String() != "0437cd7f8525ceed2324359c2d0ba26006d92d856a9c20fa0241106ee5a597c9" || tx.Inputs[0].Index != 0 {
		t.Fatalf("inputs %v", tx.Inputs)
	}
	if len(tx.Outputs) != 2 || tx.Outputs[0].Address != "1Q2TWHE3GMdB6BZKafqwxXtWAWgFt5Jvm3" || tx.Outputs[0].Value != 10*satoshisPerBTC ||
		tx.Outputs[1].Address != "12cbQLTFMXRnSzktFkuoG3eHoMeFtpTu3S" || tx.Outputs[1].Value != 40*satoshisPerBTC {
		t.Fatalf("outputs %+v", tx.Outputs)
	}
}

// TestDecodeTxRefuses: bytes that are not one whole transaction, and
// transactions that cannot be outside a block, fail with ErrInvalidTx.
func TestDecodeTxRefuses(t *testing.T) {
	a := mainnetAdapter(t)
	chain14131 := loadFixture(t, fixtureChain14131)
	good := serializeTx(t, chain14131[170].Transactions[1])
	coinbase := serializeTx(t, chain14131[170].Transactions[0])
	for name, raw := range map[string][]byte{
		"empty":          nil,
		"truncated":      good[:len(good)-1],
		"trailing byte":  append(slices.Clone(good), 0),
		"over the bound": make([]byte, MaxTxBytes+1),
	} {
		if _, err := DecodeTx(raw); !errors.Is(err, ErrInvalidTx) {
			t.Errorf("%s: DecodeTx = %v, want ErrInvalidTx", name, err)
		}
	}
	mtx, err := DecodeTx(coinbase)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.ConvertTx(mtx); !errors.Is(err, ErrInvalidTx) {
		t.Errorf("a coinbase converted alone: %v, want ErrInvalidTx", err)
	}
	noInputs := wire.NewMsgTx(2)
	noInputs.AddTxOut(wire.NewTxOut(1, []byte{0x51}))
	if _, err := a.ConvertTx(noInputs); !errors.Is(err, ErrInvalidTx) {
		t.Errorf("no inputs: %v, want ErrInvalidTx", err)
	}
}

// FuzzDecodeTx: DecodeTx never panics; what it accepts re-serializes to
// the same bytes, and ConvertTx either refuses it or keeps its outputs'
// count.
func FuzzDecodeTx(f *testing.F) {
	f.Add(serializeTx(f, loadFixture(f, fixtureChain14131)[170].Transactions[1]))
	f.Add(serializeTx(f, loadFixture(f, fixtureSmall)[0].Transactions[1]))
	f.Add([]byte{})
	a := mainnetAdapter(f)
	f.Fuzz(func(t *testing.T, raw []byte) {
		mtx, err := DecodeTx(raw)
		if err != nil {
			return
		}
		if back := serializeTx(t, mtx); !bytes.Equal(back, raw) {
			t.Fatalf("decoded %x, re-serialized %x", raw, back)
		}
		tx, err := a.ConvertTx(mtx)
		if err != nil {
			return
		}
		if len(tx.Outputs) != len(mtx.TxOut) {
			t.Fatalf("%d outputs converted to %d", len(mtx.TxOut), len(tx.Outputs))
		}
	})
}

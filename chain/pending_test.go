package chain_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/utxo-cache/utxo-cache/chain"
)

const h1 = "1111111111111111111111111111111111111111111111111111111111111111"
const h2 = "2222222222222222222222222222222222222222222222222222222222222222"

// TestDecodePending: the body of POST /v1/pending in JSON and CBOR decodes
// to the same Tx and replace flag; what cannot be pending is refused.
func TestDecodePending(t *testing.T) {
	body := `{"hash":"` + h2 + `","inputs":[{"tx_hash":"` + h1 + `","index":1}],"outputs":[{"address":"a","value":"5"}],"replace":true}`
	p, err := chain.DecodePendingJSON([]byte(body), chain.Limits{})
	if err != nil || !p.Replace || p.Tx.Hash.String() != h2 || len(p.Tx.Inputs) != 1 || p.Tx.Outputs[0].Value != 5 {
		t.Fatalf("JSON: %+v %v", p, err)
	}
	c, err := chain.DecodePendingCBOR(chain.AppendTxCBOR(nil, &p.Tx), chain.Limits{})
	if err != nil || c.Replace || !reflect.DeepEqual(c.Tx, p.Tx) {
		t.Fatalf("CBOR: %+v %v", c, err)
	}
	for name, b := range map[string]string{
		"coinbase":       `{"hash":"` + h2 + `","inputs":[{"tx_hash":"` + h1 + `","index":1}],"outputs":[],"coinbase":true}`,
		"invalid":        `{"hash":"` + h2 + `","inputs":[{"tx_hash":"` + h1 + `","index":1}],"outputs":[],"valid":false}`,
		"no input":       `{"hash":"` + h2 + `","inputs":[],"outputs":[]}`,
		"input twice":    `{"hash":"` + h2 + `","inputs":[{"tx_hash":"` + h1 + `","index":1},{"tx_hash":"` + h1 + `","index":1}],"outputs":[]}`,
		"own output":     `{"hash":"` + h2 + `","inputs":[{"tx_hash":"` + h2 + `","index":0}],"outputs":[]}`,
		"replace twice":  `{"hash":"` + h2 + `","inputs":[{"tx_hash":"` + h1 + `","index":1}],"outputs":[],"replace":true,"replace":false}`,
		"replace string": `{"hash":"` + h2 + `","inputs":[{"tx_hash":"` + h1 + `","index":1}],"outputs":[],"replace":"yes"}`,
		"unknown field":  `{"hash":"` + h2 + `","inputs":[{"tx_hash":"` + h1 + `","index":1}],"outputs":[],"x":1}`,
		"bad address":    `{"hash":"` + h2 + `","inputs":[{"tx_hash":"` + h1 + `","index":1}],"outputs":[{"address":"","value":1}]}`,
		"trailing":       `{"hash":"` + h2 + `","inputs":[{"tx_hash":"` + h1 + `","index":1}],"outputs":[]} x`,
		"not an object":  `[]`,
	} {
		if _, err := chain.DecodePendingJSON([]byte(b), chain.Limits{}); !errors.Is(err, chain.ErrInvalidArgument) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := chain.DecodePendingCBOR([]byte{0xa1}, chain.Limits{}); !errors.Is(err, chain.ErrInvalidArgument) {
		t.Errorf("truncated CBOR: %v", err)
	}
}

// FuzzDecodePending: no body panics the decoders; a failure matches
// ErrInvalidArgument or ErrTooLarge; what decodes can be pending and
// round-trips through the CBOR encoding.
func FuzzDecodePending(f *testing.F) {
	f.Add([]byte(`{"hash":"`+h2+`","inputs":[{"tx_hash":"`+h1+`","index":1}],"outputs":[{"address":"a","value":"5"}],"replace":true}`), false)
	tx := chain.Tx{Hash: chain.Hash{2}, Inputs: []chain.OutPoint{{TxHash: chain.Hash{1}}}, Outputs: []chain.Output{{Address: "a", Value: 1}}}
	f.Add(chain.AppendTxCBOR(nil, &tx), true)
	f.Fuzz(func(t *testing.T, data []byte, cbor bool) {
		dec := chain.DecodePendingJSON
		if cbor {
			dec = chain.DecodePendingCBOR
		}
		p, err := dec(data, chain.Limits{})
		if err != nil {
			if !errors.Is(err, chain.ErrInvalidArgument) && !errors.Is(err, chain.ErrTooLarge) {
				t.Fatalf("error %v matches neither class", err)
			}
			return
		}
		if err := chain.CheckPendingTx(&p.Tx); err != nil {
			t.Fatalf("decoded a transaction that cannot be pending: %v", err)
		}
		back, err := chain.DecodeTxCBOR(chain.AppendTxCBOR(nil, &p.Tx), chain.Limits{})
		if err != nil || !strings.EqualFold(back.Hash.String(), p.Tx.Hash.String()) || len(back.Inputs) != len(p.Tx.Inputs) {
			t.Fatalf("round trip: %+v %v", back, err)
		}
	})
}

// TestTxCBORUnspendable: the stored form keeps an unspendable output at its
// index (written with an empty address, which no block-format producer can
// send) and reads it back as unspendable; the block format's own decoders
// still refuse an empty address.
func TestTxCBORUnspendable(t *testing.T) {
	tx := &chain.Tx{Hash: chain.Hash{1}, Inputs: []chain.OutPoint{{TxHash: chain.Hash{2}}}, Outputs: []chain.Output{
		{Value: 0, Unspendable: true},
		{Address: "payee", Value: 7},
	}}
	got, err := chain.DecodeTxCBOR(chain.AppendTxCBOR(nil, tx), chain.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Outputs) != 2 || !got.Outputs[0].Unspendable || got.Outputs[1].Unspendable || got.Outputs[1].Address != "payee" {
		t.Fatalf("decoded outputs %+v", got.Outputs)
	}
	var created []uint32
	got.Creates(func(i uint32, _ *chain.Output, _ bool) { created = append(created, i) })
	if len(created) != 1 || created[0] != 1 {
		t.Fatalf("creates %v, want only index 1", created)
	}
	if _, err := chain.DecodePendingCBOR(chain.AppendTxCBOR(nil, tx), chain.Limits{}); err == nil {
		t.Fatal("POST /v1/pending's decoder took an output without an address")
	}
}

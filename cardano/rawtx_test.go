package cardano

import (
	"errors"
	"reflect"
	"testing"

	"github.com/blinklabs-io/gouroboros/cbor"
	"golang.org/x/crypto/blake2b"

	"github.com/utxo-cache/utxo-cache/chain"
)

// submittedTxs rebuilds, from a Shelley-or-later block's own bytes, each of
// its transactions as a wallet submits it: [body, witnesses, aux or null]
// before Alonzo, [body, witnesses, is_valid, aux or null] from Alonzo on.
// It returns them with the blake2b-256 of each body: the transaction id,
// computed here without the adapter.
func submittedTxs(t testing.TB, era Era, inner []byte) (txs [][]byte, ids []chain.Hash) {
	t.Helper()
	var parts []cbor.RawMessage
	if _, err := cbor.Decode(inner, &parts); err != nil {
		t.Fatal(err)
	}
	var bodies, witnesses []cbor.RawMessage
	if _, err := cbor.Decode(parts[1], &bodies); err != nil {
		t.Fatal(err)
	}
	if _, err := cbor.Decode(parts[2], &witnesses); err != nil {
		t.Fatal(err)
	}
	var aux map[uint64]cbor.RawMessage
	if _, err := cbor.Decode(parts[3], &aux); err != nil {
		t.Fatal(err)
	}
	invalid := map[uint64]bool{}
	if era >= EraAlonzo {
		var idx []uint64
		if _, err := cbor.Decode(parts[4], &idx); err != nil {
			t.Fatal(err)
		}
		for _, i := range idx {
			invalid[i] = true
		}
	}
	for i := range bodies {
		a, ok := aux[uint64(i)]
		if !ok {
			a = cbor.RawMessage{0xf6} // null
		}
		var tx []byte
		if era >= EraAlonzo {
			valid := byte(0xf5)
			if invalid[uint64(i)] {
				valid = 0xf4
			}
			tx = append([]byte{0x84}, bodies[i]...)
			tx = append(tx, witnesses[i]...)
			tx = append(tx, valid)
		} else {
			tx = append([]byte{0x83}, bodies[i]...)
			tx = append(tx, witnesses[i]...)
		}
		tx = append(tx, a...)
		txs = append(txs, tx)
		ids = append(ids, chain.Hash(blake2b.Sum256(bodies[i])))
	}
	return txs, ids
}

// TestConvertTxMatchesBlocks: every transaction of every Shelley-or-later
// fixture block, submitted alone, converts to the transaction the block's
// conversion holds, with the id computed from its body here.
func TestConvertTxMatchesBlocks(t *testing.T) {
	a := newAdapter(t)
	n := 0
	for _, f := range loadFixtures(t) {
		era, inner, err := splitTagged(f.tagged)
		if err != nil {
			t.Fatal(err)
		}
		if era < EraShelley {
			continue
		}
		b, err := a.Convert(f.tagged)
		if err != nil {
			t.Fatalf("%s: %v", f.name, err)
		}
		raws, ids := submittedTxs(t, era, inner)
		if len(raws) != len(b.Chain.Txs) {
			t.Fatalf("%s: %d bodies, %d converted transactions", f.name, len(raws), len(b.Chain.Txs))
		}
		for i, raw := range raws {
			got, err := a.ConvertTx(raw)
			if err != nil {
				t.Fatalf("%s tx %d: %v", f.name, i, err)
			}
			if got.Hash != ids[i] {
				t.Fatalf("%s tx %d: id %s, its body hashes to %s", f.name, i, got.Hash, ids[i])
			}
			if !reflect.DeepEqual(*got, b.Chain.Txs[i]) {
				t.Fatalf("%s tx %d converts to\n%+v\nthe block holds\n%+v", f.name, i, *got, b.Chain.Txs[i])
			}
			n++
		}
	}
	if n == 0 {
		t.Fatal("no transaction checked")
	}
	t.Logf("%d transactions", n)
}

// TestConvertTxRefuses: bytes that are no transaction fail with
// ErrCorrupt; nothing panics.
func TestConvertTxRefuses(t *testing.T) {
	a := newAdapter(t)
	for name, raw := range map[string][]byte{
		"empty":          nil,
		"an integer":     {0x01},
		"empty array":    {0x80},
		"over the bound": make([]byte, MaxTxBytes+1),
		"truncated":      {0x84, 0xa0},
	} {
		if _, err := a.ConvertTx(raw); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
}

// FuzzConvertTx: ConvertTx never panics, and what it accepts has an id and
// inputs or collateral.
func FuzzConvertTx(f *testing.F) {
	for _, fx := range loadFixtures(f) {
		era, inner, err := splitTagged(fx.tagged)
		if err != nil || era < EraShelley {
			continue
		}
		raws, _ := submittedTxs(f, era, inner)
		for _, raw := range raws[:min(len(raws), 2)] {
			f.Add(raw)
		}
	}
	f.Add([]byte{0x84})
	a := newAdapter(f)
	f.Fuzz(func(t *testing.T, raw []byte) {
		tx, err := a.ConvertTx(raw)
		if err != nil {
			return
		}
		if tx.Hash == (chain.Hash{}) {
			t.Fatal("an accepted transaction without an id")
		}
	})
}

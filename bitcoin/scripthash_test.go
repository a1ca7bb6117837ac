package bitcoin

import (
	"bytes"
	"crypto/sha256"
	"testing"

	"github.com/btcsuite/btcd/btcutil"
	"github.com/btcsuite/btcd/chaincfg"
	"github.com/btcsuite/btcd/txscript"

	"github.com/utxo-cache/utxo-cache/chain"
)

// TestScriptHashOfFixtures checks, on every spendable output of the
// fixtures, that the script hash derived from the output's address is
// SHA-256 of its script, except for P2PK, which is listed under the P2PKH
// script of its key (btcd's PayToAddrScript builds that script,
// independently of AddressScript).
func TestScriptHashOfFixtures(t *testing.T) {
	a := mainnetAdapter(t)
	classes := map[txscript.ScriptClass]int{}
	for _, name := range []string{fixtureChain14131, fixture277647, fixtureLarge, fixtureSmall} {
		for _, blk := range loadFixture(t, name) {
			for _, tx := range blk.Transactions {
				for _, out := range tx.TxOut {
					if isUnspendable(out.PkScript) {
						continue
					}
					addr := a.Address(out.PkScript)
					got, ok := ScriptHashOf(addr)
					if !ok {
						t.Fatalf("ScriptHashOf(%q) failed (script %x)", addr, out.PkScript)
					}
					class := txscript.GetScriptClass(out.PkScript)
					classes[class]++
					want := sha256.Sum256(out.PkScript)
					if class == txscript.PubKeyTy {
						pkh, err := btcutil.NewAddressPubKeyHash(btcutil.Hash160(out.PkScript[1:len(out.PkScript)-1]), &chaincfg.MainNetParams)
						if err != nil {
							t.Fatal(err)
						}
						s, err := txscript.PayToAddrScript(pkh)
						if err != nil {
							t.Fatal(err)
						}
						want = sha256.Sum256(s)
					}
					if got != want {
						t.Fatalf("%s: script hash %x, want %x (script %x)", addr, got, want, out.PkScript)
					}
					var values [][]byte
					ScriptHashValues(&chain.Utxo{Output: chain.Output{Address: addr}}, func(v []byte) { values = append(values, bytes.Clone(v)) })
					if len(values) != 1 || !bytes.Equal(values[0], want[:]) {
						t.Fatalf("ScriptHashValues(%s) = %x", addr, values)
					}
				}
			}
		}
	}
	t.Logf("script classes: %v", classes)
	for _, c := range []txscript.ScriptClass{txscript.PubKeyTy, txscript.PubKeyHashTy, txscript.ScriptHashTy, txscript.WitnessV0PubKeyHashTy, txscript.WitnessV0ScriptHashTy} {
		if classes[c] == 0 {
			t.Errorf("no %v output in the fixtures: the test covers less than it says", c)
		}
	}
}

// TestAddressScriptOtherNetworks checks testnet and regtest addresses and
// taproot against btcd's decoder, and refusals.
func TestAddressScriptOtherNetworks(t *testing.T) {
	for _, tc := range []struct {
		addr   string
		params *chaincfg.Params
	}{
		{"mipcBbFg9gMiCh81Kj8tqqdgoZub1ZJRfn", &chaincfg.TestNet3Params},
		{"2MzQwSSnBHWHqSAqtTVQ6v47XtaisrJa1Vc", &chaincfg.TestNet3Params},
		{"tb1qw508d6qejxtdg4y5r3zarvary0c5xw7kxpjzsx", &chaincfg.TestNet3Params},
		{"bcrt1qw508d6qejxtdg4y5r3zarvary0c5xw7kygt080", &chaincfg.RegressionNetParams},
		{"bc1p0xlxvlhemja6c4dqv22uapctqupfhlxm9h8z3k2e72q4k9hcz7vqzk5jj0", &chaincfg.MainNetParams},
		{"bc1qrp33g0q5c5txsp9arysrx4k6zdkfs4nce4xj0gdcccefvpysxf3qccfmv3", &chaincfg.MainNetParams},
	} {
		dec, err := btcutil.DecodeAddress(tc.addr, tc.params)
		if err != nil {
			t.Fatalf("btcutil.DecodeAddress(%s): %v", tc.addr, err)
		}
		want, err := txscript.PayToAddrScript(dec)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := AddressScript(tc.addr)
		if !ok || !bytes.Equal(got, want) {
			t.Errorf("AddressScript(%s) = %x, %v; want %x", tc.addr, got, ok, want)
		}
	}
	for _, bad := range []string{"", "1", "1A1zP1eP5QGefi2DMPTfTL5SLmv7DivfNb", "BC1QW508D6QEJXTDG4Y5R3ZARVARY0C5XW7KV8F3T4",
		"bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t5", "script:00", "addr1qx2fxv2umyhttkxyxp8x0dlpdt3k6cwng5pxj3jhsydzer3n0d3vllmyqwsx5wktcd8cc3sq835lu7drv2xwl2wywfgse35a3x",
		"script:" + "AB" + string(bytes.Repeat([]byte("00"), 31))} {
		if _, ok := ScriptHashOf(bad); ok {
			t.Errorf("ScriptHashOf(%q) succeeded", bad)
		}
	}
	h := sha256.Sum256([]byte{0x51})
	if got, ok := ScriptHashOf(fallbackAddress([]byte{0x51})); !ok || got != h {
		t.Errorf("fallback address: %x, %v", got, ok)
	}
}

// FuzzScriptHashOf: never panics, and what it accepts as a standard
// address round-trips through scriptAddress.
func FuzzScriptHashOf(f *testing.F) {
	for _, s := range []string{"1A1zP1eP5QGefi2DMPTfTL5SLmv7DivfNa", "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4", "3J98t1WpEZ73CNmQviecrnyiWrnqRhWNLy", "script:" + string(bytes.Repeat([]byte("ab"), 32))} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ScriptHashOf(s)
		script, ok := AddressScript(s)
		if !ok {
			return
		}
		if back := scriptAddress(script, &chaincfg.MainNetParams); back != s {
			if back2 := scriptAddress(script, &chaincfg.TestNet3Params); back2 != s {
				if back3 := scriptAddress(script, &chaincfg.RegressionNetParams); back3 != s {
					t.Fatalf("AddressScript(%q) = %x, which maps back to %q", s, script, back)
				}
			}
		}
	})
}

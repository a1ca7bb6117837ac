package bitcoin

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/btcsuite/btcd/btcutil"
	"github.com/btcsuite/btcd/chaincfg"
	"github.com/btcsuite/btcd/txscript"
)

func mustHex(tb testing.TB, s string) []byte {
	tb.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func fallbackOf(script []byte) string {
	sum := sha256.Sum256(script)
	return "script:" + hex.EncodeToString(sum[:])
}

// addressCases are mainnet scripts with their expected addresses. Real
// outputs name their outpoint; the rest are BIP173/BIP350 test vectors or
// constructed scripts.
var addressCases = []struct {
	name   string
	script string
	want   string // "" means the "script:" fallback
	// decodable: btcutil can decode want back to the same script (or, for
	// P2PK, to the P2PKH script of the key), an independent cross-check.
	decodable bool
}{
	{"p2pk uncompressed (genesis coinbase)",
		"4104678afdb0fe5548271967f1a67130b7105cd6a828e03909a67962e0ea1f61deb649f6bc3f4cef38c4f35504e51ec112de5c384df7ba0b8d578a4c702b6bf11d5fac",
		"1A1zP1eP5QGefi2DMPTfTL5SLmv7DivfNa", true},
	{"p2pk uncompressed (block 9 coinbase)",
		"410411db93e1dcdb8a016b49840f8c53bc1eb68a382e97b1482ecad7b148a6909a5cb2e0eaddfb84ccf9744464f82e160bfa9b8b64f9d4c03f999b8643f656b412a3ac",
		"12cbQLTFMXRnSzktFkuoG3eHoMeFtpTu3S", true},
	{"p2pk compressed (0d1e55aa…ebdd:0)",
		"210296270f394140640f8fa15684fc11255371abb6b9f253416ea2734e34607799c4ac",
		"13XpsmJszDj3GA7rg59pP2bqovU6gk3tLU", true},
	{"p2pk key not on the curve is still hashed as written",
		"21" + "02" + strings.Repeat("ff", 32) + "ac",
		"14kDNktHa2gEVxhtS2upv9tpZQGhUnyHHd", true},
	{"p2pkh (277647 0fc1f998…07ea:0)",
		"76a91427a1f12771de5cc3b73941664b2537c15316be4388ac",
		"14cZMQk89mRYQkDEj8Rn25AnGoBi5H6uer", true},
	{"p2sh (a80bb6ae…c8d1:0)",
		"a914f7af43209e948e90019a0303653d042ee97a05ee87",
		"3QGenMj5hD4LBp24xow1hsagmMDjgnDpoo", true},
	{"p2wpkh (57233bf4…0d79:0)",
		"001497cfc76442fe717f2a3f0cc9c175f7561b661997",
		"bc1qjl8uwezzlech723lpnyuza0h2cdkvxvh54v3dn", true},
	{"p2wpkh (BIP173 vector)",
		"0014751e76e8199196d454941c45d1b3a323f1433bd6",
		"bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4", true},
	{"p2wsh (0ed31a69…9901:1)",
		"0020701a8d401c84fb13e6baf169d59684e17abd9fa216c8cc5b9fc63d622ff8c58d",
		"bc1qwqdg6squsna38e46795at95yu9atm8azzmyvckulcc7kytlcckxswvvzej", true},
	{"p2tr (BIP350 vector, key G)",
		"512079be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798",
		"bc1p0xlxvlhemja6c4dqv22uapctqupfhlxm9h8z3k2e72q4k9hcz7vqzk5jj0", true},
	{"p2a anchor (witness v1, 2 bytes)", "51024e73", "bc1pfeessrawgf", false},
	{"witness v16 (BIP350 vector)", "6002751e", "bc1sw50qgdz25j", false},
	{"witness v1, 40 bytes (BIP350 vector)",
		"5128751e76e8199196d454941c45d1b3a323f1433bd6751e76e8199196d454941c45d1b3a323f1433bd6",
		"bc1pw508d6qejxtdg4y5r3zarvary0c5xw7kw508d6qejxtdg4y5r3zarvary0c5xw7kt5nd6y", false},
	{"witness v0 of 25 bytes is no address", "0019" + strings.Repeat("ab", 25), "", false},
	{"witness program of 41 bytes is no address", "5129" + strings.Repeat("ab", 41), "", false},
	{"bare multisig 1-of-2",
		"5121" + "0296270f394140640f8fa15684fc11255371abb6b9f253416ea2734e34607799c4" +
			"21" + "0279be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798" + "52ae",
		"", false},
	{"op_return (spendability is not Address's concern)", "6a0568656c6c6f", "", false},
	{"empty script", "", "", false},
	{"unparseable RSK tag (5301a783…63ed:2)",
		"52534b424c4f434b3ae3fc068128effed4a212959a1f8fde5d7caa01226071d40c530b99f90e099ed5", "", false},
}

func TestAddressMainnet(t *testing.T) {
	a := mainnetAdapter(t)
	for _, tc := range addressCases {
		t.Run(tc.name, func(t *testing.T) {
			script := mustHex(t, tc.script)
			want := tc.want
			if want == "" {
				want = fallbackOf(script)
			}
			got := a.Address(script)
			if got != want {
				t.Fatalf("Address(%s) = %s, want %s", tc.script, got, want)
			}
			if tc.decodable {
				crossCheckAddress(t, script, got, &chaincfg.MainNetParams)
			}
		})
	}
	// The fallback of the empty script is SHA-256 of nothing.
	if got := a.Address(nil); got != "script:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" {
		t.Fatalf("Address(nil) = %s", got)
	}
}

// crossCheckAddress decodes addr with btcutil and checks that it pays to
// script (or, for a P2PK script, to the P2PKH script of its key).
func crossCheckAddress(t *testing.T, script []byte, addr string, params *chaincfg.Params) {
	t.Helper()
	dec, err := btcutil.DecodeAddress(addr, params)
	if err != nil {
		t.Fatalf("btcutil cannot decode %s: %v", addr, err)
	}
	if !dec.IsForNet(params) {
		t.Fatalf("%s is not an address of %s", addr, params.Name)
	}
	want := script
	if txscript.GetScriptClass(script) == txscript.PubKeyTy {
		pkh, err := btcutil.NewAddressPubKeyHash(btcutil.Hash160(script[1:len(script)-1]), params)
		if err != nil {
			t.Fatal(err)
		}
		if want, err = txscript.PayToAddrScript(pkh); err != nil {
			t.Fatal(err)
		}
	}
	got, err := txscript.PayToAddrScript(dec)
	if err != nil {
		t.Fatalf("PayToAddrScript(%s): %v", addr, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s pays to %x, want %x", addr, got, want)
	}
}

// TestAddressNetworks checks that every network encodes with its own
// prefixes, and that btcutil decodes the result back to the script.
func TestAddressNetworks(t *testing.T) {
	scripts := map[string]string{
		"p2pk":   "210296270f394140640f8fa15684fc11255371abb6b9f253416ea2734e34607799c4ac",
		"p2pkh":  "76a91427a1f12771de5cc3b73941664b2537c15316be4388ac",
		"p2sh":   "a914f7af43209e948e90019a0303653d042ee97a05ee87",
		"p2wpkh": "0014751e76e8199196d454941c45d1b3a323f1433bd6",
		"p2wsh":  "0020701a8d401c84fb13e6baf169d59684e17abd9fa216c8cc5b9fc63d622ff8c58d",
		"p2tr":   "512079be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798",
	}
	for _, tc := range []struct {
		net      Network
		params   *chaincfg.Params
		prefixes map[string]string // script kind -> address prefix
	}{
		{Testnet, &chaincfg.TestNet3Params, map[string]string{"p2pk": "m", "p2pkh": "m", "p2sh": "2", "p2wpkh": "tb1q", "p2wsh": "tb1q", "p2tr": "tb1p"}},
		{Signet, &chaincfg.SigNetParams, map[string]string{"p2pk": "m", "p2pkh": "m", "p2sh": "2", "p2wpkh": "tb1q", "p2wsh": "tb1q", "p2tr": "tb1p"}},
		{Regtest, &chaincfg.RegressionNetParams, map[string]string{"p2pk": "m", "p2pkh": "m", "p2sh": "2", "p2wpkh": "bcrt1q", "p2wsh": "bcrt1q", "p2tr": "bcrt1p"}},
	} {
		a, err := NewAdapter(Options{Network: tc.net})
		if err != nil {
			t.Fatal(err)
		}
		for kind, s := range scripts {
			script := mustHex(t, s)
			got := a.Address(script)
			if !strings.HasPrefix(got, tc.prefixes[kind]) {
				t.Errorf("%s %s: %s lacks prefix %q", tc.net, kind, got, tc.prefixes[kind])
			}
			t.Run(string(tc.net)+"/"+kind, func(t *testing.T) { crossCheckAddress(t, script, got, tc.params) })
		}
	}
	// BIP173's testnet vector.
	a, _ := NewAdapter(Options{Network: Testnet})
	if got := a.Address(mustHex(t, scripts["p2wpkh"])); got != "tb1qw508d6qejxtdg4y5r3zarvary0c5xw7kxpjzsx" {
		t.Errorf("testnet p2wpkh = %s", got)
	}
}

func TestIsUnspendable(t *testing.T) {
	for _, tc := range []struct {
		script string
		want   bool
	}{
		{"6a", true}, // bare OP_RETURN
		{"6a24aa21a9ed" + strings.Repeat("00", 32), true}, // witness commitment
		{"", false},     // empty: anyone can spend with a true scriptSig
		{"00", false},   // OP_0: fails at execution, but Core keeps it
		{"526a", false}, // OP_RETURN not first
		{"4c", false},   // unparseable (truncated push): Core keeps it
		{strings.Repeat("61", 10000), false},
		{strings.Repeat("61", 10001), true}, // over MAX_SCRIPT_SIZE
	} {
		if got := isUnspendable(mustHex(t, tc.script)); got != tc.want {
			name := tc.script
			if len(name) > 16 {
				name = name[:16] + "…"
			}
			t.Errorf("isUnspendable(%s) = %v, want %v", name, got, tc.want)
		}
	}
}

func TestParseNetwork(t *testing.T) {
	for in, want := range map[string]Network{
		"mainnet": Mainnet, "main": Mainnet, "MAINNET": Mainnet,
		"testnet": Testnet, "testnet3": Testnet, "test": Testnet,
		"signet": Signet, "regtest": Regtest,
	} {
		got, err := ParseNetwork(in)
		if err != nil || got != want {
			t.Errorf("ParseNetwork(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "testnet4", "simnet", "bitcoin"} {
		if _, err := ParseNetwork(in); !errors.Is(err, ErrUnknownNetwork) {
			t.Errorf("ParseNetwork(%q) error = %v, want ErrUnknownNetwork", in, err)
		}
	}
	if _, err := NewAdapter(Options{Network: "simnet"}); !errors.Is(err, ErrUnknownNetwork) {
		t.Errorf("NewAdapter(simnet) error = %v", err)
	}
	a, err := NewAdapter(Options{})
	if err != nil || a.Network() != Mainnet {
		t.Errorf("zero Options: network %q, %v", a.Network(), err)
	}
}

// referenceAddress derives an address with txscript.ExtractPkScriptAddrs and
// btcutil's encoders, independently of scriptAddress. ok is false for the
// scripts ExtractPkScriptAddrs gives no single address.
func referenceAddress(script []byte, params *chaincfg.Params) (string, bool) {
	class, addrs, _, err := txscript.ExtractPkScriptAddrs(script, params)
	if err != nil || len(addrs) != 1 {
		return "", false
	}
	switch class {
	case txscript.PubKeyTy:
		return addrs[0].(*btcutil.AddressPubKey).AddressPubKeyHash().EncodeAddress(), true
	case txscript.PubKeyHashTy, txscript.ScriptHashTy,
		txscript.WitnessV0PubKeyHashTy, txscript.WitnessV0ScriptHashTy, txscript.WitnessV1TaprootTy:
		return addrs[0].EncodeAddress(), true
	}
	return "", false
}

// TestAddressAgainstReference compares Address with referenceAddress on
// every output of every fixture block.
func TestAddressAgainstReference(t *testing.T) {
	a := mainnetAdapter(t)
	counts := map[string]int{}
	for _, name := range []string{fixtureChain14131, fixture277647, fixtureLarge, fixtureSmall, fixture3A, fixture4A, fixture5A} {
		for _, blk := range loadFixture(t, name) {
			for _, tx := range blk.Transactions {
				for j, out := range tx.TxOut {
					got := a.Address(out.PkScript)
					want, ok := referenceAddress(out.PkScript, &chaincfg.MainNetParams)
					switch {
					case ok && got != want:
						t.Fatalf("%s:%d script %x: %s, reference %s", tx.TxHash(), j, out.PkScript, got, want)
					case ok:
						counts[txscript.GetScriptClass(out.PkScript).String()]++
					case got != fallbackOf(out.PkScript):
						t.Fatalf("%s:%d script %x: %s, want the fallback", tx.TxHash(), j, out.PkScript, got)
					default:
						counts["fallback"]++
					}
				}
			}
		}
	}
	t.Logf("outputs by kind: %v", counts)
	for _, kind := range []string{"pubkey", "pubkeyhash", "scripthash", "witness_v0_keyhash", "witness_v0_scripthash", "fallback"} {
		if counts[kind] == 0 {
			t.Errorf("no %s output in the fixtures", kind)
		}
	}
}

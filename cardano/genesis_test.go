package cardano

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/blake2b"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/internal/textenc"
)

func openGenesis(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixtureDir(), name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// genesisFacts are a Byron genesis file's balance count and lovelace total,
// read straight from its JSON.
func genesisFacts(t *testing.T, raw []byte) (int, *big.Int) {
	t.Helper()
	var g map[string]json.RawMessage
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	n, total := 0, new(big.Int)
	for _, k := range []string{"avvmDistr", "nonAvvmBalances"} {
		var m map[string]string
		if err := json.Unmarshal(g[k], &m); err != nil {
			t.Fatal(err)
		}
		for _, v := range m {
			x, ok := new(big.Int).SetString(v, 10)
			if !ok {
				t.Fatalf("%s balance %q", k, v)
			}
			total.Add(total, x)
			n++
		}
	}
	return n, total
}

func sumTxs(txs []chain.Tx) *big.Int {
	total := new(big.Int)
	for _, tx := range txs {
		total.Add(total, new(big.Int).SetUint64(tx.Outputs[0].Value))
	}
	return total
}

// TestByronGenesisMainnet: mainnet's Byron genesis gives one output per
// balance of the file (count and lovelace total from the JSON itself), each
// the only output of a transaction with no inputs; the known AVVM output
// 0ae3da29…7616#0 is Ae2tdPwUPEZKQuZh2UndEoTKEakMYHGNjJVYmNZgJk2qqgHouxDsA5oT83n
// with 2,463,071,701,000,000 lovelace (which checks the redeem address
// derivation byte for byte: its hash is of the derived address's CBOR), and
// every id is blake2b-256 of its address's bytes.
func TestByronGenesisMainnet(t *testing.T) {
	raw := openGenesis(t, "mainnet-byron-genesis.json")
	wantN, wantTotal := genesisFacts(t, raw)
	txs, err := ByronGenesisTxs(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if len(txs) != wantN || wantN != 14505 {
		t.Fatalf("%d outputs, the file has %d balances (want 14505)", len(txs), wantN)
	}
	if got := sumTxs(txs); got.Cmp(wantTotal) != 0 {
		t.Fatalf("total %s lovelace, the file's is %s", got, wantTotal)
	}
	known, _ := hex.DecodeString("0ae3da29711600e94a33fb7441d2e76876a9a1e98b5ebdefbf2e3bc535617616")
	found := false
	for i, tx := range txs {
		if len(tx.Inputs) != 0 || len(tx.Outputs) != 1 || tx.Coinbase {
			t.Fatalf("tx %d: %d inputs, %d outputs, coinbase %v", i, len(tx.Inputs), len(tx.Outputs), tx.Coinbase)
		}
		addrBytes, err := textenc.DecodeBase58(tx.Outputs[0].Address)
		if err != nil || !bytes.HasPrefix(addrBytes, []byte{0x82, 0xd8, 0x18}) {
			t.Fatalf("tx %d address %q: %v", i, tx.Outputs[0].Address, err)
		}
		if chain.Hash(blake2b.Sum256(addrBytes)) != tx.Hash {
			t.Fatalf("tx %d: id %s is not blake2b-256 of its address bytes", i, tx.Hash)
		}
		if i > 0 && bytes.Compare(txs[i-1].Hash[:], tx.Hash[:]) >= 0 {
			t.Fatalf("not sorted by hash at %d", i)
		}
		if bytes.Equal(tx.Hash[:], known) {
			found = true
			if tx.Outputs[0].Address != "Ae2tdPwUPEZKQuZh2UndEoTKEakMYHGNjJVYmNZgJk2qqgHouxDsA5oT83n" || tx.Outputs[0].Value != 2_463_071_701_000_000 {
				t.Fatalf("known output: %s %d", tx.Outputs[0].Address, tx.Outputs[0].Value)
			}
		}
	}
	if !found {
		t.Fatal("the known output 0ae3da29…7616#0 is missing")
	}
}

// TestByronGenesisPreview: preview's non-AVVM balances come back with the
// file's own address strings and amounts.
func TestByronGenesisPreview(t *testing.T) {
	raw := openGenesis(t, "preview-byron-genesis.json")
	var g struct{ NonAvvmBalances map[string]string }
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	txs, err := ByronGenesisTxs(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if len(txs) != len(g.NonAvvmBalances) || len(txs) != 8 {
		t.Fatalf("%d outputs, the file has %d balances (want 8)", len(txs), len(g.NonAvvmBalances))
	}
	for _, tx := range txs {
		want, ok := g.NonAvvmBalances[tx.Outputs[0].Address]
		if !ok || want != new(big.Int).SetUint64(tx.Outputs[0].Value).String() {
			t.Fatalf("output %s %d is not a balance of the file", tx.Outputs[0].Address, tx.Outputs[0].Value)
		}
	}
}

// TestShelleyGenesis: the real files have no initial funds; a file with
// two gives their bech32 addresses, amounts and blake2b-256 ids, and
// GenesisBlock joins them with Byron's at height 0; a reward address is
// refused.
func TestShelleyGenesis(t *testing.T) {
	for _, name := range []string{"mainnet-shelley-genesis.json", "preview-shelley-genesis.json"} {
		txs, err := ShelleyGenesisTxs(bytes.NewReader(openGenesis(t, name)))
		if err != nil || len(txs) != 0 {
			t.Fatalf("%s: %d outputs, %v; want none", name, len(txs), err)
		}
	}
	a := "60" + strings.Repeat("11", 28) // enterprise, testnet
	b := "61" + strings.Repeat("22", 28) // enterprise, mainnet
	file := `{"networkMagic": 42, "initialFunds": {"` + a + `": 1000000, "` + b + `": 18446744073709551615}}`
	txs, err := ShelleyGenesisTxs(strings.NewReader(file))
	if err != nil || len(txs) != 2 {
		t.Fatalf("%d outputs, %v", len(txs), err)
	}
	want := map[string]uint64{a: 1000000, b: 1<<64 - 1}
	for _, tx := range txs {
		var hexAddr string
		for h := range want {
			raw, _ := hex.DecodeString(h)
			if chain.Hash(blake2b.Sum256(raw)) == tx.Hash {
				hexAddr = h
			}
		}
		prefix := map[string]string{a: "addr_test1", b: "addr1"}[hexAddr]
		if hexAddr == "" || tx.Outputs[0].Value != want[hexAddr] || !strings.HasPrefix(tx.Outputs[0].Address, prefix) {
			t.Fatalf("output %s %s %d", tx.Hash, tx.Outputs[0].Address, tx.Outputs[0].Value)
		}
	}
	byron, err := ByronGenesisTxs(bytes.NewReader(openGenesis(t, "preview-byron-genesis.json")))
	if err != nil {
		t.Fatal(err)
	}
	blk, err := GenesisBlock(chain.Hash{7}, byron, txs)
	if err != nil || blk.Height != 0 || blk.Hash != (chain.Hash{7}) || len(blk.Txs) != 10 {
		t.Fatalf("genesis block: %+v, %v", blk, err)
	}
	if _, err := GenesisBlock(chain.Hash{7}, txs, txs); !errors.Is(err, ErrBadGenesis) {
		t.Fatalf("one address twice: %v, want ErrBadGenesis", err)
	}
	reward := `{"networkMagic": 42, "initialFunds": {"e0` + strings.Repeat("11", 28) + `": 1}}`
	if _, err := ShelleyGenesisTxs(strings.NewReader(reward)); !errors.Is(err, ErrBadGenesis) {
		t.Fatalf("reward address: %v, want ErrBadGenesis", err)
	}
}

// TestGenesisBadFiles: files that do not parse, lack their keys, or hold a
// bad key, address or amount are refused with ErrBadGenesis.
func TestGenesisBadFiles(t *testing.T) {
	good := "Ae2tdPwUPEZKQuZh2UndEoTKEakMYHGNjJVYmNZgJk2qqgHouxDsA5oT83n"
	badCRC := []byte(good) // change the last character: the CRC field breaks
	badCRC[len(badCRC)-1] = 'm'
	byron := func(avvm, non string) string {
		return `{"avvmDistr": {` + avvm + `}, "nonAvvmBalances": {` + non + `}, "protocolConsts": {"protocolMagic": 2}}`
	}
	for name, file := range map[string]string{
		"empty":             "",
		"not json":          "avvmDistr",
		"truncated":         byron("", "")[:40],
		"trailing data":     byron("", "") + "{}",
		"no keys":           `{"protocolConsts": {"protocolMagic": 2}}`,
		"no magic":          `{"avvmDistr": {}, "nonAvvmBalances": {}}`,
		"short redeem key":  byron(`"AAAA": "1"`, ""),
		"not base64":        byron(`"!!!": "1"`, ""),
		"negative amount":   byron("", `"`+good+`": "-1"`),
		"fraction":          byron("", `"`+good+`": "1.5"`),
		"over 2^64":         byron("", `"`+good+`": "18446744073709551616"`),
		"amount not string": byron("", `"`+good+`": 5`),
		"bad base58":        byron("", `"0OIl": "1"`),
		"bad crc":           byron("", `"`+string(badCRC)+`": "1"`),
		"not an address":    byron("", `"`+textenc.Base58([]byte{1, 2, 3})+`": "1"`),
	} {
		if _, err := ByronGenesisTxs(strings.NewReader(file)); !errors.Is(err, ErrBadGenesis) {
			t.Errorf("byron %s: %v, want ErrBadGenesis", name, err)
		}
	}
	for name, file := range map[string]string{
		"not json":     "{",
		"no magic":     `{"initialFunds": {}}`,
		"bad hex":      `{"networkMagic": 1, "initialFunds": {"6x": 1}}`,
		"empty addr":   `{"networkMagic": 1, "initialFunds": {"": 1}}`,
		"negative":     `{"networkMagic": 1, "initialFunds": {"60` + strings.Repeat("11", 28) + `": -1}}`,
		"string value": `{"networkMagic": 1, "initialFunds": {"60` + strings.Repeat("11", 28) + `": "1"}}`,
		"byron no crc": `{"networkMagic": 1, "initialFunds": {"82d8184100": 1}}`,
	} {
		if _, err := ShelleyGenesisTxs(strings.NewReader(file)); !errors.Is(err, ErrBadGenesis) {
			t.Errorf("shelley %s: %v, want ErrBadGenesis", name, err)
		}
	}
}

// FuzzGenesis feeds both parsers arbitrary files: no panic, an error is
// ErrBadGenesis, and every output is the only output of a transaction with
// no inputs, with an address.
//
//	go test -run '^$' -fuzz FuzzGenesis -fuzztime 60s -fuzzminimizetime 0 ./cardano/
//
// (-fuzzminimizetime 0 as for FuzzConvert: minimizing a 5 KB genesis file
// stalls a short run.)
func FuzzGenesis(f *testing.F) {
	f.Add(openGenesis(f, "preview-byron-genesis.json"))
	f.Add(openGenesis(f, "preview-shelley-genesis.json"))
	f.Add([]byte(`{"networkMagic": 42, "initialFunds": {"60` + strings.Repeat("11", 28) + `": 1000000}}`))
	f.Add([]byte(`{"avvmDistr": {"` + strings.Repeat("A", 43) + `=": "5"}, "nonAvvmBalances": {}, "protocolConsts": {"protocolMagic": 764824073}}`))
	f.Fuzz(func(t *testing.T, file []byte) {
		for _, parse := range []func([]byte) ([]chain.Tx, error){
			func(b []byte) ([]chain.Tx, error) { return ByronGenesisTxs(bytes.NewReader(b)) },
			func(b []byte) ([]chain.Tx, error) { return ShelleyGenesisTxs(bytes.NewReader(b)) },
		} {
			txs, err := parse(file)
			if err != nil {
				if !errors.Is(err, ErrBadGenesis) {
					t.Fatalf("error %v is not ErrBadGenesis", err)
				}
				continue
			}
			for _, tx := range txs {
				if len(tx.Outputs) != 1 || len(tx.Inputs) != 0 || tx.Outputs[0].Address == "" {
					t.Fatalf("output shape: %+v", tx)
				}
			}
		}
	})
}

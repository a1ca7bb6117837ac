package api_test

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/utxo-cache/utxo-cache/api"
	"github.com/utxo-cache/utxo-cache/cardano/credential"
	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/internal/textenc"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

// TestIndexRoutes checks what the index routes echo and refuse: the
// credential as sent, a policy and a unit in lower case, the same listing
// under every name of one stake credential, and 404 not_indexed with a
// message that names the index on a store that does not keep it.
func TestIndexRoutes(t *testing.T) {
	s := newStack(t, stackConfig{disk: disk.Options{
		Dimensions: []disk.Dimension{disk.DimPaymentCredential, disk.DimStakeCredential, disk.DimAssetPolicy, disk.DimAsset},
		Derivers:   disk.Derivers{disk.DimPaymentCredential: credential.PaymentValues, disk.DimStakeCredential: credential.StakeValues}}})
	bech := func(hrp string, raw []byte) string {
		return textenc.Bech32(hrp, textenc.ConvertBits(raw), textenc.Bech32Const)
	}
	pay, stk, pol := bytes.Repeat([]byte{0xa1}, 28), bytes.Repeat([]byte{0xb2}, 28), bytes.Repeat([]byte{0xC3}, 28)
	// A base address (script payment, key stake) and an enterprise one with
	// the same payment credential; a pointer address has no stake credential.
	base := bech("addr", append(append([]byte{0x11}, pay...), stk...))
	ent := bech("addr", append([]byte{0x71}, pay...))
	ptr := bech("addr", append(append([]byte{0x51}, pay...), 1, 2, 3))
	s.apply(tx("i1", nil, out(base, 1, chain.Asset{Policy: pol, Name: []byte{0xAB}, Quantity: 9}), out(ent, 2), out(ptr, 4)))

	get := func(target string, want int) (indexAnswer, map[string]any) {
		t.Helper()
		return getIndex(t, s, target, want)
	}
	script := bech("script", pay)
	a, raw := get("/v1/payment-credentials/"+script+"/utxos", 200)
	if raw["payment_credential"] != script || len(a.Utxos) != 3 {
		t.Fatalf("payment listing: %v", raw)
	}
	if a, _ := get("/v1/payment-credentials/"+bech("addr_vkh", pay)+"/balance", 200); a.UtxoCount != 0 {
		t.Fatalf("the key credential of a script hash's bytes has %d outputs", a.UtxoCount)
	}
	for _, name := range []string{bech("stake", append([]byte{0xe1}, stk...)), bech("stake_test", append([]byte{0xe0}, stk...)), bech("stake_vkh", stk)} {
		a, raw := get("/v1/stake-credentials/"+name+"/utxos", 200)
		if raw["stake_credential"] != name || len(a.Utxos) != 1 || a.Utxos[0].Address != base {
			t.Fatalf("stake listing of %s: %v", name, raw)
		}
	}
	if a, _ := get("/v1/stake-credentials/"+bech("script", stk)+"/balance", 200); a.UtxoCount != 0 {
		t.Fatalf("the script stake credential has %d outputs", a.UtxoCount)
	}
	upper := strings.ToUpper(hex.EncodeToString(pol))
	a, raw = get("/v1/policies/"+upper+"/balance", 200)
	if raw["policy"] != strings.ToLower(upper) || a.UtxoCount != 1 || a.Value != "1" {
		t.Fatalf("policy balance: %v", raw)
	}
	a, raw = get("/v1/assets/"+upper+"AB/utxos", 200)
	if raw["unit"] != strings.ToLower(upper)+"ab" || len(a.Utxos) != 1 {
		t.Fatalf("asset listing: %v", raw)
	}
	if a, _ := get("/v1/assets/"+upper+"AC/utxos", 200); len(a.Utxos) != 0 {
		t.Fatalf("another name of the policy lists %d outputs", len(a.Utxos))
	}
	a, _ = get("/v1/payment-credentials/"+bech("stake_vkh", pay)+"/utxos", 400)
	if a.Error == nil || a.Error.Code != "invalid_argument" {
		t.Fatalf("stake_vkh as a payment credential: %+v", a.Error)
	}

	plain := newStack(t, stackConfig{})
	a, _ = getIndex(t, plain, "/v1/stake-credentials/"+bech("stake_vkh", stk)+"/utxos", 404)
	if a.Error == nil || a.Error.Code != "not_indexed" || !strings.Contains(a.Error.Message, "does not keep the stake_credential index") {
		t.Fatalf("store without the index: %+v", a.Error)
	}
}

// indexAnswer is the part of an index route's answer the tests read.
type indexAnswer struct {
	Utxos []struct {
		Address string `json:"address"`
		Value   string `json:"value"`
	} `json:"utxos"`
	Value     string `json:"value"`
	UtxoCount int    `json:"utxo_count"`
	Error     *struct {
		Code, Message string
	} `json:"error"`
}

// getIndex GETs target from s, wants status want, and decodes the answer.
func getIndex(t *testing.T, s *stack, target string, want int) (indexAnswer, map[string]any) {
	t.Helper()
	r := s.do(call{method: "GET", target: target})
	if r.code != want {
		t.Fatalf("%s: %s, want %d", target, r, want)
	}
	var a indexAnswer
	var raw map[string]any
	if err := json.Unmarshal(r.body, &a); err != nil {
		t.Fatal(err)
	}
	_ = json.Unmarshal(r.body, &raw)
	return a, raw
}

// TestIndexListingsLeased: the listings by payment credential and policy
// take leased=exclude and leased=include like an address's: the leased
// output is left out, or carries leased_until, and the plain listing is as
// it was.
func TestIndexListingsLeased(t *testing.T) {
	s := newStack(t, stackConfig{api: api.Options{WalletToken: walletToken}, disk: disk.Options{
		Dimensions: []disk.Dimension{disk.DimPaymentCredential, disk.DimAssetPolicy},
		Derivers:   disk.Derivers{disk.DimPaymentCredential: credential.PaymentValues}}})
	pay, pol := bytes.Repeat([]byte{0xa1}, 28), bytes.Repeat([]byte{0xC3}, 28)
	ent := textenc.Bech32("addr", textenc.ConvertBits(append([]byte{0x71}, pay...)), textenc.Bech32Const)
	asset := chain.Asset{Policy: pol, Name: []byte{0xAB}, Quantity: 9}
	s.apply(tx("i1", nil, out(ent, 1, asset), out(ent, 2, asset)))
	script := textenc.Bech32("script", textenc.ConvertBits(pay), textenc.Bech32Const)
	targets := []string{"/v1/payment-credentials/" + script + "/utxos", "/v1/policies/" + hex.EncodeToString(pol) + "/utxos"}
	plain := map[string]string{}
	for _, target := range targets {
		plain[target] = string(getRaw(t, s, target))
	}
	r := s.lease(leaseJSON("ix", 60, op("i1", 1)))
	var g struct {
		ExpiresAt uint64 `json:"expires_at"`
	}
	if err := json.Unmarshal(r.body, &g); r.code != 200 || err != nil {
		t.Fatalf("lease: %s", r)
	}
	for _, target := range targets {
		if got := string(getRaw(t, s, target)); got != plain[target] {
			t.Fatalf("%s changed with a lease:\n%s\n%s", target, plain[target], got)
		}
		if a, _ := getIndex(t, s, target+"?leased=exclude", 200); len(a.Utxos) != 1 || a.Utxos[0].Value != "1" {
			t.Fatalf("%s?leased=exclude: %+v", target, a.Utxos)
		}
		inc := string(getRaw(t, s, target+"?leased=include"))
		if strings.Count(inc, "leased_until") != 1 || !strings.Contains(inc, fmt.Sprintf(`"leased_until":%d}`, g.ExpiresAt)) {
			t.Fatalf("%s?leased=include: %s", target, inc)
		}
	}
}

func getRaw(t *testing.T, s *stack, target string) []byte {
	t.Helper()
	r := s.get(target)
	if r.code != 200 {
		t.Fatalf("GET %s: %s", target, r)
	}
	return r.body
}

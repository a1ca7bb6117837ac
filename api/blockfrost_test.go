package api_test

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"testing"

	"github.com/utxo-cache/utxo-cache/blockfrost"
	"github.com/utxo-cache/utxo-cache/cardano/credential"
	"github.com/utxo-cache/utxo-cache/cardano/script"
	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/internal/textenc"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

// TestBlockfrostCacheInvalidation: Blockfrost answers served from the memory
// tier change with the block that changes them (an address, a credential,
// an account, a datum), never a stale one; a read with min_seq waits for
// the state it names.
func TestBlockfrostCacheInvalidation(t *testing.T) {
	dims := []disk.Dimension{disk.DimPaymentCredential, disk.DimStakeCredential, disk.DimReferenceScriptHash, disk.DimDatumHash}
	s := newStack(t, stackConfig{hot: -1, noSpec: true, blockfrost: &blockfrost.Options{},
		disk: disk.Options{Dimensions: dims, Derivers: disk.Derivers{
			disk.DimPaymentCredential: credential.PaymentValues, disk.DimStakeCredential: credential.StakeValues,
			disk.DimReferenceScriptHash: script.RefScriptValues, disk.DimDatumHash: script.DatumValues}}})
	pay, stake := bytes.Repeat([]byte{0x41}, 28), bytes.Repeat([]byte{0x42}, 28)
	b32 := func(hrp string, raw []byte) string {
		return textenc.Bech32(hrp, textenc.ConvertBits(raw), textenc.Bech32Const)
	}
	addr := b32("addr_test", append(append([]byte{0x00}, pay...), stake...))
	datum := []byte{0xd8, 0x79, 0x80}
	dh := script.DatumHash(datum)
	targets := []string{
		"/api/v0/addresses/" + addr + "/utxos",
		"/api/v0/addresses/" + b32("addr_vkh", pay) + "/utxos",
		"/api/v0/accounts/" + b32("stake_test", append([]byte{0xe0}, stake...)) + "/utxos",
		"/api/v0/addresses/" + addr,
	}
	count := func(target string) int {
		t.Helper()
		r := s.get(target)
		if r.code != 200 {
			t.Fatalf("%s: %s", target, r)
		}
		var items []json.RawMessage
		if json.Unmarshal(r.body, &items) != nil { // the address object
			return bytes.Count(r.body, []byte(`"quantity"`))
		}
		return len(items)
	}
	s.apply(tx("bc1", nil, out(addr, 1)))
	for _, target := range targets {
		count(target) // fill the memory tier
	}
	s.mem.Wait()
	hits := s.mem.Stats().Hits
	for _, target := range targets {
		if n := count(target); n != 1 {
			t.Fatalf("%s: %d", target, n)
		}
	}
	if got := s.mem.Stats().Hits - hits; got < uint64(len(targets)) {
		t.Fatalf("%d memory hits for %d cached reads", got, len(targets))
	}
	if r := s.get("/api/v0/scripts/datum/" + hex.EncodeToString(dh[:]) + "/cbor"); r.code != 404 {
		t.Fatalf("datum before: %s", r)
	}
	s.apply(tx("bc2", nil, chain.Output{Address: addr, Value: 2, Datum: datum, Assets: []chain.Asset{{Policy: pay, Name: []byte("x"), Quantity: 3}}}))
	for _, target := range targets {
		if n := count(target); n != 2 {
			t.Errorf("%s after the block: %d, want 2 (a stale cached answer?)", target, n)
		}
	}
	if r := s.get("/api/v0/scripts/datum/" + hex.EncodeToString(dh[:]) + "/cbor"); r.code != 200 || string(r.body) != `{"cbor":"d87980"}` {
		t.Fatalf("datum after: %s", r)
	}
}

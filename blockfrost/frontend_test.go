package blockfrost_test

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"

	"github.com/utxo-cache/utxo-cache/blockfrost"
	"github.com/utxo-cache/utxo-cache/cardano/credential"
	"github.com/utxo-cache/utxo-cache/cardano/script"
	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/internal/textenc"
	"github.com/utxo-cache/utxo-cache/query"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
	"github.com/utxo-cache/utxo-cache/writer"
)

// fixture is a store fed by a writer, read by a query server and the front
// end over it.
type fixture struct {
	store *disk.Store
	w     *writer.Writer
	reads *query.Server
	fe    *blockfrost.FrontEnd
	// outs lists every output created, in chain order, with its address.
	outs []chain.Utxo
}

// derivers are the Cardano adapter's functions of the derived dimensions.
var derivers = disk.Derivers{
	disk.DimPaymentCredential:   credential.PaymentValues,
	disk.DimStakeCredential:     credential.StakeValues,
	disk.DimReferenceScriptHash: script.RefScriptValues,
	disk.DimDatumHash:           script.DatumValues,
}

func newFixture(tb testing.TB, dims []disk.Dimension) *fixture {
	tb.Helper()
	store, err := disk.Open(tb.TempDir(), disk.Options{Dimensions: dims, Derivers: derivers, Chain: "cardano"})
	if err != nil {
		tb.Fatal(err)
	}
	w := writer.New(store, writer.Options{})
	reads := query.New(store, query.Options{HotAddresses: -1})
	w.Subscribe(reads)
	f := &fixture{store: store, w: w, reads: reads, fe: blockfrost.New(reads, blockfrost.Options{})}
	tb.Cleanup(func() {
		reads.Close()
		_ = w.Close()
		_ = store.Close()
	})
	return f
}

var allDims = []disk.Dimension{disk.DimAddress, disk.DimPaymentCredential, disk.DimStakeCredential,
	disk.DimReferenceScriptHash, disk.DimDatumHash}

// shelley returns a base address (header type 0, or 1 when the payment
// credential is a script; testnet) of a payment and a stake hash.
func shelley(payment, stake byte, scriptPay bool) string {
	header := byte(0x00)
	if scriptPay {
		header = 0x10
	}
	raw := append([]byte{header}, hash28(payment)...)
	raw = append(raw, hash28(stake)...)
	return textenc.Bech32("addr_test", textenc.ConvertBits(raw), textenc.Bech32Const)
}

func hash28(b byte) []byte {
	h := make([]byte, 28)
	for i := range h {
		h[i] = b
	}
	return h
}

func txHash(height uint64, i int) chain.Hash {
	var h chain.Hash
	binary.BigEndian.PutUint64(h[:], height)
	binary.BigEndian.PutUint32(h[8:], uint32(i))
	h[31] = 0xbf
	return h
}

// apply applies a block at the next height holding one transaction per
// output of outs (each output its own transaction, so order is chain order).
func (f *fixture) apply(tb testing.TB, outs ...chain.Output) {
	tb.Helper()
	st := f.store.State()
	h := uint64(0)
	var prev chain.Hash
	if !st.Tip.Empty {
		h, prev = st.Tip.Height+1, st.Tip.Hash
	}
	b := &chain.Block{Height: h, Hash: txHash(h, -1), PrevHash: prev}
	for i, o := range outs {
		tx := chain.Tx{Hash: txHash(h, i), Outputs: []chain.Output{o}}
		b.Txs = append(b.Txs, tx)
		f.outs = append(f.outs, chain.Utxo{OutPoint: chain.OutPoint{TxHash: tx.Hash}, Output: o, Height: h, TxPos: uint32(i)})
	}
	if _, err := f.w.Apply(context.Background(), b); err != nil {
		tb.Fatal(err)
	}
}

// get serves path's route (a Route.Path) with the path parameters and
// query parameters given.
func (f *fixture) get(tb testing.TB, path string, params map[string]string, q map[string]string) (query.Answer, error) {
	tb.Helper()
	for _, r := range f.fe.Routes() {
		if r.Path != path {
			continue
		}
		req := blockfrost.Request{
			Param: func(n string) string { return params[n] },
			Query: func(n string) (string, bool) { v, ok := q[n]; return v, ok },
		}
		return r.Serve(context.Background(), req)
	}
	tb.Fatalf("no route %s", path)
	return query.Answer{}, nil
}

type item struct {
	Address     string `json:"address"`
	TxHash      string `json:"tx_hash"`
	OutputIndex uint32 `json:"output_index"`
	Amount      []struct {
		Unit     string `json:"unit"`
		Quantity string `json:"quantity"`
	} `json:"amount"`
	Block               string  `json:"block"`
	DataHash            *string `json:"data_hash"`
	InlineDatum         *string `json:"inline_datum"`
	ReferenceScriptHash *string `json:"reference_script_hash"`
}

func decodeItems(tb testing.TB, a query.Answer) []item {
	tb.Helper()
	if a.Status != 200 || !a.Whole {
		tb.Fatalf("answer %d (whole %v): %s", a.Status, a.Whole, a.Body)
	}
	var items []item
	if err := json.Unmarshal(a.AppendBody(nil), &items); err != nil {
		tb.Fatalf("%v: %s", err, a.Body)
	}
	return items
}

// TestOffsetPages checks every page of an address's, a credential's and an
// account's listing, both orders, against the outputs applied, and the
// unit filter's pages against the outputs carrying the unit.
func TestOffsetPages(t *testing.T) {
	f := newFixture(t, allDims)
	a, b := shelley(1, 2, false), shelley(3, 2, true)
	policy := hash28(9)
	var outs []chain.Output
	for i := range 23 {
		o := chain.Output{Address: a, Value: uint64(1000 + i)}
		if i%3 == 0 {
			o.Assets = []chain.Asset{{Policy: policy, Name: []byte("t"), Quantity: uint64(i + 1)}}
		}
		if i%2 == 1 {
			o.Address = b
		}
		outs = append(outs, o)
	}
	f.apply(t, outs[:10]...)
	f.apply(t, outs[10:]...)
	unit := hex.EncodeToString(policy) + hex.EncodeToString([]byte("t"))
	stake := textenc.Bech32("stake_test", textenc.ConvertBits(append([]byte{0xe0}, hash28(2)...)), textenc.Bech32Const)
	cases := []struct {
		name   string
		path   string
		params map[string]string
		keep   func(u *chain.Utxo) bool
	}{
		{"address", "/addresses/:address/utxos", map[string]string{"address": a}, func(u *chain.Utxo) bool { return u.Address == a }},
		{"address and unit", "/addresses/:address/utxos/:unit", map[string]string{"address": a, "unit": unit},
			func(u *chain.Utxo) bool { return u.Address == a && len(u.Assets) > 0 }},
		{"address and lovelace", "/addresses/:address/utxos/:unit", map[string]string{"address": b, "unit": "lovelace"},
			func(u *chain.Utxo) bool { return u.Address == b }},
		// A script credential, named by its own prefix and by addr_vkh (as
		// Lucid sends it): the hash matches whatever the prefix.
		{"script credential", "/addresses/:address/utxos",
			map[string]string{"address": textenc.Bech32("script", textenc.ConvertBits(hash28(3)), textenc.Bech32Const)},
			func(u *chain.Utxo) bool { return u.Address == b }},
		{"script credential as addr_vkh", "/addresses/:address/utxos",
			map[string]string{"address": textenc.Bech32("addr_vkh", textenc.ConvertBits(hash28(3)), textenc.Bech32Const)},
			func(u *chain.Utxo) bool { return u.Address == b }},
		{"key credential as script", "/addresses/:address/utxos",
			map[string]string{"address": textenc.Bech32("script", textenc.ConvertBits(hash28(1)), textenc.Bech32Const)},
			func(u *chain.Utxo) bool { return u.Address == a }},
		{"account", "/accounts/:stake_address/utxos", map[string]string{"stake_address": stake}, func(*chain.Utxo) bool { return true }},
		{"unknown credential", "/addresses/:address/utxos",
			map[string]string{"address": textenc.Bech32("addr_vkh", textenc.ConvertBits(hash28(7)), textenc.Bech32Const)},
			func(*chain.Utxo) bool { return false }},
	}
	for _, c := range cases {
		var want []chain.Utxo
		for _, u := range f.outs {
			if c.keep(&u) {
				want = append(want, u)
			}
		}
		for _, desc := range []bool{false, true} {
			ordered := slices.Clone(want)
			order := "asc"
			if desc {
				slices.Reverse(ordered)
				order = "desc"
			}
			for _, count := range []int{1, 4, 100} {
				for page := 1; page <= len(want)/count+2; page++ {
					ans, err := f.get(t, c.path, c.params, map[string]string{"count": strconv.Itoa(count), "page": strconv.Itoa(page), "order": order})
					if err != nil {
						t.Fatalf("%s: %v", c.name, err)
					}
					got := decodeItems(t, ans)
					w := ordered[min((page-1)*count, len(ordered)):min(page*count, len(ordered))]
					if len(got) != len(w) {
						t.Fatalf("%s %s count %d page %d: %d items, want %d", c.name, order, count, page, len(got), len(w))
					}
					for i, u := range w {
						g := got[i]
						if g.TxHash != u.TxHash.String() || g.OutputIndex != 0 || g.Address != u.Address ||
							g.Amount[0].Quantity != strconv.FormatUint(u.Value, 10) || len(g.Amount) != 1+len(u.Assets) ||
							g.Block != txHash(u.Height, -1).String() {
							t.Fatalf("%s %s count %d page %d item %d: %+v, want %+v", c.name, order, count, page, i, g, u)
						}
					}
				}
			}
		}
	}
}

// TestNotKept: what the store does not keep is refused, never answered
// empty: a credential, account, script or datum read of a store without
// that index is a 400 that names the index; an unknown script or datum is
// a 404 in Blockfrost's shape.
func TestNotKept(t *testing.T) {
	f := newFixture(t, []disk.Dimension{disk.DimAddress})
	f.apply(t, chain.Output{Address: shelley(1, 2, false), Value: 5})
	for _, c := range []struct {
		path   string
		params map[string]string
		index  string
	}{
		{"/addresses/:address/utxos", map[string]string{"address": textenc.Bech32("addr_vkh", textenc.ConvertBits(hash28(1)), textenc.Bech32Const)}, "payment_credential"},
		{"/accounts/:stake_address/utxos", map[string]string{"stake_address": textenc.Bech32("stake_test", textenc.ConvertBits(append([]byte{0xe0}, hash28(2)...)), textenc.Bech32Const)}, "stake_credential"},
		{"/scripts/:hash", map[string]string{"hash": hex.EncodeToString(hash28(4))}, "reference_script_hash"},
		{"/scripts/datum/:hash/cbor", map[string]string{"hash": hex.EncodeToString(make([]byte, 32))}, "datum_hash"},
	} {
		_, err := f.get(t, c.path, c.params, nil)
		if !errors.Is(err, chain.ErrInvalidArgument) || !containsStr(err.Error(), c.index) {
			t.Errorf("%s on a store without the index: %v", c.path, err)
		}
	}
	g := newFixture(t, allDims)
	g.apply(t, chain.Output{Address: shelley(1, 2, false), Value: 5})
	for _, path := range []string{"/scripts/:hash", "/scripts/:hash/cbor", "/scripts/:hash/json"} {
		ans, err := g.get(t, path, map[string]string{"hash": hex.EncodeToString(hash28(4))}, nil)
		if err != nil || ans.Status != 404 || !json.Valid(ans.Body) || !containsStr(string(ans.Body), `"status_code":404,"error":"Not Found"`) {
			t.Errorf("%s of an unknown script: %d %s %v", path, ans.Status, ans.Body, err)
		}
	}
}

// TestScriptsAndDatums: a reference script and an inline datum are served
// by their hashes (computed here from the ledger's rules), with their type,
// size, CBOR and, for a native script, JSON; once the only output carrying
// them is spent, they are gone (404).
func TestScriptsAndDatums(t *testing.T) {
	f := newFixture(t, allDims)
	// A Plutus V2 script (its bytes: a CBOR byte string, as carried) and a
	// native script: all of [sig, after 7].
	plutus := []byte{0x44, 0x01, 0x02, 0x03, 0x04}
	plutusRef := append([]byte{0x82, 0x02}, 0x45)
	plutusRef = append(plutusRef, plutus...)
	native := append([]byte{0x82, 0x01, 0x82, 0x82, 0x00, 0x58, 0x1c}, hash28(5)...)
	native = append(native, 0x82, 0x04, 0x07)
	nativeRef := append([]byte{0x82, 0x00}, native...)
	datum := []byte{0xd8, 0x79, 0x9f, 0x01, 0xff}
	addr := shelley(1, 2, false)
	f.apply(t, chain.Output{Address: addr, Value: 1, ScriptRef: plutusRef, Datum: datum},
		chain.Output{Address: addr, Value: 2, ScriptRef: nativeRef})
	plutusHash := blake224(append([]byte{2}, plutus...))
	nativeHash := blake224(append([]byte{0}, native...))
	datumHash := script.DatumHash(datum)
	body := func(path, h string) string {
		t.Helper()
		ans, err := f.get(t, path, map[string]string{"hash": h}, nil)
		if err != nil {
			t.Fatalf("%s %s: %v", path, h, err)
		}
		return fmt.Sprintf("%d %s", ans.Status, ans.AppendBody(nil))
	}
	for _, c := range []struct{ path, hash, want string }{
		{"/scripts/:hash", plutusHash, `200 {"script_hash":"` + plutusHash + `","type":"plutusV2","serialised_size":5}`},
		{"/scripts/:hash/cbor", plutusHash, `200 {"cbor":"4401020304"}`},
		{"/scripts/:hash/json", plutusHash, `200 {"json":null}`},
		{"/scripts/:hash", nativeHash, `200 {"script_hash":"` + nativeHash + `","type":"timelock","serialised_size":null}`},
		{"/scripts/:hash/cbor", nativeHash, `200 {"cbor":null}`},
		{"/scripts/:hash/json", nativeHash, `200 {"json":{"type":"all","scripts":[{"type":"sig","keyHash":"` + hex.EncodeToString(hash28(5)) + `"},{"type":"after","slot":7}]}}`},
		{"/scripts/datum/:hash/cbor", hex.EncodeToString(datumHash[:]), `200 {"cbor":"d8799f01ff"}`},
	} {
		if got := body(c.path, c.hash); got != c.want {
			t.Errorf("%s %s:\n got %s\nwant %s", c.path, c.hash, got, c.want)
		}
	}
	items := decodeItems(t, mustAnswer(f.get(t, "/addresses/:address/utxos", map[string]string{"address": addr}, nil)))
	if len(items) != 2 || *items[0].ReferenceScriptHash != plutusHash || *items[0].InlineDatum != "d8799f01ff" ||
		*items[0].DataHash != hex.EncodeToString(datumHash[:]) || *items[1].ReferenceScriptHash != nativeHash || items[1].DataHash != nil {
		t.Fatalf("items: %+v", items)
	}
	// Spend the first output: its script and datum are no longer held.
	st := f.store.State()
	b := &chain.Block{Height: st.Tip.Height + 1, Hash: txHash(st.Tip.Height+1, -1), PrevHash: st.Tip.Hash,
		Txs: []chain.Tx{{Hash: txHash(st.Tip.Height+1, 0), Inputs: []chain.OutPoint{f.outs[0].OutPoint}, Outputs: []chain.Output{{Address: addr, Value: 1}}}}}
	if _, err := f.w.Apply(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, hash string }{{"/scripts/:hash/cbor", plutusHash}, {"/scripts/datum/:hash/cbor", hex.EncodeToString(datumHash[:])}} {
		if got := body(c.path, c.hash); got[:4] != "404 " {
			t.Errorf("%s after the spend: %s", c.path, got)
		}
	}
	if got := body("/scripts/:hash/json", nativeHash); got[:4] != "200 " {
		t.Errorf("the native script, still live: %s", got)
	}
}

func mustAnswer(a query.Answer, err error) query.Answer {
	if err != nil {
		panic(err)
	}
	return a
}

func containsStr(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// BenchmarkOffsetPage reads one page of 100 of an address with 100,000
// outputs: page 1, and page 1,000 (the last: 99,900 index keys skipped).
func BenchmarkOffsetPage(b *testing.B) {
	f := newFixture(b, []disk.Dimension{disk.DimAddress})
	addr := shelley(1, 2, false)
	outs := make([]chain.Output, 1000)
	for i := range outs {
		outs[i] = chain.Output{Address: addr, Value: uint64(i + 1)}
	}
	for range 100 {
		f.apply(b, outs...)
	}
	for _, page := range []int{1, 1000} {
		b.Run("page="+strconv.Itoa(page), func(b *testing.B) {
			q := map[string]string{"count": "100", "page": strconv.Itoa(page)}
			for b.Loop() {
				ans, err := f.get(b, "/addresses/:address/utxos", map[string]string{"address": addr}, q)
				if err != nil || ans.Status != 200 {
					b.Fatal(err)
				}
				ans.Release()
			}
		})
	}
	b.Run("v1 page of 100", func(b *testing.B) {
		for b.Loop() {
			ans, err := f.reads.AddressUtxos(context.Background(), addr, false, 100, "")
			if err != nil {
				b.Fatal(err)
			}
			ans.Release()
		}
	})
}

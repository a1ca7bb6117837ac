package query_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/utxo-cache/utxo-cache/cache"
	"github.com/utxo-cache/utxo-cache/cardano/credential"
	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/internal/model"
	"github.com/utxo-cache/utxo-cache/internal/testredis"
	"github.com/utxo-cache/utxo-cache/internal/textenc"
	"github.com/utxo-cache/utxo-cache/query"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
	"github.com/utxo-cache/utxo-cache/tiers/memory"
	"github.com/utxo-cache/utxo-cache/tiers/redis"
	"github.com/utxo-cache/utxo-cache/writer"
)

// cardanoIndexes are the four optional indexes, as a Cardano store keeps them.
var cardanoIndexes = []disk.Dimension{disk.DimPaymentCredential, disk.DimStakeCredential, disk.DimAssetPolicy, disk.DimAsset}

func cardanoDerivers() disk.Derivers {
	return disk.Derivers{disk.DimPaymentCredential: credential.PaymentValues, disk.DimStakeCredential: credential.StakeValues}
}

// testAddress is an address of the test's own making, with the credentials
// the test knows it carries (the test's 29-byte kind || hash; nil: none).
type testAddress struct {
	s              string
	payment, stake []byte
}

// cardanoTestAddresses builds n addresses of every header type from a few
// payment and stake hashes, so that several addresses share each credential,
// plus strings that carry none (a base58 string, a Bitcoin-like bech32, an
// "addr" string with a bad checksum). The credentials are written down from
// the header type as the Shelley address format defines it, not derived.
func cardanoTestAddresses(rng *rand.Rand, n int) []testAddress {
	hashes := func(k int) [][]byte {
		var hs [][]byte
		for range k {
			h := make([]byte, 28)
			for i := range h {
				h[i] = byte(rng.UintN(256))
			}
			hs = append(hs, h)
		}
		return hs
	}
	pays, stakes := hashes(4), hashes(3)
	// One hash used both as a key and a script hash: two values.
	pays[3] = stakes[0]
	var out []testAddress
	for i := 0; len(out) < n; i++ {
		typ := byte(i % 10)
		p, s := pays[rng.IntN(len(pays))], stakes[rng.IntN(len(stakes))]
		switch {
		case typ <= 3: // base: payment kind in bit 0, stake kind in bit 1
			raw := append(append([]byte{typ << 4}, p...), s...)
			out = append(out, testAddress{s: render(raw), payment: append([]byte{typ & 1}, p...), stake: append([]byte{typ >> 1 & 1}, s...)})
		case typ <= 5: // pointer: payment credential only
			raw := append(append([]byte{typ << 4}, p...), 0x81, 0x80, 0x01, byte(i), 0x02)
			out = append(out, testAddress{s: render(raw), payment: append([]byte{typ & 1}, p...)})
		case typ <= 7: // enterprise
			raw := append([]byte{typ << 4}, p...)
			out = append(out, testAddress{s: render(raw), payment: append([]byte{typ & 1}, p...)})
		case typ == 8:
			out = append(out, testAddress{s: fmt.Sprintf("DdzFFzCqrht%dByronLike", i)})
		default:
			good := render(append([]byte{0x60}, p...))
			out = append(out, testAddress{s: good[:len(good)-1] + string("qp"[rng.IntN(2)]) + "x"})
		}
	}
	return out
}

func render(raw []byte) string {
	return textenc.Bech32("addr_test", textenc.ConvertBits(raw), textenc.Bech32Const)
}

// cardanoizeBlock rewrites the generator's opaque addresses into the test's.
func cardanoizeBlock(b *chain.Block, byGen map[string]testAddress) {
	for i := range b.Txs {
		tx := &b.Txs[i]
		for j := range tx.Outputs {
			tx.Outputs[j].Address = byGen[tx.Outputs[j].Address].s
		}
		if tx.CollateralReturn != nil {
			tx.CollateralReturn.Address = byGen[tx.CollateralReturn.Address].s
		}
	}
}

// indexQuery is one value a test reads: its key and which live outputs it
// lists, by the test's own rule.
type indexQuery struct {
	key    query.IndexKey
	listed func(u *chain.Utxo) bool
	// counts says which assets of a listed output its balance sums: nil,
	// all of them; for a policy, that policy's; for an asset, that asset.
	counts func(a chain.Asset) bool
}

// indexQueries returns a query for every credential, policy and asset the
// test's addresses and generator can produce, in the strings a wallet sends
// (both forms of a stake credential), plus values no output carries.
func indexQueries(t *testing.T, addrs []testAddress, byString map[string]testAddress, policies, names [][]byte) []indexQuery {
	t.Helper()
	var qs []indexQuery
	seen := map[string]bool{}
	for _, a := range addrs {
		if a.payment != nil && !seen["p"+string(a.payment)] {
			seen["p"+string(a.payment)] = true
			hrp := []string{"addr_vkh", "script"}[a.payment[0]]
			label := textenc.Bech32(hrp, textenc.ConvertBits(a.payment[1:]), textenc.Bech32Const)
			want := bytes.Clone(a.payment)
			qs = append(qs, indexQuery{mustKey(t, "payment", label), func(u *chain.Utxo) bool {
				return bytes.Equal(byString[u.Address].payment, want)
			}, nil})
		}
		if a.stake != nil && !seen["s"+string(a.stake)] {
			seen["s"+string(a.stake)] = true
			want := bytes.Clone(a.stake)
			listed := func(u *chain.Utxo) bool { return bytes.Equal(byString[u.Address].stake, want) }
			reward := textenc.Bech32("stake_test", textenc.ConvertBits(append([]byte{0xe0 | a.stake[0]<<4}, a.stake[1:]...)), textenc.Bech32Const)
			hrp := []string{"stake_vkh", "script"}[a.stake[0]]
			cip5 := textenc.Bech32(hrp, textenc.ConvertBits(a.stake[1:]), textenc.Bech32Const)
			qs = append(qs, indexQuery{mustKey(t, "stake", reward), listed, nil}, indexQuery{mustKey(t, "stake", cip5), listed, nil})
		}
	}
	for _, p := range policies {
		if len(p) == 0 {
			continue // the API cannot name an empty policy
		}
		ofPolicy := func(a chain.Asset) bool { return bytes.Equal(a.Policy, p) }
		qs = append(qs, indexQuery{query.IndexKey{Dim: disk.DimAssetPolicy, Value: p, Field: "policy", Label: hex.EncodeToString(p)},
			func(u *chain.Utxo) bool { return slices.ContainsFunc(u.Assets, ofPolicy) }, ofPolicy})
		for _, n := range names {
			isAsset := func(a chain.Asset) bool { return bytes.Equal(a.Policy, p) && bytes.Equal(a.Name, n) }
			qs = append(qs, indexQuery{query.IndexKey{Dim: disk.DimAsset, Value: query.AssetValue(p, n), Field: "unit", Label: hex.EncodeToString(p) + hex.EncodeToString(n)},
				func(u *chain.Utxo) bool { return slices.ContainsFunc(u.Assets, isAsset) }, isAsset})
		}
	}
	// A credential nobody pays to.
	qs = append(qs, indexQuery{mustKey(t, "payment", textenc.Bech32("addr_vkh", textenc.ConvertBits(make([]byte, 28)), textenc.Bech32Const)),
		func(*chain.Utxo) bool { return false }, nil})
	return qs
}

func mustKey(t *testing.T, kind, label string) query.IndexKey {
	t.Helper()
	if kind == "payment" {
		v, err := credential.ParsePayment(label)
		if err != nil {
			t.Fatal(err)
		}
		return query.IndexKey{Dim: disk.DimPaymentCredential, Value: v, Field: "payment_credential", Label: label}
	}
	v, err := credential.ParseStake(label)
	if err != nil {
		t.Fatal(err)
	}
	return query.IndexKey{Dim: disk.DimStakeCredential, Value: v, Field: "stake_credential", Label: label}
}

type utxoJSON struct {
	TxHash string `json:"tx_hash"`
	Index  uint32 `json:"index"`
	Value  string `json:"value"`
	Frozen bool   `json:"frozen"`
}

type indexAnswer struct {
	Tip struct {
		Height uint64 `json:"height"`
	} `json:"tip"`
	Utxos      []utxoJSON `json:"utxos"`
	NextCursor *string    `json:"next_cursor"`
	Value      string     `json:"value"`
	UtxoCount  uint64     `json:"utxo_count"`
	Assets     []struct {
		Policy, Name, Quantity string
	} `json:"assets"`
	Fields map[string]json.RawMessage `json:"-"`
}

func decodeAnswer(t *testing.T, ans query.Answer) (indexAnswer, map[string]any) {
	t.Helper()
	body := ans.AppendBody(nil)
	var a indexAnswer
	var raw map[string]any
	if err := json.Unmarshal(body, &a); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	_ = json.Unmarshal(body, &raw)
	return a, raw
}

// listAll pages through a value's listing, limit items a page, keeping
// what f keeps.
func listAll(t *testing.T, srv *query.Server, k query.IndexKey, desc bool, limit int, f query.Filter, tiers map[string]int) []utxoJSON {
	t.Helper()
	var all []utxoJSON
	cursor := ""
	for {
		ans, err := srv.IndexUtxosFiltered(context.Background(), k, desc, limit, cursor, f)
		if err != nil {
			t.Fatalf("%s %s: %v", k.Field, k.Label, err)
		}
		tiers[ans.Tier]++
		a, raw := decodeAnswer(t, ans)
		if raw[k.Field] != k.Label {
			t.Fatalf("answer names %v, want %s %q", raw[k.Field], k.Field, k.Label)
		}
		all = append(all, a.Utxos...)
		if a.NextCursor == nil {
			return all
		}
		cursor = *a.NextCursor
	}
}

// checkIndexes compares every listing (both orders, paged; all outputs and
// frozen=exclude) and balance with the model's live outputs filtered by the
// test's own rule, each output's freeze as the model has it (a policy's or
// an asset's balance sums only that policy's or that asset's quantities).
func checkIndexes(t *testing.T, srv *query.Server, m *model.Model, qs []indexQuery, tiers map[string]int) {
	t.Helper()
	live := m.Live()
	for _, q := range qs {
		var want []utxoJSON
		var bal chain.Balance
		sums := map[[2]string]chain.Uint128{}
		for i := range live {
			u := &live[i]
			if !q.listed(u) {
				continue
			}
			_, frozen := m.Frozen(u.OutPoint)
			want = append(want, utxoJSON{TxHash: u.TxHash.String(), Index: u.Index, Value: fmt.Sprint(u.Value), Frozen: frozen})
			bal.Count++
			bal.Value = bal.Value.AddU64(u.Value)
			for _, a := range u.Assets {
				if q.counts != nil && !q.counts(a) {
					continue
				}
				k := [2]string{hex.EncodeToString(a.Policy), hex.EncodeToString(a.Name)}
				sums[k] = sums[k].AddU64(a.Quantity)
			}
		}
		unfrozen := slices.DeleteFunc(slices.Clone(want), func(u utxoJSON) bool { return u.Frozen })
		for _, desc := range []bool{false, true} {
			for _, f := range []query.Filter{{}, {ExcludeFrozen: true}} {
				got := listAll(t, srv, q.key, desc, 3, f, tiers)
				w := slices.Clone(want)
				if f.ExcludeFrozen {
					w = slices.Clone(unfrozen)
				}
				if desc {
					slices.Reverse(w)
				}
				if !slices.Equal(got, w) {
					t.Fatalf("tip %s: %s %s (desc %v, %+v): listed %v, want %v", m.Tip(), q.key.Field, q.key.Label, desc, f, got, w)
				}
			}
		}
		ans, err := srv.IndexBalance(context.Background(), q.key)
		if err != nil {
			t.Fatal(err)
		}
		tiers[ans.Tier]++
		a, raw := decodeAnswer(t, ans)
		if raw[q.key.Field] != q.key.Label {
			t.Fatalf("balance names %v, want %q", raw[q.key.Field], q.key.Label)
		}
		if a.UtxoCount != bal.Count || a.Value != bal.Value.String() || len(a.Assets) != len(sums) {
			t.Fatalf("tip %s: %s %s: balance %d %s %d assets, want %d %s %d", m.Tip(), q.key.Field, q.key.Label,
				a.UtxoCount, a.Value, len(a.Assets), bal.Count, bal.Value, len(sums))
		}
		for _, as := range a.Assets {
			if s, ok := sums[[2]string{as.Policy, as.Name}]; !ok || s.String() != as.Quantity {
				t.Fatalf("%s %s: asset %s.%s quantity %s, want %s", q.key.Field, q.key.Label, as.Policy, as.Name, as.Quantity, s)
			}
		}
	}
}

// TestIndexesMatchModel applies random blocks, rollbacks, freezes and
// unfreezes, whose outputs pay Cardano addresses of every header type, to a
// store that keeps the four indexes, read through the memory and Redis tiers, and after every
// change compares each listing (paged both ways) and balance with the
// reference model's live outputs filtered by credentials the test wrote
// down itself. Every value is read after every change, so a cached answer a
// change should have invalidated and did not is caught at the next check.
func TestIndexesMatchModel(t *testing.T) {
	// -seed is the package's flag (encode_ref_test.go).
	seed := flag.Lookup("seed").Value.(flag.Getter).Get().(uint64)
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("seed %d (replay: -seed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	addrs := cardanoTestAddresses(rng, 16)
	gen := model.NewGen(seed, model.GenOptions{Addresses: len(addrs), MaxTxs: 6})
	byGen, byString := map[string]testAddress{}, map[string]testAddress{}
	for i, g := range gen.Addresses() {
		byGen[g] = addrs[i]
		byString[addrs[i].s] = addrs[i]
	}

	store, err := disk.Open(t.TempDir(), disk.Options{PruneDepth: 1000, RollbackWindow: 1000,
		Dimensions: cardanoIndexes, Derivers: cardanoDerivers()})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	mem, err := memory.New(memory.Options{MaxBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	rs := testredis.Start(t)
	rt, err := redis.New(redis.Options{URL: rs.URL(), Namespace: "idx", CallTimeout: time.Second,
		StartSeq: store.Published().Seq, PublishedSeq: func() uint64 { return store.Published().Seq },
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	poll(t, "the Redis tier healthy", rt.Healthy)
	// Two servers: one reads memory then Redis, the other Redis alone, so
	// each tier is the one that answers for some reads.
	all := query.Admission{All: true} // every answer through Redis
	srv := query.New(store, query.Options{Tiers: []cache.Tier{mem, rt}, HotAddresses: -1, Admission: all})
	defer srv.Close()
	viaRedis := query.New(store, query.Options{Tiers: []cache.Tier{rt}, HotAddresses: -1, Admission: all})
	defer viaRedis.Close()
	w := writer.New(store, writer.Options{})
	defer w.Close()
	w.Subscribe(srv)
	w.Subscribe(viaRedis)

	qs := indexQueries(t, addrs, byString, model.GenPolicies(gen), model.GenNames(gen))
	m := model.New(1000, 1000)
	ctx := context.Background()
	tiers := map[string]int{}
	for step := range 60 {
		switch live := m.Live(); {
		case step > 3 && len(live) > 0 && rng.IntN(5) == 0:
			// Freeze or unfreeze a few live outputs: one change, which
			// every listing of their index values must show at once.
			f := chain.Freeze{Reason: "test"}
			for range 1 + rng.IntN(3) {
				if op := live[rng.IntN(len(live))].OutPoint; !slices.Contains(f.OutPoints, op) {
					f.OutPoints = append(f.OutPoints, op)
				}
			}
			if rng.IntN(3) == 0 {
				f.Reason = ""
				if _, err := m.Unfreeze(f); err != nil {
					t.Fatal(err)
				}
				if _, err := w.Unfreeze(ctx, f); err != nil {
					t.Fatal(err)
				}
			} else {
				if _, err := m.Freeze(f); err != nil {
					t.Fatal(err)
				}
				if _, err := w.Freeze(ctx, f); err != nil {
					t.Fatal(err)
				}
			}
		case !m.Tip().Empty && m.Tip().Height > 4 && rng.IntN(5) == 0:
			target := m.Tip().Height - uint64(rng.IntN(4))
			if err := m.Rollback(target); err != nil {
				t.Fatal(err)
			}
			if _, err := w.Rollback(ctx, target); err != nil {
				t.Fatal(err)
			}
		default:
			b := gen.Block(m)
			cardanoizeBlock(b, byGen)
			if _, err := m.Apply(b, false); err != nil {
				t.Fatal(err)
			}
			if _, err := w.Apply(ctx, b); err != nil {
				t.Fatal(err)
			}
		}
		checkIndexes(t, srv, m, qs, tiers)
		checkIndexes(t, viaRedis, m, qs, tiers)
	}
	t.Logf("answers by tier: %v (%d values)", tiers, len(qs))
	if tiers["memory"] == 0 || tiers["redis"] == 0 {
		t.Fatalf("answers by tier %v: the caches were not exercised", tiers)
	}
}

// TestIndexNotKept: a store created without an index answers its reads
// ErrNotIndexed, and a cursor of one listing is refused by another.
func TestIndexNotKept(t *testing.T) {
	store, err := disk.Open(t.TempDir(), disk.Options{Dimensions: []disk.Dimension{disk.DimPaymentCredential}, Derivers: cardanoDerivers()})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	srv := query.New(store, query.Options{HotAddresses: -1})
	defer srv.Close()
	ctx := context.Background()
	h := bytes.Repeat([]byte{7}, 28)
	stake := mustKey(t, "stake", textenc.Bech32("stake_vkh", textenc.ConvertBits(h), textenc.Bech32Const))
	if _, err := srv.IndexUtxos(ctx, stake, false, 10, ""); !errors.Is(err, query.ErrNotIndexed) {
		t.Fatalf("stake listing on a store without the index: %v", err)
	}
	if _, err := srv.IndexBalance(ctx, stake); !errors.Is(err, query.ErrNotIndexed) {
		t.Fatalf("stake balance on a store without the index: %v", err)
	}
	pay := mustKey(t, "payment", textenc.Bech32("addr_vkh", textenc.ConvertBits(h), textenc.Bech32Const))
	w := writer.New(store, writer.Options{})
	defer w.Close()
	var outs []chain.Output
	for range 3 {
		outs = append(outs, chain.Output{Address: render(append([]byte{0x60}, h...)), Value: 1})
	}
	if _, err := w.Apply(ctx, &chain.Block{Height: 1, Hash: hashOf('b', 1), Txs: []chain.Tx{{Hash: hashOf('t', 1), Outputs: outs}}}); err != nil {
		t.Fatal(err)
	}
	ans, err := srv.IndexUtxos(ctx, pay, false, 1, "")
	if err != nil {
		t.Fatal(err)
	}
	a, _ := decodeAnswer(t, ans)
	if a.NextCursor == nil {
		t.Fatal("no cursor")
	}
	other := pay
	other.Value = append([]byte{1}, h...) // the script credential of the same hash
	if _, err := srv.IndexUtxos(ctx, other, false, 1, *a.NextCursor); !errors.Is(err, chain.ErrInvalidArgument) {
		t.Fatalf("cursor of another value: %v", err)
	}
	if _, err := srv.AddressUtxos(ctx, render(append([]byte{0x60}, h...)), false, 1, *a.NextCursor); !errors.Is(err, chain.ErrInvalidArgument) {
		t.Fatalf("cursor of a credential on an address: %v", err)
	}
	if _, err := srv.IndexUtxos(ctx, pay, false, 1, *a.NextCursor); err != nil {
		t.Fatalf("its own cursor: %v", err)
	}
}

package cardano

import (
	"bytes"
	"context"
	"encoding/hex"
	"slices"
	"strings"
	"testing"

	"github.com/utxo-cache/utxo-cache/cardano/credential"
	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/internal/model"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
	"github.com/utxo-cache/utxo-cache/writer"
)

// headerCredentials is the test's own reading of a Shelley address header:
// the payment credential of types 0..7 and the stake credential of types
// 0..3, each as kind (0 key, 1 script) then the 28-byte hash; nil for none.
func headerCredentials(raw []byte) (payment, stake []byte) {
	if len(raw) < 29 {
		return nil, nil
	}
	typ := int(raw[0] >> 4)
	if typ > 7 {
		return nil, nil
	}
	payment = append([]byte{byte(typ % 2)}, raw[1:29]...)
	if typ < 4 && len(raw) >= 57 {
		stake = append([]byte{byte(typ / 2 % 2)}, raw[29:57]...)
	}
	return payment, stake
}

// rawAddress decodes an output's bech32 address with the tests' own decoder
// (facts_test.go); nil for a Byron address.
func rawAddress(t *testing.T, address string) []byte {
	t.Helper()
	for _, hrp := range []string{"addr_test", "addr"} {
		if rest, ok := strings.CutPrefix(address, hrp+"1"); ok {
			raw, err := bech32Decode(hrp, rest)
			if err != nil {
				t.Fatalf("%s: %v", address, err)
			}
			return raw
		}
	}
	return nil
}

// indexStore is a store with the four Cardano indexes, fed through a writer
// that skips unknown inputs (the fixtures start mid-chain), with the
// reference model beside it.
type indexStore struct {
	t     *testing.T
	store *disk.Store
	w     *writer.Writer
	m     *model.Model
	link  *Linker
}

func newIndexStore(t *testing.T) *indexStore {
	store, err := disk.Open(t.TempDir(), disk.Options{
		Dimensions: []disk.Dimension{disk.DimPaymentCredential, disk.DimStakeCredential, disk.DimAssetPolicy, disk.DimAsset},
		Derivers:   disk.Derivers{disk.DimPaymentCredential: credential.PaymentValues, disk.DimStakeCredential: credential.StakeValues},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	w := writer.New(store, writer.Options{SkipUnknownInputs: true})
	t.Cleanup(func() { _ = w.Close() })
	return &indexStore{t: t, store: store, w: w, m: model.New(2160, 4320), link: NewLinker(chain.Tip{Empty: true})}
}

func (s *indexStore) apply(a *Adapter, tagged []byte) {
	s.t.Helper()
	b, err := a.Convert(tagged)
	if err != nil {
		s.t.Fatal(err)
	}
	out, ok, err := s.link.Next(b)
	if err != nil {
		s.t.Fatal(err)
	}
	if !ok {
		return
	}
	if _, err := s.m.Apply(&out, true); err != nil {
		s.t.Fatal(err)
	}
	if _, err := s.w.Apply(context.Background(), &out); err != nil {
		s.t.Fatal(err)
	}
}

// check compares the store's listing and balance of dimension value v with
// the model's live outputs the test's rule lists under it.
func (s *indexStore) check(dim disk.Dimension, v []byte, listed func(u *chain.Utxo) bool) int {
	s.t.Helper()
	var want []chain.OutPoint
	var value uint64
	for _, u := range s.m.Live() {
		if listed(&u) {
			want = append(want, u.OutPoint)
			value += u.Value
		}
	}
	view, err := s.store.NewView()
	if err != nil {
		s.t.Fatal(err)
	}
	defer view.Close()
	list, next, err := view.List(disk.ListQuery{Dim: dim, Value: v, Limit: 1000})
	if err != nil || next != nil {
		s.t.Fatalf("list %s %x: %v (next %v)", dim, v, err, next)
	}
	var got []chain.OutPoint
	for _, u := range list {
		got = append(got, u.OutPoint)
	}
	if !slices.Equal(got, want) {
		s.t.Fatalf("%s %x: store lists %v, the model %v", dim, v, got, want)
	}
	b, err := view.Balance(dim, v)
	if err != nil || b.Count != uint64(len(want)) || b.Value.String() != chain.U128(value).String() {
		s.t.Fatalf("%s %x: balance %+v %v, want %d outputs of %d", dim, v, b, err, len(want), value)
	}
	return len(want)
}

// TestIndexesOnRealChunk applies a real ImmutableDB chunk (864 Babbage
// blocks of a test network) to a store with the four indexes and checks the
// listing and balance of every payment and stake credential, policy and
// asset its live outputs carry against the model, the credentials read from
// each address's bytes by the test's own header reader.
func TestIndexesOnRealChunk(t *testing.T) {
	a := newAdapter(t)
	s := newIndexStore(t)
	c := loadChunks(t)[0]
	for _, raw := range c.chunk.Blocks {
		s.apply(a, raw)
	}
	creds := func(u *chain.Utxo) (p, st []byte) { return headerCredentials(rawAddress(t, u.Address)) }
	pays, stakes, policies, assets := map[string]bool{}, map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, u := range s.m.Live() {
		p, st := creds(&u)
		if p != nil {
			pays[string(p)] = true
		}
		if st != nil {
			stakes[string(st)] = true
		}
		for _, as := range u.Assets {
			policies[string(as.Policy)] = true
			assets[string(disk.AppendAssetValue(nil, as.Policy, as.Name))] = true
		}
	}
	if len(pays) < 10 || len(stakes) < 2 || len(policies) < 2 {
		t.Fatalf("the chunk's live outputs carry %d payment credentials, %d stake, %d policies: too few to test", len(pays), len(stakes), len(policies))
	}
	listedBy := 0
	for p := range pays {
		listedBy += s.check(disk.DimPaymentCredential, []byte(p), func(u *chain.Utxo) bool { x, _ := creds(u); return bytes.Equal(x, []byte(p)) })
	}
	for st := range stakes {
		s.check(disk.DimStakeCredential, []byte(st), func(u *chain.Utxo) bool { _, x := creds(u); return bytes.Equal(x, []byte(st)) })
	}
	for p := range policies {
		s.check(disk.DimAssetPolicy, []byte(p), func(u *chain.Utxo) bool {
			return slices.ContainsFunc(u.Assets, func(as chain.Asset) bool { return string(as.Policy) == p })
		})
	}
	for v := range assets {
		is := func(as chain.Asset) bool { return string(disk.AppendAssetValue(nil, as.Policy, as.Name)) == v }
		s.check(disk.DimAsset, []byte(v), func(u *chain.Utxo) bool { return slices.ContainsFunc(u.Assets, is) })
		// The asset's balance sums that asset alone.
		var q chain.Uint128
		for _, u := range s.m.Live() {
			for _, as := range u.Assets {
				if is(as) {
					q = q.AddU64(as.Quantity)
				}
			}
		}
		view, err := s.store.NewView()
		if err != nil {
			t.Fatal(err)
		}
		b, err := view.Balance(disk.DimAsset, []byte(v))
		view.Close()
		if err != nil || len(b.Assets) != 1 || b.Assets[0].Quantity != q || string(disk.AppendAssetValue(nil, b.Assets[0].Policy, b.Assets[0].Name)) != v {
			t.Fatalf("asset %x: balance assets %+v %v, want its quantity %s alone", v, b.Assets, err, q)
		}
	}
	live := len(s.m.Live())
	t.Logf("%d live outputs (%d with a payment credential): %d payment credentials, %d stake, %d policies, %d assets",
		live, listedBy, len(pays), len(stakes), len(policies), len(assets))
}

// TestPointerAddressIndexed: the real 219-byte pointer address whose pointer
// fields overflow (alonzo27, output 95a5ef2f…#1) is listed under its payment
// credential, the 28 bytes after its header, and under no stake credential.
func TestPointerAddressIndexed(t *testing.T) {
	a := newAdapter(t)
	s := newIndexStore(t)
	s.apply(a, fixtureNamed(t, "alonzo27"))
	txh, _ := chain.ParseHash("95a5ef2f1121a197fc9bedb039787eb723e98825b4fd4df86c17ec0e3f4dc722")
	op := chain.OutPoint{TxHash: txh, Index: 1}
	u, _, err := s.m.Utxo(op)
	if err != nil {
		t.Fatal(err)
	}
	raw := rawAddress(t, u.Address)
	if len(raw) != 219 || raw[0]>>4 != 4 && raw[0]>>4 != 5 {
		t.Fatalf("output 1: %d-byte address of type %d", len(raw), raw[0]>>4)
	}
	pay := append([]byte{raw[0] >> 4 & 1}, raw[1:29]...)
	if n := s.check(disk.DimPaymentCredential, pay, func(x *chain.Utxo) bool {
		p, _ := headerCredentials(rawAddress(t, x.Address))
		return bytes.Equal(p, pay)
	}); n < 1 {
		t.Fatalf("payment credential %x lists nothing", pay)
	}
	// No stake value at all for it: every stake listing of the block's
	// base addresses leaves it out (checked against the model), and the
	// 28 bytes after its payment hash are not a stake credential.
	for _, kind := range []byte{0, 1} {
		s.check(disk.DimStakeCredential, append([]byte{kind}, raw[29:57]...), func(x *chain.Utxo) bool {
			_, st := headerCredentials(rawAddress(t, x.Address))
			return bytes.Equal(st, append([]byte{kind}, raw[29:57]...))
		})
	}
	var values [][]byte
	credential.StakeValues(&u, func(v []byte) { values = append(values, v) })
	if len(values) != 0 {
		t.Fatalf("the pointer address has stake values %x", values)
	}
	t.Logf("payment credential %s of the %d-byte pointer address", hex.EncodeToString(pay), len(raw))
}

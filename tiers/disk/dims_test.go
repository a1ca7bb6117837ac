package disk_test

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

// firstByte is a stand-in deriver for the credential dimensions: the
// address's first byte, so the test knows each output's value.
func firstByte(u *chain.Utxo, yield func([]byte)) { yield([]byte(u.Address[:1])) }

var testDerivers = disk.Derivers{disk.DimPaymentCredential: firstByte, disk.DimStakeCredential: firstByte}

// TestIndexSetRecorded: the index set is recorded at creation and read back
// by an open that names none; it can change while the store holds no block
// (explicitly, or to the default of the chain the store takes), and once it
// holds one an open that asks for another set is refused, naming what a
// re-import would add.
func TestIndexSetRecorded(t *testing.T) {
	all := []disk.Dimension{disk.DimAssetPolicy, disk.DimPaymentCredential, disk.DimStakeCredential, disk.DimAsset}
	dims := func(dir string, opts disk.Options) []disk.Dimension {
		t.Helper()
		opts.Derivers = testDerivers
		s, err := disk.Open(dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		return slices.Clone(s.Dimensions())
	}
	want := func(ds ...disk.Dimension) []disk.Dimension { return append([]disk.Dimension{disk.DimAddress}, ds...) }

	dir := t.TempDir()
	// A new store with no chain: no default applies.
	if got := dims(dir, disk.Options{DefaultDimensions: all}); !slices.Equal(got, want(all...)) {
		t.Fatalf("new store with defaults: %v", got)
	}
	// Blank, recorded chain "": a command that feeds bitcoin (default none)
	// takes the store, and with it bitcoin's default set.
	if got := dims(dir, disk.Options{Chain: "bitcoin"}); !slices.Equal(got, want()) {
		t.Fatalf("blank store taken by bitcoin: %v", got)
	}
	// Then cardano takes it, still blank: its default.
	if got := dims(dir, disk.Options{Chain: "cardano", DefaultDimensions: all}); !slices.Equal(got, want(disk.DimAssetPolicy, disk.DimPaymentCredential, disk.DimStakeCredential, disk.DimAsset)) {
		t.Fatalf("blank store taken by cardano: %v", got)
	}
	// Same chain again, no set named: the recorded one.
	if got := dims(dir, disk.Options{Chain: "cardano"}); len(got) != 5 {
		t.Fatalf("reopen: %v", got)
	}
	// Explicit on a blank store: taken.
	if got := dims(dir, disk.Options{Chain: "cardano", Dimensions: []disk.Dimension{disk.DimAsset}}); !slices.Equal(got, want(disk.DimAsset)) {
		t.Fatalf("explicit on a blank store: %v", got)
	}

	// Once it holds a block, the set is fixed.
	st := stOpen(t, dir, disk.Options{Derivers: testDerivers})
	st.apply(stChain('i', 1, 2)...)
	st.close()
	_, err := disk.Open(dir, disk.Options{Derivers: testDerivers, Dimensions: []disk.Dimension{disk.DimAsset, disk.DimStakeCredential}})
	if !errors.Is(err, disk.ErrIndexMismatch) || !strings.Contains(err.Error(), "adding [stake_credential] to an existing store needs a re-import") {
		t.Fatalf("adding an index to a store with blocks: %v", err)
	}
	_, err = disk.Open(dir, disk.Options{Derivers: testDerivers, Dimensions: []disk.Dimension{disk.DimAddress}})
	if !errors.Is(err, disk.ErrIndexMismatch) || !strings.Contains(err.Error(), "cannot drop [asset]") {
		t.Fatalf("dropping an index of a store with blocks: %v", err)
	}
	// The chain's default does not apply to a store that holds blocks.
	if got := dims(dir, disk.Options{Chain: "cardano", DefaultDimensions: all}); !slices.Equal(got, want(disk.DimAsset)) {
		t.Fatalf("defaults on a store with blocks: %v", got)
	}
}

// TestNoDeriver: a store that keeps a credential index opens without its
// deriver (reads), and refuses every write with ErrNoDeriver.
func TestNoDeriver(t *testing.T) {
	dir := t.TempDir()
	st := stOpen(t, dir, disk.Options{Derivers: testDerivers, Dimensions: []disk.Dimension{disk.DimPaymentCredential}})
	blocks := stChain('n', 1, 2)
	st.apply(blocks[0])
	st.close()
	s, err := disk.Open(dir, disk.Options{})
	if err != nil {
		t.Fatalf("open without the deriver: %v", err)
	}
	defer s.Close()
	if _, err := s.NewBlock(blocks[1]); !errors.Is(err, disk.ErrNoDeriver) || !strings.Contains(err.Error(), "payment_credential") {
		t.Fatalf("write without the deriver: %v", err)
	}
	if _, err := s.RollbackTo(0); !errors.Is(err, disk.ErrNoDeriver) {
		t.Fatalf("rollback without the deriver: %v", err)
	}
	v, err := s.NewView()
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if _, err := v.Balance(disk.DimPaymentCredential, []byte("x")); err != nil {
		t.Fatalf("read without the deriver: %v", err)
	}
}

// TestAddressOnlyStoreWritesNoIndexRow: a store that indexes addresses only
// (a Bitcoin store) has exactly one index row and one balance row per
// address of the state, as before the optional indexes existed, while the
// same blocks in a store with the four optional indexes add theirs.
func TestAddressOnlyStoreWritesNoIndexRow(t *testing.T) {
	blocks := stChain('z', 1, 30)
	live := map[chain.OutPoint]*chain.Utxo{}
	for _, b := range blocks {
		for i, tx := range b.Txs {
			for _, in := range tx.Inputs {
				delete(live, in)
			}
			for j, o := range tx.Outputs {
				op := chain.OutPoint{TxHash: tx.Hash, Index: uint32(j)}
				live[op] = &chain.Utxo{OutPoint: op, Output: o, Height: b.Height, TxPos: uint32(i)}
			}
		}
	}
	addrs := map[string]bool{}
	extra := 0 // index rows the optional indexes add, counted independently
	for _, u := range live {
		addrs[u.Address] = true
		extra += 2 // a payment and a stake value (firstByte)
		var policies [][]byte
		for _, a := range u.Assets {
			if !slices.ContainsFunc(policies, func(p []byte) bool { return bytes.Equal(p, a.Policy) }) {
				policies = append(policies, a.Policy)
			}
		}
		extra += len(policies) + len(u.Assets)
	}
	count := func(dims []disk.Dimension) (index, balance int) {
		dir := t.TempDir()
		st := stOpen(t, dir, disk.Options{Derivers: testDerivers, Dimensions: dims})
		st.apply(blocks...)
		st.close()
		return disk.CountRows(t, dir)
	}
	index, balance := count(nil)
	if index != len(live) || balance != len(addrs) {
		t.Fatalf("address-only store: %d index rows, %d balance rows; want %d and %d", index, balance, len(live), len(addrs))
	}
	index4, _ := count([]disk.Dimension{disk.DimAssetPolicy, disk.DimPaymentCredential, disk.DimStakeCredential, disk.DimAsset})
	if index4 != len(live)+extra {
		t.Fatalf("store with the four indexes: %d index rows, want %d", index4, len(live)+extra)
	}
	t.Logf("%d live outputs: %d index rows with addresses only, %d with the four indexes", len(live), index, index4)
}

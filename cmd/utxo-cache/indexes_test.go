package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/utxo-cache/utxo-cache/cardano/credential"
	"github.com/utxo-cache/utxo-cache/node"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

// TestImportCardanoIndexes: import-cardano creates a store with the four
// Cardano indexes by default, addresses only with --indexes none, and a
// store that holds blocks refuses another set, naming the re-import.
func TestImportCardanoIndexes(t *testing.T) {
	dims := func(dir string) []disk.Dimension {
		t.Helper()
		s, err := disk.Open(dir, disk.Options{Derivers: node.IndexDerivers()})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		return slices.Clone(s.Dimensions())
	}
	chunk := cardanoFixture("02019.chunk")
	dir := t.TempDir()
	mustImportCardano(t, "--data-dir", dir, "--skip-unknown-inputs", chunk)
	if got, want := dims(dir), append([]disk.Dimension{disk.DimAddress}, node.DefaultIndexes("cardano")...); len(got) != 7 || !slices.Equal(got[1:], []disk.Dimension{disk.DimAssetPolicy, disk.DimPaymentCredential, disk.DimStakeCredential, disk.DimAsset, disk.DimReferenceScriptHash, disk.DimDatumHash}) {
		t.Fatalf("default indexes %v, want %v", got, want)
	}
	err, _, stderr := runIn(runImportCardano, "--data-dir", dir, "--skip-unknown-inputs", "--indexes", "payment", chunk)
	if err == nil || !strings.Contains(err.Error()+stderr, "re-import") {
		t.Fatalf("another index set on a store with blocks: %v %s", err, stderr)
	}
	none := t.TempDir()
	mustImportCardano(t, "--data-dir", none, "--skip-unknown-inputs", "--indexes", "none", chunk)
	if got := dims(none); !slices.Equal(got, []disk.Dimension{disk.DimAddress}) {
		t.Fatalf("--indexes none: %v", got)
	}
}

// TestImportCardanoIndexesThroughWindows: a chunk imported in catch-up
// windows (the default) and block by block leaves the same index answers:
// for every live output, the listing and balance of each value it is indexed
// under agree between the two stores, and each listing counts the live
// outputs the chunk's facts (read independently of the store) give it.
func TestImportCardanoIndexesThroughWindows(t *testing.T) {
	chunk := cardanoFixture("01285.chunk")
	f := chunkFactsOf(t, chunk)
	windowed, single := t.TempDir(), t.TempDir()
	mustImportCardano(t, "--data-dir", windowed, "--skip-unknown-inputs", chunk)
	mustImportCardano(t, "--data-dir", single, "--skip-unknown-inputs", "--catch-up-bytes", "0", chunk)
	open := func(dir string) (*disk.Store, *disk.View) {
		s, err := disk.Open(dir, disk.Options{Derivers: node.IndexDerivers()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		v, err := s.NewView()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = v.Close() })
		return s, v
	}
	_, vw := open(windowed)
	_, vs := open(single)
	type key struct {
		dim disk.Dimension
		val string
	}
	counts := map[key]uint64{}
	for op := range f.live {
		u, _, err := vw.Utxo(op)
		if err != nil {
			t.Fatalf("%s: %v", op, err)
		}
		credential.PaymentValues(&u, func(v []byte) { counts[key{disk.DimPaymentCredential, string(v)}]++ })
		credential.StakeValues(&u, func(v []byte) { counts[key{disk.DimStakeCredential, string(v)}]++ })
		for _, a := range u.Assets {
			counts[key{disk.DimAsset, string(disk.AppendAssetValue(nil, a.Policy, a.Name))}]++
		}
	}
	for k, n := range counts {
		bw, errW := vw.Balance(k.dim, []byte(k.val))
		bs, errS := vs.Balance(k.dim, []byte(k.val))
		if errW != nil || errS != nil || bw.Count != n || bs.Count != n || bw.Value != bs.Value || len(bw.Assets) != len(bs.Assets) {
			t.Fatalf("%s %x: windowed %+v %v, single %+v %v, want %d outputs", k.dim, k.val, bw, errW, bs, errS, n)
		}
		lw, _, errW := vw.List(disk.ListQuery{Dim: k.dim, Value: []byte(k.val), Limit: 1000})
		ls, _, errS := vs.List(disk.ListQuery{Dim: k.dim, Value: []byte(k.val), Limit: 1000})
		if errW != nil || errS != nil || uint64(len(lw)) != n || len(ls) != len(lw) {
			t.Fatalf("%s %x: windowed lists %d, single %d, want %d", k.dim, k.val, len(lw), len(ls), n)
		}
		for i := range lw {
			if lw[i].OutPoint != ls[i].OutPoint {
				t.Fatalf("%s %x: item %d: %s and %s", k.dim, k.val, i, lw[i].OutPoint, ls[i].OutPoint)
			}
		}
	}
	if len(counts) < 50 {
		t.Fatalf("only %d indexed values: too few to test", len(counts))
	}
}

package main

import (
	"slices"
	"strings"
	"testing"

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
	if got, want := dims(dir), append([]disk.Dimension{disk.DimAddress}, node.DefaultIndexes("cardano")...); len(got) != 5 || !slices.Equal(got[1:], []disk.Dimension{disk.DimAssetPolicy, disk.DimPaymentCredential, disk.DimStakeCredential, disk.DimAsset}) {
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

package node_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/utxo-cache/utxo-cache/node"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

func TestParseIndexes(t *testing.T) {
	for _, tc := range []struct {
		spec  string
		dims  []disk.Dimension
		given bool
	}{
		{"", nil, false},
		{"none", []disk.Dimension{}, true},
		{"payment", []disk.Dimension{disk.DimPaymentCredential}, true},
		{"asset, stake,asset", []disk.Dimension{disk.DimAsset, disk.DimStakeCredential}, true},
		{"payment,stake,policy,asset,script,datum", node.DefaultIndexes("cardano"), true},
	} {
		dims, given, err := node.ParseIndexes(tc.spec)
		if err != nil || given != tc.given || !slices.Equal(dims, tc.dims) {
			t.Errorf("%q: %v %v %v, want %v %v", tc.spec, dims, given, err, tc.dims, tc.given)
		}
	}
	for _, bad := range []string{"address", "payment,", "all", "None"} {
		if _, _, err := node.ParseIndexes(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if d := node.DefaultIndexes("bitcoin"); len(d) != 0 {
		t.Errorf("bitcoin's default indexes: %v", d)
	}
}

// TestNodeIndexes: a node's new store takes its chain's default indexes
// (all six for cardano, none for bitcoin, none without a chain), an
// explicit set is recorded, and once the store holds a block a node asking
// for another set is refused.
func TestNodeIndexes(t *testing.T) {
	start := func(cfg node.Config) (*node.Node, error) {
		cfg.MemTableBytes = 4 << 20
		return node.Start(context.Background(), cfg)
	}
	dims := func(cfg node.Config) []disk.Dimension {
		t.Helper()
		n, err := start(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer n.Close(context.Background())
		return slices.Clone(n.Store().Dimensions())
	}
	all := append([]disk.Dimension{disk.DimAddress}, disk.DimAssetPolicy, disk.DimPaymentCredential, disk.DimStakeCredential, disk.DimAsset, disk.DimReferenceScriptHash, disk.DimDatumHash)
	if got := dims(node.Config{DataDir: t.TempDir(), Chain: "cardano"}); !slices.Equal(got, all) {
		t.Errorf("new cardano store: %v", got)
	}
	if got := dims(node.Config{DataDir: t.TempDir(), Chain: "bitcoin"}); !slices.Equal(got, []disk.Dimension{disk.DimAddress}) {
		t.Errorf("new bitcoin store: %v", got)
	}
	dir := t.TempDir()
	if got := dims(node.Config{DataDir: dir, Indexes: "stake"}); !slices.Equal(got, []disk.Dimension{disk.DimAddress, disk.DimStakeCredential}) {
		t.Errorf("explicit stake: %v", got)
	}
	n, err := start(node.Config{DataDir: dir, AdminToken: "admin", Chain: "generic", Indexes: "stake"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Writer().Apply(context.Background(), block(0)); err != nil {
		t.Fatal(err)
	}
	n.Close(context.Background())
	if got := dims(node.Config{DataDir: dir}); !slices.Equal(got, []disk.Dimension{disk.DimAddress, disk.DimStakeCredential}) {
		t.Errorf("reopened without indexes: %v", got)
	}
	if n, err := start(node.Config{DataDir: dir, Indexes: "stake,payment"}); !errors.Is(err, disk.ErrIndexMismatch) {
		if err == nil {
			n.Close(context.Background())
		}
		t.Fatalf("adding an index to a store with blocks: %v", err)
	}
	if err := (node.Config{DataDir: dir, Indexes: "bogus"}).Validate(); err == nil {
		t.Error("Validate accepted --indexes bogus")
	}
	if err := (node.Config{DataDir: dir, ReplicaOf: "http://w", ReplicationToken: "r", Indexes: "none"}).Validate(); err == nil {
		t.Error("Validate accepted indexes on a replica")
	}
}

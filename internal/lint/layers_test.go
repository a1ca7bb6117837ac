package lint

import (
	"slices"
	"testing"
)

// layers lists every package of the module (a directory relative to the
// module root) with the packages of the module it may import, lowest layers
// first. A package may import only packages whose lines are above its own,
// so every arrow points down and no cycle can form; the test checks the
// table for that too.
//
// One line per package. A new package needs a line here, placed below the
// packages it imports and above those that import it; a line whose package
// is gone must go. A package's test files are not checked: a test assembles
// whatever stack it exercises (a memory-tier test drives the query server
// over a real store) and is linked into no binary.
var layers = []struct {
	pkg     string
	imports []string
}{
	// Leaves: they import nothing of the module.
	{"chain", nil},
	{"internal/durable", nil},
	{"internal/threadprio", nil},
	{"internal/textenc", nil},
	{"internal/extsort", nil},
	{"internal/testredis", nil},
	{"internal/testnats", nil},
	{"internal/netlab", nil},
	{"internal/npmci", nil},
	{"internal/lint", nil},
	{"api/bare", nil},
	// Values that cross packages, and the block sources and generators.
	{"internal/diskspace", []string{"internal/durable"}},
	{"replication/storedir", []string{"internal/durable"}},
	{"cache", []string{"chain"}},
	{"changeset", []string{"chain"}},
	{"bitcoin", []string{"chain", "internal/textenc"}},
	{"cardano", []string{"chain", "internal/textenc"}},
	{"cardano/credential", []string{"chain", "internal/textenc"}},
	{"cardano/script", []string{"chain"}},
	{"internal/model", []string{"chain"}},
	{"internal/workload", []string{"chain", "internal/textenc"}},
	// The store and the cache tiers.
	{"tiers/disk", []string{"chain", "changeset", "internal/extsort"}},
	{"tiers/memory", []string{"cache"}},
	{"tiers/redis", []string{"cache", "chain"}},
	// The read path, the write path and what feeds the writer.
	{"query", []string{"cache", "chain", "changeset", "tiers/disk"}},
	{"writer", []string{"chain", "changeset", "internal/threadprio", "tiers/disk"}},
	{"replication", []string{"chain", "changeset", "internal/diskspace", "internal/durable", "replication/storedir", "tiers/disk", "writer"}},
	{"replication/jetstream", []string{"chain", "changeset", "replication", "tiers/disk"}},
	{"follow", []string{"bitcoin", "chain", "writer"}},
	{"cardano/n2n", []string{"cardano", "chain", "writer"}},
	{"cardano/n2n/n2ntest", []string{"cardano", "chain"}},
	// Serving, and the tools and binary built on it.
	{"events", []string{"chain", "query", "tiers/disk"}},
	{"blockfrost", []string{"cardano/credential", "cardano/script", "chain", "internal/textenc", "query", "tiers/disk"}},
	{"api/esplora", []string{"bitcoin", "chain", "query", "tiers/disk"}},
	{"api", []string{"api/esplora", "blockfrost", "cardano/credential", "chain", "events", "query", "replication", "writer"}},
	{"node", []string{"api", "api/esplora", "bitcoin", "blockfrost", "cache", "cardano", "cardano/credential", "cardano/script", "cardano/n2n", "chain", "changeset", "events", "follow", "internal/diskspace", "internal/threadprio", "query", "replication", "replication/jetstream", "replication/storedir", "tiers/disk", "tiers/memory", "tiers/redis", "writer"}},
	{"cmd/utxo-cache", []string{"api", "bitcoin", "cardano", "cardano/n2n", "chain", "internal/diskspace", "internal/durable", "internal/threadprio", "node", "replication", "replication/jetstream", "replication/storedir", "tiers/disk", "writer"}},

	// The load harness, a module of its own: never linked by the service.
	{"loadtest/pgref", []string{"api/bare", "chain", "query"}},
	{"loadtest", []string{"api/bare", "chain", "internal/model", "internal/workload", "loadtest/pgref", "node", "replication", "replication/jetstream"}},
	{"loadtest/cmd/utxo-loadtest", []string{"internal/workload", "loadtest"}},
}

// TestLayers checks every import between packages of the module against
// layers, and layers against the module's packages.
func TestLayers(t *testing.T) {
	line := map[string]int{} // package -> its line in layers
	for i, l := range layers {
		if _, dup := line[l.pkg]; dup {
			t.Errorf("layers lists %s twice", l.pkg)
		}
		line[l.pkg] = i
		for _, imp := range l.imports {
			if j, ok := line[imp]; !ok || j >= i {
				t.Errorf("layers lets %s import %s, whose line is not above it: list a package below every package it imports", l.pkg, imp)
			}
		}
	}

	modPath, pkgs := listPackages(t)
	seen := map[string]bool{}
	for _, p := range pkgs {
		rel, ok := relativeTo(p.ImportPath, modPath)
		if !ok {
			continue
		}
		seen[rel] = true
		i, ok := line[rel]
		if !ok {
			t.Errorf("package %s is not in layers (internal/lint/layers_test.go): add a line for it with the packages of the module it imports, below them and above the packages that import it", rel)
			continue
		}
		for _, imp := range p.Imports {
			dep, ok := relativeTo(imp, modPath)
			if !ok || slices.Contains(layers[i].imports, dep) {
				continue
			}
			if j, listed := line[dep]; listed && j < i {
				t.Errorf("%s imports %s, which its line in layers does not list: add it there if that is intended", rel, dep)
			} else {
				t.Errorf("%s imports %s, which is not below it in layers: the arrow points up; move what %s needs into a package below both", rel, dep, rel)
			}
		}
	}
	for _, l := range layers {
		if !seen[l.pkg] {
			t.Errorf("layers lists %s, which is no package of the module: remove its line", l.pkg)
		}
	}
	// Guard against a vacuous pass, as TestThirdPartyImportsStayInTheirPackage does.
	if len(seen) < 4 {
		t.Fatalf("saw only %d packages of %s: is go list seeing the module?", len(seen), modPath)
	}
}

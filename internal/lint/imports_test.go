// Package lint holds the project's own static checks, written as tests so
// that `go test ./...` (and `make lint`) enforce them with no extra tool.
//
// imports_test.go keeps each third-party library in the one package that
// owns it (CONTRIBUTING.md, one library, one package): everyone else sees the project's domain types, so a
// library can be replaced, upgraded or mocked in one place.
//
// layers_test.go keeps the module's own packages in layers: each imports
// only packages listed above it in its table, so every arrow points down.
package lint

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"
)

// confined lists the libraries that may be imported only by their home
// package (a directory relative to the module root) and the packages below
// it. Test files of those packages count as inside. An import matches a
// library when it is the library's path or below it.
var confined = []struct {
	library string
	home    string
}{
	{"github.com/cockroachdb/pebble", "tiers/disk"},
	{"github.com/redis/go-redis", "tiers/redis"},
	{"github.com/dgraph-io/ristretto", "tiers/memory"},
	{"github.com/gin-gonic/gin", "api"},
	{"github.com/btcsuite", "bitcoin"},
	{"github.com/fxamacker/cbor", "chain"},
	{"github.com/blinklabs-io/gouroboros", "cardano"},
	{"github.com/nats-io/nats.go", "replication/jetstream"},
	{"github.com/jackc/pgx", "loadtest/pgref"},
}

// nestedModules are the Go modules inside the repository whose packages
// import the service's: loadtest/ (the load harness, a module of its own so
// that the service binary does not carry it). Their packages are checked as
// the service's are, by their path below the service's module path. deploy/'s
// modules import none of the service's packages and are not checked.
var nestedModules = []string{"loadtest"}

// exempt packages are not checked (none today: keep the list for a package
// that must import a library outside its home, with the reason here).
var exempt []string

// goPackage is the part of `go list -json` this test reads.
type goPackage struct {
	ImportPath   string
	Imports      []string
	TestImports  []string
	XTestImports []string
}

func TestThirdPartyImportsStayInTheirPackage(t *testing.T) {
	modPath, pkgs := listPackages(t)
	checked := 0
	for _, p := range pkgs {
		rel, ok := relativeTo(p.ImportPath, modPath)
		if !ok || isUnder(rel, exempt...) {
			continue
		}
		checked++
		imports := map[string]string{}
		for _, list := range []struct {
			files   string
			imports []string
		}{{"", p.Imports}, {" (test)", p.TestImports}, {" (external test)", p.XTestImports}} {
			for _, imp := range list.imports {
				if _, seen := imports[imp]; !seen {
					imports[imp] = list.files
				}
			}
		}
		for imp, files := range imports {
			for _, c := range confined {
				if isUnder(imp, c.library) && !isUnder(rel, c.home) {
					t.Errorf("%s%s imports %s: only %s/%s may import %s (CONTRIBUTING.md, one library, one package); use that package's API",
						p.ImportPath, files, imp, modPath, c.home, c.library)
				}
			}
		}
	}
	// Guard against a vacuous pass (a changed `go list` output, a wrong
	// working directory): the module has far more packages than this.
	if checked < 4 {
		t.Fatalf("checked only %d packages of %s: is go list seeing the module?", checked, modPath)
	}
}

// listPackages returns the module path and every package of the module and
// of the nestedModules, as `go list -e -json ./...` sees them from each
// module's root. -e keeps the walk going past a package that does not
// compile: its imports are still known.
func listPackages(t *testing.T) (string, []goPackage) {
	t.Helper()
	root := strings.TrimSpace(goCmd(t, "", "list", "-m", "-f", "{{.Dir}}"))
	modPath := strings.TrimSpace(goCmd(t, root, "list", "-m"))
	pkgs := modulePackages(t, root)
	for _, m := range nestedModules {
		nested := modulePackages(t, filepath.Join(root, m))
		if len(nested) == 0 {
			t.Fatalf("the nested module %s lists no package", m)
		}
		pkgs = append(pkgs, nested...)
	}
	return modPath, pkgs
}

// modulePackages returns the packages of the module rooted at dir.
func modulePackages(t *testing.T, dir string) []goPackage {
	t.Helper()
	out := goCmd(t, dir, "list", "-e", "-json=ImportPath,Imports,TestImports,XTestImports", "./...")
	var pkgs []goPackage
	dec := json.NewDecoder(strings.NewReader(out))
	for {
		var p goPackage
		err := dec.Decode(&p)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("decode go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

func goCmd(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}

// relativeTo returns importPath relative to the module path.
func relativeTo(importPath, modPath string) (string, bool) {
	if importPath == modPath {
		return ".", true
	}
	rel, ok := strings.CutPrefix(importPath, modPath+"/")
	return rel, ok
}

// isUnder reports whether p is one of the paths or below one of them.
func isUnder(p string, paths ...string) bool {
	for _, q := range paths {
		if p == q || strings.HasPrefix(p, q+"/") {
			return true
		}
	}
	return false
}

func TestIsUnder(t *testing.T) {
	for _, tc := range []struct {
		p, q string
		want bool
	}{
		{"github.com/cockroachdb/pebble/v2", "github.com/cockroachdb/pebble", true},
		{"github.com/cockroachdb/pebble", "github.com/cockroachdb/pebble", true},
		{"github.com/cockroachdb/pebblex", "github.com/cockroachdb/pebble", false},
		{"github.com/btcsuite/btcd/wire", "github.com/btcsuite", true},
		{"tiers/disk", "tiers/disk", true},
		{"tiers/diskette", "tiers/disk", false},
		{path.Join("api", "v1"), "api", true},
	} {
		if got := isUnder(tc.p, tc.q); got != tc.want {
			t.Errorf("isUnder(%q, %q) = %v, want %v", tc.p, tc.q, got, tc.want)
		}
	}
}

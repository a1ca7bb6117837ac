package lint

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// A test that skips under the race detector (`if raceEnabled { t.Skip(…) }`:
// allocation counts and hit ratios mean nothing with its instrumentation)
// would never run in `go test -race ./...`. `make test` runs such tests again
// without -race (test-norace), from the Makefile's NORACE_PKGS and
// NORACE_TESTS. This check keeps that list equal to the tests that skip, so
// a new one cannot go unrun.

// TestNoRaceTestsListed compares the Makefile's list with the tests found.
func TestNoRaceTestsListed(t *testing.T) {
	root := strings.TrimSpace(goCmd(t, "", "list", "-m", "-f", "{{.Dir}}"))
	found := raceSkippingTests(t, root)
	if len(found) == 0 {
		t.Fatal("found no test that skips under -race: is the walk seeing the module?")
	}
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	pkgs := strings.Fields(makeVar(t, mk, "NORACE_PKGS"))
	names := strings.Split(makeVar(t, mk, "NORACE_TESTS"), "|")
	var listed []string
	for _, p := range pkgs {
		for _, n := range names {
			listed = append(listed, filepath.Clean(p)+" "+n)
		}
	}
	for _, f := range found {
		if !slices.Contains(listed, f) {
			t.Errorf("%s skips under -race but the Makefile's NORACE_PKGS/NORACE_TESTS do not run it", f)
		}
	}
	// Every listed name must be a skipping test of one listed package.
	for _, n := range names {
		if !slices.ContainsFunc(found, func(f string) bool { return strings.HasSuffix(f, " "+n) }) {
			t.Errorf("the Makefile's NORACE_TESTS names %s, which is no test that skips under -race", n)
		}
	}
	for _, p := range pkgs {
		if !slices.ContainsFunc(found, func(f string) bool { return strings.HasPrefix(f, filepath.Clean(p)+" ") }) {
			t.Errorf("the Makefile's NORACE_PKGS names %s, which holds no test that skips under -race", p)
		}
	}
}

// makeVar returns the value of `NAME := value` in a Makefile.
func makeVar(t *testing.T, mk []byte, name string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + name + `\s*:?=\s*(.*)$`).FindSubmatch(mk)
	if m == nil {
		t.Fatalf("the Makefile does not set %s", name)
	}
	return strings.TrimSpace(string(m[1]))
}

// raceSkippingTests returns "DIR TestName" (DIR relative to root, as
// "api" or "tiers/memory") for every test function holding an
// `if raceEnabled { … Skip … }`.
func raceSkippingTests(t *testing.T, root string) []string {
	t.Helper()
	var found []string
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil || !strings.HasPrefix(fn.Name.Name, "Test") {
				continue
			}
			if skipsUnderRace(fn.Body) {
				found = append(found, rel+" "+fn.Name.Name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// skipsUnderRace reports whether body holds an if statement on raceEnabled
// whose branch calls a Skip method.
func skipsUnderRace(body *ast.BlockStmt) bool {
	skips := false
	ast.Inspect(body, func(n ast.Node) bool {
		ifs, ok := n.(*ast.IfStmt)
		if !ok {
			return !skips
		}
		if id, ok := ifs.Cond.(*ast.Ident); !ok || id.Name != "raceEnabled" {
			return true
		}
		ast.Inspect(ifs.Body, func(n ast.Node) bool {
			if call, ok := n.(*ast.CallExpr); ok {
				if sel, ok := call.Fun.(*ast.SelectorExpr); ok && strings.HasPrefix(sel.Sel.Name, "Skip") {
					skips = true
				}
			}
			return !skips
		})
		return !skips
	})
	return skips
}

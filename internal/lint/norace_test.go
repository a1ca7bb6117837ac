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
// would never run in `go test -race ./...`, and one that runs shortened
// under it (`if raceEnabled { steps /= 5 }`: the model tests) would never
// run whole. `make test` runs such tests again without -race (test-norace),
// from the Makefile's NORACE_PKGS and NORACE_TESTS. This check keeps that
// list equal to the tests that check raceEnabled, so a new one cannot go
// unrun.

// TestNoRaceTestsListed compares the Makefile's list with the tests found.
func TestNoRaceTestsListed(t *testing.T) {
	root := strings.TrimSpace(goCmd(t, "", "list", "-m", "-f", "{{.Dir}}"))
	found := raceCheckingTests(t, root)
	if len(found) == 0 {
		t.Fatal("found no test that checks raceEnabled: is the walk seeing the module?")
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
			t.Errorf("%s checks raceEnabled (skips or shortens under -race) but the Makefile's NORACE_PKGS/NORACE_TESTS do not run it", f)
		}
	}
	// Every listed name must be a test of one listed package that checks it.
	for _, n := range names {
		if !slices.ContainsFunc(found, func(f string) bool { return strings.HasSuffix(f, " "+n) }) {
			t.Errorf("the Makefile's NORACE_TESTS names %s, which is no test that checks raceEnabled", n)
		}
	}
	for _, p := range pkgs {
		if !slices.ContainsFunc(found, func(f string) bool { return strings.HasPrefix(f, filepath.Clean(p)+" ") }) {
			t.Errorf("the Makefile's NORACE_PKGS names %s, which holds no test that checks raceEnabled", p)
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

// raceCheckingTests returns "DIR TestName" (DIR relative to root, as
// "api" or "tiers/memory") for every test function (TestMain aside) holding
// an if statement whose condition reads raceEnabled.
func raceCheckingTests(t *testing.T, root string) []string {
	t.Helper()
	var found []string
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "bin" || name == "node_modules") {
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
			if !ok || fn.Body == nil || !strings.HasPrefix(fn.Name.Name, "Test") || fn.Name.Name == "TestMain" {
				continue
			}
			if checksRace(fn.Body) {
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

// checksRace reports whether body holds an if statement whose condition
// reads raceEnabled: a test that skips, or runs shortened, under the race
// detector.
func checksRace(body *ast.BlockStmt) bool {
	checks := false
	ast.Inspect(body, func(n ast.Node) bool {
		if ifs, ok := n.(*ast.IfStmt); ok {
			ast.Inspect(ifs.Cond, func(n ast.Node) bool { // raceEnabled, !raceEnabled, raceEnabled && …
				if id, ok := n.(*ast.Ident); ok && id.Name == "raceEnabled" {
					checks = true
				}
				return !checks
			})
		}
		return !checks
	})
	return checks
}

package disk

import (
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"slices"
	"testing"
)

// TestHealthFieldsAreFilled: every field of Health is set by Store.Health.
// A field that is declared but never filled (RecentEntries was) reports 0
// to whoever reads it, which looks like a measurement.
func TestHealthFieldsAreFilled(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "health.go", nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var filled []string
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Name.Name != "Health" || fn.Recv == nil {
			continue
		}
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			lit, ok := n.(*ast.CompositeLit)
			if !ok {
				return true
			}
			if id, ok := lit.Type.(*ast.Ident); !ok || id.Name != "Health" {
				return true
			}
			for _, e := range lit.Elts {
				if kv, ok := e.(*ast.KeyValueExpr); ok {
					filled = append(filled, kv.Key.(*ast.Ident).Name)
				}
			}
			return false
		})
	}
	if len(filled) == 0 {
		t.Fatal("found no Health{...} literal in Store.Health")
	}
	ht := reflect.TypeFor[Health]()
	for i := range ht.NumField() {
		if name := ht.Field(i).Name; !slices.Contains(filled, name) {
			t.Errorf("Health.%s is never set by Store.Health: fill it or remove it", name)
		}
	}
}

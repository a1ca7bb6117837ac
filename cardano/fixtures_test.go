package cardano

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
)

// Fixture files in ../testdata/cardano (see PROVENANCE.md there).
func fixtureDir() string { return filepath.Join("..", "testdata", "cardano") }

type fixture struct {
	name   string // file name without ".block"
	tagged []byte // binary era-tagged block
}

var (
	fixturesOnce sync.Once
	fixturesAll  []fixture
	fixturesErr  error
)

// loadFixtures returns every single-block fixture, sorted by name, decoded
// from hex once per test binary. Callers must not modify the bytes.
func loadFixtures(tb testing.TB) []fixture {
	tb.Helper()
	fixturesOnce.Do(func() {
		paths, err := filepath.Glob(filepath.Join(fixtureDir(), "*.block"))
		if err != nil {
			fixturesErr = err
			return
		}
		sort.Strings(paths)
		for _, p := range paths {
			text, err := os.ReadFile(p)
			if err != nil {
				fixturesErr = err
				return
			}
			raw, err := DecodeHex(text)
			if err != nil {
				fixturesErr = err
				return
			}
			fixturesAll = append(fixturesAll, fixture{name: strings.TrimSuffix(filepath.Base(p), ".block"), tagged: raw})
		}
	})
	if fixturesErr != nil {
		tb.Fatal(fixturesErr)
	}
	if len(fixturesAll) != 52 {
		tb.Fatalf("%d fixture blocks, want 52", len(fixturesAll))
	}
	return fixturesAll
}

func newAdapter(tb testing.TB) *Adapter {
	tb.Helper()
	a, err := NewAdapter(Options{})
	if err != nil {
		tb.Fatal(err)
	}
	return a
}

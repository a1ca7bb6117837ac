package extsort

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

var seedFlag = flag.Uint64("seed", 0, "seed of the randomized tests (0: fixed seeds)")

type rec struct{ k, v string }

// TestSortMatchesInMemorySort adds random records (short keys, so many
// repeat) to sorters of several buffer sizes, from one buffer that never
// spills to hundreds of runs, and checks what comes out against a sort of
// the same records in memory: the same records, in ascending key order.
func TestSortMatchesInMemorySort(t *testing.T) {
	seeds := []uint64{1, 2, 3}
	if *seedFlag != 0 {
		seeds = []uint64{*seedFlag}
	}
	for _, seed := range seeds {
		for _, mem := range []int{1 << 30, 64 << 10, 512} {
			t.Run(fmt.Sprintf("seed=%d/mem=%d", seed, mem), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, 9))
				s, err := New(Options{Dir: t.TempDir(), MemBytes: mem})
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				var want []rec
				for range 20000 {
					k := make([]byte, rng.IntN(4))
					for i := range k {
						k[i] = byte(rng.IntN(8))
					}
					v := make([]byte, rng.IntN(40))
					for i := range v {
						v[i] = byte(rng.Uint32())
					}
					if err := s.Add(k, v); err != nil {
						t.Fatal(err)
					}
					want = append(want, rec{string(k), string(v)})
				}
				it, err := s.Sort()
				if err != nil {
					t.Fatal(err)
				}
				defer it.Close()
				var got []rec
				for it.Next() {
					if n := len(got); n > 0 && got[n-1].k > string(it.Key()) {
						t.Fatalf("record %d: key %x after %x", n, it.Key(), got[n-1].k)
					}
					got = append(got, rec{string(it.Key()), string(it.Value())})
				}
				if err := it.Err(); err != nil {
					t.Fatal(err)
				}
				if mem < 1<<20 && len(s.runs) < 2 {
					t.Fatalf("buffer of %d bytes wrote %d runs, want several", mem, len(s.runs))
				}
				cmp := func(a, b rec) int {
					if c := bytes.Compare([]byte(a.k), []byte(b.k)); c != 0 {
						return c
					}
					return bytes.Compare([]byte(a.v), []byte(b.v))
				}
				slices.SortFunc(want, cmp)
				slices.SortFunc(got, cmp) // equal keys come out in any order
				if !slices.Equal(got, want) {
					t.Fatalf("got %d records, want %d (or different ones)", len(got), len(want))
				}
			})
		}
	}
}

// TestCloseRemovesRuns: Close leaves nothing of the sorter on disk.
func TestCloseRemovesRuns(t *testing.T) {
	dir := t.TempDir()
	s, err := New(Options{Dir: dir, MemBytes: 256})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		if err := s.Add(fmt.Appendf(nil, "%08d", i), []byte("value")); err != nil {
			t.Fatal(err)
		}
	}
	it, err := s.Sort()
	if err != nil {
		t.Fatal(err)
	}
	it.Close()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	left, _ := os.ReadDir(dir)
	if len(left) != 0 {
		t.Fatalf("%d entries left in %s after Close", len(left), dir)
	}
}

// TestTruncatedRun: a run cut short, inside a record or at a record's
// end, is reported as ErrCorruptRun.
func TestTruncatedRun(t *testing.T) {
	for name, cut := range map[string]int64{"inside a record": 7, "at a record's end": 15} {
		t.Run(name, func(t *testing.T) {
			s, err := New(Options{Dir: t.TempDir(), MemBytes: 1 << 10})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			for i := range 200 {
				if err := s.Add(fmt.Appendf(nil, "%08d", i), []byte("value")); err != nil { // 15 bytes a record
					t.Fatal(err)
				}
			}
			if err := s.wait(); err != nil {
				t.Fatal(err)
			}
			fi, err := os.Stat(s.runs[0].path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(s.runs[0].path, fi.Size()-cut); err != nil {
				t.Fatal(err)
			}
			it, err := s.Sort()
			for err == nil && it.Next() {
			}
			if err == nil {
				err = it.Err()
				it.Close()
			}
			if !errors.Is(err, ErrCorruptRun) {
				t.Fatalf("run cut %d bytes short: err %v, want ErrCorruptRun", cut, err)
			}
		})
	}
}

// TestMergeInPasses: more runs than one merge reads at once are merged in
// passes, and the records come out as from one merge.
func TestMergeInPasses(t *testing.T) {
	defer func(n int) { maxMergeRuns = n }(maxMergeRuns)
	maxMergeRuns = 4
	s, err := New(Options{Dir: t.TempDir(), MemBytes: 256})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rng := rand.New(rand.NewPCG(4, 4))
	want := make([]int, 3000)
	for i := range want {
		want[i] = rng.IntN(1 << 30)
		if err := s.Add(fmt.Appendf(nil, "%010d", want[i]), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.wait(); err != nil {
		t.Fatal(err)
	}
	if len(s.runs) <= maxMergeRuns {
		t.Fatalf("%d runs: the test needs more than %d", len(s.runs), maxMergeRuns)
	}
	it, err := s.Sort()
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	if len(s.runs) > maxMergeRuns {
		t.Fatalf("%d runs left to merge at once, want at most %d", len(s.runs), maxMergeRuns)
	}
	slices.Sort(want)
	i := 0
	for ; it.Next(); i++ {
		if i >= len(want) || string(it.Key()) != fmt.Sprintf("%010d", want[i]) {
			t.Fatalf("record %d: %s", i, it.Key())
		}
	}
	if err := it.Err(); err != nil || i != len(want) {
		t.Fatalf("%d records, want %d: %v", i, len(want), err)
	}
}

// FuzzRunReader reads arbitrary bytes as a run file: records or
// ErrCorruptRun, never a panic, and a well-formed run reads back as written.
func FuzzRunReader(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{1, 2, 'k', 'v', 'v'})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x7f, 0})
	f.Add([]byte{3, 0, 'a'})
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "run")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		fh, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		src := &runSource{f: fh, r: newReader(fh), path: path, want: -1}
		defer src.close()
		var again buffer
		for src.next() {
			again.entries = append(again.entries, entry{off: len(again.data), k: uint32(len(src.key())), v: uint32(len(src.value()))})
			again.data = append(again.data, src.key()...)
			again.data = append(again.data, src.value()...)
		}
		if err := src.error(); err != nil {
			if !errors.Is(err, ErrCorruptRun) {
				t.Fatalf("error %v, want ErrCorruptRun", err)
			}
			return
		}
		// Read whole: written again, it reads back the same records.
		out := filepath.Join(t.TempDir(), "again")
		if _, err := writeEntries(out, &again); err != nil {
			t.Fatal(err)
		}
		fh2, err := os.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		src2 := &runSource{f: fh2, r: newReader(fh2), path: out, want: -1}
		defer src2.close()
		for _, e := range again.entries {
			if !src2.next() {
				t.Fatalf("written again: records missing: %v", src2.error())
			}
			k, v := again.key(e), again.data[e.off+int(e.k):e.off+int(e.k)+int(e.v)]
			if !bytes.Equal(src2.key(), k) || !bytes.Equal(src2.value(), v) {
				t.Fatalf("written again: %x=%x, want %x=%x", src2.key(), src2.value(), k, v)
			}
		}
		if src2.next() || src2.error() != nil {
			t.Fatalf("written again: a record too many, or %v", src2.error())
		}
	})
}

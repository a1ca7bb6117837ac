package disk

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestKeyBatchSameEffect checks keyBatch's invariant: the batch it hands to
// Pebble leaves the store exactly as the writes made one by one, in the order
// they were made, would. Random writes over a small keyspace (so keys repeat
// within a batch), with and without range deletions, some of them covering
// point writes made before or after them, others none.
func TestKeyBatchSameEffect(t *testing.T) {
	open := func() *pebble.DB {
		db, err := pebble.Open("", &pebble.Options{FS: vfs.NewMem(), Logger: quietPebble{}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	sorted, direct := open(), open()
	rng := rand.New(rand.NewPCG(7, 11))
	key := func() []byte {
		// Lengths 1..12 around the 8-byte head, few distinct values.
		k := make([]byte, 1+rng.IntN(12))
		for i := range k {
			k[i] = byte(rng.IntN(3))
		}
		return k
	}
	reordered, inOrder := 0, 0
	for round := range 200 {
		var kb keyBatch
		pb := direct.NewBatch()
		for range rng.IntN(60) {
			switch k := key(); {
			case round%3 == 0 && rng.IntN(20) == 0:
				end := key()
				if bytes.Compare(k, end) > 0 {
					k, end = end, k
				}
				_ = kb.DeleteRange(k, end, nil)
				_ = pb.DeleteRange(k, end, nil)
			case rng.IntN(3) == 0:
				_ = kb.Delete(k, nil)
				_ = pb.Delete(k, nil)
			default:
				v := fmt.Appendf(nil, "%d.%d", round, rng.IntN(1000))
				_ = kb.Set(k, v, nil)
				_ = pb.Set(k, v, nil)
			}
		}
		if kb.rangeCoversPoint() {
			inOrder++
		} else if len(kb.points) > 1 {
			reordered++
		}
		// The order handed to Pebble: by key, a key's writes as made.
		order := kb.sortPoints()
		if len(order) != len(kb.points) {
			t.Fatalf("round %d: %d writes sorted of %d", round, len(order), len(kb.points))
		}
		for i := 1; i < len(order); i++ {
			x, y := order[i-1], order[i]
			c := bytes.Compare(kb.bytes(kb.points[x.i].key), kb.bytes(kb.points[y.i].key))
			if c > 0 || c == 0 && x.i > y.i {
				t.Fatalf("round %d: write %d (%x) sorted before write %d (%x)", round,
					x.i, kb.bytes(kb.points[x.i].key), y.i, kb.bytes(kb.points[y.i].key))
			}
		}
		sb := kb.pebbleBatch(sorted)
		if err := sb.Commit(pebble.NoSync); err != nil {
			t.Fatal(err)
		}
		sb.Close()
		if err := pb.Commit(pebble.NoSync); err != nil {
			t.Fatal(err)
		}
		pb.Close()
		if got, want := dump(t, sorted), dump(t, direct); got != want {
			t.Fatalf("round %d: key-ordered batch left\n%s\nwrites in order left\n%s", round, got, want)
		}
	}
	t.Logf("%d batches reordered, %d kept in order", reordered, inOrder)
	if reordered < 100 || inOrder < 5 {
		t.Fatalf("the rounds exercised %d reordered batches and %d kept in order: too few", reordered, inOrder)
	}
}

func dump(t *testing.T, db *pebble.DB) string {
	t.Helper()
	it, err := db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var out bytes.Buffer
	for valid := it.First(); valid; valid = it.Next() {
		fmt.Fprintf(&out, "%x=%s\n", it.Key(), it.Value())
	}
	if err := it.Error(); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

type quietPebble struct{}

func (quietPebble) Infof(string, ...any)  {}
func (quietPebble) Errorf(string, ...any) {}
func (quietPebble) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}

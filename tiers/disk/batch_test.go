package disk

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// TestKeyBatchSameEffect checks keyBatch's invariant: the batch it hands to
// Pebble leaves the store exactly as the writes made one by one, in the order
// they were made, would. Random writes over a small keyspace (so keys repeat
// within a batch), with and without range deletions, some of them covering
// point writes made before or after them, others none. Twice: batches
// inserted into the memtable (a block's), and batches larger than half the
// memtable, which Pebble keeps as flushable batches and sorts itself (a
// catch-up window's).
func TestKeyBatchSameEffect(t *testing.T) {
	t.Run("memtable", func(t *testing.T) { testKeyBatchSameEffect(t, 0, 0) })
	t.Run("flushable", func(t *testing.T) { testKeyBatchSameEffect(t, 256<<10, 8<<10) })
}

// testKeyBatchSameEffect runs TestKeyBatchSameEffect on stores of memtable
// bytes (0: Pebble's default), each value padded with pad bytes.
func testKeyBatchSameEffect(t *testing.T, memtable uint64, pad int) {
	open := func() *pebble.DB {
		db, err := pebble.Open("", &pebble.Options{FS: vfs.NewMem(), Logger: quietPebble{}, MemTableSize: memtable})
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
	reordered, inOrder, flushable := 0, 0, 0
	padding := strings.Repeat("p", pad)
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
				v := fmt.Appendf(nil, "%d.%d%s", round, rng.IntN(1000), padding)
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
		if memtable > 0 && uint64(len(sb.Repr())) > memtable/2 {
			flushable++ // Pebble's own estimate of the batch is larger still
		}
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
	t.Logf("%d batches reordered, %d kept in order, %d flushable", reordered, inOrder, flushable)
	if reordered < 100 || inOrder < 5 || memtable > 0 && flushable < 100 {
		t.Fatalf("the rounds exercised %d reordered batches, %d kept in order and %d flushable: too few", reordered, inOrder, flushable)
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

// TestReadSorted: every present key is handed to fn exactly once with its
// value, absent keys never, whatever the split over workers, and an error of
// fn is reported.
func TestReadSorted(t *testing.T) {
	db, err := pebble.Open("", &pebble.Options{FS: vfs.NewMem(), Logger: quietPebble{}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	key := func(i int, dst []byte) []byte { return binary.BigEndian.AppendUint32(append(dst, 'k'), uint32(i)) }
	b := db.NewBatch()
	for i := 0; i < 1000; i += 2 { // even keys present, odd ones absent
		_ = b.Set(key(i, nil), fmt.Appendf(nil, "v%d", i), nil)
	}
	_ = b.Set(key(500, nil), []byte("old"), nil) // flushed to a table, then shadowed in the memtable
	if err := b.Commit(pebble.NoSync); err != nil {
		t.Fatal(err)
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := db.Set(key(500, nil), []byte("v500"), pebble.NoSync); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ n, workers int }{{0, 4}, {10, 4}, {parallelMin * 2, 2}, {1000, 3}, {1000, 1}} {
		calls := make([]int32, tc.n)
		var mu sync.Mutex
		err := readSorted(db, tc.n, tc.workers, key, func(i int, v []byte) error {
			mu.Lock()
			defer mu.Unlock()
			calls[i]++
			if want := fmt.Sprintf("v%d", i); string(v) != want {
				return fmt.Errorf("key %d: value %q, want %q", i, v, want)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for i, c := range calls {
			if want := int32(1 - i%2); c != want {
				t.Fatalf("n=%d workers=%d: key %d read %d times, want %d", tc.n, tc.workers, i, c, want)
			}
		}
	}
	boom := errors.New("boom")
	err = readSorted(db, 1000, 4, key, func(i int, _ []byte) error {
		if i == 778 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err %v, want boom", err)
	}
}

// sstReadFault fails every read of an sstable while on.
type sstReadFault struct{ on atomic.Bool }

func (f *sstReadFault) String() string { return "sstReadFault" }

func (f *sstReadFault) MaybeError(op errorfs.Op) error {
	if f.on.Load() && op.Kind == errorfs.OpFileReadAt && strings.HasSuffix(op.Path, ".sst") {
		return errorfs.ErrInjected
	}
	return nil
}

// TestReadSortedReadError: a key whose read fails is an error, never an
// absent key. (Regression: SeekPrefixGE reports a read error as "not found",
// and the next seek clears the iterator's error, so readSorted went on and
// a failed balance read was taken as a zero balance.) Every key of a share
// after the failed one is read too, so the error must survive later seeks.
func TestReadSortedReadError(t *testing.T) {
	fault := &sstReadFault{}
	fs := errorfs.Wrap(vfs.NewMem(), fault)
	opts := func() *pebble.Options {
		return &pebble.Options{FS: fs, Logger: quietPebble{}, Cache: pebble.NewCache(0)}
	}
	db, err := pebble.Open("", opts())
	if err != nil {
		t.Fatal(err)
	}
	key := func(i int, dst []byte) []byte { return binary.BigEndian.AppendUint32(append(dst, 'k'), uint32(i)) }
	for i := 0; i < 200; i += 2 {
		if err := db.Set(key(i, nil), []byte("v"), pebble.NoSync); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil { // the keys go to a table, and no block stays cached
		t.Fatal(err)
	}
	if db, err = pebble.Open("", opts()); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	fault.on.Store(true)
	defer fault.on.Store(false)
	for _, workers := range []int{1, 2} {
		err := readSorted(db, 200, workers, key, func(int, []byte) error { return nil })
		if !errors.Is(err, errorfs.ErrInjected) {
			t.Errorf("workers=%d: readSorted with every table read failing: %v, want the injected error", workers, err)
		}
	}
}

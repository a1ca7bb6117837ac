package disk

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// WithFS returns o with its file system replaced by fs: the crash and fault
// tests of package disk_test run stores on vfs.NewCrashableMem, wrapped in
// vfs/errorfs.
func WithFS(o Options, fs vfs.FS) Options {
	o.fs = fs
	return o
}

// Flush flushes the store's memtable to an sstable and waits for it (Pebble
// retries a flush that fails).
func Flush(s *Store) error { return s.db.Flush() }

// OnBatchBuilt makes every commit of s call f once its Pebble batch is
// built, before Pebble commits it (nil: none). Set it before the writes.
func OnBatchBuilt(s *Store, f func()) { s.batchBuilt = f }

// SetBatchLimit lowers the bytes a sorted batch of s may hold (0: the
// default, 4 GiB), so that a test can reach ErrBatchTooLarge.
func SetBatchLimit(s *Store, n int) { s.batchLimit = n }

// WaitLargeCommitFlushed waits for the flush that the last commit of a
// large block (or rollback) started, if any (see afterCommit). Call it on
// the writer's side of a finished request.
func WaitLargeCommitFlushed(s *Store) {
	if s.flushed != nil {
		<-s.flushed
	}
}

// WithoutCompactions returns o with Pebble's automatic compactions off, for
// heap measurements that a background compaction would blur.
func WithoutCompactions(o Options) Options {
	o.noCompactions = true
	return o
}

// AddressKey is MakeDimKey(DimAddress, address).
func AddressKey(address string) DimKey { return dimKeyOf(DimAddress, address) }

// AssetCount is the number of assets the output carries.
func (r *UtxoRef) AssetCount() int { return r.assetCount }

// SettingsRow returns the raw settings row (meta.go).
func SettingsRow(s *Store) ([]byte, error) { return s.get(keySettings) }

// CountRows opens the closed store in dir with plain Pebble and counts its
// index rows (0x03) and balance rows (0x04, asset rows not counted).
func CountRows(t testing.TB, dir string) (index, balance int) {
	t.Helper()
	db, err := pebble.Open(dir, &pebble.Options{Logger: pebbleLogger{slog.New(slog.DiscardHandler)}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixIndex}, UpperBound: []byte{prefixBalance + 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		if it.Key()[0] == prefixIndex {
			index++
		} else if len(it.Key()) == 1+dimKeySize { // not an asset row
			balance++
		}
	}
	return index, balance
}

// CompactedTableBytes flushes the memtable, compacts the whole key space and
// returns the bytes of the store's tables: its size on disk without the log.
func CompactedTableBytes(s *Store) (int64, error) {
	if err := s.db.Flush(); err != nil {
		return 0, err
	}
	if err := s.db.Compact(context.Background(), []byte{0}, bytes.Repeat([]byte{0xff}, 64), true); err != nil {
		return 0, err
	}
	return s.db.Metrics().Total().TablesSize, nil
}

// DowngradeCounters rewrites the closed store in dir into the layout of a
// store written when the address counters had rows of their own: each
// version 2 or 3 balance row with counters becomes a version 1 row (deleted
// when it holds no outputs; listing its assets, whose asset rows go) and a
// counter row (0x14 'c'). It returns the counter rows written.
func DowngradeCounters(t testing.TB, dir string) int {
	t.Helper()
	db, it := rawBalanceRows(t, dir)
	defer db.Close()
	b := db.NewBatch()
	n := 0
	forBalanceRows(t, it, nil, func(key []byte, k DimKey, r balanceRow) {
		if r.ctr.zero() {
			return
		}
		if r.assetRows > 0 {
			var err error
			if r.bal.Assets, err = readAssetRows(db, k, r.assetRows); err != nil {
				t.Fatal(err)
			}
			for _, a := range r.bal.Assets {
				_ = b.Delete(appendAssetKey(nil, k, a.Policy, a.Name), nil)
			}
		}
		if r.bal.Count == 0 {
			_ = b.Delete(key, nil)
		} else {
			_ = b.Set(key, appendBalance(nil, &r.bal), nil)
		}
		_ = b.Set(counterRowKey(nil, k), appendCounterRow(nil, &r.ctr), nil)
		n++
	})
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	return n
}

// CounterRows counts the counter rows (0x14 'c') of the open store.
func CounterRows(t testing.TB, s *Store) int {
	t.Helper()
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixCounters, counterKindRow}, UpperBound: []byte{prefixCounters, counterKindRow + 1}})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	return n
}

// RollbackOneBlock reverts the tip block on the way down to target: one
// batch of a rollback, as a crash after it leaves the store (the next Open
// completes the rollback). Call it with no writer running.
func RollbackOneBlock(s *Store, target uint64) error {
	_, err := s.rollbackBlock(target)
	return err
}

// BatchPointKeys returns copies of the keys of the point writes of s's
// sorted batch; call it from the function given to OnBatchBuilt.
func BatchPointKeys(s *Store) [][]byte {
	var keys [][]byte
	for i := range s.batch.points {
		keys = append(keys, bytes.Clone(s.batch.bytes(s.batch.points[i].key)))
	}
	return keys
}

// IsAssetRowKey reports whether k is an asset row's key, and
// IsBalanceRowKey whether it is a balance row's.
func IsAssetRowKey(k []byte) bool   { return len(k) >= assetKeyLen && k[0] == prefixBalance }
func IsBalanceRowKey(k []byte) bool { return len(k) == 1+dimKeySize && k[0] == prefixBalance }

// DowngradeAssetRows rewrites the closed store in dir into the layout of a
// store of schema version 3, written before asset rows: each version 3
// balance row becomes a row of version 1 or 2 that lists its assets, whose
// asset rows go. It returns the rows rewritten.
func DowngradeAssetRows(t testing.TB, dir string) int {
	t.Helper()
	db, it := rawBalanceRows(t, dir)
	defer db.Close()
	b := db.NewBatch()
	n := 0
	forBalanceRows(t, it, func(key []byte) {
		_ = b.Delete(key, nil) // an asset row: listed in its balance row below
	}, func(key []byte, k DimKey, r balanceRow) {
		if r.assetRows == 0 {
			return
		}
		var err error
		if r.bal.Assets, err = readAssetRows(db, k, r.assetRows); err != nil {
			t.Fatal(err)
		}
		_ = b.Set(key, appendBalanceRow(nil, &r.bal, &r.ctr), nil)
		n++
	})
	raw, closer, err := db.Get(keySchema)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := decodeSchema(raw)
	closer.Close()
	if err != nil {
		t.Fatal(err)
	}
	sc.version = schemaSpenderVin
	_ = b.Set(keySchema, appendSchema(nil, &sc), nil)
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	return n
}

// StoredSchemaVersion returns the schema version the open store records.
func StoredSchemaVersion(t testing.TB, s *Store) uint32 {
	t.Helper()
	raw, err := s.get(keySchema)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := decodeSchema(raw)
	if err != nil {
		t.Fatal(err)
	}
	return sc.version
}

// forBalanceRows calls row with each balance row of it (from
// rawBalanceRows), decoded, and asset (when not nil) with the key of each
// asset row, then closes it.
func forBalanceRows(t testing.TB, it *pebble.Iterator, asset func(key []byte), row func(key []byte, k DimKey, r balanceRow)) {
	t.Helper()
	for ok := it.First(); ok; ok = it.Next() {
		if len(it.Key()) != 1+dimKeySize {
			if asset != nil {
				asset(it.Key())
			}
			continue
		}
		r, err := decodeBalanceRow(it.Value())
		if err != nil {
			t.Fatal(err)
		}
		var k DimKey
		copy(k[:], it.Key()[1:])
		row(it.Key(), k, r)
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		t.Fatal(err)
	}
}

// rawBalanceRows opens the closed store in dir with plain Pebble, and an
// iterator over its balance and asset rows (0x04); close the store once
// done with both.
func rawBalanceRows(t testing.TB, dir string) (*pebble.DB, *pebble.Iterator) {
	t.Helper()
	db, err := pebble.Open(dir, &pebble.Options{Logger: pebbleLogger{slog.New(slog.DiscardHandler)}})
	if err != nil {
		t.Fatal(err)
	}
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixBalance}, UpperBound: []byte{prefixBalance + 1}})
	if err != nil {
		db.Close()
		t.Fatal(err)
	}
	return db, it
}

// Row is one key and value of a store.
type Row struct{ Key, Value []byte }

// RawRows returns every row of s's committed state, in key order, but the
// store's random secret (0x01 'K'), which differs between any two stores.
func RawRows(t testing.TB, s *Store) []Row {
	t.Helper()
	it, err := s.db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var rows []Row
	for valid := it.First(); valid; valid = it.Next() {
		if bytes.Equal(it.Key(), keySecret) {
			continue
		}
		rows = append(rows, Row{bytes.Clone(it.Key()), bytes.Clone(it.Value())})
	}
	if err := it.Error(); err != nil {
		t.Fatal(err)
	}
	return rows
}

// TableLevels returns how many tables each level of s's LSM holds.
func TableLevels(s *Store) []int {
	m := s.db.Metrics()
	n := make([]int, len(m.Levels))
	for i := range m.Levels {
		n[i] = int(m.Levels[i].TablesCount)
	}
	return n
}

package disk

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/utxo-cache/utxo-cache/chain"
)

func testHash(i int) chain.Hash { return sha256.Sum256(binary.BigEndian.AppendUint64(nil, uint64(i))) }

// TestTxFilterNoFalseNegatives: every added hash is reported present, also
// past capacity; absent hashes are mostly reported absent.
func TestTxFilterNoFalseNegatives(t *testing.T) {
	f := newTxFilter(1000)
	const n = 3 * txFilterMinCapacity // past capacity: the rate degrades, never the invariant
	for i := 0; i < n; i++ {
		h := testHash(i)
		f.add(&h)
	}
	for i := 0; i < n; i++ {
		if h := testHash(i); !f.mayContain(&h) {
			t.Fatalf("false negative for hash %d", i)
		}
	}
	if !f.full() {
		t.Fatalf("added %d over capacity %d but not full", f.added, f.capacity)
	}
	fresh := newTxFilter(n)
	for i := 0; i < n; i++ {
		h := testHash(i)
		fresh.add(&h)
	}
	fp := 0
	for i := n; i < 2*n; i++ {
		if h := testHash(i); fresh.mayContain(&h) {
			fp++
		}
	}
	if rate := float64(fp) / n; rate > 0.03 {
		t.Fatalf("false positive rate %.3f at capacity, want about 0.01", rate)
	}
}

// TestTxFilterBuiltFromStore: the filter built at the first block holds every
// tx of a store written earlier, so reopening never loses duplicates.
func TestTxFilterBuiltFromStore(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	b := &chain.Block{Height: 1, Hash: testHash(-1)}
	for i := 0; i < 50; i++ {
		b.Txs = append(b.Txs, chain.Tx{Hash: testHash(i), Outputs: []chain.Output{{Address: "a", Value: 1}, {Address: "b", Value: 2}}})
	}
	txn, err := s.NewBlock(b)
	if err != nil {
		t.Fatal(err)
	}
	for pos, tx := range b.Txs {
		for i := range tx.Outputs {
			u := chain.Utxo{OutPoint: chain.OutPoint{TxHash: tx.Hash, Index: uint32(i)}, Output: tx.Outputs[i], Height: 1, TxPos: uint32(pos)}
			if err := txn.Create(&u); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := txn.Commit(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	txn, err = s.NewBlock(&chain.Block{Height: 2, Hash: testHash(-2), PrevHash: b.Hash})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		h := testHash(i)
		if !s.txf.mayContain(&h) {
			t.Fatalf("tx %d of the store is not in the rebuilt filter", i)
		}
		rec, found, err := txn.Lookup(chain.OutPoint{TxHash: h, Index: 1})
		if err != nil || !found || rec.Utxo.Address != "b" {
			t.Fatalf("lookup of tx %d output 1: %+v %v %v", i, rec, found, err)
		}
	}
}

func TestBalanceCacheBounded(t *testing.T) {
	c := newBalanceCache(64, 1<<30)
	for i := 0; i < 1000; i++ {
		c.put(MakeDimKey(DimAddress, binary.BigEndian.AppendUint32(nil, uint32(i))), balanceRow{bal: chain.Balance{Count: uint64(i)}})
		if len(c.m) > 64 {
			t.Fatalf("cache holds %d entries, capacity 64", len(c.m))
		}
	}
	k := MakeDimKey(DimAddress, binary.BigEndian.AppendUint32(nil, 999))
	if b, ok := c.get(k); !ok || b.bal.Count != 999 {
		t.Fatalf("latest entry: %+v %v", b, ok)
	}
}

// TestBalanceCacheBytesBounded: rows of many assets are held within the
// byte budget, whatever the entry capacity; the bytes counted are those of
// the entries held; a row over a sixteenth of the budget is not kept, and
// replaces (drops) the stale entry of its key.
func TestBalanceCacheBytesBounded(t *testing.T) {
	const budget = 1 << 20
	c := newBalanceCache(1<<20, budget)
	row := func(assets int) balanceRow {
		var b balanceRow
		b.bal.Count = 1
		for j := range assets {
			b.bal.Assets = append(b.bal.Assets, chain.AssetSum{Policy: make([]byte, 28), Name: binary.BigEndian.AppendUint32(nil, uint32(j)), Quantity: chain.U128(1)})
		}
		return b
	}
	key := func(i int) DimKey { return MakeDimKey(DimAddress, binary.BigEndian.AppendUint32(nil, uint32(i))) }
	for i := range 2000 {
		c.put(key(i), row(1+i%400)) // 100 bytes to 38 KiB
		var sum int64
		for _, r := range c.m {
			sum += rowMemory(&r)
		}
		if sum != c.bytes || c.bytes > budget {
			t.Fatalf("after %d rows: %d bytes counted, %d held, budget %d", i+1, c.bytes, sum, budget)
		}
	}
	if b, ok := c.get(key(1999)); !ok || len(b.bal.Assets) != 1+1999%400 {
		t.Fatalf("latest entry: %v", ok)
	}
	c.put(key(1999), row(2000)) // over a sixteenth of the budget
	if _, ok := c.get(key(1999)); ok {
		t.Fatal("a row over a sixteenth of the budget was kept, or its stale entry left")
	}
}

// commitTestBlock commits a block at height h of n one-output txs whose
// hashes are testHash(first..first+n-1) and returns the new tip hash.
func commitTestBlock(t *testing.T, s *Store, h uint64, prev chain.Hash, first, n int) chain.Hash {
	t.Helper()
	b := &chain.Block{Height: h, Hash: testHash(-int(h)), PrevHash: prev}
	txn, err := s.NewBlock(b)
	if err != nil {
		t.Fatal(err)
	}
	for i := first; i < first+n; i++ {
		u := chain.Utxo{OutPoint: chain.OutPoint{TxHash: testHash(i)}, Output: chain.Output{Address: "a", Value: 1}, Height: h, TxPos: uint32(i - first)}
		if err := txn.Create(&u); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := txn.Commit(); err != nil {
		t.Fatal(err)
	}
	return b.Hash
}

// TestTxFilterRebuildInBackground: a full filter is rebuilt from a snapshot
// while blocks keep committing; the swapped-in filter holds the hashes of the
// snapshot and of every later commit (no false negatives at any point), and
// Close waits for a rebuild in flight.
func TestTxFilterRebuildInBackground(t *testing.T) {
	s, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.PrepareWrites(); err != nil {
		t.Fatal(err)
	}
	old := s.txf
	old.capacity = 30 // full after block 1
	release := make(chan struct{})
	s.testBeforeTxFilterBuild = func() { <-release }
	tip := commitTestBlock(t, s, 1, chain.Hash{}, 0, 40)
	r := s.txfRebuild
	if r == nil {
		t.Fatal("a full filter started no rebuild")
	}
	// Blocks committed while the build runs go to the old filter and to
	// pending; the build does not see them (it reads a snapshot).
	tip = commitTestBlock(t, s, 2, tip, 40, 40)
	tip = commitTestBlock(t, s, 3, tip, 80, 40)
	if s.txf != old || len(r.pending) != 80 {
		t.Fatalf("during the rebuild: filter swapped %v, %d pending, want 80", s.txf != old, len(r.pending))
	}
	close(release)
	built := <-r.done // wait for the builder, then hand its result back
	if built.err != nil {
		t.Fatal(built.err)
	}
	r.done <- built
	tip = commitTestBlock(t, s, 4, tip, 120, 40)
	if s.txf == old || s.txfRebuild != nil || s.Health().FilterRebuilds != 1 {
		t.Fatalf("after the build: swapped %v, rebuild pending %v, rebuilds %d", s.txf != old, s.txfRebuild != nil, s.Health().FilterRebuilds)
	}
	for i := 0; i < 160; i++ {
		if h := testHash(i); !s.txf.mayContain(&h) {
			t.Fatalf("tx %d is missing from the rebuilt filter", i)
		}
	}
	if s.txf.capacity < txFilterHeadroom {
		t.Fatalf("rebuilt capacity %d, want at least %d", s.txf.capacity, txFilterHeadroom)
	}

	// A rebuild in flight at Close is stopped and waited for.
	s.txf.capacity = 0
	commitTestBlock(t, s, 5, tip, 160, 1)
	if s.txfRebuild == nil {
		t.Fatal("no second rebuild")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestPrepareWritesUntilStops: a closing writer abandons the start-up scan,
// and the store stays unprepared (the next block prepares it).
func TestPrepareWritesUntilStops(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	tip := commitTestBlock(t, s, 1, chain.Hash{}, 0, 5000) // past one stop check
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(dir, Options{}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.PrepareWritesUntil(func() bool { return true }); !errors.Is(err, ErrStopped) || s.txf != nil {
		t.Fatalf("stopped prepare: err %v, prepared %v", err, s.txf != nil)
	}
	commitTestBlock(t, s, 2, tip, 5000, 1) // NewBlock prepares
	if h := testHash(4999); s.txf == nil || !s.txf.mayContain(&h) {
		t.Fatal("the next block did not prepare the store fully")
	}
}

package disk

import (
	"testing"

	"github.com/utxo-cache/utxo-cache/chain"
)

// TestPrefetchMatchesLookup: rows prefetched on several goroutines are the
// rows a plain Lookup reads: live outputs found with their content, unknown
// outpoints absent, duplicates harmless; a spend after the prefetch sees
// them.
func TestPrefetchMatchesLookup(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	tip := commitTestBlock(t, s, 1, chain.Hash{}, 0, 300)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Reopened: the young-output view is empty, so every live output is a
	// Pebble read.
	s, err = Open(dir, Options{PrefetchWorkers: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b := &chain.Block{Height: 2, Hash: testHash(-2), PrevHash: tip}
	txn, err := s.NewBlock(b)
	if err != nil {
		t.Fatal(err)
	}
	var ops []chain.OutPoint
	for i := range 300 {
		ops = append(ops, chain.OutPoint{TxHash: testHash(i)})
	}
	ops = append(ops, ops[:50]...)                                   // duplicates
	ops = append(ops, chain.OutPoint{TxHash: testHash(5), Index: 1}) // a tx with a row, not this index
	ops = append(ops, chain.OutPoint{TxHash: testHash(10_000)})      // no such tx
	before := s.Health().RecentMisses
	if err := txn.Prefetch(ops); err != nil {
		t.Fatal(err)
	}
	prefetched := s.Health().RecentMisses
	if got := prefetched - before; got < 300 {
		t.Fatalf("prefetch read %d rows from Pebble, want at least 300", got)
	}
	for i := range 300 {
		rec, found, err := txn.Lookup(chain.OutPoint{TxHash: testHash(i)})
		if err != nil || !found || rec.Spent != nil || rec.Utxo.Address != "a" || rec.Utxo.TxPos != uint32(i) || rec.Utxo.Height != 1 {
			t.Fatalf("output %d: %+v found %v err %v", i, rec, found, err)
		}
	}
	for _, op := range ops[len(ops)-2:] {
		if _, found, err := txn.Lookup(op); err != nil || found {
			t.Fatalf("%s: found %v err %v, want absent", op, found, err)
		}
	}
	if after := s.Health().RecentMisses; after != prefetched {
		t.Fatalf("lookups after the prefetch read Pebble again: %d reads", after-prefetched)
	}
	if err := txn.Spend(chain.OutPoint{TxHash: testHash(7)}, testHash(20_000), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Commit(); err != nil {
		t.Fatal(err)
	}
	if s.State().UtxoCount != 299 {
		t.Fatalf("count %d after one spend, want 299", s.State().UtxoCount)
	}
}

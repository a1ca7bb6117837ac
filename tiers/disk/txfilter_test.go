package disk

import (
	"crypto/sha256"
	"encoding/binary"
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
	c := newBalanceCache(64)
	for i := 0; i < 1000; i++ {
		c.put(MakeDimKey(DimAddress, binary.BigEndian.AppendUint32(nil, uint32(i))), chain.Balance{Count: uint64(i)})
		if len(c.m) > 64 {
			t.Fatalf("cache holds %d entries, capacity 64", len(c.m))
		}
	}
	k := MakeDimKey(DimAddress, binary.BigEndian.AppendUint32(nil, 999))
	if b, ok := c.get(k); !ok || b.Count != 999 {
		t.Fatalf("latest entry: %+v %v", b, ok)
	}
}

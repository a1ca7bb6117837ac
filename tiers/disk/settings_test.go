package disk_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

// TestSettingsRecorded: a store records its prune depth and rollback window
// when created; an Open that leaves them zero adopts them, and one that
// gives other values records the change.
func TestSettingsRecorded(t *testing.T) {
	dir := t.TempDir()
	st := stOpen(t, dir, disk.Options{PruneDepth: 20000, RollbackWindow: 7})
	st.apply(stChain(1, 1, 3)...)
	st.close()

	st = stOpen(t, dir, disk.Options{})
	if o := st.s.Options(); o.PruneDepth != 20000 || o.RollbackWindow != 7 {
		t.Fatalf("reopened with zero options: prune depth %d, window %d; want the recorded 20000, 7", o.PruneDepth, o.RollbackWindow)
	}
	st.close()

	st = stOpen(t, dir, disk.Options{RollbackWindow: 5}) // a deliberate change of one
	if o := st.s.Options(); o.PruneDepth != 20000 || o.RollbackWindow != 5 {
		t.Fatalf("changed the window: prune depth %d, window %d; want 20000, 5", o.PruneDepth, o.RollbackWindow)
	}
	st.close()

	st = stOpen(t, dir, disk.Options{})
	if o := st.s.Options(); o.PruneDepth != 20000 || o.RollbackWindow != 5 {
		t.Fatalf("after the change: prune depth %d, window %d; want the recorded 20000, 5", o.PruneDepth, o.RollbackWindow)
	}
	st.close()

	fresh := stOpen(t, t.TempDir(), disk.Options{})
	if o := fresh.s.Options(); o.PruneDepth != 2160 || o.RollbackWindow != 4320 {
		t.Fatalf("new store: prune depth %d, window %d; want the defaults", o.PruneDepth, o.RollbackWindow)
	}
}

// TestPublishedViewLagsCommit: readers see the published state only: a
// commit is invisible to PublishedView until Publish, and an open published
// view keeps its state after newer publishes.
func TestPublishedViewLagsCommit(t *testing.T) {
	dir := t.TempDir()
	s, err := disk.Open(dir, disk.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	blocks := stChain(1, 1, 2)
	for i, b := range blocks {
		txn, err := s.NewBlock(b)
		if err != nil {
			t.Fatal(err)
		}
		for pos := range b.Txs {
			var cerr error
			b.Txs[pos].Creates(func(index uint32, out *chain.Output, _ bool) {
				if cerr == nil {
					u := chain.Utxo{OutPoint: chain.OutPoint{TxHash: b.Txs[pos].Hash, Index: index}, Output: *out, Height: b.Height, TxPos: uint32(pos)}
					cerr = txn.Create(&u)
				}
			})
			if cerr != nil {
				t.Fatal(cerr)
			}
		}
		if _, err := txn.Commit(); err != nil {
			t.Fatal(err)
		}
		if got := s.Published().Seq; got != uint64(i) {
			t.Fatalf("after commit %d, before Publish: published seq %d, want %d", i+1, got, i)
		}
		v, err := s.PublishedView()
		if err != nil {
			t.Fatal(err)
		}
		if v.State().Seq != uint64(i) {
			t.Fatalf("a published view at seq %d before Publish of %d", v.State().Seq, i+1)
		}
		s.Publish()
		if got := s.Published().Seq; got != uint64(i+1) {
			t.Fatalf("after Publish: seq %d, want %d", got, i+1)
		}
		// The view opened before keeps its state, and stays readable.
		if _, err := v.Balance(disk.DimAddress, []byte("alice")); err != nil || v.State().Seq != uint64(i) {
			t.Fatalf("the older view after Publish: seq %d, %v", v.State().Seq, err)
		}
		v.Close()
	}
}

// TestChangeLog: every change is in the log, in order, with the figures
// after it; the log keeps LogRetention changes, and answers ErrAhead and
// ErrLogTruncated past its ends.
func TestChangeLog(t *testing.T) {
	st := stOpen(t, t.TempDir(), disk.Options{RollbackWindow: 10, LogRetention: 4})
	blocks := stChain(1, 1, 6)
	st.apply(blocks...)
	if _, err := st.w.Rollback(context.Background(), 4); err != nil {
		t.Fatal(err)
	}
	st.s.Publish()
	v, err := st.s.PublishedView()
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if v.State().Seq != 7 {
		t.Fatalf("seq %d after 6 blocks and a rollback, want 7", v.State().Seq)
	}
	data, n, err := v.Changes(3, 1<<20)
	if err != nil || n != 4 {
		t.Fatalf("changes after 3: %d, %v; want 4", n, err)
	}
	for q := uint64(4); q <= 7; q++ {
		c, rest, err := chain.DecodeChangeCBOR(data, chain.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		data = rest
		if c.Seq != q {
			t.Fatalf("record seq %d, want %d", c.Seq, q)
		}
		switch {
		case q <= 6 && (c.Kind != chain.ChangeApply || c.Block.Hash != blocks[q-1].Hash || c.After.Tip.Hash != blocks[q-1].Hash):
			t.Fatalf("record %d: %+v, want the apply of block %d", q, c, q)
		case q == 7 && (c.Kind != chain.ChangeRollback || c.Target.Height != 4 || c.Target.Hash != blocks[3].Hash || c.After != chain.Summary{Tip: v.Tip(), UtxoCount: v.State().UtxoCount, Digest: v.State().Digest}):
			t.Fatalf("record 7: %+v, want the rollback to 4 with the figures after it", c)
		}
	}
	if _, _, err := v.Changes(2, 1<<20); !errors.Is(err, disk.ErrLogTruncated) {
		t.Fatalf("changes after 2 with a retention of 4 at seq 7: %v, want ErrLogTruncated", err)
	}
	if _, _, err := v.Changes(8, 1<<20); !errors.Is(err, disk.ErrAhead) {
		t.Fatalf("changes after 8 at seq 7: %v, want ErrAhead", err)
	}
	if data, n, err := v.Changes(7, 1<<20); err != nil || n != 0 || len(data) != 0 {
		t.Fatalf("changes after the current seq: %d, %v", n, err)
	}
	// Seq 7 with a retention of 4: the log keeps 4..7.
	if first, err := v.FirstKept(); err != nil || first != 4 {
		t.Fatalf("FirstKept: %d, %v; want 4", first, err)
	}
	one, n, err := v.Changes(3, 1) // bounded: still one record
	if err != nil || n != 1 {
		t.Fatalf("changes after 3 within 1 byte: %d records, %v; want 1", n, err)
	}
	if full, _, _ := v.Changes(3, 1<<20); !bytes.HasPrefix(full, one) {
		t.Fatal("a bounded answer is not a prefix of the full one")
	}
}

// TestStoreChain: a store records the chain it is first opened for; an Open
// for another chain, once the store holds blocks, is refused with
// ErrWrongChain (a ChainMismatchError naming both) and changes nothing; an
// Open without a chain neither checks nor records; a store that never took a
// block takes the chain it is next opened for.
func TestStoreChain(t *testing.T) {
	dir := t.TempDir()
	st := stOpen(t, dir, disk.Options{Chain: "cardano", PruneDepth: 50})
	if got := st.s.Chain(); got != "cardano" {
		t.Fatalf("new store: chain %q, want cardano", got)
	}
	st.apply(stChain(1, 1, 3)...)
	before := st.s.State()
	st.close()

	row := func() []byte {
		s, err := disk.Open(dir, disk.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if s.State() != before {
			t.Fatalf("state %+v, want %+v", s.State(), before)
		}
		if s.Chain() != "cardano" || s.Options().PruneDepth != 50 {
			t.Fatalf("chain %q, prune depth %d; want cardano, 50", s.Chain(), s.Options().PruneDepth)
		}
		r, err := disk.SettingsRow(s)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	rowBefore := row()
	for _, opts := range []disk.Options{{Chain: "bitcoin"}, {Chain: "generic", PruneDepth: 9, RollbackWindow: 9}} {
		_, err := disk.Open(dir, opts)
		var mm *disk.ChainMismatchError
		if !errors.Is(err, disk.ErrWrongChain) || !errors.As(err, &mm) || mm.Have != "cardano" || mm.Want != opts.Chain {
			t.Fatalf("open for %s: %v (%+v), want a mismatch cardano/%s", opts.Chain, err, mm, opts.Chain)
		}
		if got := row(); !bytes.Equal(got, rowBefore) { // and the state checked in row
			t.Fatalf("refused open for %s changed the settings row: %x, was %x", opts.Chain, got, rowBefore)
		}
	}
	again := stOpen(t, dir, disk.Options{Chain: "cardano"})
	again.close()

	// A store that never took a block takes the next chain.
	empty := t.TempDir()
	stOpen(t, empty, disk.Options{Chain: "generic"}).close()
	e := stOpen(t, empty, disk.Options{Chain: "bitcoin"})
	if got := e.s.Chain(); got != "bitcoin" {
		t.Fatalf("empty store opened for bitcoin: chain %q", got)
	}
	e.close()

	if _, err := disk.Open(t.TempDir(), disk.Options{Chain: "Bit coin"}); err == nil {
		t.Fatal("a chain name with a space and capitals was accepted")
	}
}

// TestStoreChainOldStore: a store that records no chain (one written before
// chains were recorded: its settings row is version 1) opens, with or
// without a chain, and records the first chain given.
func TestStoreChainOldStore(t *testing.T) {
	dir := t.TempDir()
	st := stOpen(t, dir, disk.Options{})
	st.apply(stChain(1, 1, 3)...)
	before := st.s.State()
	r, err := disk.SettingsRow(st.s)
	if err != nil || len(r) != 17 || r[0] != 1 {
		t.Fatalf("settings row of a store without a chain: %x, %v; want the 17-byte version 1 row", r, err)
	}
	st.close()

	st = stOpen(t, dir, disk.Options{})
	if st.s.Chain() != "" || st.s.State() != before {
		t.Fatalf("old store: chain %q, state %+v; want none, %+v", st.s.Chain(), st.s.State(), before)
	}
	st.close()
	st = stOpen(t, dir, disk.Options{Chain: "bitcoin"})
	if st.s.Chain() != "bitcoin" || st.s.State() != before {
		t.Fatalf("old store opened for bitcoin: chain %q, state changed: %v", st.s.Chain(), st.s.State() != before)
	}
	st.close()
	if _, err := disk.Open(dir, disk.Options{Chain: "cardano"}); !errors.Is(err, disk.ErrWrongChain) {
		t.Fatalf("after recording bitcoin, open for cardano: %v, want ErrWrongChain", err)
	}
}

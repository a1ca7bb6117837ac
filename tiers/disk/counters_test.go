package disk_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

// wantCounters computes the counters of every address from the blocks
// alone (a transaction counts once per address it funds or spends from),
// independently of the store: outs are the outputs created before the
// blocks (by blocks not counted), which inputs may spend.
func wantCounters(blocks []*chain.Block, outs map[chain.OutPoint]chain.Output) map[string]disk.Counters {
	if outs == nil {
		outs = map[chain.OutPoint]chain.Output{}
	}
	got := map[string]disk.Counters{}
	for _, b := range blocks {
		for _, tx := range b.Txs {
			touched := map[string]bool{}
			for _, in := range tx.Spends() {
				o := outs[in]
				c := got[o.Address]
				c.SpentCount++
				c.SpentSum = c.SpentSum.AddU64(o.Value)
				got[o.Address] = c
				touched[o.Address] = true
			}
			tx.Creates(func(i uint32, o *chain.Output, _ bool) {
				outs[chain.OutPoint{TxHash: tx.Hash, Index: i}] = *o
				c := got[o.Address]
				c.FundedCount++
				c.FundedSum = c.FundedSum.AddU64(o.Value)
				got[o.Address] = c
				touched[o.Address] = true
			})
			for a := range touched {
				c := got[a]
				c.TxCount++
				got[a] = c
			}
		}
	}
	return got
}

func checkCounters(t *testing.T, s *disk.Store, want map[string]disk.Counters, from uint64) {
	t.Helper()
	v, err := s.PublishedView()
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	for _, a := range append(stAddrs, "nobody") {
		got, err := v.Counters(disk.DimAddress, []byte(a))
		if err != nil {
			t.Fatal(err)
		}
		w := want[a]
		w.FromHeight = from
		if got != w {
			t.Errorf("tip %s: counters of %s = %+v, want %+v", v.Tip(), a, got, w)
		}
	}
}

// TestCountersMigration: a store written when the counters had rows of
// their own (0x14 'c', beside version 1 balance rows) moves them into its
// balance rows at open; its counters and balances read the same, and it
// goes on counting and rolling back exactly.
func TestCountersMigration(t *testing.T) {
	ctx := context.Background()
	blocks := stChain(1, 0, 12)
	st := stOpen(t, t.TempDir(), disk.Options{Counters: true, RollbackWindow: 20})
	st.apply(blocks[:8]...)
	balances := func(s *disk.Store) map[string]chain.Balance {
		v, err := s.PublishedView()
		if err != nil {
			t.Fatal(err)
		}
		defer v.Close()
		m := map[string]chain.Balance{}
		for _, a := range stAddrs {
			if m[a], err = v.Balance(disk.DimAddress, []byte(a)); err != nil {
				t.Fatal(err)
			}
		}
		return m
	}
	before := balances(st.s)
	dir := st.dir
	st.close()
	moved := disk.DowngradeCounters(t, dir)
	if moved == 0 {
		t.Fatal("no counters to move")
	}
	st = stOpen(t, dir, disk.Options{RollbackWindow: 20})
	if n := disk.CounterRows(t, st.s); n != 0 {
		t.Errorf("%d counter rows left after the migration of %d", n, moved)
	}
	checkCounters(t, st.s, wantCounters(blocks[:8], nil), 0)
	if after := balances(st.s); !reflect.DeepEqual(after, before) {
		t.Errorf("balances after the migration:\n got %v\nwant %v", after, before)
	}
	// Rolling back a block counted before the migration subtracts it from
	// the moved counters.
	if _, err := st.w.Rollback(ctx, 5); err != nil {
		t.Fatal(err)
	}
	checkCounters(t, st.s, wantCounters(blocks[:6], nil), 0)
	st.apply(blocks[6:]...)
	checkCounters(t, st.s, wantCounters(blocks, nil), 0)
}

// TestCounters: the counters of a store that counts from genesis, across
// blocks applied one by one and in a catch-up window, and exact after a
// rollback; a store created mid-chain counts from its first block and says
// so; a store that does not count answers ErrNoCounters.
func TestCounters(t *testing.T) {
	ctx := context.Background()
	blocks := stChain(1, 0, 12)
	// A transaction that spends from and pays to carol in one block, and
	// pays bob twice: each counts once for them.
	for _, b := range blocks[3:] {
		prev := blocks[b.Height-1]
		b.Txs = append(b.Txs, chain.Tx{
			Hash:    stHash(1, 'x', b.Height),
			Inputs:  []chain.OutPoint{{TxHash: prev.Txs[len(prev.Txs)-1].Hash, Index: 0}},
			Outputs: []chain.Output{{Address: "carol", Value: 1}, {Address: "bob", Value: 2}, {Address: "bob", Value: 3}},
		})
	}
	// Block 3's extra spends block 2's carol output, which is tx 's'.
	blocks[3].Txs[2].Inputs = []chain.OutPoint{{TxHash: blocks[2].Txs[1].Hash, Index: 0}}

	st := stOpen(t, t.TempDir(), disk.Options{Counters: true, RollbackWindow: 20})
	st.apply(blocks[:5]...)
	checkCounters(t, st.s, wantCounters(blocks[:5], nil), 0)
	if _, err := st.w.ApplyBlocks(ctx, blocks[5:], 12); err != nil {
		t.Fatal(err)
	}
	checkCounters(t, st.s, wantCounters(blocks, nil), 0)
	if _, err := st.w.Rollback(ctx, 6); err != nil {
		t.Fatal(err)
	}
	checkCounters(t, st.s, wantCounters(blocks[:7], nil), 0)
	st.apply(blocks[7:]...)
	checkCounters(t, st.s, wantCounters(blocks, nil), 0)

	// Reopened without the option: it keeps counting.
	dir := st.dir
	st.close()
	st = stOpen(t, dir, disk.Options{RollbackWindow: 20})
	next := stChain(1, 12, 13)[1]
	next.Txs = next.Txs[:1]
	st.apply(next)
	checkCounters(t, st.s, wantCounters(append(blocks[:13:13], next), nil), 0)

	// Mid-chain: counts from its first block.
	mid := stChain(2, 100, 104)
	st2 := stOpen(t, t.TempDir(), disk.Options{Counters: true})
	st2.apply(mid...)
	checkCounters(t, st2.s, wantCounters(mid, nil), 100)

	// Counting turned on for a store with blocks: from the next block.
	st3 := stOpen(t, t.TempDir(), disk.Options{RollbackWindow: 20})
	st3.apply(mid[:2]...)
	v, err := st3.s.PublishedView()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Counters(disk.DimAddress, []byte("alice")); err != disk.ErrNoCounters {
		t.Errorf("counters of a store that does not count: %v", err)
	}
	v.Close()
	dir3 := st3.dir
	st3.close()
	st3 = stOpen(t, dir3, disk.Options{Counters: true, RollbackWindow: 20})
	checkCounters(t, st3.s, nil, 102)
	st3.apply(mid[2:]...)
	outs := map[chain.OutPoint]chain.Output{}
	wantCounters(mid[:2], outs)
	checkCounters(t, st3.s, wantCounters(mid[2:], outs), 102)
	// A rollback below where counting began: counts from there on.
	if _, err := st3.w.Rollback(ctx, 100); err != nil {
		t.Fatal(err)
	}
	checkCounters(t, st3.s, nil, 101)
	st3.apply(mid[1:]...)
	outs = map[chain.OutPoint]chain.Output{}
	wantCounters(mid[:1], outs)
	checkCounters(t, st3.s, wantCounters(mid[1:], outs), 101)
}

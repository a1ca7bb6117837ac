package disk_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
	"github.com/utxo-cache/utxo-cache/writer"
)

// leaseOpen opens dir with a writer that never sweeps (the test decides
// every expiry).
func leaseOpen(t *testing.T, dir string) *stStore {
	t.Helper()
	s, err := disk.Open(dir, disk.Options{RollbackWindow: 30})
	if err != nil {
		t.Fatal(err)
	}
	st := &stStore{t: t, dir: dir, s: s, w: writer.New(s, writer.Options{LeaseSweep: -1})}
	t.Cleanup(st.close)
	return st
}

// leasedState reads, from a view of the committed state, the expiry of the
// lease holding each op ("-" when none) and lease id's outpoints.
func leasedState(t *testing.T, s *disk.Store, id string, ops ...chain.OutPoint) string {
	t.Helper()
	v, err := s.NewView()
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	var b bytes.Buffer
	for _, op := range ops {
		until, found, err := v.LeasedUntil(op)
		if err != nil {
			t.Fatal(err)
		}
		if found {
			fmt.Fprintf(&b, "%d ", until)
		} else {
			b.WriteString("- ")
		}
	}
	li, found, err := v.Lease(id)
	if err != nil {
		t.Fatal(err)
	}
	if !found {
		return b.String() + id + ": none"
	}
	fmt.Fprintf(&b, "%s: until %d holds", id, li.ExpiresAt)
	for _, op := range li.OutPoints {
		fmt.Fprintf(&b, " %x:%d", op.TxHash[:2], op.Index)
	}
	return b.String()
}

// TestLeaseStore follows leases through the store: requests decided one
// by one and committed as one change (the first of two overlapping leases
// wins, refusals write nothing); a block that spends a leased output lapses
// it, also inside a catch-up window, and a rollback does not bring it back;
// the rows have the documented layout and survive a reopen; a sweep at the
// expiry removes them.
func TestLeaseStore(t *testing.T) {
	dir := t.TempDir()
	st := leaseOpen(t, dir)
	blocks := stChain(1, 1, 20)
	st.apply(blocks[:5]...)
	if err := st.w.Close(); err != nil { // the store alone from here
		t.Fatal(err)
	}
	bob2 := chain.OutPoint{TxHash: blocks[1].Txs[0].Hash, Index: 1}   // never spent
	alice5 := chain.OutPoint{TxHash: blocks[4].Txs[0].Hash, Index: 0} // spent by block 6
	alice8 := chain.OutPoint{TxHash: blocks[7].Txs[0].Hash, Index: 0} // spent by block 9, in a window
	bob3 := chain.OutPoint{TxHash: blocks[2].Txs[0].Hash, Index: 1}
	spent := chain.OutPoint{TxHash: blocks[0].Txs[0].Hash, Index: 0} // spent by block 2
	before := st.s.State()
	lease := func(id string, ttl uint32, ops ...chain.OutPoint) disk.WalletRequest {
		return disk.WalletRequest{Lease: &chain.LeaseRequest{ID: id, OutPoints: ops, TTL: ttl}}
	}
	res, err := st.s.Wallet([]disk.WalletRequest{
		lease("A", 100, bob2, alice5),
		lease("B", 0, alice5, bob3), // overlaps A: refused whole
		lease("C", 0, bob3),
		{Release: "nope"},               // nothing to release
		lease("D", 0, bob3, spent),      // a spent outpoint: refused
		lease("E", 0, chain.OutPoint{}), // unknown
	}, 1000)
	if err != nil || res.Changes == nil || res.Changes.Seq != before.Seq+1 || len(res.Ops) != 2 {
		t.Fatalf("batch: %+v, %v", res, err)
	}
	var held *chain.LeasedError
	o := res.Outcomes
	if o[0].Err != nil || o[0].LeaseID != "A" || o[0].ExpiresAt != 1100 || o[2].Err != nil || o[2].ExpiresAt != 1600 || o[3].Err != nil ||
		!errors.As(o[1].Err, &held) || len(held.Held) != 1 || held.Held[0] != (chain.HeldOutPoint{OutPoint: alice5, ExpiresAt: 1100}) ||
		!errors.Is(o[4].Err, chain.ErrUnknownInput) || !errors.Is(o[5].Err, chain.ErrUnknownInput) {
		t.Fatalf("outcomes: %+v", o)
	}
	if after := st.s.State(); after.Tip != before.Tip || after.UtxoCount != before.UtxoCount || after.Digest != before.Digest {
		t.Fatal("a wallet change moved the confirmed state")
	}
	first, second := fmt.Sprintf("%x:1", bob2.TxHash[:2]), fmt.Sprintf("%x:0", alice5.TxHash[:2])
	if chain.CompareOutPoints(alice5, bob2) < 0 {
		first, second = second, first // the lease row lists its outpoints in key order
	}
	if got, want := leasedState(t, st.s, "A", bob2, alice5, bob3), "1100 1100 1600 A: until 1100 holds "+first+" "+second; got != want {
		t.Fatalf("after the batch: %s, want %s", got, want)
	}
	// An expired lease holds nothing: at 1100, B's request would win.
	if r, err := st.s.Wallet([]disk.WalletRequest{lease("A", 0, bob3)}, 1100); err != nil || !errors.Is(r.Outcomes[0].Err, chain.ErrLeased) {
		t.Fatalf("renewing A onto C's output: %+v %v", r.Outcomes, err)
	}

	st.w = writer.New(st.s, writer.Options{LeaseSweep: -1})
	st.apply(blocks[5]) // spends alice5
	if got := leasedState(t, st.s, "A", alice5, bob2); got != fmt.Sprintf("- 1100 A: until 1100 holds %x:1", bob2.TxHash[:2]) {
		t.Fatalf("after the block that spends alice5: %s", got)
	}
	if _, err := st.w.Rollback(context.Background(), 5); err != nil {
		t.Fatal(err)
	}
	if got := leasedState(t, st.s, "A", alice5); got != fmt.Sprintf("- A: until 1100 holds %x:1", bob2.TxHash[:2]) {
		t.Fatalf("the rollback brought a lapsed lease back: %s", got)
	}
	st.apply(blocks[5:8]...)
	if err := st.w.Close(); err != nil {
		t.Fatal(err)
	}
	if r, err := st.s.Wallet([]disk.WalletRequest{lease("W", 50, alice8)}, 1000); err != nil || r.Outcomes[0].Err != nil {
		t.Fatalf("lease alice8: %+v %v", r, err)
	}
	st.w = writer.New(st.s, writer.Options{LeaseSweep: -1})
	if br, err := st.w.ApplyBlocks(context.Background(), blocks[8:], 20); err != nil || br.Done != len(blocks[8:]) {
		t.Fatalf("apply blocks: %+v, %v", br, err)
	}
	if got := leasedState(t, st.s, "W", alice8); got != "- W: until 1050 holds" {
		t.Fatalf("after a window spent alice8: %s", got)
	}

	// The rows' layout, and a reopen.
	st.close()
	raw := stGetRaw(t, dir, append(append([]byte{0x10}, bob2.TxHash[:]...), 0, 0, 0, 1))
	if want := append(binary.BigEndian.AppendUint64([]byte{0x01}, 1100), 1, 'A'); !bytes.Equal(raw, want) {
		t.Fatalf("held row %x, want %x", raw, want)
	}
	key := append([]byte{0x11, 'A'}, make([]byte, 63)...)
	raw = stGetRaw(t, dir, key)
	want := binary.BigEndian.AppendUint64([]byte{0x01}, 1100)
	want = append(append(append(want, 1), bob2.TxHash[:]...), 0, 0, 0, 1)
	if !bytes.Equal(raw, want) {
		t.Fatalf("lease row %x, want %x", raw, want)
	}
	st = leaseOpen(t, dir)
	if err := st.w.Close(); err != nil {
		t.Fatal(err)
	}
	if got := leasedState(t, st.s, "A", bob2); got != fmt.Sprintf("1100 A: until 1100 holds %x:1", bob2.TxHash[:2]) {
		t.Fatalf("after a reopen: %s", got)
	}
	// The sweep at 1100 ends A and W (C lasts until 1600).
	r, err := st.s.Wallet([]disk.WalletRequest{{Expire: true}}, 1100)
	if err != nil || r.Changes == nil || len(r.Ops) != 2 || r.Ops[0].LeaseID != "A" || r.Ops[1].LeaseID != "W" {
		t.Fatalf("sweep: %+v %v", r, err)
	}
	if got := leasedState(t, st.s, "C", bob2, bob3); got != fmt.Sprintf("- 1600 C: until 1600 holds %x:1", bob3.TxHash[:2]) {
		t.Fatalf("after the sweep: %s", got)
	}
	if r, err := st.s.Wallet([]disk.WalletRequest{{Expire: true}}, 1100); err != nil || r.Changes != nil {
		t.Fatalf("a sweep with nothing expired: %+v %v", r, err)
	}
}

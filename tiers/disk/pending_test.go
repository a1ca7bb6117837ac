package disk_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
	"github.com/utxo-cache/utxo-cache/writer"
)

func pendingOpen(t *testing.T, dir string, opts disk.Options, now *int64) *stStore {
	t.Helper()
	opts.RollbackWindow = 30
	s, err := disk.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	st := &stStore{t: t, dir: dir, s: s, w: writer.New(s, writer.Options{LeaseSweep: -1, Now: func() time.Time { return time.Unix(*now, 0) }})}
	t.Cleanup(st.close)
	return st
}

func ptx(tag byte, inputs []chain.OutPoint, outs ...chain.Output) chain.Tx {
	return chain.Tx{Hash: stHash(tag, 'p', 0), Inputs: inputs, Outputs: outs}
}

func op(tx chain.Tx, i uint32) chain.OutPoint { return chain.OutPoint{TxHash: tx.Hash, Index: i} }

// pendingState renders the status of each tx, and what the pending rows say
// of each address: its unconfirmed outputs and the outputs pending
// transactions spend.
func pendingState(t *testing.T, s *disk.Store, names map[chain.Hash]string, addrs []string, txs ...chain.Tx) string {
	t.Helper()
	v, err := s.NewView()
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	var b strings.Builder
	for _, tx := range txs {
		info, found, err := v.PendingStatus(tx.Hash)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case !found:
			fmt.Fprintf(&b, "%s:- ", names[tx.Hash])
		case info.Status == chain.PendingConfirmed:
			fmt.Fprintf(&b, "%s:confirmed@%d ", names[tx.Hash], info.Height)
		case info.Status == chain.PendingConflicting:
			fmt.Fprintf(&b, "%s:conflicting(%s) ", names[tx.Hash], names[info.ConflictsWith])
		default:
			fmt.Fprintf(&b, "%s:%s ", names[tx.Hash], info.Status)
		}
	}
	for _, a := range addrs {
		fmt.Fprintf(&b, "| %s +", a)
		if err := v.PendingOutputs(disk.DimAddress, []byte(a), false, func(o *disk.PendingOutput) error {
			fmt.Fprintf(&b, " %s:%d=%d", names[o.Utxo.TxHash], o.Utxo.Index, o.Utxo.Value)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		b.WriteString(" -")
		if err := v.PendingSpentOf(disk.DimAddress, []byte(a), func(o *disk.PendingSpentOutput) error {
			fmt.Fprintf(&b, " %s:%d=%d>%s", names[o.Utxo.TxHash], o.Utxo.Index, o.Utxo.Value, names[o.By.TxHash])
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		b.WriteString(" ")
	}
	return strings.TrimSpace(b.String())
}

// TestPendingStore follows pending transactions through the writer and the
// store: posts checked against live and pending outputs, a conflict and a
// replacement, a withdrawal with its descendant, blocks that confirm and
// conflict, a rollback that returns them in order, a reopen, an expiry and
// the bounds.
func TestPendingStore(t *testing.T) {
	dir := t.TempDir()
	now := int64(1000)
	st := pendingOpen(t, dir, disk.Options{}, &now)
	ctx := context.Background()
	cb := chain.Tx{Hash: stHash(1, 'c', 1), Coinbase: true, Outputs: []chain.Output{{Address: "alice", Value: 100}, {Address: "bob", Value: 50}}}
	b1 := &chain.Block{Height: 1, Hash: stHash(1, 'b', 1), Time: 500, Txs: []chain.Tx{cb}}
	b2 := &chain.Block{Height: 2, Hash: stHash(1, 'b', 2), PrevHash: b1.Hash, Time: 600, Txs: []chain.Tx{{Hash: stHash(1, 'c', 2), Coinbase: true, Outputs: []chain.Output{{Address: "zed", Value: 1}}}}}
	st.apply(b1, b2)

	p1 := ptx(1, []chain.OutPoint{op(cb, 0)}, chain.Output{Address: "carol", Value: 60}, chain.Output{Address: "alice", Value: 40})
	p2 := ptx(2, []chain.OutPoint{op(p1, 0)}, chain.Output{Address: "dave", Value: 60})
	x := ptx(3, []chain.OutPoint{op(cb, 0)}, chain.Output{Address: "erin", Value: 100})
	r := ptx(4, []chain.OutPoint{op(cb, 1)}, chain.Output{Address: "carol", Value: 50})
	p3 := ptx(5, []chain.OutPoint{op(x, 0)}, chain.Output{Address: "dave", Value: 99})
	p4 := ptx(6, []chain.OutPoint{op(cb, 1)}, chain.Output{Address: "dave", Value: 49})
	w := chain.Tx{Hash: stHash(7, 'w', 0), Inputs: []chain.OutPoint{op(cb, 1)}, Outputs: []chain.Output{{Address: "frank", Value: 50}}}
	names := map[chain.Hash]string{p1.Hash: "P1", p2.Hash: "P2", x.Hash: "X", r.Hash: "R", p3.Hash: "P3", p4.Hash: "P4", w.Hash: "W", cb.Hash: "cb"}
	all := []chain.Tx{p1, p2, x, r, p3, p4}
	addrs := []string{"alice", "bob", "carol", "dave"}
	post := func(tx chain.Tx, replace bool) (writer.PendingResult, error) {
		return st.w.Post(ctx, chain.PendingPost{Tx: tx, Replace: replace})
	}
	mustPost := func(tx chain.Tx, replace bool) {
		t.Helper()
		if res, err := post(tx, replace); err != nil || !res.Changed {
			t.Fatalf("post %s: %+v %v", names[tx.Hash], res, err)
		}
	}
	check := func(when, want string) {
		t.Helper()
		if got := pendingState(t, st.s, names, addrs, all...); got != want {
			t.Fatalf("%s:\n got %s\nwant %s", when, got, want)
		}
	}

	mustPost(p1, false)
	mustPost(p2, false)
	before := st.s.State()
	if res, err := post(p1, false); err != nil || res.Changed || res.Seq != before.Seq {
		t.Fatalf("posting P1 again: %+v %v", res, err)
	}
	var ce *chain.ConflictError
	if _, err := post(x, false); !errors.As(err, &ce) || ce.Spender != p1.Hash || ce.Input != 0 || ce.OutPoint != op(cb, 0) {
		t.Fatalf("double spend without replace: %v", err)
	}
	if _, err := post(ptx(9, []chain.OutPoint{op(p2, 5)}, chain.Output{Address: "a", Value: 1}), false); !errors.Is(err, chain.ErrUnknownInput) {
		t.Fatalf("a missing pending output: %v", err)
	}
	if _, err := post(ptx(9, []chain.OutPoint{op(b2.Txs[0], 0), op(b2.Txs[0], 0)}, chain.Output{Address: "a", Value: 1}), false); !errors.Is(err, chain.ErrInvalidArgument) {
		t.Fatalf("an input twice: %v", err)
	}
	if after := st.s.State(); after.Seq != before.Seq {
		t.Fatal("a refused post made a change")
	}
	mustPost(r, false)
	check("posted", "P1:pending P2:pending X:- R:pending P3:- P4:- | alice + P1:1=40 - cb:0=100>P1 | bob + - cb:1=50>R | carol + P1:0=60 R:0=50 - P1:0=60>P2 | dave + P2:0=60 -")
	if res, err := st.w.Withdraw(ctx, r.Hash); err != nil || !res.Changed {
		t.Fatalf("withdraw R: %+v %v", res, err)
	}
	if res, err := st.w.Withdraw(ctx, r.Hash); err != nil || res.Changed {
		t.Fatalf("withdraw R again: %+v %v", res, err)
	}
	mustPost(x, true) // evicts P1 and its child P2
	check("replaced", "P1:conflicting(X) P2:conflicting(X) X:pending R:withdrawn P3:- P4:- | alice + - cb:0=100>X | bob + - | carol + - | dave + -")

	b3 := &chain.Block{Height: 3, Hash: stHash(1, 'b', 3), PrevHash: b2.Hash, Time: 700, Txs: []chain.Tx{x}}
	st.apply(b3)
	mustPost(p3, false) // spends X's output, now confirmed
	mustPost(p4, false)
	b4 := &chain.Block{Height: 4, Hash: stHash(1, 'b', 4), PrevHash: b3.Hash, Time: 800, Txs: []chain.Tx{w}}
	st.apply(b4)
	check("blocks", "P1:conflicting(X) P2:conflicting(X) X:confirmed@3 R:withdrawn P3:pending P4:conflicting(W) | alice + - | bob + - | carol + - | dave + P3:0=99 -")

	if _, err := st.w.Rollback(ctx, 2); err != nil {
		t.Fatal(err)
	}
	got := pendingState(t, st.s, names, addrs, all...)
	// P4 was posted after P3: posting order, not the order they returned in.
	if want := "P1:conflicting(X) P2:conflicting(X) X:pending R:withdrawn P3:pending P4:pending | alice + - cb:0=100>X | bob + - cb:1=50>P4 | carol + - | dave + P3:0=99 P4:0=49 -"; got != want {
		t.Fatalf("after the rollback:\n got %s\nwant %s", got, want)
	}
	st.close()
	st = pendingOpen(t, dir, disk.Options{Pending: disk.PendingOptions{MaxTxs: 3, TTL: 100}}, &now)
	if got2 := pendingState(t, st.s, names, addrs, all...); got2 != got {
		t.Fatalf("after a reopen:\n got %s\nwant %s", got2, got)
	}
	// Three pending: the bound refuses a fourth, and changes nothing.
	if _, err := post(ptx(10, []chain.OutPoint{op(b2.Txs[0], 0)}, chain.Output{Address: "a", Value: 1}), false); !errors.Is(err, chain.ErrInsufficientStorage) {
		t.Fatalf("over the bound: %v", err)
	}
	// Expiry: X was posted at 1000 with the default TTL; the others too.
	if n, _ := st.s.PendingCount(); n != 3 {
		t.Fatalf("%d pending", n)
	}
	now = 1000 + chain.DefaultPendingTTL
	if _, err := st.w.ExpireLeases(ctx); err != nil {
		t.Fatal(err)
	}
	check("expired", "P1:conflicting(X) P2:conflicting(X) X:expired R:withdrawn P3:expired P4:expired | alice + - | bob + - | carol + - | dave + -")

	// Statuses are forgotten once the chain passes the rollback window
	// (30 blocks here) beyond where it was when they left.
	prev := b2
	var blocks []*chain.Block
	for h := uint64(3); h <= 40; h++ {
		b := &chain.Block{Height: h, Hash: stHash(2, 'b', h), PrevHash: prev.Hash, Txs: []chain.Tx{{Hash: stHash(2, 'c', h), Coinbase: true, Outputs: []chain.Output{{Address: "z", Value: 1}}}}}
		blocks = append(blocks, b)
		prev = b
	}
	st.apply(blocks[:30]...) // to height 32
	if got := pendingState(t, st.s, names, nil, all...); got != "P1:conflicting(X) P2:conflicting(X) X:expired R:withdrawn P3:expired P4:expired" {
		t.Fatalf("at 32, nothing is forgotten yet: %s", got)
	}
	st.apply(blocks[30]) // 33: what left when the chain had reached 2 goes
	if got := pendingState(t, st.s, names, nil, all...); got != "P1:- P2:- X:expired R:- P3:expired P4:expired" {
		t.Fatalf("at 33: %s", got)
	}
	st.apply(blocks[31:]...)
	if got := pendingState(t, st.s, names, nil, all...); got != "P1:- P2:- X:- R:- P3:- P4:-" {
		t.Fatalf("after the window: %s", got)
	}
}

// TestRollbackReplacesSpentOutput: a block that spends an output and
// creates another on the same outpoint (a transaction hash used again, as
// Bitcoin allowed before BIP 30) is rolled back while a pending transaction
// spends the new output: the output it spends is gone (the earlier one is
// live again), so it is withdrawn with its descendant, and the block's own
// transaction, which spent the earlier output, returns to pending.
func TestRollbackReplacesSpentOutput(t *testing.T) {
	now := int64(1000)
	st := pendingOpen(t, t.TempDir(), disk.Options{}, &now)
	ctx := context.Background()
	d := chain.Tx{Hash: stHash(1, 'd', 0), Coinbase: true, Outputs: []chain.Output{{Address: "alice", Value: 100}}}
	b1 := &chain.Block{Height: 1, Hash: stHash(1, 'b', 1), Time: 500, Txs: []chain.Tx{d}}
	st.apply(b1)
	s := ptx(1, []chain.OutPoint{op(d, 0)}, chain.Output{Address: "erin", Value: 90})
	if _, err := st.w.Post(ctx, chain.PendingPost{Tx: s}); err != nil {
		t.Fatal(err)
	}
	again := chain.Tx{Hash: d.Hash, Outputs: []chain.Output{{Address: "bob", Value: 70}}}
	b2 := &chain.Block{Height: 2, Hash: stHash(1, 'b', 2), PrevHash: b1.Hash, Time: 600, Txs: []chain.Tx{s, again}}
	st.apply(b2)
	p := ptx(2, []chain.OutPoint{op(d, 0)}, chain.Output{Address: "carol", Value: 60})
	c := ptx(3, []chain.OutPoint{op(p, 0)}, chain.Output{Address: "dave", Value: 50})
	for _, tx := range []chain.Tx{p, c} {
		if _, err := st.w.Post(ctx, chain.PendingPost{Tx: tx}); err != nil {
			t.Fatal(err)
		}
	}
	names := map[chain.Hash]string{d.Hash: "D", s.Hash: "S", p.Hash: "P", c.Hash: "C"}
	addrs := []string{"alice", "bob", "carol", "erin"}
	if got, want := pendingState(t, st.s, names, addrs, s, p, c), "S:confirmed@2 P:pending C:pending | alice + - | bob + - D:0=70>P | carol + P:0=60 - P:0=60>C | erin + -"; got != want {
		t.Fatalf("before the rollback:\n got %s\nwant %s", got, want)
	}
	if _, err := st.w.Rollback(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if got, want := pendingState(t, st.s, names, addrs, s, p, c), "S:pending P:withdrawn C:withdrawn | alice + - D:0=100>S | bob + - | carol + - | erin + S:0=90 -"; got != want {
		t.Fatalf("after the rollback:\n got %s\nwant %s", got, want)
	}
}

// TestRollbackMovesSurviveCrash: a rollback of two blocks that each
// confirmed a pending transaction, interrupted by a crash after its first
// batch and completed by the next Open, logs one change record whose pending
// moves are both batches' (the transactions returned to pending, tip block's
// first), as an uninterrupted rollback's are.
func TestRollbackMovesSurviveCrash(t *testing.T) {
	for _, crash := range []bool{false, true} {
		t.Run(fmt.Sprintf("crash=%v", crash), func(t *testing.T) {
			dir := t.TempDir()
			now := int64(1000)
			st := pendingOpen(t, dir, disk.Options{}, &now)
			ctx := context.Background()
			cb := chain.Tx{Hash: stHash(1, 'c', 1), Coinbase: true, Outputs: []chain.Output{{Address: "alice", Value: 100}}}
			b1 := &chain.Block{Height: 1, Hash: stHash(1, 'b', 1), Time: 500, Txs: []chain.Tx{cb}}
			st.apply(b1)
			p1 := ptx(1, []chain.OutPoint{op(cb, 0)}, chain.Output{Address: "bob", Value: 60})
			if _, err := st.w.Post(ctx, chain.PendingPost{Tx: p1}); err != nil {
				t.Fatal(err)
			}
			b2 := &chain.Block{Height: 2, Hash: stHash(1, 'b', 2), PrevHash: b1.Hash, Time: 600, Txs: []chain.Tx{p1}}
			st.apply(b2)
			p2 := ptx(2, []chain.OutPoint{op(p1, 0)}, chain.Output{Address: "carol", Value: 50})
			if _, err := st.w.Post(ctx, chain.PendingPost{Tx: p2}); err != nil {
				t.Fatal(err)
			}
			b3 := &chain.Block{Height: 3, Hash: stHash(1, 'b', 3), PrevHash: b2.Hash, Time: 700, Txs: []chain.Tx{p2}}
			st.apply(b3)
			if crash {
				if err := st.w.Close(); err != nil {
					t.Fatal(err)
				}
				if err := disk.RollbackOneBlock(st.s, 1); err != nil {
					t.Fatal(err)
				}
				if err := st.s.Close(); err != nil {
					t.Fatal(err)
				}
				st.s, st.w = nil, nil
				st = pendingOpen(t, dir, disk.Options{}, &now) // completes the rollback
			} else if r, err := st.w.Rollback(ctx, 1); err != nil || !r.Applied {
				t.Fatalf("rollback: %+v %v", r, err)
			}
			v, err := st.s.NewView()
			if err != nil {
				t.Fatal(err)
			}
			defer v.Close()
			seq := v.State().Seq
			rec, n, err := v.Changes(seq-1, 1<<20)
			if err != nil || n != 1 {
				t.Fatalf("the last record: %d, %v", n, err)
			}
			c, _, err := chain.DecodeChangeCBOR(rec, chain.Limits{})
			if err != nil || c.Kind != chain.ChangeRollback {
				t.Fatalf("the last record: %+v %v", c, err)
			}
			var got []string
			for _, mv := range c.Pending {
				got = append(got, fmt.Sprintf("%x:%s:%s", mv.Tx.Hash[:2], mv.Status, mv.Spent[0].OutPoint))
			}
			want := []string{
				fmt.Sprintf("%x:pending:%s", p2.Hash[:2], op(p1, 0)),
				fmt.Sprintf("%x:pending:%s", p1.Hash[:2], op(cb, 0)),
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("moves %v, want %v", got, want)
			}
		})
	}
}

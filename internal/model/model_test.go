package model

import (
	"errors"
	"math"
	"reflect"
	"slices"
	"testing"

	"github.com/utxo-cache/utxo-cache/chain"
)

func hash(b byte) chain.Hash {
	var h chain.Hash
	h[0], h[31] = b, 0xee
	return h
}

func op(tx byte, i uint32) chain.OutPoint { return chain.OutPoint{TxHash: hash(tx), Index: i} }

func out(addr string, v uint64, assets ...chain.Asset) chain.Output {
	return chain.Output{Address: addr, Value: v, Assets: assets}
}

// sameState reports whether two models answer everything alike.
func sameState(a, b *Model) bool {
	return a.tip == b.tip && reflect.DeepEqual(a.rows, b.rows) && reflect.DeepEqual(a.hashes, b.hashes)
}

func mustApply(t *testing.T, m *Model, b *chain.Block) {
	t.Helper()
	applied, err := m.Apply(b, false)
	if err != nil || !applied {
		t.Fatalf("apply %d: applied=%v err=%v", b.Height, applied, err)
	}
}

// genesis: a coinbase paying alice 2^64-1 with assets, and a tx spending it
// in the same block.
func genesis() *chain.Block {
	return &chain.Block{Height: 1, Hash: hash(1), Txs: []chain.Tx{
		{Hash: hash(10), Coinbase: true, Outputs: []chain.Output{
			out("alice", math.MaxUint64,
				chain.Asset{Policy: []byte{2}, Name: []byte("b"), Quantity: 5},
				chain.Asset{Policy: []byte{1}, Name: []byte("z"), Quantity: math.MaxUint64}),
			out("alice", math.MaxUint64, chain.Asset{Policy: []byte{1}, Name: []byte("z"), Quantity: 3}),
		}},
		{Hash: hash(11), Inputs: []chain.OutPoint{op(10, 0)}, Outputs: []chain.Output{out("bob", 7), out("alice", 1)}},
	}}
}

func TestApplyBasics(t *testing.T) {
	m := New(2, 3)
	if !m.Tip().Empty || m.Count() != 0 || m.Digest() != (chain.Digest{}) {
		t.Fatalf("new model: %v %d %v", m.Tip(), m.Count(), m.Digest())
	}
	mustApply(t, m, genesis())
	if got := m.Tip(); got != (chain.Tip{Height: 1, Hash: hash(1)}) {
		t.Fatalf("tip %v", got)
	}
	if m.Count() != 3 {
		t.Fatalf("count %d", m.Count())
	}
	u, sp, err := m.Utxo(op(10, 0))
	if err != nil || sp == nil || *sp != (chain.Spent{TxHash: hash(11), Height: 1}) || !u.Coinbase() {
		t.Fatalf("spent in block: %+v %+v %v", u, sp, err)
	}
	if !chain.AssetsSorted(u.Assets) || string(u.Assets[0].Policy) != "\x01" {
		t.Fatalf("assets not sorted: %+v", u.Assets)
	}
	u, sp, err = m.Utxo(op(11, 1))
	if err != nil || sp != nil || u.Address != "alice" || u.TxPos != 1 || u.Height != 1 || u.Flags != 0 {
		t.Fatalf("live: %+v %+v %v", u, sp, err)
	}
	if _, _, err := m.Utxo(op(99, 0)); !errors.Is(err, chain.ErrNotFound) {
		t.Fatalf("never existed: %v", err)
	}

	// Listing in chain order: (1,0,1) then (1,1,1).
	l := m.List("alice", false)
	if len(l) != 2 || l[0].OutPoint != op(10, 1) || l[1].OutPoint != op(11, 1) {
		t.Fatalf("list asc %+v", l)
	}
	d := m.List("alice", true)
	if len(d) != 2 || d[0].OutPoint != op(11, 1) {
		t.Fatalf("list desc %+v", d)
	}
	if l := m.List("nobody", false); len(l) != 0 {
		t.Fatalf("nobody %+v", l)
	}

	// alice: 2^64-1 + 1 = 2^64, asset (1,z) = 3.
	bal := m.Balance("alice")
	want := chain.Balance{Value: chain.Uint128{Hi: 1}, Count: 2, Assets: []chain.AssetSum{
		{Policy: []byte{1}, Name: []byte("z"), Quantity: chain.U128(3)},
	}}
	if !reflect.DeepEqual(bal, want) {
		t.Fatalf("balance %+v, want %+v", bal, want)
	}
	if b := m.Balance("nobody"); !reflect.DeepEqual(b, chain.Balance{}) {
		t.Fatalf("empty balance %+v", b)
	}

	// The digest is the sum of the live terms.
	var dg chain.Digest
	for _, u := range m.Live() {
		dg.Add(&u)
	}
	if m.Digest() != dg || dg == (chain.Digest{}) {
		t.Fatalf("digest %v want %v", m.Digest(), dg)
	}
}

func TestBalanceSumsPast64Bits(t *testing.T) {
	m := New(2, 3)
	b := &chain.Block{Height: 5, Hash: hash(5), Txs: []chain.Tx{{Hash: hash(50), Outputs: []chain.Output{
		out("a", math.MaxUint64, chain.Asset{Policy: []byte("p"), Quantity: math.MaxUint64}),
		out("a", math.MaxUint64, chain.Asset{Policy: []byte("p"), Quantity: math.MaxUint64}),
		out("a", math.MaxUint64, chain.Asset{Policy: []byte("p"), Quantity: 2}),
	}}}}
	mustApply(t, m, b)
	bal := m.Balance("a")
	// 3 * (2^64-1) = 2*2^64 + (2^64-3); 2*(2^64-1)+2 = 2*2^64.
	if bal.Value != (chain.Uint128{Hi: 2, Lo: math.MaxUint64 - 2}) || bal.Assets[0].Quantity != (chain.Uint128{Hi: 2}) {
		t.Fatalf("balance %+v", bal)
	}
}

func TestRejectionsChangeNothing(t *testing.T) {
	base := New(2, 3)
	mustApply(t, base, genesis())
	next := func(txs ...chain.Tx) *chain.Block {
		return &chain.Block{Height: 2, Hash: hash(2), PrevHash: hash(1), Txs: txs}
	}
	ok := chain.Tx{Hash: hash(20), Inputs: []chain.OutPoint{op(11, 0)}, Outputs: []chain.Output{out("c", 1)}}
	cases := []struct {
		name string
		b    *chain.Block
		want error
	}{
		{"wrong height", &chain.Block{Height: 3, Hash: hash(3), PrevHash: hash(1)}, chain.ErrNotNextBlock},
		{"wrong prev", &chain.Block{Height: 2, Hash: hash(2), PrevHash: hash(9)}, chain.ErrNotNextBlock},
		{"other block at tip height", &chain.Block{Height: 1, Hash: hash(7)}, chain.ErrNotNextBlock},
		{"below tip", &chain.Block{Height: 0, Hash: hash(7)}, chain.ErrNotNextBlock},
		{"unknown input", next(ok, chain.Tx{Hash: hash(21), Inputs: []chain.OutPoint{op(99, 0)}}), chain.ErrUnknownInput},
		{"spent input", next(chain.Tx{Hash: hash(21), Inputs: []chain.OutPoint{op(10, 0)}}), chain.ErrUnknownInput},
		{"unknown collateral", next(chain.Tx{Hash: hash(21), Invalid: true, CollateralInputs: []chain.OutPoint{op(99, 0)}}), chain.ErrUnknownInput},
		{"double spend across txs", next(ok, chain.Tx{Hash: hash(21), Inputs: []chain.OutPoint{op(11, 0)}}), chain.ErrDoubleSpend},
		{"double spend in tx", next(chain.Tx{Hash: hash(21), Inputs: []chain.OutPoint{op(11, 0), op(11, 0)}}), chain.ErrDoubleSpend},
		{"spend created then spent in block", next(
			chain.Tx{Hash: hash(21), Outputs: []chain.Output{out("x", 1)}},
			chain.Tx{Hash: hash(22), Inputs: []chain.OutPoint{op(21, 0)}},
			chain.Tx{Hash: hash(23), Inputs: []chain.OutPoint{op(21, 0)}},
		), chain.ErrDoubleSpend},
		{"duplicate of live", next(chain.Tx{Hash: hash(11), Outputs: []chain.Output{out("x", 1)}}), chain.ErrDuplicateOutpoint},
		{"duplicate in block", next(ok, chain.Tx{Hash: hash(20), Outputs: []chain.Output{out("x", 1)}}), chain.ErrDuplicateOutpoint},
		{"collateral return on live", next(chain.Tx{Hash: hash(11), Invalid: true, Outputs: []chain.Output{out("x", 1)},
			CollateralReturn: &chain.Output{Address: "x", Value: 1}}), chain.ErrDuplicateOutpoint},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := base.Clone()
			applied, err := m.Apply(c.b, false)
			if !errors.Is(err, c.want) || applied {
				t.Fatalf("got applied=%v %v, want %v", applied, err, c.want)
			}
			if !sameState(m, base) || len(m.undo) != len(base.undo) {
				t.Fatal("a rejected block changed the model")
			}
		})
	}
}

func TestSkipUnknown(t *testing.T) {
	m := New(2, 3)
	mustApply(t, m, genesis())
	b := &chain.Block{Height: 2, Hash: hash(2), PrevHash: hash(1), Txs: []chain.Tx{
		{Hash: hash(20), Inputs: []chain.OutPoint{op(99, 0), op(10, 0), op(11, 0)}, Outputs: []chain.Output{out("c", 1)}},
	}}
	if applied, err := m.Apply(b, true); err != nil || !applied {
		t.Fatalf("skip: %v %v", applied, err)
	}
	if _, sp, _ := m.Utxo(op(11, 0)); sp == nil || sp.TxHash != hash(20) {
		t.Fatalf("the known input was not spent: %+v", sp)
	}
	if _, sp, _ := m.Utxo(op(10, 0)); sp == nil || sp.TxHash != hash(11) {
		t.Fatalf("a skipped spent input changed: %+v", sp)
	}
}

func TestRepost(t *testing.T) {
	m := New(2, 3)
	g := genesis()
	mustApply(t, m, g)
	b2 := &chain.Block{Height: 2, Hash: hash(2), PrevHash: hash(1)}
	mustApply(t, m, b2)
	before := m.Clone()
	for _, b := range []*chain.Block{g, b2, {Height: 2, Hash: hash(2), PrevHash: hash(77)}} {
		applied, err := m.Apply(b, false)
		if err != nil || applied {
			t.Fatalf("re-post of %d: %v %v", b.Height, applied, err)
		}
	}
	if !sameState(m, before) || len(m.undo) != len(before.undo) {
		t.Fatal("a re-post changed the model")
	}
}

func TestPhase2Invalid(t *testing.T) {
	m := New(2, 3)
	mustApply(t, m, genesis())
	cr := out("carol", 4)
	b := &chain.Block{Height: 2, Hash: hash(2), PrevHash: hash(1), Txs: []chain.Tx{{
		Hash:             hash(20),
		Invalid:          true,
		Inputs:           []chain.OutPoint{op(11, 1), op(98, 3)}, // neither checked nor spent
		Outputs:          []chain.Output{out("x", 1), out("y", 2)},
		CollateralInputs: []chain.OutPoint{op(11, 0)},
		CollateralReturn: &cr,
	}}}
	mustApply(t, m, b)
	if !m.IsLive(op(11, 1)) {
		t.Fatal("an invalid tx's input was spent")
	}
	if _, sp, _ := m.Utxo(op(11, 0)); sp == nil || sp.TxHash != hash(20) {
		t.Fatal("collateral not spent")
	}
	for _, i := range []uint32{0, 1} {
		if _, _, err := m.Utxo(op(20, i)); !errors.Is(err, chain.ErrNotFound) {
			t.Fatalf("output %d of an invalid tx exists", i)
		}
	}
	u, _, err := m.Utxo(op(20, 2))
	if err != nil || !u.CollateralReturn() || u.Coinbase() || u.Address != "carol" {
		t.Fatalf("collateral return: %+v %v", u, err)
	}
	// An invalid tx without a collateral return creates nothing.
	mustApply(t, m, &chain.Block{Height: 3, Hash: hash(3), PrevHash: hash(2), Txs: []chain.Tx{
		{Hash: hash(30), Invalid: true, Outputs: []chain.Output{out("x", 1)}},
	}})
	if _, _, err := m.Utxo(op(30, 1)); !errors.Is(err, chain.ErrNotFound) {
		t.Fatal("created without a collateral return")
	}
}

func TestSpentVisibilityAndRecreation(t *testing.T) {
	m := New(2, 10)
	mustApply(t, m, genesis()) // 10:0 spent at 1
	for h := uint64(2); h <= 4; h++ {
		mustApply(t, m, &chain.Block{Height: h, Hash: hash(byte(h)), PrevHash: hash(byte(h - 1))})
		_, sp, err := m.Utxo(op(10, 0))
		if visible := h-1 <= 2; visible != (err == nil) || (visible && sp == nil) {
			t.Fatalf("tip %d: spent=%v err=%v", h, sp, err)
		}
	}
	// Re-create 10:0 (its record is pruned from view) and 11:0 after
	// spending it in the same block: the live ones show.
	mustApply(t, m, &chain.Block{Height: 5, Hash: hash(5), PrevHash: hash(4), Txs: []chain.Tx{
		{Hash: hash(10), Outputs: []chain.Output{out("new", 1)}},
		{Hash: hash(11), Inputs: []chain.OutPoint{op(11, 0)}, Outputs: []chain.Output{out("again", 2)}},
	}})
	for _, c := range []struct {
		op   chain.OutPoint
		addr string
	}{{op(10, 0), "new"}, {op(11, 0), "again"}} {
		u, sp, err := m.Utxo(c.op)
		if err != nil || sp != nil || u.Address != c.addr || u.Height != 5 {
			t.Fatalf("%s: %+v %v %v", c.op, u, sp, err)
		}
	}
	// Rolling back brings the spent records back.
	if err := m.Rollback(4); err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.Utxo(op(10, 0)); !errors.Is(err, chain.ErrNotFound) {
		t.Fatalf("10:0 after rollback: %v", err)
	}
	if u, sp, err := m.Utxo(op(11, 0)); err != nil || sp != nil || u.Address != "bob" {
		t.Fatalf("11:0 after rollback: %+v %v %v", u, sp, err)
	}
}

func chainOf(t *testing.T, m *Model, from, to uint64, tag byte) []*Model {
	t.Helper()
	var states []*Model
	for h := from; h <= to; h++ {
		b := &chain.Block{Height: h, Hash: hash(tag + byte(h)), Txs: []chain.Tx{
			{Hash: hash(tag + 100 + byte(h)), Coinbase: true, Outputs: []chain.Output{out("a", h)}},
		}}
		if t := m.Tip(); !t.Empty {
			b.PrevHash = t.Hash
		}
		mustApply(t, m, b)
		states = append(states, m.Clone())
	}
	return states
}

func TestRollback(t *testing.T) {
	m := New(2, 3)
	states := chainOf(t, m, 1, 6, 0) // states[i] is right after block i+1

	if err := m.Rollback(7); !errors.Is(err, chain.ErrInvalidArgument) {
		t.Fatalf("above tip: %v", err)
	}
	if err := m.Rollback(2); !errors.Is(err, chain.ErrRollbackTooDeep) {
		t.Fatalf("too deep: %v", err)
	}
	if err := m.Rollback(6); err != nil || !sameState(m, states[5]) {
		t.Fatalf("no-op: %v", err)
	}
	if !sameState(m, states[5]) {
		t.Fatal("refused rollbacks changed the model")
	}
	if err := m.Rollback(4); err != nil || !sameState(m, states[3]) {
		t.Fatalf("rollback to 4: %v", err)
	}
	if _, ok := m.HashAt(5); ok {
		t.Fatal("hash of a rolled-back block kept")
	}
	// The floor of the bounded reading is measured from the highest tip
	// applied: 6 - 3 = 3, although 4 - 1 = 3 is within the window from the
	// current tip. The model itself keeps the whole history and can go there.
	if f := m.RollbackFloor(); f != 3 {
		t.Fatalf("floor %d", f)
	}
	if err := m.Rollback(3); err != nil || !sameState(m, states[2]) {
		t.Fatalf("rollback to the floor: %v", err)
	}
	// A new branch from 3 raises the floor only once it passes the old tip.
	chainOf(t, m, 4, 5, 50)
	if h, _ := m.HashAt(4); h == hash(4) {
		t.Fatal("branch did not replace block 4")
	}
	if f := m.RollbackFloor(); f != 3 {
		t.Fatalf("floor after a lower branch %d", f)
	}
	if err := m.Rollback(2); err != nil || !sameState(m, states[1]) {
		t.Fatalf("below the floor: %v", err)
	}
	if err := m.Rollback(1); err != nil || !sameState(m, states[0]) {
		t.Fatalf("second rollback below the floor: %v", err)
	}
	if f := m.RollbackFloor(); f != 3 {
		t.Fatalf("floor after rollbacks %d", f)
	}
	if err := m.CheckRollback(0); err != nil {
		t.Fatalf("check rollback to 0: %v", err)
	}
	chainOf(t, m, 2, 7, 80)
	if f := m.RollbackFloor(); f != 4 {
		t.Fatalf("floor after a higher branch %d", f)
	}
}

func TestRollbackPastFirstBlock(t *testing.T) {
	m := New(2, 10)
	empty := m.Clone()
	if err := m.Rollback(0); !errors.Is(err, chain.ErrInvalidArgument) {
		t.Fatalf("rollback of an empty model: %v", err)
	}
	chainOf(t, m, 100, 102, 0)
	// Below the first block's parent: the empty state.
	if f, ok := m.FirstHeight(); f != 100 || !ok {
		t.Fatalf("first height %d %v", f, ok)
	}
	if err := m.Rollback(95); err != nil || !sameState(m, empty) || m.Count() != 0 {
		t.Fatalf("past the first block: %v %v", err, m.Tip())
	}
	if _, ok := m.FirstHeight(); ok || m.RollbackFloor() != 0 {
		t.Fatal("an empty model has a first block or a floor")
	}
	// Any block may follow.
	chainOf(t, m, 7, 8, 30)
	if m.Tip().Height != 8 {
		t.Fatalf("tip %v", m.Tip())
	}
}

func TestCloneIsIndependent(t *testing.T) {
	m := New(2, 3)
	mustApply(t, m, genesis())
	c := m.Clone()
	chainOf(t, c, 2, 3, 60)
	if m.Tip().Height != 1 || c.Tip().Height != 3 {
		t.Fatal("clone shares state")
	}
	if err := c.Rollback(1); err != nil || !sameState(m, c) {
		t.Fatalf("clone rollback: %v", err)
	}
}

// Every block Gen builds is valid, every bad block is rejected with its
// declared class and changes nothing, and one seed gives one chain.
func TestGen(t *testing.T) {
	build := func(seed uint64, steps int) ([]*chain.Block, *Model) {
		g := NewGen(seed, GenOptions{})
		m := New(3, 6)
		var blocks []*chain.Block
		faults := make(map[Fault]int)
		for i := range steps {
			if i%5 == 4 {
				bad, f := g.BadBlock(m)
				want := f.Want()
				faults[f]++
				before := m.Clone()
				applied, err := m.Apply(bad, false)
				if !errors.Is(err, want) || applied || !sameState(m, before) {
					t.Fatalf("seed %d step %d fault %s: applied=%v err=%v want %v", seed, i, f, applied, err, want)
				}
				continue
			}
			if i%37 == 36 {
				if err := m.Rollback(m.Tip().Height - uint64(g.Rand().IntN(4))); err != nil {
					t.Fatal(err)
				}
				continue
			}
			b := g.Block(m)
			blocks = append(blocks, b)
			if _, err := m.Apply(b, false); err != nil {
				t.Fatalf("seed %d step %d: generated block rejected: %v", seed, i, err)
			}
		}
		if steps >= 200 && len(faults) != int(numFaults) {
			t.Errorf("seed %d: faults seen %v", seed, faults)
		}
		return blocks, m
	}
	a, ma := build(7, 200)
	b, mb := build(7, 200)
	if !reflect.DeepEqual(a, b) || !sameState(ma, mb) {
		t.Fatal("same seed, different chains")
	}
	c, _ := build(8, 20)
	if reflect.DeepEqual(a[:len(c)], c) {
		t.Fatal("different seeds, same chain")
	}
	// The chains exercise what they should.
	var invalid, coinbase, big, reused int
	seen := make(map[chain.Hash]bool)
	for _, b := range a {
		for _, tx := range b.Txs {
			if tx.Invalid {
				invalid++
			}
			if tx.Coinbase {
				coinbase++
			}
			if seen[tx.Hash] {
				reused++
			}
			seen[tx.Hash] = true
			for _, o := range tx.Outputs {
				if o.Value > math.MaxUint64/2 {
					big++
				}
			}
		}
	}
	if invalid == 0 || coinbase == 0 || big == 0 || reused == 0 {
		t.Fatalf("invalid=%d coinbase=%d big=%d reused=%d", invalid, coinbase, big, reused)
	}
	if live := ma.Live(); !slices.IsSortedFunc(live, CompareChainOrder) || len(live) == 0 {
		t.Fatalf("live outputs: %d", len(live))
	}
}

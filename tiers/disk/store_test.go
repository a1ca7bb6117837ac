package disk_test

import (
	"context"
	"encoding/hex"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
	"github.com/utxo-cache/utxo-cache/writer"
)

// Store-level behaviour through the exported API, on real Pebble stores in
// t.TempDir(): schema refusal, reopening, the rollback boundaries, and
// idempotent re-posts. Randomised comparison against a model lives in
// writer/model_test.go; these are the named boundary scenarios.

// stAddrs are the addresses stChain's blocks pay.
var stAddrs = []string{"alice", "bob", "carol"}

// stHash returns a hash distinct per (tag, kind, height).
func stHash(tag, kind byte, height uint64) chain.Hash {
	var h chain.Hash
	h[0], h[1], h[2] = 0x5d, tag, kind
	for i := range 8 {
		h[24+i] = byte(height >> (56 - 8*i))
	}
	return h
}

// stChain returns linked blocks from..to. Block h has a coinbase paying
// alice h and bob 2^64-1 with an asset (so bob's balance passes 2^64 from
// the second block), and, after the first block, a tx spending the
// previous block's alice output to carol. The store holds 2 live outputs
// per block.
func stChain(tag byte, from, to uint64) []*chain.Block {
	var blocks []*chain.Block
	var prev *chain.Block
	for h := from; h <= to; h++ {
		b := &chain.Block{Height: h, Hash: stHash(tag, 'b', h), Txs: []chain.Tx{{
			Hash: stHash(tag, 'c', h), Coinbase: true,
			Outputs: []chain.Output{
				{Address: "alice", Value: h},
				{Address: "bob", Value: math.MaxUint64, Assets: []chain.Asset{{Policy: []byte{tag}, Name: []byte("n"), Quantity: h}}},
			},
		}}}
		if prev != nil {
			b.PrevHash = prev.Hash
			b.Txs = append(b.Txs, chain.Tx{
				Hash:    stHash(tag, 's', h),
				Inputs:  []chain.OutPoint{{TxHash: prev.Txs[0].Hash, Index: 0}},
				Outputs: []chain.Output{{Address: "carol", Value: h - 1}},
			})
		}
		blocks = append(blocks, b)
		prev = b
	}
	return blocks
}

// stOutPoints lists every outpoint the blocks create.
func stOutPoints(blocks []*chain.Block) []chain.OutPoint {
	var ops []chain.OutPoint
	for _, b := range blocks {
		for _, tx := range b.Txs {
			for i := range tx.Outputs {
				ops = append(ops, chain.OutPoint{TxHash: tx.Hash, Index: uint32(i)})
			}
		}
	}
	return ops
}

// stStore is a store and its writer, opened on dir.
type stStore struct {
	t   *testing.T
	dir string
	s   *disk.Store
	w   *writer.Writer
}

func stOpen(t *testing.T, dir string, opts disk.Options) *stStore {
	t.Helper()
	s, err := disk.Open(dir, opts)
	if err != nil {
		t.Fatalf("open %s: %v", dir, err)
	}
	st := &stStore{t: t, dir: dir, s: s, w: writer.New(s, writer.Options{})}
	t.Cleanup(st.close)
	return st
}

// close stops the writer, then closes the store; a second call does nothing.
func (st *stStore) close() {
	if st.s == nil {
		return
	}
	if err := st.w.Close(); err != nil {
		st.t.Errorf("close writer: %v", err)
	}
	if err := st.s.Close(); err != nil {
		st.t.Errorf("close store: %v", err)
	}
	st.s, st.w = nil, nil
}

func (st *stStore) apply(blocks ...*chain.Block) {
	st.t.Helper()
	for _, b := range blocks {
		r, err := st.w.Apply(context.Background(), b)
		if err != nil || !r.Applied {
			st.t.Fatalf("apply block %d: %+v %v", b.Height, r, err)
		}
	}
}

// stAnswers is everything a client can read from a store: the state row,
// the block hashes, and for each address its balance and full listing, and
// every outpoint lookup.
type stAnswers struct {
	State    disk.State
	Hashes   map[uint64]chain.Hash
	Balances map[string]chain.Balance
	Lists    map[string][]chain.Utxo
	Lookups  map[chain.OutPoint]string
}

// read collects the answers from one view, heights 0..maxHeight and the
// outpoints ops.
func (st *stStore) read(maxHeight uint64, ops []chain.OutPoint) stAnswers {
	st.t.Helper()
	v, err := st.s.NewView()
	if err != nil {
		st.t.Fatal(err)
	}
	defer v.Close()
	a := stAnswers{
		State:    v.State(),
		Hashes:   make(map[uint64]chain.Hash),
		Balances: make(map[string]chain.Balance),
		Lists:    make(map[string][]chain.Utxo),
		Lookups:  make(map[chain.OutPoint]string),
	}
	for h := range maxHeight + 1 {
		hash, found, err := st.s.HashAt(h)
		if err != nil {
			st.t.Fatal(err)
		}
		if found {
			a.Hashes[h] = hash
			if got, found, err := st.s.HeightOfHash(hash); err != nil || !found || got != h {
				st.t.Fatalf("height of hash %s: %d %v %v, want %d", hash, got, found, err, h)
			}
		}
	}
	for _, addr := range stAddrs {
		if a.Balances[addr], err = v.Balance(disk.DimAddress, []byte(addr)); err != nil {
			st.t.Fatal(err)
		}
		list, next, err := v.List(disk.ListQuery{Dim: disk.DimAddress, Value: []byte(addr), Limit: 1000})
		if err != nil || next != nil {
			st.t.Fatalf("list %s: next %v, err %v", addr, next, err)
		}
		a.Lists[addr] = list
	}
	for _, op := range ops {
		u, spent, err := v.Utxo(op)
		switch {
		case errors.Is(err, chain.ErrNotFound):
			a.Lookups[op] = "not found"
		case err != nil:
			st.t.Fatalf("lookup %s: %v", op, err)
		case spent != nil:
			a.Lookups[op] = "spent by " + spent.TxHash.String() + " at " + stItoa(spent.Height) + ": " + hex.EncodeToString(chain.AppendDigestEncoding(nil, &u))
		default:
			a.Lookups[op] = "live: " + hex.EncodeToString(chain.AppendDigestEncoding(nil, &u))
		}
	}
	return a
}

func stItoa(v uint64) string { return chain.U128(v).String() }

// stSameAnswers reports where a and b differ in what the contract promises:
// everything but the bookkeeping fields of the state row (Seq, prune
// cursors, undo floor, max height), which legitimately differ between two
// stores at the same tip.
func stSameAnswers(t *testing.T, what string, got, want stAnswers) {
	t.Helper()
	g, w := got.State, want.State
	if g.Tip != w.Tip || g.UtxoCount != w.UtxoCount || g.Digest != w.Digest || g.SkippedInputs != w.SkippedInputs {
		t.Errorf("%s: state\n got tip %s count %d digest %s skipped %d\nwant tip %s count %d digest %s skipped %d", what,
			g.Tip, g.UtxoCount, g.Digest, g.SkippedInputs, w.Tip, w.UtxoCount, w.Digest, w.SkippedInputs)
	}
	got.State, want.State = disk.State{}, disk.State{}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s: answers differ\n got %#v\nwant %#v", what, got, want)
	}
}

// TestOpenRefusesNewerSchema: a store whose schema row says a newer format
// is refused with ErrNewerSchema and a message that says to upgrade, never
// read as corrupt, and left as it was: once the row is put back, the store
// opens with its state intact.
func TestOpenRefusesNewerSchema(t *testing.T) {
	dir := t.TempDir()
	st := stOpen(t, dir, disk.Options{})
	blocks := stChain(1, 1, 3)
	st.apply(blocks...)
	before := st.read(3, stOutPoints(blocks))
	st.close()

	// The schema row is 0x01 'V' (doc.go): uint32 version, then the format
	// of that version.
	keySchema := []byte{0x01, 'V'}
	original := stGetRaw(t, dir, keySchema)
	if want := []byte{0, 0, 0, byte(disk.SchemaVersion), 1, 1}; string(original) != string(want) {
		t.Fatalf("schema row %x, want %x", original, want)
	}
	for _, c := range []struct {
		name string
		row  string
	}{
		{"next version", "00000005 01 01"},
		{"max version, unreadable rest", "ffffffff ffff"},
		{"version only", "00000005"},
	} {
		t.Run(c.name, func(t *testing.T) {
			stSetRaw(t, dir, keySchema, stUnhex(t, c.row))
			for attempt := range 2 { // a refused Open releases the store
				s, err := disk.Open(dir, disk.Options{})
				if err == nil {
					s.Close()
					t.Fatalf("open %d of a store with schema row %s succeeded", attempt, c.row)
				}
				if !errors.Is(err, disk.ErrNewerSchema) || errors.Is(err, disk.ErrCorrupt) {
					t.Fatalf("open %d: err %v, want ErrNewerSchema and not ErrCorrupt", attempt, err)
				}
				if !strings.Contains(err.Error(), "upgrade") {
					t.Fatalf("open %d: message %q does not say to upgrade", attempt, err)
				}
			}
		})
	}

	// A current version with an unknown dimension is corruption, not newer.
	stSetRaw(t, dir, keySchema, stUnhex(t, "00000001 01 07"))
	if s, err := disk.Open(dir, disk.Options{}); err == nil || !errors.Is(err, disk.ErrCorrupt) || errors.Is(err, disk.ErrNewerSchema) {
		if s != nil {
			s.Close()
		}
		t.Fatalf("open with an unknown dimension: err %v, want ErrCorrupt", err)
	}

	stSetRaw(t, dir, keySchema, original)
	st = stOpen(t, dir, disk.Options{})
	stSameAnswers(t, "after the refused opens", st.read(3, stOutPoints(blocks)), before)
	if got := st.s.State(); got != before.State {
		t.Fatalf("state after the refused opens\n got %+v\nwant %+v", got, before.State)
	}
}

// TestReopenKeepsState: closing and reopening a store keeps the state row
// (tip, count, digest and bookkeeping), the secret, and every answer; the
// digest equals the one computed from the listed outputs; and the reopened
// store extends the chain.
func TestReopenKeepsState(t *testing.T) {
	dir := t.TempDir()
	opts := disk.Options{PruneDepth: 2, RollbackWindow: 3} // pruning runs
	st := stOpen(t, dir, opts)
	blocks := stChain(1, 1, 9)
	ops := stOutPoints(blocks)
	st.apply(blocks[:8]...)
	before := st.read(9, ops)
	secret := append([]byte(nil), st.s.Secret()...)
	if got := before.State.UtxoCount; got != 2*8 {
		t.Fatalf("count %d after 8 blocks, want 16", got)
	}
	var digest chain.Digest
	for _, list := range before.Lists {
		for i := range list {
			digest.Add(&list[i])
		}
	}
	if digest != before.State.Digest {
		t.Fatalf("stored digest %s, digest of the listed outputs %s", before.State.Digest, digest)
	}
	if bob := before.Balances["bob"]; bob.Value != (chain.Uint128{Hi: 7, Lo: math.MaxUint64 - 7}) || bob.Count != 8 {
		t.Fatalf("bob holds %+v, want 8 x (2^64-1)", bob)
	}
	st.close()

	st = stOpen(t, dir, opts)
	after := st.read(9, ops)
	if after.State != before.State {
		t.Fatalf("state after reopen\n got %+v\nwant %+v", after.State, before.State)
	}
	stSameAnswers(t, "after reopen", after, before)
	if string(st.s.Secret()) != string(secret) {
		t.Fatalf("secret changed across reopen")
	}
	st.apply(blocks[8])
	if got := st.s.State(); got.Tip.Height != 9 || got.UtxoCount != 18 || got.Seq != before.State.Seq+1 {
		t.Fatalf("after block 9 on the reopened store: %+v", got)
	}
}

// TestCheckRollbackBoundaries: a rollback to the tip is a no-op, to
// tip - RollbackWindow succeeds and restores every answer, one block deeper
// is refused with ErrRollbackTooDeep and nothing changed, also after a
// reopen with a wider window than the undo data kept.
func TestCheckRollbackBoundaries(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	opts := disk.Options{PruneDepth: 2, RollbackWindow: 3}
	st := stOpen(t, dir, opts)

	if err := st.s.CheckRollback(0); !errors.Is(err, chain.ErrInvalidArgument) {
		t.Fatalf("rollback of the empty store: err %v, want ErrInvalidArgument", err)
	}
	blocks := stChain(1, 1, 8)
	ops := stOutPoints(blocks)
	answers := make(map[uint64]stAnswers) // right after each block
	for _, b := range blocks {
		st.apply(b)
		answers[b.Height] = st.read(8, ops)
	}
	const tip, edge = 8, 8 - 3

	unchanged := func(what string) {
		t.Helper()
		got := st.read(8, ops)
		if got.State != answers[tip].State { // Seq included: nothing committed
			t.Fatalf("%s: state\n got %+v\nwant %+v", what, got.State, answers[tip].State)
		}
		stSameAnswers(t, what, got, answers[tip])
	}
	for _, c := range []struct {
		target uint64
		want   error // nil: allowed
	}{
		{tip + 1, chain.ErrInvalidArgument},
		{math.MaxUint64, chain.ErrInvalidArgument},
		{tip, nil},
		{tip - 1, nil},
		{edge, nil},
		{edge - 1, chain.ErrRollbackTooDeep},
		{0, chain.ErrRollbackTooDeep},
	} {
		if err := st.s.CheckRollback(c.target); !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
			t.Errorf("CheckRollback(%d) at tip %d, window 3: err %v, want %v", c.target, tip, err, c.want)
		}
	}
	// The writer refuses the same targets without changing anything.
	for _, target := range []uint64{tip + 1, edge - 1, 0} {
		r, err := st.w.Rollback(ctx, target)
		if err == nil || r.Applied || r.Tip != answers[tip].State.Tip {
			t.Fatalf("rollback to %d: %+v %v, want refused at tip %d", target, r, err, tip)
		}
		unchanged("refused rollback to " + stItoa(target))
	}
	if r, err := st.w.Rollback(ctx, tip); err != nil || r.Applied {
		t.Fatalf("rollback to the tip: %+v %v, want a no-op", r, err)
	}
	unchanged("rollback to the tip")

	// To the window's edge: exactly the answers right after that block.
	if r, err := st.w.Rollback(ctx, edge); err != nil || !r.Applied || r.Tip != answers[edge].State.Tip {
		t.Fatalf("rollback to %d: %+v %v", edge, r, err)
	}
	stSameAnswers(t, "after rollback to the window edge", st.read(8, ops), answers[edge])
	if err := st.s.CheckRollback(edge - 1); !errors.Is(err, chain.ErrRollbackTooDeep) {
		t.Fatalf("CheckRollback(%d) at tip %d: the delta of %d was pruned at tip %d: err %v", edge-1, edge, edge, tip, err)
	}
	// The same blocks again: the same answers as the first time.
	st.apply(blocks[edge:]...)
	stSameAnswers(t, "after re-applying the rolled back blocks", st.read(8, ops), answers[tip])
	answers[tip] = st.read(8, ops) // new Seq

	// Reopened with a wider window: the window no longer limits, the undo
	// data kept does (deltas <= edge went at tip 8).
	st.close()
	st = stOpen(t, dir, disk.Options{PruneDepth: 2, RollbackWindow: 6})
	if err := st.s.CheckRollback(edge); err != nil {
		t.Fatalf("CheckRollback(%d) after reopen with window 6: %v", edge, err)
	}
	for _, target := range []uint64{edge - 1, tip - 6} {
		if err := st.s.CheckRollback(target); !errors.Is(err, chain.ErrRollbackTooDeep) {
			t.Fatalf("CheckRollback(%d) with window 6 but deltas only above %d: err %v", target, edge, err)
		}
		if _, err := st.w.Rollback(ctx, target); !errors.Is(err, chain.ErrRollbackTooDeep) {
			t.Fatalf("rollback to %d: err %v, want ErrRollbackTooDeep", target, err)
		}
		unchanged("refused rollback to " + stItoa(target) + " after reopen")
	}
	if err := st.s.CheckRollback(tip - 7); !errors.Is(err, chain.ErrRollbackTooDeep) {
		t.Fatalf("CheckRollback(%d) beyond window 6: err %v", tip-7, err)
	}
}

// TestReapplyIsIdempotent: after a reopen (a fresh writer and tx filter),
// re-posting blocks below the tip is a no-op that changes nothing, not even
// Seq, and a different block at an applied height is refused.
func TestReapplyIsIdempotent(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st := stOpen(t, dir, disk.Options{})
	blocks := stChain(1, 1, 5)
	ops := stOutPoints(blocks)
	st.apply(blocks[:4]...)
	st.close()
	st = stOpen(t, dir, disk.Options{})
	before := st.read(5, ops)
	for _, b := range blocks[:4] {
		r, err := st.w.Apply(ctx, b)
		if err != nil || r.Applied || r.Tip != before.State.Tip || r.Changes != nil {
			t.Fatalf("re-post of block %d: %+v %v, want a no-op at tip %s", b.Height, r, err, before.State.Tip)
		}
	}
	other := stChain(2, 1, 4)
	for _, b := range []*chain.Block{other[2], other[3]} {
		b.PrevHash = blocks[b.Height-2].Hash
		if _, err := st.w.Apply(ctx, b); !errors.Is(err, chain.ErrNotNextBlock) {
			t.Fatalf("another block at height %d: err %v, want ErrNotNextBlock", b.Height, err)
		}
	}
	after := st.read(5, ops)
	if after.State != before.State {
		t.Fatalf("state after re-posts\n got %+v\nwant %+v", after.State, before.State)
	}
	stSameAnswers(t, "after re-posts", after, before)
	st.apply(blocks[4])
	if r, err := st.w.Apply(ctx, blocks[4]); err != nil || r.Applied {
		t.Fatalf("re-post of the tip: %+v %v", r, err)
	}
}

// TestOpenOptions: documented defaults, invalid options refused, the index
// dimensions fixed at creation, and Close once.
func TestOpenOptions(t *testing.T) {
	o := disk.Options{}.EnsureDefaults()
	if o.PruneDepth != 2160 || o.RollbackWindow != 4320 || o.UndoMode != disk.UndoCompact || o.PruneBudget != 20000 ||
		o.RecentOutputs != 500_000 || o.BalanceCache != 1<<18 || o.BalanceCacheBytes != 128<<20 || o.CacheBytes != 256<<20 || o.MemTableBytes != 64<<20 || o.Logger == nil {
		t.Fatalf("defaults: %+v", o)
	}
	if o := (disk.Options{RecentOutputs: -1, BalanceCache: -1}).EnsureDefaults(); o.RecentOutputs != 0 || o.BalanceCache != 0 {
		t.Fatalf("negative caches are not disabled: %+v", o)
	}
	for name, bad := range map[string]disk.Options{
		"undo mode 3":       {UndoMode: 3},
		"prune budget -1":   {PruneBudget: -1},
		"unknown dimension": {Dimensions: []disk.Dimension{9}},
	} {
		if s, err := disk.Open(t.TempDir(), bad); err == nil {
			s.Close()
			t.Errorf("%s: Open succeeded", name)
		}
	}

	dir := t.TempDir()
	st := stOpen(t, dir, disk.Options{Dimensions: []disk.Dimension{disk.DimAssetPolicy}})
	st.apply(stChain('d', 1, 1)...)
	s := st.s
	st.close()
	if err := s.Close(); !errors.Is(err, disk.ErrClosed) {
		t.Fatalf("second Close: err %v, want ErrClosed", err)
	}
	if s, err := disk.Open(dir, disk.Options{Dimensions: []disk.Dimension{disk.DimAddress}}); !errors.Is(err, disk.ErrIndexMismatch) {
		if err == nil {
			s.Close()
		}
		t.Fatalf("reopen with other dimensions: %v, want ErrIndexMismatch", err)
	}
	// No dimensions asked for: the store's own.
	s, err := disk.Open(dir, disk.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	v, err := s.NewView()
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if _, err := v.Balance(disk.DimAssetPolicy, []byte{1}); err != nil {
		t.Fatalf("asset policy balance on a store that indexes it: %v", err)
	}
}

func stUnhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// stRawDB opens the closed store in dir with plain Pebble, to read or damage
// rows the exported API does not reach.
func stRawDB(t *testing.T, dir string) *pebble.DB {
	t.Helper()
	db, err := pebble.Open(dir, &pebble.Options{Logger: stQuietLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func stSetRaw(t *testing.T, dir string, key, val []byte) {
	t.Helper()
	db := stRawDB(t, dir)
	if err := db.Set(key, val, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

func stGetRaw(t *testing.T, dir string, key []byte) []byte {
	t.Helper()
	db := stRawDB(t, dir)
	defer db.Close()
	v, closer, err := db.Get(key)
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	return append([]byte(nil), v...)
}

type stQuietLogger struct{}

func (stQuietLogger) Infof(string, ...any)  {}
func (stQuietLogger) Errorf(string, ...any) {}
func (stQuietLogger) Fatalf(format string, args ...any) {
	panic("pebble: fatal: " + format)
}

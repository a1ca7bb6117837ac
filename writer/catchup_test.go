package writer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"testing"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/internal/model"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

// TestCatchUpModel runs the same random chains through two stores and the
// reference model: one applies every block alone (Apply), the other in
// catch-up windows (ApplyBlocks, small windows so each call commits several).
// Rounds alternate between a target equal to the batch's last block (every
// window boundary must then be exact) and a far target reached over several
// batches (at the boundaries below it only the spent records older than
// target - prune depth - rollback window may be missing; at the target
// everything must be exact). After every batch both stores are compared with
// the model (tip, count, digest, every outpoint, every listing in both
// orders, every balance) and the windowed store's change log must be byte for
// byte the one-by-one store's: the same seqs, blocks and after figures, which
// is what a replica applies and verifies. A batch may end with a bad block:
// both must refuse it with the same error, the blocks before it applied.
// At the target: rollbacks (right after the catch-up) and reopenings.
func TestCatchUpModel(t *testing.T) {
	configs := []modelConfig{
		{name: "prune3-window6", opts: disk.Options{PruneDepth: 3, RollbackWindow: 6}},
		{name: "prune6-window3-budget3", opts: disk.Options{PruneDepth: 6, RollbackWindow: 3, PruneBudget: 3}},
		{name: "selfcontained-recent8", opts: disk.Options{PruneDepth: 3, RollbackWindow: 6, UndoMode: disk.UndoSelfContained, RecentOutputs: 8}},
		{name: "prune2-window5-norecent-skip", opts: disk.Options{PruneDepth: 2, RollbackWindow: 5, PruneBudget: 3, RecentOutputs: -1},
			wopts: Options{SkipUnknownInputs: true}},
	}
	seeds := []uint64{1, 2}
	if *seedFlag != 0 {
		seeds = []uint64{*seedFlag}
	}
	rounds := 24
	if *stepsFlag > 0 {
		rounds = *stepsFlag
	}
	for _, c := range configs {
		for _, seed := range seeds {
			t.Run(fmt.Sprintf("%s/seed=%d", c.name, seed), func(t *testing.T) {
				t.Parallel()
				r := newCatchUpRun(t, c, seed)
				for r.round = 1; r.round <= rounds; r.round++ {
					r.randomRound()
				}
				r.t.Logf("done: tip %s, %d live, %v", r.m.Tip(), r.m.Count(), r.stats)
			})
		}
	}
}

type catchUpSide struct {
	name  string
	dir   string
	store *disk.Store
	w     *Writer
}

type catchUpRun struct {
	t     *testing.T
	cfg   modelConfig
	seed  uint64
	round int
	ctx   context.Context
	m     *model.Model
	g     *model.Gen
	rng   *rand.Rand
	alone catchUpSide // every block alone
	win   catchUpSide // catch-up windows
	seen  map[chain.OutPoint]struct{}
	ops   []chain.OutPoint
	stats map[string]int
}

func newCatchUpRun(t *testing.T, cfg modelConfig, seed uint64) *catchUpRun {
	f := fnv.New64a()
	f.Write([]byte("catchup/" + cfg.name))
	o := cfg.opts.EnsureDefaults()
	r := &catchUpRun{
		t: t, cfg: cfg, seed: seed, ctx: context.Background(),
		m:     model.New(o.PruneDepth, o.RollbackWindow),
		g:     model.NewGen(seed^f.Sum64(), model.GenOptions{}),
		rng:   rand.New(rand.NewPCG(seed, 7)),
		alone: catchUpSide{name: "alone", dir: storeDir(t)},
		win:   catchUpSide{name: "window", dir: storeDir(t)},
		seen:  make(map[chain.OutPoint]struct{}),
		stats: make(map[string]int),
	}
	r.open(&r.alone)
	r.open(&r.win)
	t.Cleanup(func() { r.close(&r.alone); r.close(&r.win) })
	return r
}

func (r *catchUpRun) open(s *catchUpSide) {
	st, err := disk.Open(s.dir, r.cfg.opts)
	if err != nil {
		r.fatalf("open %s store: %v", s.name, err)
	}
	wo := r.cfg.wopts
	if s == &r.win {
		// Small windows, and only the last block before the target alone,
		// so every batch commits several windows.
		wo.WindowBlocks = 2 + r.rng.IntN(3)
		wo.LiveMargin = 1
	}
	s.store, s.w = st, New(st, wo)
}

func (r *catchUpRun) close(s *catchUpSide) {
	if s.w != nil {
		s.w.Close()
		s.w = nil
	}
	if s.store != nil {
		if err := s.store.Close(); err != nil {
			r.t.Errorf("close %s store: %v", s.name, err)
		}
		s.store = nil
	}
}

func (r *catchUpRun) fatalf(format string, args ...any) {
	r.t.Helper()
	r.t.Fatalf("seed %d round %d (replay: go test ./writer -run 'TestCatchUpModel/%s' -seed=%d): %s",
		r.seed, r.round, r.cfg.name, r.seed, fmt.Sprintf(format, args...))
}

func (r *catchUpRun) note(b *chain.Block) {
	for i := range b.Txs {
		tx := &b.Txs[i]
		for _, op := range tx.Spends() {
			r.noteOp(op)
		}
		tx.Creates(func(index uint32, _ *chain.Output, _ bool) {
			r.noteOp(chain.OutPoint{TxHash: tx.Hash, Index: index})
		})
	}
}

func (r *catchUpRun) noteOp(op chain.OutPoint) {
	if _, ok := r.seen[op]; !ok {
		r.seen[op] = struct{}{}
		r.ops = append(r.ops, op)
	}
}

// randomRound catches up to a target in one or more batches, then maybe
// rolls back or reopens.
func (r *catchUpRun) randomRound() {
	far := r.rng.IntN(2) == 0
	n := 1 + r.rng.IntN(12)
	if far {
		n = 1 + r.rng.IntN(int(r.m.PruneDepth()+r.m.RollbackWindow())+12)
	}
	var target uint64 // set by the first block (an empty store starts anywhere)
	for done := 0; done < n; {
		k := min(n-done, 1+r.rng.IntN(8))
		var blocks []*chain.Block
		for range k {
			b := r.g.Block(r.m)
			if _, err := r.m.Apply(b, r.cfg.wopts.SkipUnknownInputs); err != nil {
				r.fatalf("model refused its own block: %v", err)
			}
			r.note(b)
			blocks = append(blocks, b)
			if done == 0 && len(blocks) == 1 {
				target = b.Height + uint64(n) - 1
			}
		}
		done += k
		batchTarget := target
		if !far {
			batchTarget = blocks[len(blocks)-1].Height
		}
		var bad *chain.Block
		var fault model.Fault
		if done == n && r.rng.IntN(4) == 0 {
			bad, fault = r.g.BadBlock(r.m)
			r.note(bad)
			blocks = append(blocks, bad)
		}
		r.batch(blocks, batchTarget, bad, fault)
		r.compare(target)
	}
	r.stats["rounds"]++
	if far {
		r.stats["far"]++
	}
	switch x := r.rng.IntN(10); {
	case x < 4:
		r.rollback()
		r.compare(r.m.Tip().Height)
	case x == 4:
		r.stats["reopen"]++
		r.close(&r.win)
		r.open(&r.win)
		r.compare(r.m.Tip().Height)
	}
}

// batch applies blocks alone on one side and in one ApplyBlocks on the other;
// bad, when set, is the last block and must be refused by both.
func (r *catchUpRun) batch(blocks []*chain.Block, target uint64, bad *chain.Block, fault model.Fault) {
	var aloneErr error
	for _, b := range blocks {
		if _, aloneErr = r.alone.w.Apply(r.ctx, b); aloneErr != nil {
			break
		}
	}
	res, err := r.win.w.ApplyBlocks(r.ctx, blocks, target)
	r.stats["windows"] += res.Windows
	r.stats["window-blocks"] += res.WindowBlocks
	if bad == nil {
		if err != nil || aloneErr != nil {
			r.fatalf("valid batch to %d: windows %v, alone %v", target, err, aloneErr)
		}
		if res.Done != len(blocks) || res.Applied != len(blocks) || res.Tip != r.m.Tip() {
			r.fatalf("batch of %d: done %d applied %d tip %s, model %s", len(blocks), res.Done, res.Applied, res.Tip, r.m.Tip())
		}
		return
	}
	r.stats["bad:"+fault.String()]++
	mErr := fault.Want()
	skip := r.cfg.wopts.SkipUnknownInputs && mErr == chain.ErrUnknownInput
	if skip {
		// Skipped inputs make this "bad" block valid: the model applies it too.
		if _, merr := r.m.Apply(bad, true); merr != nil {
			mErr = merr
		} else {
			mErr = nil
		}
	}
	if errClass(err) != errClass(aloneErr) || errClass(err) != errClass(mErr) {
		r.fatalf("bad block (%s): windows %v, alone %v, model %v", fault, err, aloneErr, mErr)
	}
	if err != nil && res.Done != len(blocks)-1 {
		r.fatalf("bad block (%s) refused after %d of %d blocks", fault, res.Done, len(blocks))
	}
}

func (r *catchUpRun) rollback() {
	tip := r.m.Tip()
	if tip.Empty {
		return
	}
	depth := 1 + uint64(r.rng.IntN(int(r.m.RollbackWindow())+2))
	target := tip.Height - min(depth, tip.Height)
	mErr := r.m.CheckRollback(target)
	_, aErr := r.alone.w.Rollback(r.ctx, target)
	_, wErr := r.win.w.Rollback(r.ctx, target)
	if errClass(aErr) != errClass(wErr) {
		r.fatalf("rollback from %s to %d: windows %v, alone %v, model %v", tip, target, wErr, aErr, mErr)
	}
	if aErr != nil {
		if mErr == nil && !(errors.Is(aErr, chain.ErrRollbackTooDeep) && target < r.m.RollbackFloor()) {
			r.fatalf("rollback from %s to %d refused (%v), model %v", tip, target, aErr, mErr)
		}
		r.stats["rollback-refused"]++
		return
	}
	if err := r.m.Rollback(target); err != nil {
		r.fatalf("model rollback to %d: %v (stores accepted it)", target, err)
	}
	r.stats["rollback"]++
}

// compare checks both sides against the model and the windowed side's
// change log against the one-by-one side's. On the windowed side a spent
// record older than target - prune depth - rollback window may be missing
// while the tip is below target.
func (r *catchUpRun) compare(target uint64) {
	r.t.Helper()
	o := r.alone.store.Options()
	var keepFrom uint64
	if keep := o.PruneDepth + o.RollbackWindow; target > keep {
		keepFrom = target - keep
	}
	tip := r.m.Tip()
	for _, s := range []*catchUpSide{&r.alone, &r.win} {
		tolerant := s == &r.win && !tip.Empty && tip.Height < target
		r.compareSide(s, tolerant, keepFrom)
	}
	a, b := r.alone.store.State(), r.win.store.State()
	if a.Seq != b.Seq {
		r.fatalf("seq: alone %d, windows %d", a.Seq, b.Seq)
	}
	va, err := r.alone.store.PublishedView()
	if err != nil {
		r.fatalf("view: %v", err)
	}
	defer va.Close()
	vb, err := r.win.store.PublishedView()
	if err != nil {
		r.fatalf("view: %v", err)
	}
	defer vb.Close()
	// The retention is the rollback window: compare the records both keep.
	// Below the target the windowed side keeps no record of a block the
	// log will not hold at the target.
	tolerant := !tip.Empty && tip.Height < target
	from := a.Seq - min(a.Seq, o.RollbackWindow)
	for after := from; after < a.Seq; {
		la, na, errA := va.Changes(after, 1<<20)
		lb, nb, errB := vb.Changes(after, 1<<20)
		if tolerant && errors.Is(errB, disk.ErrLogTruncated) && errA == nil {
			r.stats["log-record-dropped"]++
			after++
			continue
		}
		if errA != nil || errB != nil || na != nb || !bytes.Equal(la, lb) {
			r.fatalf("change log after %d: alone %d records (%v), windows %d (%v), equal %v",
				after, na, errA, nb, errB, bytes.Equal(la, lb))
		}
		after += uint64(na)
	}
}

func (r *catchUpRun) compareSide(s *catchUpSide, tolerant bool, keepFrom uint64) {
	r.t.Helper()
	v, err := s.store.PublishedView()
	if err != nil {
		r.fatalf("%s view: %v", s.name, err)
	}
	defer v.Close()
	st := v.State()
	if st.Tip != r.m.Tip() || st.UtxoCount != r.m.Count() || st.Digest != r.m.Digest() {
		r.fatalf("%s: tip %s count %d digest %s; model %s %d %s", s.name, st.Tip, st.UtxoCount, st.Digest,
			r.m.Tip(), r.m.Count(), r.m.Digest())
	}
	for _, op := range r.ops {
		u, sp, err := v.Utxo(op)
		mu, msp, mErr := r.m.Utxo(op)
		if tolerant && errors.Is(err, chain.ErrNotFound) && msp != nil && msp.Height < keepFrom {
			r.stats["spent-record-dropped"]++
			continue
		}
		if errClass(err) != errClass(mErr) {
			r.fatalf("%s: utxo %s: store %v, model %v (model spent %+v)", s.name, op, err, mErr, msp)
		}
		if err != nil {
			continue
		}
		if d := diffUtxo(u, mu); d != "" {
			r.fatalf("%s: utxo %s: %s", s.name, op, d)
		}
		if (sp == nil) != (msp == nil) || (sp != nil && *sp != *msp) {
			r.fatalf("%s: utxo %s: spent %+v, model %+v", s.name, op, sp, msp)
		}
	}
	for _, addr := range r.g.Addresses() {
		for _, desc := range []bool{false, true} {
			page, next, err := v.List(disk.ListQuery{Dim: disk.DimAddress, Value: []byte(addr), Desc: desc, Limit: 1 << 20})
			if err != nil || next != nil {
				r.fatalf("%s: list %s: %v (next %v)", s.name, addr, err, next)
			}
			if err := sameList(page, r.m.List(addr, desc)); err != nil {
				r.fatalf("%s: list %s desc=%v: %v", s.name, addr, desc, err)
			}
		}
		bal, err := v.Balance(disk.DimAddress, []byte(addr))
		if err != nil {
			r.fatalf("%s: balance %s: %v", s.name, addr, err)
		}
		if d := diffBalance(bal, r.m.Balance(addr)); d != "" {
			r.fatalf("%s: balance %s: %s", s.name, addr, d)
		}
	}
}

// TestCatchUpReplay is what a replica does with a writer that caught up in
// windows: it decodes the writer's change log from the start and applies
// every record alone through a writer whose Verify compares the state after
// each change with the record's after figures (tip, count, digest) and seq,
// as the replica's follower does. Every change must verify, and the replay
// must end at the writer's state. (TestCatchUpModel checks that the records
// are byte for byte those of the blocks applied one by one.)
func TestCatchUpReplay(t *testing.T) {
	opts := disk.Options{PruneDepth: 3, RollbackWindow: 6, LogRetention: 10_000}
	src, err := disk.Open(storeDir(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	sw := New(src, Options{WindowBlocks: 7, LiveMargin: 1})
	defer sw.Close()
	m := model.New(3, 6)
	g := model.NewGen(11, model.GenOptions{})
	windows := 0
	for range 8 {
		var batch []*chain.Block
		for range 20 {
			b := g.Block(m)
			if _, err := m.Apply(b, false); err != nil {
				t.Fatal(err)
			}
			batch = append(batch, b)
		}
		// The batch's last block as the target: ingest's mode, every
		// window boundary exact and every record kept.
		res, err := sw.ApplyBlocks(context.Background(), batch, batch[len(batch)-1].Height)
		if err != nil {
			t.Fatal(err)
		}
		windows += res.Windows
	}
	if windows < 8 {
		t.Fatalf("%d windows: the test needs catch-up windows", windows)
	}
	v, err := src.PublishedView()
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	final := v.State()

	dst, err := disk.Open(storeDir(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	var expect *chain.Change
	verified := 0
	rw := New(dst, Options{Verify: func(st disk.State) error {
		want := expect.After
		if st.Seq != expect.Seq || st.Tip != want.Tip || st.UtxoCount != want.UtxoCount || st.Digest != want.Digest {
			return fmt.Errorf("change %d: state seq %d %s %d %s, record %s %d %s", expect.Seq,
				st.Seq, st.Tip, st.UtxoCount, st.Digest, want.Tip, want.UtxoCount, want.Digest)
		}
		verified++
		return nil
	}})
	defer rw.Close()
	for after := uint64(0); after < final.Seq; {
		log, n, err := v.Changes(after, 1<<20)
		if err != nil {
			t.Fatalf("changes after %d: %v", after, err)
		}
		for range n {
			var c *chain.Change
			if c, log, err = chain.DecodeChangeCBOR(log, chain.Limits{}); err != nil {
				t.Fatal(err)
			}
			if c.Kind != chain.ChangeApply {
				t.Fatalf("change %d is a %s", c.Seq, c.Kind)
			}
			expect = c
			if _, err := rw.Apply(context.Background(), c.Block); err != nil {
				t.Fatalf("replay of change %d: %v", c.Seq, err)
			}
		}
		after += uint64(n)
	}
	if got := dst.State(); verified != int(final.Seq) || got.Digest != final.Digest || got.Tip != final.Tip {
		t.Fatalf("replayed %d of %d changes to %s %s, writer %s %s", verified, final.Seq, got.Tip, got.Digest, final.Tip, final.Digest)
	}
}

package writer

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/internal/model"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

var (
	seedFlag  = flag.Uint64("seed", 0, "replay one seed of TestModel and TestCrash (0: the default seeds)")
	stepsFlag = flag.Int("steps", 0, "steps per TestModel run (0: the default)")
	traceFlag = flag.Bool("modeltrace", false, "log every step of TestModel")
	fullFlag  = flag.Bool("fullcheck", false, "TestModel: look up every outpoint ever seen after every step")
)

// modelConfig is one store configuration TestModel runs every seed against.
type modelConfig struct {
	name  string
	opts  disk.Options
	wopts Options
}

// TestModel drives the writer and a model.Model with the same random blocks,
// bad blocks, re-posts, rollbacks (by height and by hash, too deep on
// purpose, then a new branch) and store reopenings, and after every step
// compares every answer the contract defines: tip, count, digest, every
// outpoint ever seen, every address's listing walked through cursors in both
// orders, and balances. Small retention settings make pruning and rollbacks
// past the window frequent. (Outpoints both sides answered "not found" for
// are looked up again only when a block names them or a rollback can reach
// them, and all of them every 50 steps: -fullcheck looks up all after every
// step.)
//
// A failure names the seed and step; replay one with
//
//	go test ./writer -run 'TestModel/<config>' -seed=N
func TestModel(t *testing.T) {
	configs := []modelConfig{
		{name: "prune3-window6", opts: disk.Options{PruneDepth: 3, RollbackWindow: 6}},
		{name: "prune6-window3-budget3", opts: disk.Options{PruneDepth: 6, RollbackWindow: 3, PruneBudget: 3}},
		{name: "selfcontained-recent8", opts: disk.Options{PruneDepth: 3, RollbackWindow: 6, UndoMode: disk.UndoSelfContained, RecentOutputs: 8}},
		{name: "budget3-norecent-skip", opts: disk.Options{PruneDepth: 2, RollbackWindow: 5, PruneBudget: 3, RecentOutputs: -1},
			wopts: Options{SkipUnknownInputs: true}},
	}
	seeds := []uint64{1, 2}
	if *seedFlag != 0 {
		seeds = []uint64{*seedFlag}
	}
	steps := 160
	if *stepsFlag > 0 {
		steps = *stepsFlag
	}
	for _, c := range configs {
		for _, seed := range seeds {
			t.Run(fmt.Sprintf("%s/seed=%d", c.name, seed), func(t *testing.T) {
				t.Parallel()
				h := newHarness(t, c, seed)
				for h.step = 1; h.step <= steps; h.step++ {
					if h.step == steps/2 {
						h.reopen()
					} else {
						h.randomStep()
					}
					h.fullCheck = h.fullCheck || *fullFlag || h.step%50 == 0 || h.step == steps
					h.compare()
				}
				h.step = steps
				h.logf("done: tip %s, %d live, %d outpoints seen, %v", h.m.Tip(), h.m.Count(), len(h.seen), h.stats)
			})
		}
	}
}

// harness holds one TestModel run: the store under test, its writer, the
// model, and what the run has seen.
type harness struct {
	t     *testing.T
	cfg   modelConfig
	seed  uint64
	step  int
	dir   string
	ctx   context.Context
	store *disk.Store
	w     *Writer
	m     *model.Model
	g     *model.Gen
	rng   *rand.Rand

	seen    map[chain.OutPoint]struct{} // every outpoint any block named
	seenOps []chain.OutPoint            // the same, in first-seen order
	// settled holds outpoints both answered chain.ErrNotFound for when last
	// checked. Only a block naming them or a rollback can change that answer
	// (a rollback un-settles every outpoint the blocks within its reach
	// name), so compare skips them except on full checks: every 50 steps,
	// at the end and after a reopen.
	settled   map[chain.OutPoint]bool
	fullCheck bool
	blocks    map[chain.Hash]*chain.Block // applied blocks, for re-posts
	stats     map[string]int
}

func newHarness(t *testing.T, cfg modelConfig, seed uint64) *harness {
	// Each configuration gets its own chains from the same seed.
	f := fnv.New64a()
	f.Write([]byte(cfg.name))
	g := model.NewGen(seed^f.Sum64(), model.GenOptions{})
	o := cfg.opts.EnsureDefaults()
	h := &harness{
		t: t, cfg: cfg, seed: seed, dir: storeDir(t), ctx: context.Background(),
		m: model.New(o.PruneDepth, o.RollbackWindow), g: g, rng: g.Rand(),
		seen: make(map[chain.OutPoint]struct{}), blocks: make(map[chain.Hash]*chain.Block),
		settled: make(map[chain.OutPoint]bool),
		stats:   make(map[string]int),
	}
	h.open()
	t.Cleanup(h.close)
	return h
}

// storeDir returns an empty directory for a test store, removed after the
// test. Every block commits with fsync, which costs milliseconds on a real
// disk and dominates these tests, so the directory is on tmpfs (/dev/shm)
// when there is one: still a real Pebble store, and a SIGKILL loses nothing
// the page cache holds, which is what the crash test needs. Set
// UTXO_CACHE_TEST_TMPDIR to choose the parent directory (a real disk, say).
func storeDir(t testing.TB) string {
	t.Helper()
	parent := os.Getenv("UTXO_CACHE_TEST_TMPDIR")
	if parent == "" {
		if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
			parent = "/dev/shm"
		}
	}
	if parent == "" {
		return t.TempDir()
	}
	dir, err := os.MkdirTemp(parent, "utxo-cache-test-")
	if err != nil {
		return t.TempDir()
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func (h *harness) open() {
	st, err := disk.Open(h.dir, h.cfg.opts)
	if err != nil {
		h.fatalf("open store: %v", err)
	}
	h.store, h.w = st, New(st, h.cfg.wopts)
}

// reopen closes the writer and the store and opens them again on the same
// directory: everything must read the same.
func (h *harness) reopen() {
	h.stats["reopen"]++
	h.fullCheck = true
	h.tracef("reopen")
	h.close()
	h.open()
}

func (h *harness) close() {
	if h.w != nil {
		h.w.Close()
		h.w = nil
	}
	if h.store != nil {
		if err := h.store.Close(); err != nil {
			h.t.Errorf("close store: %v", err)
		}
		h.store = nil
	}
}

func (h *harness) fatalf(format string, args ...any) {
	h.t.Helper()
	h.t.Fatalf("seed %d step %d (replay: go test ./writer -run 'TestModel/%s' -seed=%d): %s",
		h.seed, h.step, h.cfg.name, h.seed, fmt.Sprintf(format, args...))
}

// tracef logs a step when -modeltrace is set.
func (h *harness) tracef(format string, args ...any) {
	h.t.Helper()
	if *traceFlag {
		h.logf(format, args...)
	}
}

func (h *harness) logf(format string, args ...any) {
	h.t.Helper()
	h.t.Logf("seed %d step %d: %s", h.seed, h.step, fmt.Sprintf(format, args...))
}

// unsettleReachable un-settles every outpoint named by a block that a
// rollback from the current tip can revert, or whose spent records it can
// make visible again.
func (h *harness) unsettleReachable() {
	tip := h.m.Tip()
	if tip.Empty {
		return
	}
	reach := h.m.RollbackWindow() + h.m.PruneDepth() + 2
	for height := tip.Height - min(tip.Height, reach); height <= tip.Height; height++ {
		if hash, ok := h.m.HashAt(height); ok && h.blocks[hash] != nil {
			h.note(h.blocks[hash])
		}
	}
}

func (h *harness) note(b *chain.Block) {
	add := func(op chain.OutPoint) {
		delete(h.settled, op)
		if _, ok := h.seen[op]; !ok {
			h.seen[op] = struct{}{}
			h.seenOps = append(h.seenOps, op)
		}
	}
	for _, tx := range b.Txs {
		for _, op := range tx.Inputs {
			add(op)
		}
		for _, op := range tx.CollateralInputs {
			add(op)
		}
		for i := range len(tx.Outputs) + 1 {
			add(chain.OutPoint{TxHash: tx.Hash, Index: uint32(i)})
		}
	}
}

// errClass names the contract error class err matches, "" for nil.
func errClass(err error) string {
	for _, c := range []error{chain.ErrNotNextBlock, chain.ErrUnknownInput, chain.ErrDoubleSpend,
		chain.ErrDuplicateOutpoint, chain.ErrRollbackTooDeep, chain.ErrInvalidArgument, chain.ErrNotFound} {
		if errors.Is(err, c) {
			return c.Error()
		}
	}
	if err != nil {
		return "other: " + err.Error()
	}
	return ""
}

func (h *harness) randomStep() {
	switch r := h.rng.IntN(100); {
	case r < 55:
		h.applyValid()
	case r < 68:
		h.applyBad()
	case r < 73:
		h.repost()
	case r < 89:
		h.rollback()
	case r < 90:
		h.reopen()
	default:
		h.cursorAcrossBlocks()
	}
}

// apply posts b to both and checks they agree on the outcome.
func (h *harness) apply(b *chain.Block) (applied bool, err error) {
	h.t.Helper()
	h.note(b)
	res, err := h.w.Apply(h.ctx, b)
	mApplied, mErr := h.m.Apply(b, h.cfg.wopts.SkipUnknownInputs)
	if errClass(err) != errClass(mErr) || res.Applied != mApplied {
		h.fatalf("apply block %d: store applied=%v err=%v; model applied=%v err=%v", b.Height, res.Applied, err, mApplied, mErr)
	}
	if err == nil && res.Tip != h.m.Tip() {
		h.fatalf("apply block %d: result tip %s, model %s", b.Height, res.Tip, h.m.Tip())
	}
	if res.Applied {
		h.blocks[b.Hash] = b
	}
	h.tracef("apply %d/%x (%d txs): applied=%v err=%v -> tip %s", b.Height, b.Hash[:4], len(b.Txs), res.Applied, err, h.m.Tip())
	return res.Applied, err
}

func (h *harness) applyValid() {
	h.stats["block"]++
	if _, err := h.apply(h.g.Block(h.m)); err != nil {
		h.fatalf("valid block rejected: %v", err)
	}
}

func (h *harness) applyBad() {
	b, fault := h.g.BadBlock(h.m)
	h.stats["bad:"+fault.String()]++
	_, err := h.apply(b)
	if want := fault.Want(); !errors.Is(err, want) && !(h.cfg.wopts.SkipUnknownInputs && want == chain.ErrUnknownInput) {
		h.fatalf("bad block (%s): got %v, want %v", fault, err, want)
	}
}

// repost posts again a block of the current chain, the tip or below.
func (h *harness) repost() {
	tip := h.m.Tip()
	if tip.Empty {
		h.applyValid()
		return
	}
	height := tip.Height - min(tip.Height, uint64(h.rng.IntN(4)))
	hash, ok := h.m.HashAt(height)
	if !ok {
		hash = tip.Hash
	}
	h.stats["repost"]++
	if applied, err := h.apply(h.blocks[hash]); err != nil || applied {
		h.fatalf("re-post of %s: applied=%v err=%v", hash, applied, err)
	}
}

// rollback asks both for a rollback of random depth, up to past the window,
// by height or by hash, now and then above the tip or to a hash that is not
// on the chain.
//
// The store must succeed wherever the model's RollbackFloor guarantees it and
// must refuse beyond the window; below the floor it may refuse as too deep
// (see model.Model), and then nothing may change.
func (h *harness) rollback() {
	h.unsettleReachable()
	tip := h.m.Tip()
	window := h.m.RollbackWindow()
	var target uint64
	switch {
	case h.rng.IntN(20) == 0:
		target = tip.Height + 1 + uint64(h.rng.IntN(3))
	case tip.Empty:
		target = uint64(h.rng.IntN(3))
	default:
		depth := 1 + uint64(h.rng.IntN(int(window)+3))
		target = tip.Height - min(depth, tip.Height)
	}
	var res Result
	var err, mErr error
	byHash := h.rng.IntN(2) == 0
	if byHash {
		hash, ok := h.m.HashAt(target)
		if !ok || h.rng.IntN(15) == 0 {
			hash = h.g.Hash() // not on the chain
		}
		h.stats["rollback-hash"]++
		res, err = h.w.RollbackToHash(h.ctx, hash)
		if height, ok := h.m.HeightOf(hash); ok {
			mErr = h.m.CheckRollback(height)
		} else {
			mErr = fmt.Errorf("model: %s not on the chain: %w", hash, chain.ErrInvalidArgument)
		}
	} else {
		h.stats["rollback"]++
		res, err = h.w.Rollback(h.ctx, target)
		mErr = h.m.CheckRollback(target)
	}
	h.tracef("rollback from %s to %d (by hash %v, floor %d): store err=%v, model err=%v",
		tip, target, byHash, h.m.RollbackFloor(), err, mErr)
	if mErr == nil && errors.Is(err, chain.ErrRollbackTooDeep) && target < h.m.RollbackFloor() {
		h.stats["rollback-refused-below-floor"]++
		if now := h.store.State().Tip; now != tip {
			h.fatalf("rollback from %s to %d refused as too deep, but the store moved to %s",
				tip, target, now)
		}
		return
	}
	if errClass(err) != errClass(mErr) {
		h.fatalf("rollback from %s to %d (by hash %v, floor %d): store %v; model %v",
			tip, target, byHash, h.m.RollbackFloor(), err, mErr)
	}
	if err != nil {
		h.stats["rollback-refused:"+errClass(err)]++
		return
	}
	if err := h.m.Rollback(target); err != nil {
		h.fatalf("model rollback after its check passed: %v", err)
	}
	if res.Tip != h.m.Tip() {
		h.fatalf("rollback to %d: result tip %s, model %s", target, res.Tip, h.m.Tip())
	}
	if target < h.m.RollbackFloor() {
		h.stats["rollback-below-floor"]++
	}
}

// cursorAcrossBlocks reads part of an address's listing, applies blocks,
// and resumes from the cursor: nothing repeats, order holds, and every output
// live all along shows exactly once (docs/api.md).
func (h *harness) cursorAcrossBlocks() {
	var addr string
	for _, a := range h.g.Addresses() {
		if len(h.m.List(a, false)) >= 3 {
			addr = a
			break
		}
	}
	if addr == "" {
		h.applyValid()
		return
	}
	h.stats["cursor"]++
	desc := h.rng.IntN(2) == 0
	before := h.m.List(addr, desc)
	q := disk.ListQuery{Dim: disk.DimAddress, Value: []byte(addr), Desc: desc}
	v := h.view()
	var got []chain.Utxo
	var cursor *chain.Position
	for pages := 1 + h.rng.IntN(2); pages > 0; pages-- {
		q.After, q.Limit = cursor, 1+h.rng.IntN(2)
		page, next, err := v.List(q)
		if err != nil {
			h.fatalf("list: %v", err)
		}
		got, cursor = append(got, page...), next
		if next == nil {
			break
		}
	}
	v.Close()
	if cursor == nil {
		return
	}
	for range 1 + h.rng.IntN(3) {
		h.applyValid()
	}
	after := h.m.List(addr, desc)
	resumed := h.walk(addr, desc, cursor)
	// The resumed part is exactly the current listing beyond the cursor.
	var want []chain.Utxo
	for _, u := range after {
		p := chain.Position{Height: u.Height, TxPos: u.TxPos, Index: u.Index}
		if beyond(p, *cursor, desc) {
			want = append(want, u)
		}
	}
	if err := sameList(resumed, want); err != nil {
		h.fatalf("%s resumed after %+v (desc %v): %v", addr, *cursor, desc, err)
	}
	all := append(got, resumed...)
	type id struct {
		op     chain.OutPoint
		height uint64
	}
	count := make(map[id]int)
	for i, u := range all {
		count[id{u.OutPoint, u.Height}]++
		if i > 0 && model.CompareChainOrder(all[i-1], u)*direction(desc) >= 0 {
			h.fatalf("%s: listing across blocks out of order at %d", addr, i)
		}
	}
	liveAfter := make(map[id]bool)
	for _, u := range after {
		liveAfter[id{u.OutPoint, u.Height}] = true
	}
	for _, u := range before {
		k := id{u.OutPoint, u.Height}
		if liveAfter[k] && count[k] != 1 {
			h.fatalf("%s: %s live all along shows %d times across blocks", addr, u.OutPoint, count[k])
		}
	}
	for k, n := range count {
		if n > 1 {
			h.fatalf("%s: %s repeated across blocks", addr, k.op)
		}
	}
}

func direction(desc bool) int {
	if desc {
		return -1
	}
	return 1
}

func beyond(p, cursor chain.Position, desc bool) bool {
	c := comparePos(p, cursor)
	return (!desc && c > 0) || (desc && c < 0)
}

func comparePos(a, b chain.Position) int {
	return model.CompareChainOrder(
		chain.Utxo{Height: a.Height, TxPos: a.TxPos, OutPoint: chain.OutPoint{Index: a.Index}},
		chain.Utxo{Height: b.Height, TxPos: b.TxPos, OutPoint: chain.OutPoint{Index: b.Index}})
}

func (h *harness) view() *disk.View {
	h.t.Helper()
	v, err := h.store.NewView()
	if err != nil {
		h.fatalf("view: %v", err)
	}
	return v
}

// walk lists addr from after (nil: the start) to the end with random page
// sizes, checking the cursor protocol on the way.
func (h *harness) walk(addr string, desc bool, after *chain.Position) []chain.Utxo {
	v := h.view()
	defer v.Close()
	var all []chain.Utxo
	for pages := 0; ; pages++ {
		limit := 1 + h.rng.IntN(4)
		page, next, err := v.List(disk.ListQuery{Dim: disk.DimAddress, Value: []byte(addr), After: after, Desc: desc, Limit: limit})
		if err != nil {
			h.fatalf("list %s: %v", addr, err)
		}
		if len(page) > limit || (next != nil && len(page) != limit) {
			h.fatalf("list %s: page of %d with limit %d, next %v", addr, len(page), limit, next)
		}
		if next != nil {
			last := page[len(page)-1]
			if *next != (chain.Position{Height: last.Height, TxPos: last.TxPos, Index: last.Index}) {
				h.fatalf("list %s: cursor %+v is not the last item's position", addr, *next)
			}
		}
		all = append(all, page...)
		if next == nil {
			return all
		}
		if pages > 10_000 {
			h.fatalf("list %s: no end", addr)
		}
		after = next
	}
}

// compare checks every answer of the store against the model.
func (h *harness) compare() {
	h.t.Helper()
	v := h.view()
	defer v.Close()
	st := v.State()
	if st.Tip != h.m.Tip() || v.Tip() != h.m.Tip() {
		h.fatalf("tip %s, model %s", st.Tip, h.m.Tip())
	}
	if w := h.w.Tip(); w != h.m.Tip() {
		h.fatalf("writer tip %s, model %s", w, h.m.Tip())
	}
	if st.UtxoCount != h.m.Count() {
		h.fatalf("count %d, model %d", st.UtxoCount, h.m.Count())
	}
	if st.Digest != h.m.Digest() {
		h.fatalf("digest %s, model %s", st.Digest, h.m.Digest())
	}
	full := h.fullCheck
	h.fullCheck = false
	for _, op := range h.seenOps {
		if h.settled[op] && !full {
			continue
		}
		u, sp, err := v.Utxo(op)
		mu, msp, mErr := h.m.Utxo(op)
		if errClass(err) != errClass(mErr) {
			h.fatalf("utxo %s: store %v, model %v (model spent %+v)", op, err, mErr, msp)
		}
		h.settled[op] = errors.Is(err, chain.ErrNotFound)
		if err != nil {
			continue
		}
		if d := diffUtxo(u, mu); d != "" {
			h.fatalf("utxo %s: %s", op, d)
		}
		if (sp == nil) != (msp == nil) || (sp != nil && *sp != *msp) {
			h.fatalf("utxo %s: spent %+v, model %+v", op, sp, msp)
		}
	}
	for _, addr := range h.g.Addresses() {
		for _, desc := range []bool{false, true} {
			if err := sameList(h.walkView(v, addr, desc), h.m.List(addr, desc)); err != nil {
				h.fatalf("list %s desc=%v: %v", addr, desc, err)
			}
		}
		bal, err := v.Balance(disk.DimAddress, []byte(addr))
		if err != nil {
			h.fatalf("balance %s: %v", addr, err)
		}
		if d := diffBalance(bal, h.m.Balance(addr)); d != "" {
			h.fatalf("balance %s: %s", addr, d)
		}
	}
}

// walkView is walk on an open view (one snapshot for the whole compare).
func (h *harness) walkView(v *disk.View, addr string, desc bool) []chain.Utxo {
	var all []chain.Utxo
	var after *chain.Position
	for {
		limit := 1 + h.rng.IntN(4)
		if h.rng.IntN(3) == 0 {
			limit = 1 + h.rng.IntN(40)
		}
		page, next, err := v.List(disk.ListQuery{Dim: disk.DimAddress, Value: []byte(addr), After: after, Desc: desc, Limit: limit})
		if err != nil {
			h.fatalf("list %s: %v", addr, err)
		}
		if len(page) > limit || (next != nil && len(page) != limit) {
			h.fatalf("list %s: page of %d with limit %d, next %v", addr, len(page), limit, next)
		}
		all = append(all, page...)
		if next == nil {
			return all
		}
		after = next
	}
}

func sameList(got, want []chain.Utxo) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d items, model %d:\n got %s\nwant %s", len(got), len(want), outPoints(got), outPoints(want))
	}
	for i := range got {
		if d := diffUtxo(got[i], want[i]); d != "" {
			return fmt.Errorf("item %d: %s", i, d)
		}
	}
	return nil
}

func outPoints(us []chain.Utxo) string {
	var s []string
	for _, u := range us {
		s = append(s, fmt.Sprintf("%x:%d@%d.%d", u.TxHash[:4], u.Index, u.Height, u.TxPos))
	}
	return "[" + strings.Join(s, " ") + "]"
}

// diffUtxo compares two UTXOs field by field (nil and empty byte strings are
// the same: the contract cannot tell them apart).
func diffUtxo(got, want chain.Utxo) string {
	switch {
	case got.OutPoint != want.OutPoint:
		return fmt.Sprintf("outpoint %s, model %s", got.OutPoint, want.OutPoint)
	case got.Address != want.Address:
		return fmt.Sprintf("address %q, model %q", got.Address, want.Address)
	case got.Value != want.Value:
		return fmt.Sprintf("value %d, model %d", got.Value, want.Value)
	case got.Height != want.Height || got.TxPos != want.TxPos:
		return fmt.Sprintf("position %d.%d, model %d.%d", got.Height, got.TxPos, want.Height, want.TxPos)
	case got.Flags != want.Flags:
		return fmt.Sprintf("flags %b, model %b", got.Flags, want.Flags)
	case (got.DatumHash == nil) != (want.DatumHash == nil) || (got.DatumHash != nil && *got.DatumHash != *want.DatumHash):
		return "datum hash differs"
	case !bytes.Equal(got.Datum, want.Datum):
		return "datum differs"
	case !bytes.Equal(got.ScriptRef, want.ScriptRef):
		return "script ref differs"
	case !slices.EqualFunc(got.Assets, want.Assets, func(a, b chain.Asset) bool {
		return bytes.Equal(a.Policy, b.Policy) && bytes.Equal(a.Name, b.Name) && a.Quantity == b.Quantity
	}):
		return fmt.Sprintf("assets %+v, model %+v", got.Assets, want.Assets)
	}
	return ""
}

func diffBalance(got, want chain.Balance) string {
	if got.Count != want.Count || got.Value != want.Value {
		return fmt.Sprintf("count %d value %s, model count %d value %s", got.Count, got.Value, want.Count, want.Value)
	}
	if !slices.EqualFunc(got.Assets, want.Assets, func(a, b chain.AssetSum) bool {
		return bytes.Equal(a.Policy, b.Policy) && bytes.Equal(a.Name, b.Name) && a.Quantity == b.Quantity
	}) {
		return fmt.Sprintf("assets %+v, model %+v", got.Assets, want.Assets)
	}
	return ""
}

// Minimal reproductions of bugs TestModel found in tiers/disk (fixed in
// 544b42b), kept as regression tests.

// testChain builds linked blocks with one coinbase output each, every block
// after the first also spending the previous block's output.
type testChain struct {
	t      *testing.T
	w      *Writer
	tag    byte
	prev   *chain.Block
	blocks map[uint64]*chain.Block
}

// rewind makes the next block extend the block at height (after a rollback).
func (c *testChain) rewind(height uint64) { c.prev = c.blocks[height] }

func (c *testChain) hash(height uint64, what byte) chain.Hash {
	var h chain.Hash
	h[0], h[1], h[2] = c.tag, what, 0x5a
	h[24], h[25], h[26], h[27] = byte(height>>24), byte(height>>16), byte(height>>8), byte(height)
	return h
}

func (c *testChain) apply(heights ...uint64) {
	c.t.Helper()
	for _, height := range heights {
		b := &chain.Block{Height: height, Hash: c.hash(height, 'b')}
		tx := chain.Tx{Hash: c.hash(height, 't'), Coinbase: true, Outputs: []chain.Output{{Address: "a", Value: height}}}
		if c.prev != nil {
			b.PrevHash = c.prev.Hash
			tx.Coinbase = false
			tx.Inputs = []chain.OutPoint{{TxHash: c.prev.Txs[0].Hash}}
		}
		b.Txs = []chain.Tx{tx}
		if _, err := c.w.Apply(context.Background(), b); err != nil {
			c.t.Fatalf("apply %d: %v", height, err)
		}
		if c.blocks == nil {
			c.blocks = make(map[uint64]*chain.Block)
		}
		c.prev, c.blocks[height] = b, b
	}
}

func span(from, to uint64) []uint64 {
	var hs []uint64
	for h := from; h <= to; h++ {
		hs = append(hs, h)
	}
	return hs
}

func openTestStore(t *testing.T, opts disk.Options) (*disk.Store, *Writer) {
	t.Helper()
	st, err := disk.Open(storeDir(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	w := New(st, Options{})
	t.Cleanup(func() { w.Close(); st.Close() })
	return st, w
}

// Regression (tiers/disk, fixed in 544b42b). A store rolled back to empty
// kept State.UndoFloor from its old chain, so a new chain starting below it
// wrote undo deltas prune never deleted; deltas stopped being contiguous, and
// CheckRollback, which took the lowest delta below target+2 to mean "every
// delta from there to the tip exists", passed rollbacks that RollbackBlock
// could not finish: the writer answered chain.ErrRollbackTooDeep after
// reverting some blocks, against docs/rollback-and-retention.md ("deeper answers 409
// rollback_too_deep with nothing changed").
func TestRollbackRefusedAfterRestartChangesNothing(t *testing.T) {
	st, w := openTestStore(t, disk.Options{PruneDepth: 2, RollbackWindow: 3})
	ctx := context.Background()
	c := &testChain{t: t, w: w, tag: 1}
	c.apply(1, 2, 3) // tip 3: UndoFloor = 1
	if _, err := w.Rollback(ctx, 0); err != nil || !st.State().Tip.Empty {
		t.Fatalf("rollback to empty: %v, tip %s", err, st.State().Tip)
	}
	c = &testChain{t: t, w: w, tag: 2}
	c.apply(span(0, 6)...) // before the fix the delta of block 0 stayed for ever
	if _, err := w.Rollback(ctx, 3); err != nil {
		t.Fatal(err)
	}
	c.tag = 3
	c.rewind(3)
	c.apply(4) // the deltas of 1..3 were pruned at tip 6
	before := st.State().Tip
	_, err := w.Rollback(ctx, 1) // within the window, but the deltas of 2 and 3 are gone
	if after := st.State().Tip; !errors.Is(err, chain.ErrRollbackTooDeep) || after != before {
		t.Fatalf("rollback to 1 from %s: err %v, tip now %s; want rollback too deep and nothing changed", before, err, after)
	}
}

// Regression (tiers/disk, fixed in 544b42b). CheckRollback refused a
// rollback below the parent of the store's first block although it was
// within the window and every delta it needed was kept: with blocks
// 100..102, a rollback to 99 emptied the store, but a rollback to 98
// answered "no undo data kept for height 99". Both targets name the same
// state (nothing applied), and docs/rollback-and-retention.md says a rollback within
// rollback_window must succeed.
func TestRollbackBelowFirstBlock(t *testing.T) {
	st, w := openTestStore(t, disk.Options{PruneDepth: 2, RollbackWindow: 10})
	c := &testChain{t: t, w: w, tag: 1}
	c.apply(100, 101, 102)
	if _, err := w.Rollback(context.Background(), 98); err != nil || !st.State().Tip.Empty {
		t.Fatalf("rollback to 98 from 102 (window 10): %v, tip %s; want the empty store", err, st.State().Tip)
	}
}

// Regression (tiers/disk, fixed in 544b42b). After a rollback to empty, a
// new chain that started below the old one was not pruned until it passed
// the old chain's height: State.PruneHeight and UndoFloor kept the old
// chain's values, so pruneSpent returned at once (PruneHeight >= limit) and
// prune deleted no undo delta (UndoFloor >= limit), against the retention
// promise of tiers/disk/doc.go ("Records are physically deleted once
// tip - spent_height > PruneDepth + RollbackWindow").
func TestPruningAfterRestartFromEmpty(t *testing.T) {
	st, w := openTestStore(t, disk.Options{PruneDepth: 1, RollbackWindow: 4})
	c := &testChain{t: t, w: w, tag: 1}
	c.apply(span(1000, 1003)...)
	if _, err := w.Rollback(context.Background(), 999); err != nil || !st.State().Tip.Empty {
		t.Fatalf("rollback to empty: %v", err)
	}
	before := st.Health()
	c = &testChain{t: t, w: w, tag: 2}
	c.apply(span(0, 40)...) // every block spends the previous block's output
	after := st.Health()
	if after.PrunedSpentRecords == before.PrunedSpentRecords || after.PrunedUndoDeltas == before.PrunedUndoDeltas {
		t.Fatalf("40 blocks with prune depth 1 and window 4 pruned %d spent records and %d undo deltas; state %+v",
			after.PrunedSpentRecords-before.PrunedSpentRecords, after.PrunedUndoDeltas-before.PrunedUndoDeltas, st.State())
	}
}

package writer

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/internal/model"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

// testSpace is a DiskSpace whose figure the test sets: statfs, as the
// guard sees it.
type testSpace struct {
	avail atomic.Uint64
	fail  atomic.Bool
}

func (s *testSpace) AvailableBytes() (uint64, error) {
	if s.fail.Load() {
		return 0, errors.New("statfs: not today")
	}
	return s.avail.Load(), nil
}

// observed is one published state a reader saw.
type observed struct {
	seq          uint64
	tip          chain.Tip
	count        uint64
	digest       chain.Digest
	viewSeq      uint64
	viewTip      chain.Tip
	viewCount    uint64
	viewDigest   chain.Digest
	publishedSeq uint64 // Published().Seq read just after the view
}

// TestFullDiskRefusesWrites fills the disk (as statfs reports it) under a
// feed of blocks and rollbacks with concurrent readers: once the room left
// is below the reserve plus the next change's estimate, every write that
// would change the store answers ErrInsufficientStorage with the current
// tip and seq, and changes nothing (committed and published state, and
// what readers see), while re-posts and rejections answer as always and
// readers keep being served the last published state. When room returns,
// writes resume by themselves, and the store ends exactly at the model's
// tip, count and digest.
func TestFullDiskRefusesWrites(t *testing.T) {
	const reserve = 1 << 20
	st, err := disk.Open(t.TempDir(), disk.Options{PruneDepth: 3, RollbackWindow: 6})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	space := &testSpace{}
	space.avail.Store(1 << 40)
	reg := prometheus.NewRegistry()
	w := New(st, Options{Space: space, Reserve: reserve, Metrics: NewMetrics(reg)})
	defer w.Close()
	ctx := context.Background()
	g := model.NewGen(7, model.GenOptions{})
	m := model.New(3, 6)

	// Every state the writer acknowledged, by seq: what readers must see.
	var mu sync.Mutex
	states := map[uint64]observed{0: {tip: chain.Tip{Empty: true}}}
	seq := uint64(0)
	acked := func(res Result) {
		t.Helper()
		seq++
		if res.Seq != seq || res.Tip != m.Tip() {
			t.Fatalf("acknowledged %+v, want seq %d tip %s", res, seq, m.Tip())
		}
		mu.Lock()
		states[seq] = observed{tip: m.Tip(), count: m.Count(), digest: m.Digest()}
		mu.Unlock()
	}
	apply := func() {
		t.Helper()
		b := g.Block(m)
		res, err := w.Apply(ctx, b)
		if err != nil {
			t.Fatalf("apply %d: %v", b.Height, err)
		}
		if _, err := m.Apply(b, false); err != nil {
			t.Fatal(err)
		}
		acked(res)
	}
	rollback := func(depth uint64) {
		t.Helper()
		target := m.Tip().Height - depth
		res, err := w.Rollback(ctx, target)
		if err != nil {
			t.Fatalf("rollback to %d: %v", target, err)
		}
		if err := m.Rollback(target); err != nil {
			t.Fatal(err)
		}
		acked(res)
	}

	// Readers: published state and a view of it, as fast as they can.
	stop := make(chan struct{})
	var readers sync.WaitGroup
	var seen [3][]observed
	var readErrs atomic.Value
	for i := range seen {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				p := st.Published()
				v, err := st.PublishedView()
				if err != nil {
					readErrs.Store(err)
					return
				}
				vs := v.State()
				v.Close()
				seen[i] = append(seen[i], observed{seq: p.Seq, tip: p.Tip, count: p.UtxoCount, digest: p.Digest,
					viewSeq: vs.Seq, viewTip: vs.Tip, viewCount: vs.UtxoCount, viewDigest: vs.Digest,
					publishedSeq: st.Published().Seq})
			}
		}()
	}

	for range 20 {
		apply()
	}
	rollback(2)
	for range 5 {
		apply()
	}

	// The disk fills up.
	next := g.Block(m)
	need := reserve + writeFactor*estimateBlock(next)
	space.avail.Store(need - 1)
	before, published := st.State(), st.Published()
	refusals := 0
	wantRefused := func(what string, res Result, err error) {
		t.Helper()
		refusals++
		if !errors.Is(err, ErrInsufficientStorage) || res.Applied || res.Changes != nil || res.Tip != m.Tip() || res.Seq != seq {
			t.Fatalf("%s on a full disk: %+v, %v; want ErrInsufficientStorage at tip %s seq %d", what, res, err, m.Tip(), seq)
		}
		if st.State() != before || st.Published() != published {
			t.Fatalf("%s was refused but changed the store: %+v, was %+v", what, st.State(), before)
		}
	}
	for range 5 {
		res, err := w.Apply(ctx, next)
		wantRefused(fmt.Sprintf("block %d", next.Height), res, err)
	}
	// The room left still meets the reserve alone, but not the refused
	// block: WritesRefused (for /readyz) says writes are refused.
	if err := w.WritesRefused(); !errors.Is(err, ErrInsufficientStorage) {
		t.Fatalf("WritesRefused after a refusal: %v", err)
	}
	// What changes nothing answers as always: a re-post, a rollback to the
	// tip, a block that does not extend the tip.
	tipHash, _ := m.HashAt(m.Tip().Height)
	if res, err := w.Rollback(ctx, m.Tip().Height); err != nil || res.Applied || res.Seq != seq {
		t.Fatalf("a rollback to the tip on a full disk: %+v, %v", res, err)
	}
	if _, err := w.RollbackToHash(ctx, tipHash); err != nil {
		t.Fatalf("a rollback to the tip by hash on a full disk: %v", err)
	}
	stale := *next
	stale.Height += 5
	if _, err := w.Apply(ctx, &stale); !errors.Is(err, chain.ErrNotNextBlock) {
		t.Fatalf("a block that does not extend the tip, on a full disk: %v; want ErrNotNextBlock", err)
	}

	// Below the reserve, everything that writes is refused.
	space.avail.Store(reserve - 1)
	res, err := w.Rollback(ctx, m.Tip().Height-1)
	wantRefused("a rollback", res, err)
	h, _ := m.HashAt(m.Tip().Height - 2)
	res, err = w.RollbackToHash(ctx, h)
	wantRefused("a rollback by hash", res, err)
	if _, err := w.Checkpoint(ctx, t.TempDir()+"/cp"); !errors.Is(err, ErrInsufficientStorage) {
		t.Fatalf("a checkpoint on a full disk: %v; want ErrInsufficientStorage", err)
	}
	refusals++
	space.avail.Store(reserve - 1)
	if err := w.WritesRefused(); !errors.Is(err, ErrInsufficientStorage) {
		t.Fatalf("WritesRefused below the reserve: %v", err)
	}
	figures := gather(t, reg)
	if got := figures[`utxo_cache_writes_refused_total{reason="insufficient_storage"}`]; got != float64(refusals) {
		t.Fatalf("utxo_cache_writes_refused_total{reason=insufficient_storage} = %v, want %d", got, refusals)
	}
	if got := figures["utxo_cache_disk_free_bytes"]; got != reserve-1 {
		t.Fatalf("utxo_cache_disk_free_bytes = %v, want %d", got, reserve-1)
	}
	if got := figures["utxo_cache_disk_reserve_bytes"]; got != reserve {
		t.Fatalf("utxo_cache_disk_reserve_bytes = %v, want %d", got, reserve)
	}

	// Exactly the refused block's worth of room lets it through, and
	// WritesRefused says so first.
	space.avail.Store(need)
	if err := w.WritesRefused(); err != nil {
		t.Fatalf("WritesRefused with room for the refused block: %v", err)
	}
	res, err = w.Apply(ctx, next)
	if err != nil {
		t.Fatalf("block %d once room returned: %v", next.Height, err)
	}
	if _, err := m.Apply(next, false); err != nil {
		t.Fatal(err)
	}
	acked(res)
	space.avail.Store(1 << 40)
	for range 10 {
		apply()
	}
	rollback(3)
	for range 5 {
		apply()
	}

	// Room unknown (statfs fails): the guard lets writes through.
	space.fail.Store(true)
	apply()
	space.fail.Store(false)

	close(stop)
	readers.Wait()
	if err := readErrs.Load(); err != nil {
		t.Fatalf("a reader failed: %v", err)
	}
	final := st.Published()
	if final.Tip != m.Tip() || final.UtxoCount != m.Count() || final.Digest != m.Digest() || final.Seq != seq {
		t.Fatalf("final state %+v; want tip %s count %d digest %s seq %d", final, m.Tip(), m.Count(), m.Digest(), seq)
	}
	// Every state a reader saw was an acknowledged one, exactly, never older
	// than one it saw before; and readers went on during the refusals.
	duringRefusal := 0
	for i, obs := range seen {
		var last uint64
		for _, o := range obs {
			want, ok := states[o.seq]
			if !ok || o.tip != want.tip || o.count != want.count || o.digest != want.digest {
				t.Fatalf("reader %d saw seq %d: %s %d %s; acknowledged %+v (known %v)", i, o.seq, o.tip, o.count, o.digest, want, ok)
			}
			vwant := states[o.viewSeq]
			if o.viewTip != vwant.tip || o.viewCount != vwant.count || o.viewDigest != vwant.digest {
				t.Fatalf("reader %d's view at seq %d: %s %d; acknowledged %+v", i, o.viewSeq, o.viewTip, o.viewCount, vwant)
			}
			if o.seq < last || o.viewSeq < o.seq || o.publishedSeq < o.viewSeq {
				t.Fatalf("reader %d went back: seq %d after %d (view %d, then %d)", i, o.seq, last, o.viewSeq, o.publishedSeq)
			}
			last = o.publishedSeq
			if o.seq == published.Seq {
				duringRefusal++
			}
		}
	}
	if duringRefusal == 0 {
		t.Log("no reader happened to read while writes were refused (a busy machine); the refusals' own checks held")
	}
	t.Logf("%d refusals; readers saw %d, %d, %d states (%d at the refusal's seq)", refusals, len(seen[0]), len(seen[1]), len(seen[2]), duringRefusal)
}

// TestGuardBoundaries checks the guard's arithmetic at its edges: the
// reserve alone, the reserve plus the estimate, and an off guard.
func TestGuardBoundaries(t *testing.T) {
	st, err := disk.Open(t.TempDir(), disk.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if w := New(st, Options{}); w.WritesRefused() != nil || w.opts.Reserve != DefaultReserve(64<<20) || w.opts.Reserve != 192<<20 {
		t.Fatalf("no Space: refused %v, reserve %d", w.WritesRefused(), w.opts.Reserve)
	} else {
		w.Close()
	}
	space := &testSpace{}
	w := New(st, Options{Space: space, Reserve: 1000})
	defer w.Close()
	for _, c := range []struct {
		avail, need uint64
		refused     bool
	}{
		{0, 0, true}, {999, 0, true}, {1000, 0, false}, {1999, 1000, true}, {2000, 1000, false}, {1 << 62, 1 << 20, false},
	} {
		space.avail.Store(c.avail)
		_, err := w.checkSpace(c.need)
		if got := errors.Is(err, ErrInsufficientStorage); got != c.refused {
			t.Errorf("available %d, need %d: %v; want refused %v", c.avail, c.need, err, c.refused)
		}
	}
	b := &chain.Block{Txs: []chain.Tx{{Outputs: []chain.Output{{Address: "abc", Datum: make([]byte, 1000)}}}}}
	if e := estimateBlock(b); e < 1000+3 || e > 1000+3+256 {
		t.Errorf("estimate of a block with a 1000-byte datum: %d", e)
	}
}

// gather returns every counter and gauge of reg by name{labels}.
func gather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]float64)
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			name := mf.GetName()
			if len(m.GetLabel()) > 0 {
				var ls []string
				for _, l := range m.GetLabel() {
					ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
				}
				name += "{" + strings.Join(ls, ",") + "}"
			}
			switch {
			case m.GetCounter() != nil:
				out[name] = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				out[name] = m.GetGauge().GetValue()
			}
		}
	}
	return out
}

// TestFullDiskRefusesCatchUp: ApplyBlocks goes through the free-space guard
// too. With room for single blocks but not for a window, the window is
// refused and its blocks are applied one by one; with no room, ApplyBlocks
// answers ErrInsufficientStorage and changes nothing.
func TestFullDiskRefusesCatchUp(t *testing.T) {
	const reserve = 1 << 20
	st, err := disk.Open(t.TempDir(), disk.Options{PruneDepth: 3, RollbackWindow: 6})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	space := &testSpace{}
	space.avail.Store(1 << 40)
	w := New(st, Options{Space: space, Reserve: reserve, LiveMargin: 1})
	defer w.Close()
	ctx := context.Background()
	g := model.NewGen(11, model.GenOptions{})
	m := model.New(3, 6)
	next := func(n int) []*chain.Block {
		var bs []*chain.Block
		for range n {
			b := g.Block(m)
			if _, err := m.Apply(b, false); err != nil {
				t.Fatal(err)
			}
			bs = append(bs, b)
		}
		return bs
	}

	// No room at all: refused, nothing changed.
	space.avail.Store(reserve / 2)
	blocks := next(20)
	before := st.State()
	res, err := w.ApplyBlocks(ctx, blocks, blocks[len(blocks)-1].Height)
	if !errors.Is(err, ErrInsufficientStorage) || res.Done != 0 {
		t.Fatalf("ApplyBlocks on a full disk: %+v, %v; want ErrInsufficientStorage and nothing done", res, err)
	}
	if after := st.State(); after != before {
		t.Fatalf("a refused catch-up changed the store: %+v -> %+v", before, after)
	}

	// Room for any one block but not for the window of all twenty.
	var one, all uint64
	for _, b := range blocks {
		one = max(one, writeFactor*estimateBlock(b))
		all += writeFactor * estimateBlock(b)
	}
	if all <= one {
		t.Fatalf("window estimate %d not above one block's %d", all, one)
	}
	space.avail.Store(reserve + one + (all-one)/2)
	res, err = w.ApplyBlocks(ctx, blocks, blocks[len(blocks)-1].Height)
	if err != nil || res.Done != len(blocks) || res.Windows != 0 {
		t.Fatalf("ApplyBlocks with room for single blocks: %+v, %v; want all %d one by one", res, err, len(blocks))
	}
	if got := st.State(); got.Tip != m.Tip() || got.UtxoCount != m.Count() || got.Digest != m.Digest() {
		t.Fatalf("after catch-up: %+v, want the model's tip %s, %d UTXOs, digest %s", got, m.Tip(), m.Count(), m.Digest())
	}

	// Room again: windows resume.
	space.avail.Store(1 << 40)
	blocks = next(20)
	res, err = w.ApplyBlocks(ctx, blocks, blocks[len(blocks)-1].Height)
	if err != nil || res.Done != len(blocks) || res.Windows == 0 {
		t.Fatalf("ApplyBlocks with room: %+v, %v; want windows", res, err)
	}
	if got := st.State(); got.Tip != m.Tip() || got.UtxoCount != m.Count() || got.Digest != m.Digest() {
		t.Fatalf("after catch-up: %+v, want the model's tip %s, %d UTXOs, digest %s", got, m.Tip(), m.Count(), m.Digest())
	}
}

// TestSmallWriteKeepsRefusal: a write smaller than the one the guard refused
// (a checkpoint) passing does not clear the refusal /readyz reports; a
// write as large as it does, once there is room.
func TestSmallWriteKeepsRefusal(t *testing.T) {
	const reserve = 1 << 20
	st, err := disk.Open(t.TempDir(), disk.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	space := &testSpace{}
	space.avail.Store(1 << 40)
	w := New(st, Options{Space: space, Reserve: reserve})
	defer w.Close()
	ctx := context.Background()
	g := model.NewGen(3, model.GenOptions{})
	m := model.New(2160, 4320)
	b := g.Block(m)
	space.avail.Store(reserve + 1) // room for the reserve, not for a block
	if _, err := w.Apply(ctx, b); !errors.Is(err, ErrInsufficientStorage) {
		t.Fatalf("apply on a nearly full disk: %v, want ErrInsufficientStorage", err)
	}
	if _, err := w.Checkpoint(ctx, filepath.Join(t.TempDir(), "cp")); err != nil {
		t.Fatalf("checkpoint within the reserve: %v", err)
	}
	if err := w.WritesRefused(); !errors.Is(err, ErrInsufficientStorage) {
		t.Fatalf("WritesRefused after a checkpoint passed: %v, want the block's refusal to stand", err)
	}
	space.avail.Store(1 << 40)
	if _, err := m.Apply(b, false); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Apply(ctx, b); err != nil {
		t.Fatalf("apply with room: %v", err)
	}
	if err := w.WritesRefused(); err != nil {
		t.Fatalf("WritesRefused after the block went through: %v", err)
	}
}

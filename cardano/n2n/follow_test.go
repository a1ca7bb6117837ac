package n2n

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/utxo-cache/utxo-cache/cardano/n2n/n2ntest"
	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
	"github.com/utxo-cache/utxo-cache/writer"
)

// The scenarios run the follower against the fake node (fakenode_test.go)
// serving consecutive blocks of the fixture chunk 01836. The store starts
// empty at the chunk's first block (Options.Start), so it applies blocks
// 1.. with SkipUnknownInputs (their earlier outputs are not in the store).
// After each scenario the store must equal a reference store built by
// applying the node's final chain (blocks 1..) directly through the same
// adapter and a writer: the state (tip, UTXO count, digest), every point,
// and every output the blocks created, spent or not.

const testChunk = "01836"

var fixtureDir = filepath.Join("..", "..", "testdata", "cardano")

// testBlocks is how many blocks of the chunk the scenarios use: enough for
// catch-up windows and rollbacks, few enough for -race -count=20.
const testBlocks = 60

type rig struct {
	t     *testing.T
	node  *n2ntest.Node
	store *disk.Store
	w     *writer.Writer
	f     *Follower
	reg   *prometheus.Registry
	stop  context.CancelFunc
	done  chan error
}

func openStore(t testing.TB) (*disk.Store, *writer.Writer) {
	s, err := disk.Open(t.TempDir(), disk.Options{RollbackWindow: 20})
	if err != nil {
		t.Fatal(err)
	}
	w := writer.New(s, writer.Options{SkipUnknownInputs: true, LiveMargin: 5, WindowBlocks: 8})
	t.Cleanup(func() {
		_ = w.Close()
		_ = s.Close()
	})
	return s, w
}

// startRig starts a fake node serving blocks and a follower of it over a
// fresh store. opts may adjust the follower's options.
func startRig(t *testing.T, blocks []n2ntest.Block, opts func(*Options)) *rig {
	r := &rig{t: t, node: n2ntest.NewNode(t, MagicPreview, blocks), reg: prometheus.NewRegistry(), done: make(chan error, 1)}
	r.store, r.w = openStore(t)
	start := Point{Slot: blocks[0].Slot, Hash: blocks[0].Hash}
	o := Options{
		Address: r.node.Addr(), Magic: MagicPreview, Start: &start,
		Writer: r.w, Points: r.store, Metrics: r.reg,
		BackoffMin: 5 * time.Millisecond, BackoffMax: 40 * time.Millisecond,
		BatchBlocks: 16, FlushAfter: 5 * time.Millisecond, FetchTimeout: 10 * time.Second,
		Logger: testLogger(),
	}
	if opts != nil {
		opts(&o)
	}
	r.f = New(o)
	ctx, cancel := context.WithCancel(context.Background())
	r.stop = cancel
	go func() { r.done <- r.f.Run(ctx) }()
	t.Cleanup(r.close)
	return r
}

func (r *rig) close() {
	if r.stop == nil {
		return
	}
	r.stop()
	if err := <-r.done; err != nil {
		r.t.Errorf("Run: %v", err)
	}
	r.stop = nil
}

func (r *rig) metric(name string, labels ...string) float64 {
	r.t.Helper()
	mfs, err := r.reg.Gather()
	if err != nil {
		r.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			ok := true
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, lp := range m.GetLabel() {
					if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
						found = true
					}
				}
				ok = ok && found
			}
			if !ok {
				continue
			}
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	r.t.Fatalf("no metric %s %v", name, labels)
	return 0
}

// waitFor polls cond until it holds, failing after a deadline.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 30s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// waitTip waits until the store has published the tip b.
func (r *rig) waitTip(b *n2ntest.Block) {
	r.t.Helper()
	waitFor(r.t, "store at "+b.Hash.String(), func() bool {
		tip := r.store.Published().Tip
		return !tip.Empty && tip.Hash == b.Hash
	})
}

// checkSame compares the rig's store with one built by applying chain[1:]
// directly.
func (r *rig) checkSame(chainBlocks []n2ntest.Block) {
	r.t.Helper()
	checkSameStore(r.t, r.store, chainBlocks)
}

func checkSameStore(t *testing.T, got *disk.Store, chainBlocks []n2ntest.Block, orphans ...n2ntest.Block) {
	t.Helper()
	ref, w := openStore(t)
	var blocks []*chain.Block
	for i := range chainBlocks[1:] {
		b := chainBlocks[1+i].Conv.Chain
		blocks = append(blocks, &b)
	}
	for _, b := range blocks {
		if _, err := w.Apply(context.Background(), b); err != nil {
			t.Fatalf("reference: apply %d: %v", b.Height, err)
		}
	}
	gs, rs := got.State(), ref.State()
	if gs.Tip != rs.Tip || gs.UtxoCount != rs.UtxoCount || gs.Digest != rs.Digest {
		t.Fatalf("store state %+v\nreference   %+v", gs, rs)
	}
	for _, b := range blocks {
		gp, gf, gerr := got.PointAt(b.Height)
		rp, rf, rerr := ref.PointAt(b.Height)
		if gerr != nil || rerr != nil || !gf || !rf || gp != rp || gp.Slot != b.Slot {
			t.Fatalf("point at %d: %v %v %v, reference %v %v %v", b.Height, gp, gf, gerr, rp, rf, rerr)
		}
	}
	// Nothing above the tip.
	if _, found, _ := got.PointAt(rs.Tip.Height + 1); found {
		t.Fatalf("the store has a block above the tip %s", rs.Tip)
	}
	gv, err := got.NewView()
	if err != nil {
		t.Fatal(err)
	}
	defer gv.Close()
	rv, err := ref.NewView()
	if err != nil {
		t.Fatal(err)
	}
	defer rv.Close()
	// Every output any block of the node's chains created (those of blocks
	// rolled back included: they must be gone from both).
	n := 0
	for _, cb := range append(slices.Clone(chainBlocks), orphans...) {
		for _, tx := range cb.Conv.Chain.Txs {
			for j := range uint32(len(tx.Outputs) + 1) {
				op := chain.OutPoint{TxHash: tx.Hash, Index: j}
				gu, gsp, gerr := gv.Utxo(op)
				ru, rsp, rerr := rv.Utxo(op)
				if !errors.Is(gerr, rerr) && (gerr != nil || rerr != nil) {
					if !(errors.Is(gerr, chain.ErrNotFound) && errors.Is(rerr, chain.ErrNotFound)) {
						t.Fatalf("%s: store %v, reference %v", op, gerr, rerr)
					}
				}
				if !reflect.DeepEqual(gu, ru) || !reflect.DeepEqual(gsp, rsp) {
					t.Fatalf("%s: store %+v %+v, reference %+v %+v", op, gu, gsp, ru, rsp)
				}
				if gerr == nil {
					n++
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("compared no output")
	}
}

// TestColdStartToTip: an empty store follows the node from the start point
// to its tip (catch-up windows far below it), then the blocks the node
// announces one at a time.
func TestColdStartToTip(t *testing.T) {
	all := n2ntest.ChunkBlocks(t, fixtureDir, testChunk, testBlocks)
	r := startRig(t, all[:50], nil)
	r.waitTip(&all[49])
	if w := r.metric("utxo_cache_cardano_follow_catchup_windows_total"); w == 0 {
		t.Errorf("the catch-up used no window")
	}
	for i := 50; i < len(all); i++ {
		r.node.Extend(all[i])
		r.waitTip(&all[i])
	}
	r.checkSame(all)
	if got := r.metric("utxo_cache_cardano_follow_blocks_applied_total"); got != float64(len(all)-1) {
		t.Errorf("blocks_applied_total %v, want %d", got, len(all)-1)
	}
	waitFor(t, "tip metrics", func() bool {
		return r.metric("utxo_cache_cardano_follow_tip_slot") == float64(all[len(all)-1].Slot) &&
			r.metric("utxo_cache_cardano_follow_node_tip_height") == float64(all[len(all)-1].Height)
	})
	if err := r.f.Ready(); err != nil {
		t.Errorf("Ready: %v", err)
	}
}

// TestRollbackThenReapply: the node rolls back 7 blocks (the store follows
// exactly), then serves a shorter fork (3 of them again), then all and
// more; finally a restart of the follower over the same store resumes by
// intersection without applying anything twice.
func TestRollbackThenReapply(t *testing.T) {
	all := n2ntest.ChunkBlocks(t, fixtureDir, testChunk, testBlocks)
	r := startRig(t, all[:40], nil)
	r.waitTip(&all[39])

	r.node.Rollback(7) // tip 32
	r.waitTip(&all[32])
	r.checkSame(all[:33])
	if got := r.metric("utxo_cache_cardano_follow_rolled_back_blocks_total"); got != 7 {
		t.Errorf("rolled_back_blocks_total %v, want 7", got)
	}
	r.node.Extend(all[33:36]...)
	r.waitTip(&all[35])
	r.checkSame(all[:36])
	r.node.Rollback(2) // tip 33, then forward again past the old tip
	r.waitTip(&all[33])
	r.node.Extend(all[34:50]...)
	r.waitTip(&all[49])
	r.checkSame(all[:50])
	if got := r.metric("utxo_cache_cardano_follow_rollbacks_total"); got != 2 {
		t.Errorf("rollbacks_total %v, want 2", got)
	}

	// A restart: the follower intersects at the store's tip.
	r.close()
	applied := r.store.State().Seq
	f2reg := prometheus.NewRegistry()
	f2 := New(Options{Address: r.node.Addr(), Magic: MagicPreview, Writer: r.w, Points: r.store, Metrics: f2reg,
		BackoffMin: 5 * time.Millisecond, BackoffMax: 40 * time.Millisecond, FlushAfter: 5 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f2.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	r.node.Extend(all[50:]...)
	r.waitTip(&all[len(all)-1])
	r.checkSame(all)
	if got := r.store.State().Seq - applied; got != uint64(len(all)-50) {
		t.Errorf("the restarted follower committed %d changes, want %d", got, len(all)-50)
	}
}

// TestFork: the node switches to another branch from a few blocks below its
// tip (real blocks changed and re-hashed: n2ntest.Fork), longer than the
// old one. The store rolls back to the fork point and applies the branch:
// the old branch's outputs are gone, the new branch's are there.
func TestFork(t *testing.T) {
	all := n2ntest.ChunkBlocks(t, fixtureDir, testChunk, testBlocks)
	r := startRig(t, all[:40], nil)
	r.waitTip(&all[39])
	k := 30 // the first block of the branch: one whose first transaction creates outputs
	for len(all[k].Conv.Chain.Txs) == 0 || len(all[k].Conv.Chain.Txs[0].Outputs) == 0 || all[k].Conv.Chain.Txs[0].Invalid {
		k++
	}
	if k > 37 {
		t.Fatalf("no block with a transaction among 30..37")
	}
	branch := n2ntest.Fork(t, all[k:45])
	if branch[0].Hash == all[k].Hash || branch[0].Conv.Chain.Txs[0].Hash == all[k].Conv.Chain.Txs[0].Hash {
		t.Fatal("the fork's first block is the original")
	}
	r.node.Rollback(40 - k)
	r.node.Extend(branch...)
	r.waitTip(&branch[len(branch)-1])
	fork := append(slices.Clone(all[:k]), branch...)
	checkSameStore(t, r.store, fork, all[k:40]...)
	if got := r.metric("utxo_cache_cardano_follow_rolled_back_blocks_total"); got != float64(40-k) {
		t.Errorf("rolled_back_blocks_total %v, want %d", got, 40-k)
	}
	// The outputs of the replaced transaction: the old ones gone, the new
	// ones live.
	v, err := r.store.NewView()
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	oldTx, newTx := all[k].Conv.Chain.Txs[0], branch[0].Conv.Chain.Txs[0]
	if _, _, err := v.Utxo(chain.OutPoint{TxHash: oldTx.Hash}); !errors.Is(err, chain.ErrNotFound) {
		t.Errorf("the old branch's output %s:0: %v, want not found", oldTx.Hash, err)
	}
	if _, _, err := v.Utxo(chain.OutPoint{TxHash: newTx.Hash}); err != nil {
		t.Errorf("the new branch's output %s:0: %v", newTx.Hash, err)
	}
}

// TestDroppedMidFetch: the node drops the connection in the middle of a
// block-fetch batch; the follower applies nothing of it, reconnects and
// reaches the tip.
func TestDroppedMidFetch(t *testing.T) {
	all := n2ntest.ChunkBlocks(t, fixtureDir, testChunk, testBlocks)
	r := startRig(t, all[:2], nil)
	r.waitTip(&all[1])
	r.node.DropAfter(3)
	r.node.Extend(all[2:30]...)
	r.waitTip(&all[29])
	r.checkSame(all[:30])
	if got := r.metric("utxo_cache_cardano_follow_reconnects_total"); got < 1 {
		t.Errorf("reconnects_total %v, want ≥ 1", got)
	}
	if got := r.metric("utxo_cache_cardano_follow_errors_total", "reason", ReasonNetwork) + r.metric("utxo_cache_cardano_follow_errors_total", "reason", ReasonProtocol); got < 1 {
		t.Errorf("no network or protocol error counted")
	}
}

// TestBlockThatDoesNotLink: the node announces a block whose parent is not
// the store's tip. Nothing is applied, the error names the block, the
// follower retries with backoff; once the node serves the missing block it
// catches up.
func TestBlockThatDoesNotLink(t *testing.T) {
	all := n2ntest.ChunkBlocks(t, fixtureDir, testChunk, testBlocks)
	logs := &lockedLog{}
	r := startRig(t, all[:10], func(o *Options) { o.Logger = slog.New(slog.NewTextHandler(logs, nil)) })
	r.waitTip(&all[9])
	before := r.store.State()
	r.node.Extend(all[11]) // skips block 10
	waitFor(t, "two not_linked errors", func() bool {
		return r.metric("utxo_cache_cardano_follow_errors_total", "reason", ReasonNotLinked) >= 2
	})
	if after := r.store.State(); after.Seq != before.Seq || after.Tip != before.Tip {
		t.Fatalf("a block that does not link changed the store: %+v → %+v", before, after)
	}
	if s := logs.String(); !strings.Contains(s, all[11].Hash.String()) || !strings.Contains(s, "does not link") {
		t.Errorf("the log does not name the block %s:\n%s", all[11].Hash, s)
	}
	r.node.Rollback(1)
	r.node.Extend(all[10:20]...)
	r.waitTip(&all[19])
	r.checkSame(all[:20])
}

// TestGarbage: the node answers with bytes that are no protocol message;
// the session ends (a protocol error), the follower reconnects and goes on.
func TestGarbage(t *testing.T) {
	all := n2ntest.ChunkBlocks(t, fixtureDir, testChunk, testBlocks)
	r := startRig(t, all[:5], nil)
	r.waitTip(&all[4])
	r.node.GarbageNext()
	r.node.Extend(all[5:25]...)
	r.waitTip(&all[24])
	r.checkSame(all[:25])
	if got := r.metric("utxo_cache_cardano_follow_errors_total", "reason", ReasonProtocol) + r.metric("utxo_cache_cardano_follow_errors_total", "reason", ReasonNetwork); got < 1 {
		t.Errorf("garbage counted no error")
	}
}

// TestRollbackTooDeep: the node rolls back further than the store's
// rollback window (20): the follower applies nothing, says why in Ready and
// the halted gauge, and never guesses; when the node returns to the
// store's chain it resumes.
func TestRollbackTooDeep(t *testing.T) {
	all := n2ntest.ChunkBlocks(t, fixtureDir, testChunk, testBlocks)
	r := startRig(t, all[:50], nil)
	r.waitTip(&all[49])
	before := r.store.State()
	r.node.Rollback(25) // tip 24: 25 blocks deep, the window is 20
	waitFor(t, "halted", func() bool { return r.f.Ready() != nil })
	if err := r.f.Ready(); !errors.Is(err, ErrRollbackTooDeep) {
		t.Fatalf("Ready: %v, want ErrRollbackTooDeep", err)
	}
	if r.metric("utxo_cache_cardano_follow_halted") != 1 {
		t.Error("halted gauge not 1")
	}
	if after := r.store.State(); after.Seq != before.Seq {
		t.Fatalf("a rollback too deep changed the store: %+v → %+v", before, after)
	}
	// The node comes back to the store's chain: the follower resumes.
	r.node.Extend(all[25:55]...)
	r.waitTip(&all[54])
	waitFor(t, "resumed", func() bool { return r.f.Ready() == nil })
	r.checkSame(all[:55])
}

func TestParse(t *testing.T) {
	for in, want := range map[string]uint32{"mainnet": 764824073, "preprod": 1, "preview": 2, "Preview": 2, "42": 42} {
		if got, err := ParseNetwork(in); err != nil || got != want {
			t.Errorf("ParseNetwork(%q) = %d, %v", in, got, err)
		}
	}
	for _, in := range []string{"", "0", "testnet", "4294967296", "-1"} {
		if _, err := ParseNetwork(in); err == nil {
			t.Errorf("ParseNetwork(%q) accepted", in)
		}
	}
	h := strings.Repeat("ab", 32)
	p, err := ParsePoint("123." + h)
	if err != nil || p.Slot != 123 || p.Hash.String() != h || p.String() != "123."+h {
		t.Errorf("ParsePoint: %v %v", p, err)
	}
	for _, in := range []string{"", "123", "x." + h, "1." + h[:62], "1:" + h} {
		if _, err := ParsePoint(in); err == nil {
			t.Errorf("ParsePoint(%q) accepted", in)
		}
	}
}

func TestOptionsValidate(t *testing.T) {
	s, w := openStore(t)
	ok := Options{Address: "127.0.0.1:3001", Magic: 1, Writer: w, Points: s}.EnsureDefaults()
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, o := range map[string]Options{
		"no address": {Magic: 1, Writer: w, Points: s},
		"no port":    {Address: "host", Magic: 1, Writer: w, Points: s},
		"no magic":   {Address: "h:1", Writer: w, Points: s},
		"no writer":  {Address: "h:1", Magic: 1, Points: s},
		"backoff":    {Address: "h:1", Magic: 1, Writer: w, Points: s, BackoffMin: time.Second, BackoffMax: time.Millisecond},
	} {
		if err := o.EnsureDefaults().Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
		if err := New(o).Run(context.Background()); err == nil {
			t.Errorf("%s: Run accepted", name)
		}
	}
}

// lockedLog is a log sink safe for the follower's goroutine.
type lockedLog struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// testLogger discards, unless N2N_TEST_LOG is set (then: debug to stderr).
func testLogger() *slog.Logger {
	if os.Getenv("N2N_TEST_LOG") == "" {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// TestWrongNetwork: a node of another network refuses the handshake; the
// follower applies nothing and keeps retrying, counting the failures.
func TestWrongNetwork(t *testing.T) {
	all := n2ntest.ChunkBlocks(t, fixtureDir, testChunk, 5)
	r := startRig(t, all, func(o *Options) { o.Magic = MagicPreprod })
	waitFor(t, "three failed sessions", func() bool {
		return r.metric("utxo_cache_cardano_follow_errors_total", "reason", ReasonProtocol)+
			r.metric("utxo_cache_cardano_follow_errors_total", "reason", ReasonNetwork) >= 3
	})
	if st := r.store.State(); !st.Tip.Empty || st.Seq != 0 {
		t.Fatalf("a node of another network changed the store: %+v", st)
	}
	if err := r.f.Ready(); err != nil {
		t.Errorf("Ready: %v (an unreachable node is no halt)", err)
	}
}

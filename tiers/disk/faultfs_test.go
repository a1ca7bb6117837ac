package disk_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/internal/model"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
	"github.com/utxo-cache/utxo-cache/writer"
)

// The harness of the power-loss test (powerloss_test.go) and the I/O fault
// tests (iofault_test.go). A store runs on Pebble's crashable in-memory file
// system (vfs.NewCrashableMem), behind an errorfs injector, faultHook, that
// the test arms for one request at a time: to take a crash clone (what was
// synced survives; of the rest, all or nothing) just before the k-th sync
// of the write-ahead log, or to fail writes or syncs of the WAL, or writes
// of sstables.
//
// Every synced batch of the store syncs the WAL once, so "the k-th WAL sync
// of a request" is its k-th batch: a block is one batch, a rollback one per
// reverted block. (A WAL rotation inside the request adds a sync of the old
// log; a fault or crash then lands one batch earlier, which is as good a
// point as any: the checks below do not depend on the exact batch.)
//
// The test drives a writer.Writer and a model.Model with the same random
// blocks and rollbacks, and knows at every moment the model and Seq of the
// last acknowledged change and of the change in flight. After a crash or a
// failure, the reopened store must be at one of those two, exactly: tip,
// count, digest, Seq, no rollback in progress, and the answers for a sample
// of outpoints and addresses.

var seedFlag = flag.Uint64("seed", 0, "replay one seed of TestPowerLoss, TestIOFaults or TestUtxoRefMatchesRecord (0: the default seeds; a random one, printed, for the last)")

// faultSeeds returns the seeds a randomized fault test runs: the default
// ones, or the one -seed names.
func faultSeeds(defaults ...uint64) []uint64 {
	if *seedFlag != 0 {
		return []uint64{*seedFlag}
	}
	return defaults
}

// faultOptions are the store options of the fault tests: small retention so
// pruning and undo deletion run in most batches, and a small memtable so
// that flushes (sstable writes) and WAL rotations happen within a run.
var faultOptions = disk.Options{
	PruneDepth: 3, RollbackWindow: 6, PruneBudget: 3, RecentOutputs: 16,
	MemTableBytes: 64 << 10, CacheBytes: 4 << 20,
}

// walFaultOptions are faultOptions with memtables large enough that a
// request never rotates the WAL: faults on the WAL must not hit a rotation
// (see disk.ErrFailed).
var walFaultOptions = func() disk.Options {
	o := faultOptions
	o.MemTableBytes = 4 << 20
	return o
}()

const faultDir = "/db"

// faultKind names what faultHook makes fail.
type faultKind int

const (
	faultNone     faultKind = iota
	faultWALWrite           // writes to the WAL, from the faultAt-th batch on
	faultWALSync            // syncs of the WAL, from the faultAt-th on
	faultSSTable            // creating, writing or syncing sstables, sstBudget times
)

// faultHook is the errorfs.Injector of a test store. Pebble calls it from
// several goroutines (the commit path, the WAL flusher, flushes and
// compactions), before each file system operation; mu guards it all.
//
// It never fails an operation on the MANIFEST or other metadata: Pebble
// treats a failed MANIFEST write as fatal on a background goroutine, which
// ends the process (see pebbleLogger.Fatalf). Nor does it fail WAL
// rotations, which end the process inside Pebble (see disk.ErrFailed).
type faultHook struct {
	mu sync.Mutex
	// mem is the file system under the store, which a crash clones.
	mem *vfs.MemFS
	// walSyncs counts WAL syncs since the last arm.
	walSyncs int
	// crashAt: take clone just before this WAL sync (0: never).
	crashAt  int
	crashCfg vfs.CrashCloneCfg
	clone    *vfs.MemFS
	// fault is what fails; faultAt is the first batch it fails (WAL write
	// and sync faults); sstBudget how many sstable operations still fail.
	fault     faultKind
	faultAt   int
	sstBudget int
	injected  int
}

var _ errorfs.Injector = (*faultHook)(nil)

func (h *faultHook) String() string { return "faultHook" }

// MaybeError implements errorfs.Injector.
func (h *faultHook) MaybeError(op errorfs.Op) error {
	wal := strings.HasSuffix(op.Path, ".log")
	sst := strings.HasSuffix(op.Path, ".sst")
	if !wal && !sst {
		return nil
	}
	var write, sync, create bool
	switch op.Kind {
	case errorfs.OpFileWrite, errorfs.OpFileWriteAt:
		write = true
	case errorfs.OpFileSync, errorfs.OpFileSyncData:
		sync = true
	case errorfs.OpCreate, errorfs.OpReuseForWrite:
		create = true
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if wal && sync {
		h.walSyncs++
		if h.walSyncs == h.crashAt && h.clone == nil {
			// Before the sync: the batch it would make durable is written
			// but not synced, so the clone may or may not keep it.
			h.clone = h.mem.CrashClone(h.crashCfg)
		}
	}
	var fail bool
	switch h.fault {
	case faultWALWrite:
		// Batch j writes after the syncs of batches 1..j-1.
		fail = wal && write && h.walSyncs >= h.faultAt-1
	case faultWALSync:
		fail = wal && sync && h.walSyncs >= h.faultAt
	case faultSSTable:
		if sst && (write || sync || create) && h.sstBudget > 0 {
			h.sstBudget--
			fail = true
		}
	}
	if fail {
		h.injected++
		return errorfs.ErrInjected
	}
	return nil
}

// faultFS is errorfs.FS with the injector on recycled files too: errorfs
// (v2.1.7) returns the file of ReuseForWrite unwrapped, so a WAL that
// Pebble recycles would escape every fault and crash point.
type faultFS struct{ *errorfs.FS }

// ReuseForWrite implements vfs.FS.
func (fs faultFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, category) // injects, renames, opens
	if err != nil {
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	return fs.FS.OpenReadWrite(newname, category) // at offset 0, like ReuseForWrite
}

// armCrash makes the hook take a crash clone of the store's file system
// just before the k-th WAL sync from now.
func (h *faultHook) armCrash(k int, cfg vfs.CrashCloneCfg) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.walSyncs, h.crashAt, h.crashCfg, h.clone = 0, k, cfg, nil
}

// armFault makes the hook fail kind from now on (from the at-th batch for
// the WAL write and sync faults; sstable faults fail budget operations).
func (h *faultHook) armFault(kind faultKind, at, budget int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.walSyncs, h.fault, h.faultAt, h.sstBudget, h.injected = 0, kind, at, budget, 0
}

// disarm stops crashes and faults, and returns the crash clone taken since
// armCrash, if any, and the number of operations failed since armFault.
func (h *faultHook) disarm() (clone *vfs.MemFS, injected int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	clone, injected = h.clone, h.injected
	h.crashAt, h.clone, h.fault, h.sstBudget = 0, nil, faultNone, 0
	return clone, injected
}

// crashClone clones the store's file system as a crash now would leave it.
func (h *faultHook) crashClone(cfg vfs.CrashCloneCfg) *vfs.MemFS {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.mem.CrashClone(cfg)
}

// completionCounter is a slog handler that counts the Opens that completed
// a rollback interrupted by a crash (Open logs it as a warning).
type completionCounter struct{ n *atomic.Int64 }

func (c completionCounter) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (c completionCounter) Handle(_ context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, "completing a rollback interrupted") {
		c.n.Add(1)
	}
	return nil
}
func (c completionCounter) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c completionCounter) WithGroup(string) slog.Handler      { return c }

// faultOp is one request: a block to apply, or a rollback to target.
type faultOp struct {
	block   *chain.Block
	target  uint64
	batches int // synced batches it commits: 1, or one per reverted block
}

func (op faultOp) String() string {
	if op.block != nil {
		return fmt.Sprintf("block %d", op.block.Height)
	}
	return fmt.Sprintf("rollback to %d (%d blocks)", op.target, op.batches)
}

// faultRun is one seeded run: a store on a crashable file system, its
// writer, and the model of the last acknowledged change.
type faultRun struct {
	t    *testing.T
	name string // the test, for the replay line
	seed uint64
	g    *model.Gen
	rng  *rand.Rand
	hook *faultHook

	opts  disk.Options // the store's options (the file system apart)
	store *disk.Store
	w     *writer.Writer

	m     *model.Model // the state after the last acknowledged change
	seq   uint64       // its Seq
	named []chain.OutPoint
	seen  map[chain.OutPoint]bool

	completions atomic.Int64 // Opens that completed an interrupted rollback
	flushes     int64        // memtable flushes (sstables written) of closed stores
	step        int
}

// newFaultRun opens a store with opts on a new crashable file system.
func newFaultRun(t *testing.T, name string, seed uint64, opts disk.Options) *faultRun {
	g := model.NewGen(seed, model.GenOptions{})
	o := opts.EnsureDefaults()
	r := &faultRun{
		t: t, name: name, seed: seed, g: g, rng: g.Rand(), hook: &faultHook{}, opts: opts,
		m: model.New(o.PruneDepth, o.RollbackWindow), seen: make(map[chain.OutPoint]bool),
	}
	r.open(vfs.NewCrashableMem())
	t.Cleanup(func() { r.close(true) })
	return r
}

func (r *faultRun) fatalf(format string, args ...any) {
	r.t.Helper()
	r.t.Fatalf("seed %d step %d (replay: go test ./tiers/disk -run '%s' -seed=%d): %s",
		r.seed, r.step, r.name, r.seed, fmt.Sprintf(format, args...))
}

// openStore opens the store on mem (behind the hook).
func (r *faultRun) openStore(mem *vfs.MemFS) (*disk.Store, error) {
	r.hook.mu.Lock()
	r.hook.mem = mem
	r.hook.mu.Unlock()
	opts := r.opts
	opts.Logger = slog.New(completionCounter{&r.completions})
	return disk.Open(faultDir, disk.WithFS(opts, faultFS{errorfs.Wrap(mem, r.hook)}))
}

// open opens the store and a writer on mem.
func (r *faultRun) open(mem *vfs.MemFS) {
	r.t.Helper()
	s, err := r.openStore(mem)
	if err != nil {
		r.fatalf("open: %v", err)
	}
	r.store, r.w = s, writer.New(s, writer.Options{})
}

// close stops the writer and closes the store. A failed store may fail to
// close (Pebble reports the WAL's error again); a healthy one may not.
func (r *faultRun) close(healthy bool) {
	r.t.Helper()
	if r.store == nil {
		return
	}
	r.w.Close()
	r.flushes += r.store.Health().Flushes
	if err := r.store.Close(); err != nil && healthy && !r.t.Failed() {
		r.fatalf("close: %v", err)
	}
	r.store, r.w = nil, nil
}

// note records the outpoints b names, for sampling.
func (r *faultRun) note(b *chain.Block) {
	add := func(op chain.OutPoint) {
		if !r.seen[op] {
			r.seen[op] = true
			r.named = append(r.named, op)
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

// batches returns how many blocks a rollback to target reverts.
func (r *faultRun) batches(target uint64) int {
	tip := r.m.Tip()
	low := target
	if first, _ := r.m.FirstHeight(); first > 0 && target < first-1 {
		low = first - 1 // below the chain's first block: the store empties
	}
	return int(tip.Height - low)
}

// rollbackOp returns a rollback the store must do (at or above the model's
// floor, within the window) that reverts at least minBatches blocks, or
// false when there is none.
func (r *faultRun) rollbackOp(minBatches int) (faultOp, bool) {
	tip := r.m.Tip()
	if tip.Empty {
		return faultOp{}, false
	}
	lowest := max(r.m.RollbackFloor(), tip.Height-min(tip.Height, r.m.RollbackWindow()))
	var targets []uint64
	for target := lowest; target < tip.Height; target++ {
		if r.batches(target) >= minBatches {
			targets = append(targets, target)
		}
	}
	if len(targets) == 0 {
		return faultOp{}, false
	}
	target := targets[r.rng.IntN(len(targets))]
	return faultOp{target: target, batches: r.batches(target)}, true
}

// blockOp returns a valid block on the model's tip.
func (r *faultRun) blockOp() faultOp {
	b := r.g.Block(r.m)
	r.note(b)
	return faultOp{block: b, batches: 1}
}

// randomOp returns a valid block, or one time in four a rollback.
func (r *faultRun) randomOp() faultOp {
	if r.rng.IntN(4) == 0 {
		if op, ok := r.rollbackOp(1); ok {
			return op
		}
	}
	return r.blockOp()
}

// after returns the model after op, from the last acknowledged state.
func (r *faultRun) after(op faultOp) *model.Model {
	r.t.Helper()
	m := r.m.Clone()
	var err error
	if op.block != nil {
		_, err = m.Apply(op.block, false)
	} else {
		err = m.Rollback(op.target)
	}
	if err != nil {
		r.fatalf("model: %s: %v", op, err)
	}
	return m
}

func (r *faultRun) submit(op faultOp) (writer.Result, error) {
	if op.block != nil {
		return r.w.Apply(context.Background(), op.block)
	}
	return r.w.Rollback(context.Background(), op.target)
}

// do submits op with nothing armed: it must be acknowledged as the model
// says, and becomes the last acknowledged change.
func (r *faultRun) do(op faultOp) {
	r.t.Helper()
	next := r.after(op)
	res, err := r.submit(op)
	if err != nil || !res.Applied || res.Tip != next.Tip() || res.Seq != r.seq+1 {
		r.fatalf("%s: applied %v tip %s seq %d err %v; want tip %s seq %d",
			op, res.Applied, res.Tip, res.Seq, err, next.Tip(), r.seq+1)
	}
	r.m, r.seq = next, r.seq+1
}

// sample returns a random sample of the outpoints blocks named and of the
// addresses, drawn once so that every candidate state is checked on the
// same reads.
func (r *faultRun) sample() (ops []chain.OutPoint, addrs []string) {
	for range min(32, len(r.named)) {
		ops = append(ops, r.named[r.rng.IntN(len(r.named))])
	}
	all := r.g.Addresses()
	return ops, []string{all[0], all[1+r.rng.IntN(len(all)-1)]}
}

// checkView compares a view with model m at Seq seq.
func (r *faultRun) checkView(v *disk.View, m *model.Model, seq uint64, ops []chain.OutPoint, addrs []string) error {
	st := v.State()
	switch {
	case st.Tip != m.Tip():
		return fmt.Errorf("tip %s, model %s", st.Tip, m.Tip())
	case st.Seq != seq:
		return fmt.Errorf("seq %d, want %d (tip %s)", st.Seq, seq, st.Tip)
	case st.RollingBack:
		return fmt.Errorf("a rollback to %d is in progress at %s", st.RollbackTarget, st.Tip)
	case st.UtxoCount != m.Count() || st.Digest != m.Digest():
		return fmt.Errorf("count %d digest %s, model count %d digest %s", st.UtxoCount, st.Digest, m.Count(), m.Digest())
	}
	for _, op := range ops {
		u, sp, err := v.Utxo(op)
		mu, msp, mErr := m.Utxo(op)
		if errors.Is(err, chain.ErrNotFound) != errors.Is(mErr, chain.ErrNotFound) || (err != nil && !errors.Is(err, chain.ErrNotFound)) {
			return fmt.Errorf("utxo %s: store %v, model %v", op, err, mErr)
		}
		if err != nil {
			continue
		}
		if !sameUtxo(u, mu) {
			return fmt.Errorf("utxo %s: %+v, model %+v", op, u, mu)
		}
		if (sp == nil) != (msp == nil) || (sp != nil && *sp != *msp) {
			return fmt.Errorf("utxo %s: spent %+v, model %+v", op, sp, msp)
		}
	}
	for _, addr := range r.g.Addresses() {
		bal, err := v.Balance(disk.DimAddress, []byte(addr))
		if err != nil {
			return err
		}
		if !sameBalance(bal, m.Balance(addr)) {
			return fmt.Errorf("balance of %.20s: %+v, model %+v", addr, bal, m.Balance(addr))
		}
	}
	for _, addr := range addrs {
		var got []chain.Utxo
		var after *chain.Position
		for {
			page, next, err := v.List(disk.ListQuery{Dim: disk.DimAddress, Value: []byte(addr), After: after, Limit: 25})
			if err != nil {
				return err
			}
			got = append(got, page...)
			if next == nil {
				break
			}
			after = next
		}
		want := m.List(addr, false)
		if len(got) != len(want) {
			return fmt.Errorf("listing of %.20s: %d outputs, model %d", addr, len(got), len(want))
		}
		for i := range got {
			if !sameUtxo(got[i], want[i]) {
				return fmt.Errorf("listing of %.20s, item %d: %+v, model %+v", addr, i, got[i], want[i])
			}
		}
	}
	return nil
}

func sameUtxo(a, b chain.Utxo) bool {
	return a.TxPos == b.TxPos && bytes.Equal(chain.AppendDigestEncoding(nil, &a), chain.AppendDigestEncoding(nil, &b))
}

func sameBalance(a, b chain.Balance) bool {
	if a.Count != b.Count || a.Value != b.Value || len(a.Assets) != len(b.Assets) {
		return false
	}
	for i := range a.Assets {
		x, y := a.Assets[i], b.Assets[i]
		if !bytes.Equal(x.Policy, y.Policy) || !bytes.Equal(x.Name, y.Name) || x.Quantity != y.Quantity {
			return false
		}
	}
	return true
}

// checkPublished compares what readers see (a new published view, and the
// writer's tip) with the last acknowledged change.
func (r *faultRun) checkPublished() {
	r.t.Helper()
	if p := r.store.Published(); p.Tip != r.m.Tip() || p.Seq != r.seq {
		r.fatalf("published %s seq %d, want %s seq %d", p.Tip, p.Seq, r.m.Tip(), r.seq)
	}
	if tip := r.w.Tip(); tip != r.m.Tip() {
		r.fatalf("writer tip %s, want %s", tip, r.m.Tip())
	}
	v, err := r.store.PublishedView()
	if err != nil {
		r.fatalf("published view: %v", err)
	}
	defer v.Close()
	ops, addrs := r.sample()
	if err := r.checkView(v, r.m, r.seq, ops, addrs); err != nil {
		r.fatalf("published view: %v", err)
	}
}

// recovered checks the store just opened after a crash or a failure during
// op (see classify) and makes the state it is at the last acknowledged
// change. It returns "ack" or "next".
func (r *faultRun) recovered(op faultOp, next *model.Model) string {
	r.t.Helper()
	outcome := r.classify(op, next)
	if outcome == "next" {
		r.m, r.seq = next, r.seq+1
	}
	return outcome
}

// classify checks the store just opened after a crash or a failure during
// op: it must be at the last acknowledged change ("ack"), or at op's
// ("next"; for a rollback, completed by Open).
func (r *faultRun) classify(op faultOp, next *model.Model) string {
	r.t.Helper()
	if st, p := r.store.State(), r.store.Published(); st != p {
		r.fatalf("after open: state %+v, published %+v", st, p)
	}
	v, err := r.store.PublishedView()
	if err != nil {
		r.fatalf("view: %v", err)
	}
	defer v.Close()
	ops, addrs := r.sample()
	errAck := r.checkView(v, r.m, r.seq, ops, addrs)
	if errAck == nil {
		return "ack"
	}
	errNext := r.checkView(v, next, r.seq+1, ops, addrs)
	if errNext != nil {
		r.fatalf("reopened during %s from %s seq %d: at neither the last acknowledged change (%v) nor the one in flight (%v)",
			op, r.m.Tip(), r.seq, errAck, errNext)
	}
	return "next"
}

// crashCfg returns a random power cut: it keeps exactly the synced data, or
// everything written. Not a random part of the unsynced data: MemFS picks
// it in map iteration order, so a seed would not replay; and to the store a
// torn write at the end of the WAL is a lost one (Pebble drops a torn
// record), which the first kind of cut covers.
func (r *faultRun) crashCfg() vfs.CrashCloneCfg {
	percent := [...]int{0, 100}[r.rng.IntN(2)]
	return vfs.CrashCloneCfg{UnsyncedDataPercent: percent, RNG: rand.New(rand.NewPCG(r.rng.Uint64(), 0))}
}

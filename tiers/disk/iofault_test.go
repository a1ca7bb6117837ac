package disk_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/utxo-cache/utxo-cache/internal/model"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
	"github.com/utxo-cache/utxo-cache/writer"
)

// TestIOFaults injects I/O errors under a store (vfs/errorfs) while a random
// chain with rollbacks is applied through the writer:
//
//   - wal-write-on-apply, wal-sync-on-apply: writing or syncing the WAL
//     fails while a block commits;
//   - wal-write-in-rollback, wal-sync-in-rollback: the same at a random
//     batch of a multi-block rollback (the first, or after some are synced).
//
// (A fault while Pebble rotates the WAL ends the process inside Pebble: see
// disk.ErrFailed. TestSSTableFlushFaults and TestOpenFaults cover the other
// writes.)
//
// Pebble reports the WAL failures through Logger.Fatalf, which the store
// turns into ErrFailed. After one, the request must fail with an error
// matching disk.ErrFailed and writer.ErrFailed and acknowledge nothing; the
// writer must refuse every later request with it, changing nothing; readers
// (a published view held across the failure, and new ones) keep answering
// the last acknowledged change. Then the power is cut (a crash clone of the
// failed store's file system) and, separately, the failed store is closed
// and reopened on the same file system with the fault gone: both must be at
// the last acknowledged change or, the outcome of the failed request being
// unknown, at its change (a rollback completed by Open). The run goes on
// from there, several faults per run.
//
// A failure names the seed and step; replay one with
//
//	go test ./tiers/disk -run 'TestIOFaults/<fault>' -seed=N
func TestIOFaults(t *testing.T) {
	cases := []struct {
		name     string
		kind     faultKind
		rollback bool // the fault hits a rollback of several blocks
	}{
		{"wal-write-on-apply", faultWALWrite, false},
		{"wal-sync-on-apply", faultWALSync, false},
		{"wal-write-in-rollback", faultWALWrite, true},
		{"wal-sync-in-rollback", faultWALSync, true},
	}
	for _, c := range cases {
		for _, seed := range faultSeeds(1, 2) {
			t.Run(fmt.Sprintf("%s/seed=%d", c.name, seed), func(t *testing.T) {
				r := newFaultRun(t, "TestIOFaults/"+c.name, seed, walFaultOptions)
				stats := make(map[string]int)
				for round := 0; round < 3; round++ {
					for range 8 + r.rng.IntN(12) {
						r.step++
						r.do(r.randomOp())
					}
					r.step++
					var outcomes string
					switch {
					case c.rollback:
						op, ok := r.rollbackOp(2)
						for ; !ok; op, ok = r.rollbackOp(2) {
							r.do(r.blockOp())
						}
						// Fail batch k: the first (nothing of the rollback is
						// durable), or a later one (Open must complete it).
						k := 1 + r.rng.IntN(op.batches)
						outcomes = fmt.Sprintf("batch %d of %d: ", k, op.batches)
						outcomes += r.failDuring(op, c.kind, k)
					default:
						outcomes = r.failDuring(r.blockOp(), c.kind, 1)
					}
					stats[outcomes]++
				}
				t.Logf("tip %s seq %d; %d interrupted rollbacks completed by Open; outcomes (clone, same fs): %v",
					r.m.Tip(), r.seq, r.completions.Load(), stats)
			})
		}
	}
}

// failDuring submits op with kind armed to fail from its k-th batch on,
// checks the failure and recovers from it (see afterFailure).
func (r *faultRun) failDuring(op faultOp, kind faultKind, k int) string {
	r.t.Helper()
	next := r.after(op)
	// Start a new memtable and WAL, so that op's batches cannot rotate the
	// WAL: Pebble v2.1.7 cannot survive a failure to close the full WAL or
	// to create the next one (rotateWAL panics with DB.mu released, and the
	// deferred unlock is a fatal error no recover can stop), so an I/O
	// fault during a rotation ends the process. No fault test can cover
	// it; a restart recovers it like a power cut (TestPowerLoss).
	if err := disk.Flush(r.store); err != nil {
		r.fatalf("flush: %v", err)
	}
	held := r.publishedView()
	r.hook.armFault(kind, k, 0)
	res, err := r.submit(op)
	return r.afterFailure(op, next, held, res, err)
}

func (r *faultRun) publishedView() *disk.View {
	r.t.Helper()
	v, err := r.store.PublishedView()
	if err != nil {
		r.fatalf("published view: %v", err)
	}
	return v
}

// afterFailure checks a request (op, whose change would be next) that a
// storage fault failed, then recovers twice: from a power cut of the failed
// store, and by reopening the same file system with the fault gone. held is
// a published view taken before the request. It returns the outcomes.
func (r *faultRun) afterFailure(op faultOp, next *model.Model, held *disk.View, res writer.Result, err error) string {
	r.t.Helper()
	if !errors.Is(err, disk.ErrFailed) || !errors.Is(err, writer.ErrFailed) {
		r.fatalf("%s with a fault: result %+v, err %v; want ErrFailed", op, res, err)
	}
	if res.Applied || res.Changes != nil || res.Tip != r.m.Tip() || res.Seq != r.seq {
		r.fatalf("%s failed, but answered %+v; want tip %s seq %d, nothing applied", op, res, r.m.Tip(), r.seq)
	}
	if !errors.Is(r.w.Failed(), writer.ErrFailed) || !errors.Is(r.store.Failed(), disk.ErrFailed) {
		r.fatalf("after the failure: writer reports %v, store %v", r.w.Failed(), r.store.Failed())
	}

	// Readers keep the last acknowledged change: the view held across the
	// failure and new ones.
	ops, addrs := r.sample()
	if err := r.checkView(held, r.m, r.seq, ops, addrs); err != nil {
		r.fatalf("a view held across the failure: %v", err)
	}
	held.Close()
	r.checkPublished()

	// The writer takes nothing more, and nothing changes.
	failed := r.store.State()
	later := []faultOp{r.blockOp()}
	if rb, ok := r.rollbackOp(1); ok {
		later = append(later, rb)
	}
	if hash, ok := r.m.HashAt(r.m.Tip().Height); ok && !r.m.Tip().Empty {
		if _, err := r.w.RollbackToHash(context.Background(), hash); !errors.Is(err, writer.ErrFailed) {
			r.fatalf("rollback by hash after the failure: %v; want ErrFailed", err)
		}
	}
	for _, op := range later {
		if res, err := r.submit(op); !errors.Is(err, writer.ErrFailed) || res.Applied || res.Tip != r.m.Tip() {
			r.fatalf("%s after the failure: %+v, %v; want ErrFailed and tip %s", op, res, err, r.m.Tip())
		}
	}
	if st := r.store.State(); st != failed {
		r.fatalf("a refused request changed the state: %+v, was %+v", st, failed)
	}
	r.checkPublished()

	// Recover: cut the power (while the fault still holds), then close the
	// failed store, take the fault away and reopen the same file system.
	clone := r.hook.crashClone(r.crashCfg())
	if _, injected := r.hook.disarm(); injected == 0 {
		r.fatalf("%s failed, but no fault was injected", op)
	}
	r.hook.mu.Lock()
	same := r.hook.mem
	r.hook.mu.Unlock()
	r.close(false)
	fss := []*vfs.MemFS{clone, same}
	if r.rng.IntN(2) == 0 {
		fss[0], fss[1] = fss[1], fss[0] // the run goes on from the second
	}
	var outcomes [2]string
	for i, fs := range fss {
		if i > 0 {
			r.close(true)
		}
		r.open(fs)
		outcomes[i] = r.classify(op, next)
		if i == 1 && outcomes[i] == "next" {
			r.m, r.seq = next, r.seq+1
		}
		if fs == same {
			outcomes[i] += "(same fs)"
		}
	}
	// The reopened store takes writes again.
	r.step++
	r.do(r.blockOp())
	r.checkPublished()
	return outcomes[0] + ", " + outcomes[1]
}

// TestSSTableFlushFaults fails a few sstable writes while the memtable is
// flushed, between and during requests: Pebble retries the flush, and the
// store must neither fail nor lose anything (the WAL still holds what the
// memtable held): every request succeeds, and a power cut after the flush
// recovers the last acknowledged change.
func TestSSTableFlushFaults(t *testing.T) {
	for _, seed := range faultSeeds(1, 2) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			r := newFaultRun(t, "TestSSTableFlushFaults", seed, faultOptions)
			injected := 0
			for round := 0; round < 4; round++ {
				for range 5 + r.rng.IntN(10) {
					r.step++
					r.do(r.randomOp())
				}
				budget := 1 + r.rng.IntN(3)
				r.hook.armFault(faultSSTable, 0, budget)
				for range 1 + r.rng.IntN(3) { // the memtable is not empty
					r.step++
					r.do(r.randomOp())
				}
				if err := disk.Flush(r.store); err != nil {
					r.fatalf("flush: %v", err)
				}
				_, n := r.hook.disarm()
				if n != budget {
					r.fatalf("%d sstable faults injected, armed %d", n, budget)
				}
				injected += n
				if err := r.store.Failed(); err != nil {
					r.fatalf("a failed flush failed the store: %v", err)
				}
				r.checkPublished()
				r.cutBetween()
			}
			t.Logf("tip %s seq %d; %d sstable faults injected", r.m.Tip(), r.seq, injected)
		})
	}
}

// TestOpenFaults fails the writes Open makes itself: creating a store,
// recording changed settings, and completing a rollback a crash
// interrupted. Open must return an error matching ErrFailed, and a later
// Open with the fault gone must succeed at a state of the commit sequence.
// (Regression: Open committed the first two outside Store.commit, so
// Pebble's Logger.Fatalf panic escaped Open and ended the process.)
func TestOpenFaults(t *testing.T) {
	for _, kind := range []faultKind{faultWALWrite, faultWALSync} {
		name := map[faultKind]string{faultWALWrite: "wal-write", faultWALSync: "wal-sync"}[kind]
		t.Run("create/"+name, func(t *testing.T) {
			r := newFaultRun(t, "TestOpenFaults", 1, walFaultOptions) // opens a store, which we replace
			r.close(true)
			mem := vfs.NewCrashableMem()
			r.hook.armFault(kind, 1, 0)
			if s, err := r.openStore(mem); err == nil || !errors.Is(err, disk.ErrFailed) {
				if s != nil {
					s.Close()
				}
				t.Fatalf("creating a store with WAL %s failing: %v; want ErrFailed", name, err)
			}
			r.hook.disarm()
			r.open(mem)
			if st := r.store.State(); !st.Tip.Empty || st.Seq != 0 || st.UtxoCount != 0 {
				t.Fatalf("a new store after a failed creation: %+v", st)
			}
			r.do(r.blockOp())
			r.checkPublished()
		})
		t.Run("record-settings/"+name, func(t *testing.T) {
			r := newFaultRun(t, "TestOpenFaults/record-settings", 1, walFaultOptions)
			for range 5 {
				r.do(r.blockOp())
			}
			r.hook.mu.Lock()
			mem := r.hook.mem
			r.hook.mu.Unlock()
			r.close(true)
			// A new prune depth is recorded by Open, in a synced batch.
			r.opts.PruneDepth++
			r.hook.armFault(kind, 1, 0)
			if s, err := r.openStore(mem); err == nil || !errors.Is(err, disk.ErrFailed) {
				if s != nil {
					s.Close()
				}
				t.Fatalf("recording new settings with WAL %s failing: %v; want ErrFailed", name, err)
			}
			r.hook.disarm()
			r.opts.PruneDepth--
			r.open(mem)
			r.checkPublished()
			r.do(r.blockOp())
		})
		t.Run("complete-rollback/"+name, func(t *testing.T) {
			r := newFaultRun(t, "TestOpenFaults/complete-rollback", 1, walFaultOptions)
			for range 10 {
				r.do(r.blockOp())
			}
			op, ok := r.rollbackOp(3)
			if !ok {
				t.Fatal("no rollback of 3 blocks")
			}
			next := r.after(op)
			// Cut the power after the rollback's first batch is synced.
			r.hook.armCrash(2, vfs.CrashCloneCfg{})
			if _, err := r.submit(op); err != nil {
				t.Fatal(err)
			}
			clone, _ := r.hook.disarm()
			r.close(true)
			r.hook.armFault(kind, 1, 0)
			if s, err := r.openStore(clone); err == nil || !errors.Is(err, disk.ErrFailed) {
				if s != nil {
					s.Close()
				}
				t.Fatalf("completing an interrupted rollback with WAL %s failing: %v; want ErrFailed", name, err)
			}
			r.hook.disarm()
			r.open(clone)
			if got := r.classify(op, next); got != "next" {
				t.Fatalf("after an interrupted rollback and a failed completion, the store is at %s", got)
			}
			r.m, r.seq = next, r.seq+1
			r.do(r.blockOp())
			r.checkPublished()
		})
	}
}

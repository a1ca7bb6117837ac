package disk_test

import (
	"fmt"
	"testing"
)

// TestPowerLoss cuts the power under a store at random points of a random
// chain with rollbacks: between requests, inside a block's commit, and
// between the batches of a multi-block rollback. A power cut keeps what was
// synced and loses any part of the rest (vfs.MemFS.CrashClone); unlike
// writer's TestCrash, whose killed process leaves everything it wrote in the
// page cache, this checks that every batch the store acknowledges is synced.
//
// After each cut the store is reopened on the clone and must be exactly at
// the last acknowledged change, or at the one in flight: a block committed,
// or a rollback, which Open completes if only some of its batches survived
// (tip the target, Seq one more than before it, nothing in progress). Then
// the run goes on from there.
//
// A failure names the seed and step; replay one with
//
//	go test ./tiers/disk -run 'TestPowerLoss' -seed=N
func TestPowerLoss(t *testing.T) {
	const steps = 100
	var completions int64
	for _, seed := range faultSeeds(1, 2, 3) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			r := newFaultRun(t, "TestPowerLoss", seed, faultOptions)
			stats := make(map[string]int)
			for r.step = 1; r.step <= steps; r.step++ {
				op := r.randomOp()
				switch c := r.rng.IntN(10); {
				case c < 4:
					// Cut inside the request, before its k-th batch is synced;
					// in a rollback of several blocks mostly after its first.
					k := 1 + r.rng.IntN(op.batches)
					if op.batches > 1 && r.rng.IntN(3) > 0 {
						k = 2 + r.rng.IntN(op.batches-1)
					}
					outcome := r.cutDuring(op, k)
					kind := "block"
					if op.block == nil {
						kind = "rollback"
						if k > 1 {
							kind = "mid-rollback"
						}
					}
					stats[fmt.Sprintf("cut in %s: at %s", kind, outcome)]++
				case c < 5:
					r.do(op)
					r.cutBetween()
					stats["cut between requests"]++
				default:
					r.do(op)
					if r.step%5 == 0 {
						r.checkPublished()
					}
				}
			}
			r.cutBetween()
			completions += r.completions.Load()
			t.Logf("tip %s seq %d; %d interrupted rollbacks completed by Open, %d memtable flushes; %v",
				r.m.Tip(), r.seq, r.completions.Load(), r.flushes, stats)
		})
	}
	if *seedFlag == 0 && completions == 0 {
		t.Errorf("no cut landed between the batches of a rollback: the test no longer covers Open completing one")
	}
}

// cutDuring submits op and cuts the power just before its k-th WAL sync,
// then reopens the store on what survived and checks it. It returns where
// the store was: "ack" (the last acknowledged change) or "next" (op's).
func (r *faultRun) cutDuring(op faultOp, k int) string {
	r.t.Helper()
	next := r.after(op)
	cfg := r.crashCfg()
	r.hook.armCrash(k, cfg)
	res, err := r.submit(op)
	clone, _ := r.hook.disarm()
	if err != nil {
		r.fatalf("%s: %v", op, err)
	}
	if clone == nil {
		// The request synced fewer times than planned: no cut.
		r.fatalf("%s: no WAL sync %d (result %+v)", op, k, res)
	}
	// The process that lost power does not acknowledge anything: the
	// result is ignored, and the old store (which kept running on the
	// original file system) is closed.
	r.close(true)
	r.open(clone)
	outcome := r.recovered(op, next)
	if k == 1 && cfg.UnsyncedDataPercent == 0 && outcome != "ack" {
		// Nothing of op was synced, and the cut kept nothing unsynced.
		r.fatalf("%s: a cut before its first WAL sync kept it", op)
	}
	return outcome
}

// cutBetween cuts the power while the writer is idle (Pebble may be
// flushing or compacting) and checks that every acknowledged change
// survived.
func (r *faultRun) cutBetween() {
	r.t.Helper()
	clone := r.hook.crashClone(r.crashCfg())
	r.close(true)
	r.open(clone)
	r.checkPublished()
}

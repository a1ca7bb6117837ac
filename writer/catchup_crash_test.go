//go:build unix

package writer

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/internal/model"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

// TestCatchUpCrash kills (SIGKILL) a child process that catches a store up
// to the end of a deterministic chain with ApplyBlocks, in batches of
// catchUpBatch blocks heading to the chain's last height, windows of a few
// blocks each; kills land after a chosen acknowledgement once 0 to 3 more
// batches reached the write-ahead log, so mostly between the windows of a
// batch in flight. After each kill the reopened store must be exactly the
// state after some block at or above the last acknowledged one (tip, count,
// digest, every listing and balance, every outpoint; a spent record older
// than target - prune depth - rollback window may be missing below the
// target, as the catch-up promises), and the next child resumes the batches
// from the first unacknowledged one (blocks already applied are re-posts).
// The last run completes the chain: then every answer must be exact.
func TestCatchUpCrash(t *testing.T) {
	if dir := os.Getenv(crashEnvDir); dir != "" {
		runCatchUpCrashChild(t, dir)
		return
	}
	if testing.Short() {
		t.Skip("crash test re-executes the test binary")
	}
	seeds := []uint64{1, 2}
	if *seedFlag != 0 {
		seeds = []uint64{*seedFlag}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { testCatchUpCrash(t, seed) })
	}
}

const (
	catchUpCrashBlocks = 240
	catchUpBatch       = 24
)

// catchUpCrashChain returns the deterministic chain of seed, the generator's
// addresses, and the model after each block (models[i]: after blocks[:i+1]).
func catchUpCrashChain(seed uint64) ([]*chain.Block, []string, []*model.Model) {
	o := crashOptions.EnsureDefaults()
	m := model.New(o.PruneDepth, o.RollbackWindow)
	g := model.NewGen(seed^0xca7c4, model.GenOptions{})
	var blocks []*chain.Block
	var models []*model.Model
	for range catchUpCrashBlocks {
		b := g.Block(m)
		if _, err := m.Apply(b, false); err != nil {
			panic(fmt.Sprintf("model refused its own block: %v", err))
		}
		blocks = append(blocks, b)
		models = append(models, m.Clone())
	}
	return blocks, g.Addresses(), models
}

func catchUpCrashOptions() Options { return Options{WindowBlocks: 5, LiveMargin: 1} }

func testCatchUpCrash(t *testing.T, seed uint64) {
	blocks, addrs, models := catchUpCrashChain(seed)
	batches := catchUpCrashBlocks / catchUpBatch
	target := blocks[len(blocks)-1].Height
	o := crashOptions.EnsureDefaults()
	keepFrom := target - min(target, o.PruneDepth+o.RollbackWindow)
	dir := storeDir(t)
	rng := rand.New(rand.NewPCG(seed, 0xca7c))
	next := 0
	for kill := 0; ; kill++ {
		killAfter := next - 1 + rng.IntN(3)
		if kill == 6 {
			killAfter = batches // the last run completes the chain
		}
		walWrites := rng.IntN(4)
		last, done := runCrashChildProcess(t, "^TestCatchUpCrash$", dir, seed, next, killAfter, walWrites)
		next = last + 1
		st, err := disk.Open(dir, crashOptions)
		if err != nil {
			t.Fatalf("seed %d kill %d: reopen: %v", seed, kill, err)
		}
		tip := st.State().Tip
		acked := next*catchUpBatch - 1 // index of the last acknowledged block
		var cerr error
		i := int(tip.Height - blocks[0].Height)
		switch {
		case tip.Empty && acked >= 0, !tip.Empty && i < acked:
			cerr = fmt.Errorf("tip %s is below the acknowledged block %d", tip, blocks[max(acked, 0)].Height)
		case tip.Empty:
		case i >= len(blocks):
			cerr = fmt.Errorf("tip %s is above the chain", tip)
		default:
			cerr = diffCatchUpState(st, models[i], blocks[:min(len(blocks), (next+1)*catchUpBatch)], addrs, tip.Height < target, keepFrom)
		}
		st.Close()
		if cerr != nil {
			t.Fatalf("seed %d kill %d (after ACK of batch %d; replay: go test ./writer -run TestCatchUpCrash -seed=%d): %v",
				seed, kill, last, seed, cerr)
		}
		t.Logf("kill %d: after ACK %d (+%d WAL writes), last ACK %d: store at %s", kill, killAfter, walWrites, last, tip)
		if done {
			if tip.Height != target {
				t.Fatalf("completed, but the tip is %s", tip)
			}
			return
		}
	}
}

// diffCatchUpState compares the store with m on tip, count, digest, every
// listing and balance, and every outpoint blocks name; with tolerant, a
// spent record older than keepFrom may be missing.
func diffCatchUpState(st *disk.Store, m *model.Model, blocks []*chain.Block, addrs []string, tolerant bool, keepFrom uint64) error {
	v, err := st.NewView()
	if err != nil {
		return err
	}
	defer v.Close()
	if err := diffStoreModel(v, m, nil, addrs); err != nil {
		return err
	}
	for _, b := range blocks {
		for i := range b.Txs {
			tx := &b.Txs[i]
			ops := append([]chain.OutPoint(nil), tx.Spends()...)
			for j := range len(tx.Outputs) {
				ops = append(ops, chain.OutPoint{TxHash: tx.Hash, Index: uint32(j)})
			}
			for _, op := range ops {
				u, sp, err := v.Utxo(op)
				mu, msp, mErr := m.Utxo(op)
				if tolerant && errors.Is(err, chain.ErrNotFound) && msp != nil && msp.Height < keepFrom {
					continue
				}
				if errClass(err) != errClass(mErr) {
					return fmt.Errorf("utxo %s: store %v, model %v", op, err, mErr)
				}
				if err != nil {
					continue
				}
				if d := diffUtxo(u, mu); d != "" {
					return fmt.Errorf("utxo %s: %s", op, d)
				}
				if (sp == nil) != (msp == nil) || (sp != nil && *sp != *msp) {
					return fmt.Errorf("utxo %s: spent %+v, model %+v", op, sp, msp)
				}
			}
		}
	}
	return nil
}

// runCatchUpCrashChild is the child: ApplyBlocks of each batch from the
// start one, acknowledged on stdout ("ACK batch tip") once it has returned.
func runCatchUpCrashChild(t *testing.T, dir string) {
	seed, err1 := strconv.ParseUint(os.Getenv(crashEnvSeed), 10, 64)
	start, err2 := strconv.Atoi(os.Getenv(crashEnvStart))
	if err := errors.Join(err1, err2); err != nil {
		t.Fatal(err)
	}
	blocks, _, _ := catchUpCrashChain(seed)
	target := blocks[len(blocks)-1].Height
	st, err := disk.Open(dir, crashOptions)
	if err != nil {
		t.Fatal(err)
	}
	w := New(st, catchUpCrashOptions())
	permits := bufio.NewReader(os.Stdin)
	for i := start; i < catchUpCrashBlocks/catchUpBatch; i++ {
		if _, err := permits.ReadByte(); err != nil {
			t.Fatalf("waiting for the permit of batch %d: %v", i, err)
		}
		batch := blocks[i*catchUpBatch : (i+1)*catchUpBatch]
		res, err := w.ApplyBlocks(context.Background(), batch, target)
		if err != nil || res.Done != len(batch) {
			t.Fatalf("batch %d: done %d: %v", i, res.Done, err)
		}
		os.Stdout.WriteString(fmt.Sprintf("ACK %d %d\n", i, w.Tip().Height))
	}
	w.Close()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString("DONE\n")
}

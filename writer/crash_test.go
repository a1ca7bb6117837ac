//go:build unix

package writer

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/internal/model"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

// The crash test re-executes the test binary as a child process that applies
// a deterministic script of blocks and rollbacks to a store and prints
// "ACK <op> <tip height>" once each request has returned. The parent kills
// it with SIGKILL right after reading a chosen ACK line (the child is then
// somewhere in a later request: mid-commit, mid-rollback, between batches),
// reopens the store and checks docs/consistency.md: the store is exactly the state
// after the last acknowledged request, or after the request in flight (a
// block committed, or a rollback: if a kill lands between its batches, Open
// completes it, so the store is never left between its target and its
// start). Then the next child resumes the
// script on the same directory, re-issuing the request in flight (a block
// already committed is an idempotent re-post, a rollback already done is a
// no-op).
const (
	crashEnvDir   = "UTXO_CACHE_CRASH_DIR"
	crashEnvSeed  = "UTXO_CACHE_CRASH_SEED"
	crashEnvStart = "UTXO_CACHE_CRASH_START"

	crashScriptLen = 300
	crashKills     = 10 // per seed
)

// crashOptions are the store options of parent and child alike: small
// retention so that pruning and undo deletion run in most batches.
var crashOptions = disk.Options{PruneDepth: 3, RollbackWindow: 6, PruneBudget: 3, RecentOutputs: 16}

// crashOp is one request of the script: a block to apply, or a rollback.
type crashOp struct {
	block   *chain.Block // apply when set
	target  uint64       // rollback target otherwise
	wantErr error        // the rejection class expected, nil for success
	repost  bool         // block is already applied (an idempotent re-post)
	from    uint64       // tip height before the op
}

func (op crashOp) String() string {
	switch {
	case op.block == nil:
		return fmt.Sprintf("rollback to %d (want %v)", op.target, op.wantErr)
	case op.repost:
		return fmt.Sprintf("re-post of %d", op.block.Height)
	default:
		return fmt.Sprintf("block %d (want %v)", op.block.Height, op.wantErr)
	}
}

// applyTo applies op to m, checking that m agrees with the expected outcome.
func (op crashOp) applyTo(m *model.Model) error {
	var err error
	if op.block != nil {
		_, err = m.Apply(op.block, false)
	} else {
		err = m.Rollback(op.target)
	}
	if !errors.Is(err, op.wantErr) || (op.wantErr == nil && err != nil) {
		return fmt.Errorf("model: %s: %v", op, err)
	}
	return nil
}

// crashScript returns the deterministic script of seed: mostly valid blocks,
// some bad blocks, re-posts, rollbacks of 1..window blocks (so a kill can land
// between their batches; some empty the store) and rollbacks beyond the
// window. Every rollback it expects to succeed is one the store must do: at
// or above the model's floor.
func crashScript(seed uint64) ([]crashOp, *model.Gen) {
	g := model.NewGen(seed, model.GenOptions{})
	rng := g.Rand()
	o := crashOptions.EnsureDefaults()
	m := model.New(o.PruneDepth, o.RollbackWindow)
	var ops []crashOp
	applied := make(map[chain.Hash]*chain.Block)
	for len(ops) < crashScriptLen {
		tip := m.Tip()
		op := crashOp{from: tip.Height}
		switch r := rng.IntN(100); {
		case tip.Empty || r < 65:
			op.block = g.Block(m)
		case r < 73:
			var f model.Fault
			op.block, f = g.BadBlock(m)
			op.wantErr = f.Want()
		case r < 78:
			op.block, op.repost = applied[tip.Hash], true
		case r < 82 && tip.Height >= o.RollbackWindow+1:
			op.target = tip.Height - o.RollbackWindow - 1 - min(uint64(rng.IntN(3)), tip.Height-o.RollbackWindow-1)
			op.wantErr = chain.ErrRollbackTooDeep
		default:
			lowest := max(m.RollbackFloor(), tip.Height-min(tip.Height, o.RollbackWindow))
			if lowest >= tip.Height {
				op.block = g.Block(m)
				break
			}
			op.target = tip.Height - 1 - uint64(rng.IntN(int(tip.Height-lowest)))
		}
		if err := op.applyTo(m); err != nil {
			panic(fmt.Sprintf("crash script seed %d op %d: %v", seed, len(ops), err))
		}
		if op.block != nil && op.wantErr == nil {
			applied[op.block.Hash] = op.block
		}
		ops = append(ops, op)
	}
	return ops, g
}

func TestCrash(t *testing.T) {
	if dir := os.Getenv(crashEnvDir); dir != "" {
		runCrashChild(t, dir)
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
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { testCrash(t, seed) })
	}
}

func testCrash(t *testing.T, seed uint64) {
	script, g := crashScript(seed)
	dir := storeDir(t)
	rng := rand.New(rand.NewPCG(seed, 0xc4a54))
	o := crashOptions.EnsureDefaults()
	m := model.New(o.PruneDepth, o.RollbackWindow) // state after script[:next]
	next := 0
	var inFlightCommitted, exact int
	for kill := 0; next < len(script); kill++ {
		// Kill in the op after killAfter (next-1: while the child opens the
		// store and runs its first op); half of the time pick an op
		// followed by a multi-block rollback.
		killAfter := next - 1 + rng.IntN(30)
		if rng.IntN(2) == 0 {
			for i := killAfter; i+1 < min(len(script), next+60); i++ {
				if op := script[i+1]; op.block == nil && op.wantErr == nil {
					killAfter = i
					break
				}
			}
		}
		walWrites := rng.IntN(4)
		if i := killAfter + 1; i < len(script) && script[i].block == nil && script[i].wantErr == nil && script[i].from-script[i].target >= 2 {
			// A rollback of d blocks writes d batches: stop it in between.
			walWrites = 1 + rng.IntN(int(script[i].from-script[i].target-1))
		}
		if kill == crashKills {
			killAfter = len(script) // the last run completes the script
		}
		last, done := runCrashChildProcess(t, "^TestCrash$", dir, seed, next, killAfter, walWrites)
		for i := next; i <= last; i++ {
			if err := script[i].applyTo(m); err != nil {
				t.Fatal(err)
			}
		}
		next = last + 1

		st, err := disk.Open(dir, crashOptions)
		if err != nil {
			t.Fatalf("seed %d kill %d: reopen after the kill: %v", seed, kill, err)
		}
		outcome, err := checkCrashState(st, m, script, next, g.Addresses(), rng)
		st.Close()
		if err != nil {
			t.Fatalf("seed %d kill %d (after ACK of op %d, %d ops acknowledged; replay: go test ./writer -run TestCrash -seed=%d): %v",
				seed, kill, last, next, seed, err)
		}
		if done {
			t.Logf("final run: completed the script; store is %s", outcome)
			break
		}
		switch outcome {
		case "exact":
			exact++
		default:
			inFlightCommitted++
		}
		t.Logf("kill %d: after ACK %d (+%d WAL writes), last ACK %d: store is %s", kill, killAfter, walWrites, last, outcome)
	}
	if next != len(script) {
		t.Fatalf("the script did not complete: %d of %d ops", next, len(script))
	}
	t.Logf("seed %d: %d kills; the store was at the last ACK %d times, past it %d times",
		seed, exact+inFlightCommitted, exact, inFlightCommitted)
}

// runCrashChildProcess runs a child from op start and kills it with SIGKILL
// in the op after killAfter, once that op has written walWrites batches to
// Pebble's write-ahead log (0: as it starts). The child runs one op per byte
// it reads from stdin, so the parent knows which op it is in: waiting for WAL
// writes lands kills right after a commit that is not acknowledged yet, or
// between the batches of a rollback. It returns the last op acknowledged and
// whether the child finished the script.
//
// test names the test (a -test.run pattern) whose child runs: TestCrash or
// TestCatchUpCrash.
func runCrashChildProcess(t *testing.T, test, dir string, seed uint64, start, killAfter, walWrites int) (last int, done bool) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run="+test+"/^seed="+strconv.FormatUint(seed, 10)+"$", "-test.count=1")
	cmd.Env = append(os.Environ(),
		crashEnvDir+"="+dir,
		crashEnvSeed+"="+strconv.FormatUint(seed, 10),
		crashEnvStart+"="+strconv.Itoa(start))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	permit := func() { stdin.Write([]byte{'g'}) } // fails only once the child is dead

	last = start - 1
	killed := false
	var pending, other []string // lines read while waiting; lines that are not ours
	next := func() (string, bool) {
		if len(pending) > 0 {
			l := pending[0]
			pending = pending[1:]
			return l, true
		}
		l, ok := <-lines
		return l, ok
	}
	permit()
	if killAfter < start {
		pending = append(pending, waitWALWrites(dir, walWrites, lines)...)
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		killed = true
	}
	for {
		line, ok := next()
		if !ok {
			break
		}
		switch f := strings.Fields(line); {
		case len(f) == 3 && f[0] == "ACK":
			i, err := strconv.Atoi(f[1])
			if err != nil || i != last+1 {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("child acknowledged %q after op %d", line, last)
			}
			last = i
			if killed {
				break
			}
			permit()
			if i >= killAfter {
				pending = append(pending, waitWALWrites(dir, walWrites, lines)...)
				// SIGKILL: no deferred code, no flush, no Close runs.
				if err := cmd.Process.Kill(); err != nil {
					t.Fatal(err)
				}
				killed = true
			}
		case len(f) == 1 && f[0] == "DONE":
			done = true
		default:
			other = append(other, line)
		}
	}
	stdin.Close()
	err = cmd.Wait()
	if !killed && (err != nil || !done) {
		t.Fatalf("child from op %d failed: %v\nstdout: %s\nstderr: %s", start, err, strings.Join(other, "\n"), stderr.String())
	}
	if killed && !done {
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("child from op %d did not die of SIGKILL: %v\nstdout: %s\nstderr: %s", start, err, strings.Join(other, "\n"), stderr.String())
		}
	}
	return last, done
}

// waitWALWrites returns once the write-ahead log files in dir have changed n
// times (each change is at least one committed batch), or the child has
// printed a line (it finished the op and waits for the next permit), or
// exited. It returns the line printed, if any.
func waitWALWrites(dir string, n int, lines <-chan string) []string {
	sig := walSignature(dir)
	for n > 0 {
		select {
		case l, ok := <-lines:
			if !ok {
				return nil
			}
			return []string{l}
		default:
		}
		if s := walSignature(dir); s != sig {
			sig = s
			n--
			continue
		}
		// Busy polling: the window between a commit and its ACK is a few
		// microseconds, and the wait ends with the op.
		runtime.Gosched()
	}
	return nil
}

// walSignature identifies the state of the WAL files: names, sizes, times.
func walSignature(dir string) string {
	es, _ := os.ReadDir(dir)
	var b strings.Builder
	for _, e := range es {
		if !strings.HasSuffix(e.Name(), ".log") {
			continue
		}
		if fi, err := e.Info(); err == nil {
			fmt.Fprintf(&b, "%s:%d:%d;", e.Name(), fi.Size(), fi.ModTime().UnixNano())
		}
	}
	return b.String()
}

// runCrashChild is the child side: apply the script from the start op,
// acknowledging each request on stdout once it has returned.
func runCrashChild(t *testing.T, dir string) {
	seed, err1 := strconv.ParseUint(os.Getenv(crashEnvSeed), 10, 64)
	start, err2 := strconv.Atoi(os.Getenv(crashEnvStart))
	if err := errors.Join(err1, err2); err != nil {
		t.Fatal(err)
	}
	script, _ := crashScript(seed)
	st, err := disk.Open(dir, crashOptions)
	if err != nil {
		t.Fatal(err)
	}
	w := New(st, Options{})
	ctx := context.Background()
	permits := bufio.NewReader(os.Stdin)
	for i := start; i < len(script); i++ {
		if _, err := permits.ReadByte(); err != nil {
			t.Fatalf("waiting for the permit of op %d: %v", i, err)
		}
		op := script[i]
		var err error
		if op.block != nil {
			_, err = w.Apply(ctx, op.block)
		} else {
			_, err = w.Rollback(ctx, op.target)
		}
		if !errors.Is(err, op.wantErr) || (op.wantErr == nil && err != nil) {
			t.Fatalf("op %d, %s: %v", i, op, err)
		}
		// One write(2) per line: the parent reads whole lines.
		os.Stdout.WriteString(fmt.Sprintf("ACK %d %d\n", i, w.Tip().Height))
	}
	w.Close()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString("DONE\n")
}

// checkCrashState compares the reopened store with the model after the
// acknowledged ops (m), or, failing that, with the model after the op in
// flight (script[next]); a rollback in flight must be complete (Open
// completes one a crash interrupted). It returns which one matched.
func checkCrashState(st *disk.Store, m *model.Model, script []crashOp, next int, addrs []string, rng *rand.Rand) (string, error) {
	v, err := st.NewView()
	if err != nil {
		return "", err
	}
	defer v.Close()
	ops := crashOutPoints(script[:min(next+1, len(script))], rng)
	if err := diffStoreModel(v, m, ops, addrs); err == nil {
		return "exact", nil
	} else if next == len(script) {
		return "", err
	} else if tip := v.Tip(); tip.Height < m.Tip().Height && script[next].block != nil {
		// Only a rollback can lower the tip.
		return "", fmt.Errorf("the tip %s is below the acknowledged %s: %v", tip, m.Tip(), err)
	}
	op := script[next]
	c := m.Clone()
	outcome := "past the last ACK (the op in flight committed)"
	if op.block != nil {
		if err := op.applyTo(c); err != nil {
			return "", err
		}
	} else if err := c.Rollback(op.target); err != nil {
		return "", err
	}
	if err := diffStoreModel(v, c, ops, addrs); err != nil {
		return "", fmt.Errorf("neither the acknowledged state nor the op in flight (%s): %v", op, err)
	}
	return outcome, nil
}

// crashOutPoints returns every outpoint the ops' blocks create, and a random
// sample of the inputs they name.
func crashOutPoints(script []crashOp, rng *rand.Rand) []chain.OutPoint {
	var ops []chain.OutPoint
	for _, op := range script {
		if op.block == nil {
			continue
		}
		for _, tx := range op.block.Txs {
			for i := range len(tx.Outputs) + 1 {
				ops = append(ops, chain.OutPoint{TxHash: tx.Hash, Index: uint32(i)})
			}
			for _, in := range tx.Inputs {
				if rng.IntN(4) == 0 {
					ops = append(ops, in)
				}
			}
		}
	}
	return ops
}

// diffStoreModel compares the store's view with the model on tip, count,
// digest, the given outpoints, and the listing and balance of every address.
func diffStoreModel(v *disk.View, m *model.Model, ops []chain.OutPoint, addrs []string) error {
	st := v.State()
	if st.Tip != m.Tip() {
		return fmt.Errorf("tip %s, model %s", st.Tip, m.Tip())
	}
	if st.UtxoCount != m.Count() || st.Digest != m.Digest() {
		return fmt.Errorf("count %d digest %s, model count %d digest %s", st.UtxoCount, st.Digest, m.Count(), m.Digest())
	}
	for _, op := range ops {
		u, sp, err := v.Utxo(op)
		mu, msp, mErr := m.Utxo(op)
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
	for _, addr := range addrs {
		for _, desc := range []bool{false, true} {
			var got []chain.Utxo
			var after *chain.Position
			for {
				page, next, err := v.List(disk.ListQuery{Dim: disk.DimAddress, Value: []byte(addr), After: after, Desc: desc, Limit: 7})
				if err != nil {
					return err
				}
				got = append(got, page...)
				if next == nil {
					break
				}
				after = next
			}
			if err := sameList(got, m.List(addr, desc)); err != nil {
				return fmt.Errorf("list %s desc=%v: %v", addr, desc, err)
			}
		}
		bal, err := v.Balance(disk.DimAddress, []byte(addr))
		if err != nil {
			return err
		}
		if d := diffBalance(bal, m.Balance(addr)); d != "" {
			return fmt.Errorf("balance %s: %s", addr, d)
		}
	}
	return nil
}

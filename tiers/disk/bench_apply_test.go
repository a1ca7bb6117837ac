package disk_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/internal/workload"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
	"github.com/utxo-cache/utxo-cache/writer"
)

// The apply and read benchmarks run on a store of UTXO_BENCH_UTXOS live
// outputs (default 1,000,000), built once per test binary run:
//
//	go test -run='^$' -bench=Apply -benchtime=200x -count=1 ./tiers/disk/
//	go test -run='^$' -bench=Read -benchtime=20000x -count=1 ./tiers/disk/
//	UTXO_BENCH_UTXOS=20000 go test -run='^$' -bench=. -benchtime=5x ./tiers/disk/  # smoke
//
// Fixture: a Bitcoin-like workload.Generator (seed 1) makes a seed chain of
// outputs-heavy blocks (50,000 outputs, one input per 500) until the live set
// reaches the target. The seed chain is applied once through the writer into
// our base store and once, as raw Sets, into a separate base Pebble DB in the
// naive layout (key: the 36-byte outpoint; value: height, value, address,
// about 60 bytes). Both are then fully compacted with the same Pebble options,
// so every variant starts from a settled LSM. Each measured run starts from a
// plain file copy of its base directory.
//
// The measured blocks are the generator's next blocks (300 txs: a coinbase
// and 299 txs of 2 inputs and 2-3 outputs, Zipf-popular and hot addresses,
// half the inputs among the 5,000 youngest outputs), generated once and
// shared by every variant. changes/s counts inputs spent plus outputs created
// per second of wall time; every commit is Sync.
const envUTXOs = "UTXO_BENCH_UTXOS"

const (
	seedBlockOutputs = 50_000
	benchSeed        = 1
	fixturePrefix    = "utxo-cache-bench-"
)

// benchFixture is shared by every benchmark of the test binary.
type benchFixture struct {
	dir       string // holds both bases; swept by a later run (sweepStaleFixtures)
	oursBase  string
	naiveBase string
	utxos     int // live outputs of both bases

	gen    *workload.Generator // positioned after blocks
	mu     sync.Mutex          // guards blocks and gen
	blocks []*chain.Block      // measured blocks, in chain order from the bases' tip

	sample []chain.OutPoint // live outpoints of the base state, in random order
	hot    []string         // hot addresses, each with >= 100 live outputs
}

var (
	fixtureOnce sync.Once
	fixture     *benchFixture
	fixtureErr  error
)

func getFixture(b *testing.B) *benchFixture {
	b.Helper()
	fixtureOnce.Do(func() {
		start := time.Now()
		pprof.Do(context.Background(), pprof.Labels("phase", "fixture"), func(context.Context) {
			fixture, fixtureErr = buildFixture()
		})
		if fixtureErr == nil {
			ours, _ := dirBytes(fixture.oursBase)
			naive, _ := dirBytes(fixture.naiveBase)
			fmt.Fprintf(os.Stderr, "bench fixture: %d live UTXOs built in %s under %s; compacted size: ours %.1f bytes/utxo, naive layout %.1f bytes/utxo\n",
				fixture.utxos, time.Since(start).Round(time.Millisecond), fixture.dir,
				float64(ours)/float64(fixture.utxos), float64(naive)/float64(fixture.utxos))
		}
	})
	if fixtureErr != nil {
		b.Fatal(fixtureErr)
	}
	return fixture
}

func targetUTXOs() (int, error) {
	s := os.Getenv(envUTXOs)
	if s == "" {
		return 1_000_000, nil
	}
	n, err := strconv.ParseInt(s, 0, 64) // base 0 accepts 1_000_000
	if err != nil || n < 20_000 {
		return 0, fmt.Errorf("%s=%q: want an integer >= 20000 (hot addresses need a 100-item page)", envUTXOs, s)
	}
	return int(n), nil
}

func buildFixture() (*benchFixture, error) {
	target, err := targetUTXOs()
	if err != nil {
		return nil, err
	}
	sweepStaleFixtures()
	dir, err := os.MkdirTemp("", fmt.Sprintf("%s%d-", fixturePrefix, os.Getpid()))
	if err != nil {
		return nil, err
	}
	f := &benchFixture{dir: dir, oursBase: filepath.Join(dir, "ours"), naiveBase: filepath.Join(dir, "naive")}
	f.gen, err = workload.New(workload.Options{Seed: benchSeed, Profile: workload.Bitcoin})
	if err != nil {
		return nil, err
	}

	st, err := disk.Open(f.oursBase, disk.Options{})
	if err != nil {
		return nil, err
	}
	w := writer.New(st, writer.Options{})
	naive, err := openBenchPebble(f.naiveBase)
	if err != nil {
		return nil, err
	}
	for f.gen.Live() < target {
		blk := f.gen.NextSeed(min(seedBlockOutputs, target-f.gen.Live()+1000))
		if _, err := w.Apply(context.Background(), blk); err != nil {
			return nil, fmt.Errorf("seed block %d: %w", blk.Height, err)
		}
		nb := naive.NewBatch()
		if err := naiveApply(nb, blk, nil); err != nil {
			return nil, err
		}
		if err := nb.Commit(pebble.NoSync); err != nil {
			return nil, err
		}
		nb.Close()
	}
	f.utxos = f.gen.Live()
	if got := st.State().UtxoCount; got != uint64(f.utxos) {
		return nil, fmt.Errorf("base store has %d live UTXOs, the generator %d", got, f.utxos)
	}
	w.Close()
	if err := st.Close(); err != nil {
		return nil, err
	}
	if err := naive.Close(); err != nil {
		return nil, err
	}
	// Both bases are compacted by raw Pebble with the options disk.Open uses
	// (the same bloom filters, so the rewritten tables keep them), then
	// opened once more: Pebble deletes the obsolete WAL files it kept for
	// recycling on open, so the copies and their sizes hold live data only.
	for _, base := range []string{f.naiveBase, f.oursBase} {
		db, err := openBenchPebble(base)
		if err != nil {
			return nil, err
		}
		if err := compactAll(db); err != nil {
			return nil, err
		}
		if err := db.Close(); err != nil {
			return nil, err
		}
		if db, err = openBenchPebble(base); err != nil {
			return nil, err
		}
		if err := db.Close(); err != nil {
			return nil, err
		}
	}

	rng := rand.New(rand.NewPCG(benchSeed, 2))
	keep := min(1, 100_000/float64(f.utxos))
	for op := range f.gen.LiveOutPoints() {
		if rng.Float64() < keep {
			f.sample = append(f.sample, op)
		}
	}
	rng.Shuffle(len(f.sample), func(i, j int) { f.sample[i], f.sample[j] = f.sample[j], f.sample[i] })
	f.hot = f.gen.HotAddresses()
	return f, nil
}

// blocksUpTo returns the first n measured blocks, generating any missing.
func (f *benchFixture) blocksUpTo(n int) []*chain.Block {
	f.mu.Lock()
	defer f.mu.Unlock()
	for len(f.blocks) < n {
		f.blocks = append(f.blocks, f.gen.Next())
	}
	return f.blocks[:n]
}

// sweepStaleFixtures removes the fixture directories of earlier runs whose
// process has exited: a test binary has no hook after its last benchmark
// (short of a TestMain, which the package may want for itself), so each run
// cleans up after the previous ones.
func sweepStaleFixtures() {
	paths, _ := filepath.Glob(filepath.Join(os.TempDir(), fixturePrefix+"*"))
	for _, p := range paths {
		pidStr, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(p), fixturePrefix), "-")
		pid, err := strconv.Atoi(pidStr)
		if err != nil || pid == os.Getpid() {
			continue
		}
		if proc, err := os.FindProcess(pid); err == nil && proc.Signal(syscall.Signal(0)) == nil {
			continue // still running
		}
		os.RemoveAll(p)
	}
}

// openBenchPebble opens a raw Pebble DB sized like disk.Open's defaults:
// 256 MiB cache, 64 MiB memtable, 10-bit bloom filters on every level,
// FormatNewest.
func openBenchPebble(dir string) (*pebble.DB, error) {
	cache := pebble.NewCache(256 << 20)
	defer cache.Unref()
	o := &pebble.Options{
		Cache:              cache,
		MemTableSize:       64 << 20,
		FormatMajorVersion: pebble.FormatNewest,
		Logger:             quietLogger{}, // as disk.Open's default discarding logger
	}
	for i := range o.Levels {
		o.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	o.EnsureDefaults()
	return pebble.Open(dir, o)
}

type quietLogger struct{}

func (quietLogger) Infof(string, ...any)  {}
func (quietLogger) Errorf(string, ...any) {}
func (quietLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}

func compactAll(db *pebble.DB) error {
	if err := db.Flush(); err != nil {
		return err
	}
	return db.Compact(context.Background(), []byte{0}, bytes.Repeat([]byte{0xff}, 64), true)
}

// naiveApply writes blk in the naive layout into batch nb. With get set
// (an indexed batch's Get, so in-block spends are seen), each input is read
// before it is deleted, and must exist.
func naiveApply(nb *pebble.Batch, blk *chain.Block, get func([]byte) ([]byte, io.Closer, error)) error {
	var key [chain.HashSize + 4]byte
	var val []byte
	for i := range blk.Txs {
		tx := &blk.Txs[i]
		for _, op := range tx.Spends() {
			k := naiveKey(key[:0], op)
			if get != nil {
				_, closer, err := get(k)
				if err != nil {
					return fmt.Errorf("block %d: get %s: %w", blk.Height, op, err)
				}
				closer.Close()
			}
			if err := nb.Delete(k, nil); err != nil {
				return err
			}
		}
		var err error
		tx.Creates(func(index uint32, out *chain.Output, _ bool) {
			val = naiveValue(val[:0], blk.Height, out)
			if e := nb.Set(naiveKey(key[:0], chain.OutPoint{TxHash: tx.Hash, Index: index}), val, nil); e != nil {
				err = e
			}
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func naiveKey(dst []byte, op chain.OutPoint) []byte {
	dst = append(dst, op.TxHash[:]...)
	return binary.BigEndian.AppendUint32(dst, op.Index)
}

// naiveValue is height (8), value (8), address length (1) and address:
// 51 to 79 bytes for Bitcoin addresses.
func naiveValue(dst []byte, height uint64, out *chain.Output) []byte {
	dst = binary.BigEndian.AppendUint64(dst, height)
	dst = binary.BigEndian.AppendUint64(dst, out.Value)
	dst = append(dst, byte(len(out.Address)))
	return append(dst, out.Address...)
}

func blockChanges(blk *chain.Block) int {
	n := 0
	for i := range blk.Txs {
		tx := &blk.Txs[i]
		n += len(tx.Spends())
		tx.Creates(func(uint32, *chain.Output, bool) { n++ })
	}
	return n
}

// copyStore copies a closed store directory to a new directory under the
// fixture and returns its path.
func (f *benchFixture) copyStore(b *testing.B, base string) string {
	b.Helper()
	dst, err := os.MkdirTemp(f.dir, "run-")
	if err != nil {
		b.Fatal(err)
	}
	if err := os.CopyFS(dst, os.DirFS(base)); err != nil {
		b.Fatal(err)
	}
	return dst
}

func BenchmarkApply(b *testing.B) {
	f := getFixture(b)
	const txs = 300
	for _, impl := range []string{"writer", "writer-counters", "naive", "ceiling", "catchup", "catchup-near", "naive-batched"} {
		b.Run(fmt.Sprintf("impl=%s/txs=%d", impl, txs), func(b *testing.B) {
			blocks := f.blocksUpTo(b.N)
			// The label, inherited by the writer goroutine started here,
			// separates the variants in a -cpuprofile (go tool pprof
			// -tagfocus=impl=writer); Pebble labels its own background work
			// (pebble=compact, pebble=flush) whichever variant caused it.
			pprof.Do(context.Background(), pprof.Labels("impl", impl), func(ctx context.Context) {
				benchApply(ctx, b, f, impl, blocks)
			})
		})
	}
}

// benchWindow is the blocks per catch-up window (catchup, catchup-near)
// and per synced batch (naive-batched): UTXO_BENCH_WINDOW, default 100.
var benchWindow = func() int {
	if n, err := strconv.Atoi(os.Getenv("UTXO_BENCH_WINDOW")); err == nil && n > 0 {
		return n
	}
	return 100
}()

// benchApply applies blocks (b.N of them) to a fresh copy of the base store
// of impl:
//
//   - writer: Writer.Apply, block by block, each synced; writer-counters:
//     the same on a store that keeps the address counters;
//   - catchup: Writer.ApplyBlocks, benchWindow blocks per call and window,
//     the producer heading to a target PruneDepth + RollbackWindow above the
//     last block (a catch-up far behind);
//   - catchup-near: the same with the last block as the producer's target.
//     The writer gives every window its own last block as the target
//     whatever the producer's (writer.applyWindow: every block keeps its
//     undo delta and spent records, every window end is exact), so both
//     variants do the same work and differ by run-to-run noise only;
//   - naive: the naive layout, each block read (its inputs) and written in
//     one synced batch; naive-batched: benchWindow blocks per synced batch;
//   - ceiling: the naive layout's writes alone, each block synced.
func benchApply(ctx context.Context, b *testing.B, f *benchFixture, impl string, blocks []*chain.Block) {
	changes := 0
	for _, blk := range blocks {
		changes += blockChanges(blk)
	}
	step := 1 // blocks per apply call
	var apply func([]*chain.Block) error
	var closeAll func() error
	switch impl {
	case "catchup", "catchup-near":
		step = benchWindow
		dir := f.copyStore(b, f.oursBase)
		defer os.RemoveAll(dir)
		st, err := disk.Open(dir, disk.Options{})
		if err != nil {
			b.Fatal(err)
		}
		if err := st.PrepareWrites(); err != nil {
			b.Fatal(err)
		}
		w := writer.New(st, writer.Options{WindowBlocks: benchWindow, LiveMargin: 1})
		target := blocks[len(blocks)-1].Height
		if impl == "catchup" {
			o := st.Options()
			target += o.PruneDepth + o.RollbackWindow
		}
		windows := 0
		apply = func(bs []*chain.Block) error {
			res, err := w.ApplyBlocks(ctx, bs, target)
			windows += res.Windows
			return err
		}
		closeAll = func() error {
			w.Close()
			b.Logf("%s, %d blocks in %d windows", impl, len(blocks), windows)
			return st.Close()
		}
	case "writer", "writer-counters":
		dir := f.copyStore(b, f.oursBase)
		defer os.RemoveAll(dir)
		// writer-counters keeps the address counters (counters.go) from
		// its first block on: what they add to a live block.
		st, err := disk.Open(dir, disk.Options{Counters: impl == "writer-counters"})
		if err != nil {
			b.Fatal(err)
		}
		// The writer's one-time start-up (building the tx-hash filter from
		// the store) is not per-block work: do it before the clock starts.
		if err := st.PrepareWrites(); err != nil {
			b.Fatal(err)
		}
		w := writer.New(st, writer.Options{})
		addresses := 0 // distinct addresses touched: one balance read each
		// The most memtables a read would have seeked after a block: a store
		// just opened starts Pebble's memtable ramp (256 KiB doubling up to
		// Options.MemTableBytes, none flushed before they add up to it).
		// Health takes about 5 µs, against a block's 17 ms.
		var memtables int64
		apply = func(bs []*chain.Block) error {
			res, err := w.Apply(ctx, bs[0])
			if err == nil && res.Changes != nil {
				addresses += len(res.Changes.Addresses)
			}
			memtables = max(memtables, st.Health().MemTables)
			return err
		}
		closeAll = func() error {
			w.Close()
			h := st.Health()
			n := float64(len(blocks))
			b.Logf("writer, %d blocks; per block: %.0f young-output view hits, %.0f misses (outpoint reads), %.0f addresses (balance reads); %d flushes, %d compactions, %d L0 files, read amp %d, up to %d memtables",
				len(blocks), float64(h.RecentHits)/n, float64(h.RecentMisses)/n, float64(addresses)/n,
				h.Flushes, h.Compactions, h.L0Files, h.ReadAmplification, memtables)
			return st.Close()
		}
	default:
		dir := f.copyStore(b, f.naiveBase)
		defer os.RemoveAll(dir)
		db, err := openBenchPebble(dir)
		if err != nil {
			b.Fatal(err)
		}
		reads := impl != "ceiling"
		if impl == "naive-batched" {
			step = benchWindow
		}
		apply = func(bs []*chain.Block) error {
			var nb *pebble.Batch
			var get func([]byte) ([]byte, io.Closer, error)
			if reads {
				nb = db.NewIndexedBatch()
				get = nb.Get
			} else {
				nb = db.NewBatch()
			}
			defer nb.Close()
			for _, blk := range bs {
				if err := naiveApply(nb, blk, get); err != nil {
					return err
				}
			}
			return nb.Commit(pebble.Sync)
		}
		closeAll = db.Close
	}

	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU(b)
	for i := 0; i < b.N; i += step {
		if err := apply(blocks[i:min(i+step, b.N)]); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(changes)/b.Elapsed().Seconds(), "changes/s")
	// The process's CPU time per block, Pebble's background work (flushes,
	// compactions) and the Go runtime's (GC) included: on a shared machine
	// wall time measures the neighbours too.
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N)/1e6, "cpu-ms/block")
	if err := closeAll(); err != nil {
		b.Fatal(err)
	}
}

func BenchmarkRead(b *testing.B) {
	f := getFixture(b)
	dir := f.copyStore(b, f.oursBase)
	st, err := disk.Open(dir, disk.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		st.Close()
		os.RemoveAll(dir)
	})
	// The base was flushed and fully compacted before it was copied: a
	// settled size (the fixture line on stderr compares the naive layout's).
	bytesPerUTXO := float64(st.Health().DiskBytes) / float64(st.State().UtxoCount)

	b.Run("kind=address_page/limit=100", func(b *testing.B) {
		b.ReportAllocs()
		cpu0 := processCPU(b)
		for i := range b.N {
			v, err := st.NewView()
			if err != nil {
				b.Fatal(err)
			}
			page, next, err := v.List(disk.ListQuery{Dim: disk.DimAddress, Value: []byte(f.hot[i%len(f.hot)]), Limit: 100})
			if err != nil || len(page) != 100 || next == nil {
				b.Fatalf("list %s: %d items, next %v, err %v", f.hot[i%len(f.hot)], len(page), next, err)
			}
			v.Close()
		}
		// The process's CPU time per read: on a shared machine wall time
		// measures the neighbours too.
		b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
		b.ReportMetric(bytesPerUTXO, "bytes/utxo")
	})
	// The _ref kinds read in place (ListFunc, UtxoFunc), as the read API
	// does: no chain.Utxo is built.
	b.Run("kind=address_page_ref/limit=100", func(b *testing.B) {
		b.ReportAllocs()
		cpu0 := processCPU(b)
		for i := range b.N {
			v, err := st.NewView()
			if err != nil {
				b.Fatal(err)
			}
			n := 0
			_, more, err := v.ListFunc(disk.ListQuery{Dim: disk.DimAddress, Value: []byte(f.hot[i%len(f.hot)]), Limit: 100},
				func(*disk.UtxoRef) error { n++; return nil })
			if err != nil || n != 100 || !more {
				b.Fatalf("list %s: %d items, more %v, err %v", f.hot[i%len(f.hot)], n, more, err)
			}
			v.Close()
		}
		// The process's CPU time per read: on a shared machine wall time
		// measures the neighbours too.
		b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
		b.ReportMetric(bytesPerUTXO, "bytes/utxo")
	})
	b.Run("kind=outpoint_ref", func(b *testing.B) {
		b.ReportAllocs()
		cpu0 := processCPU(b)
		for i := range b.N {
			v, err := st.NewView()
			if err != nil {
				b.Fatal(err)
			}
			op := f.sample[i%len(f.sample)]
			if err := v.UtxoFunc(op, func(r *disk.UtxoRef) error {
				if r.Spent {
					return fmt.Errorf("spent")
				}
				return nil
			}); err != nil {
				b.Fatalf("utxo %s: %v", op, err)
			}
			v.Close()
		}
		// The process's CPU time per read: on a shared machine wall time
		// measures the neighbours too.
		b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
		b.ReportMetric(bytesPerUTXO, "bytes/utxo")
	})
	b.Run("kind=outpoint", func(b *testing.B) {
		b.ReportAllocs()
		cpu0 := processCPU(b)
		for i := range b.N {
			v, err := st.NewView()
			if err != nil {
				b.Fatal(err)
			}
			op := f.sample[i%len(f.sample)]
			if _, spent, err := v.Utxo(op); err != nil || spent != nil {
				b.Fatalf("utxo %s: spent %v, err %v", op, spent, err)
			}
			v.Close()
		}
		// The process's CPU time per read: on a shared machine wall time
		// measures the neighbours too.
		b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
		b.ReportMetric(bytesPerUTXO, "bytes/utxo")
	})
}

// processCPU is the user and system CPU time the process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func dirBytes(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err == nil {
			n += info.Size()
		}
		return err
	})
	return n, err
}

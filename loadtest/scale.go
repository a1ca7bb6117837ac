package loadtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/internal/workload"
)

// The scale scenario (ScenarioScale) measures a store of mainnet size on
// this machine, in five steps that each keep their memory bounded:
//
//  1. generate: the preload chain streams to a CBOR file (streamChain, a
//     bounded generator): the harness's memory does not grow with N;
//  2. import: `utxo-cache ingest --progress-every 1s` applies the file in
//     catch-up windows (with every Cardano index for the Cardano profile);
//     its progress lines give the changes/s of the whole import and of its
//     first and last tenths, its rusage the peak RSS;
//  3. settle: a disk-only service on the imported store itself serves the
//     standard mix in windows of settleWindow while /metrics reports
//     Pebble's compactions; reads are fast once Pebble is quiet (no
//     compaction ran or runs for two windows in a row: the estimated debt
//     need not reach 0, Pebble leaves some owed while L0 is below its
//     thresholds), and the windows' requests/s show the difference;
//  4. reference: unless ReferenceRounds is negative, the chain file is
//     also loaded into PostgreSQL (pgref) right after the import, and the
//     settled store (disk only) and the reference answer the same reads
//     side by side (reference.go);
//  5. read: the read configurations (ScaleConfigs) each run on a copy of
//     the settled store, as in the other scenarios, but with no model (it
//     would not fit): no feed and no correctness sample. The readers ask
//     about the generator's most popular addresses (derived from their
//     rank), its exchange addresses and a shuffled sample of the outputs it
//     kept live.

// scale scenario constants.
const (
	settleWindow = 2 * time.Second
	settleLimit  = 15 * time.Minute
	// scaleAddresses is how many of the most popular ordinary addresses
	// the readers ask about; scaleOutPoints bounds the outpoints they read.
	scaleAddresses = 100_000
	scaleOutPoints = 1 << 20
)

// cardanoIndexes are every index a Cardano store can keep.
const cardanoIndexes = "payment,stake,policy,asset"

// ScaleResult is the scale scenario's import, before the read
// configurations (which are in Report.Configs as in every scenario).
type ScaleResult struct {
	Chain           ChainStats `json:"chain"`
	ChainFileBytes  int64      `json:"chain_file_bytes"`
	GenerateSeconds float64    `json:"generate_seconds"`
	// HarnessRSSPeak is the harness's peak RSS (VmHWM) once the chain is
	// written: the bounded generator's footprint, with the harness's own.
	HarnessRSSPeak int64  `json:"harness_rss_peak_bytes"`
	Indexes        string `json:"indexes"`
	// ImportFlags are the flags the import had beyond the scenario's own
	// (Options.ImportFlags).
	ImportFlags string `json:"import_flags,omitempty"`

	ImportSeconds float64 `json:"import_seconds"` // ingest's own figure, store open to close
	ChangesPerSec float64 `json:"changes_per_sec"`
	// BulkLoad says the import was a bulk load (ImportFlags --bulk):
	// every change lands at once, at its end, so it has no tenths (their
	// rates are 0, and the target on them is not judged).
	BulkLoad                bool          `json:"bulk_load,omitempty"`
	FirstTenthChangesPerSec float64       `json:"first_tenth_changes_per_sec"`
	LastTenthChangesPerSec  float64       `json:"last_tenth_changes_per_sec"`
	ImportRSSPeak           int64         `json:"import_rss_peak_bytes"` // ingest's maxrss
	Progress                []ImportPoint `json:"progress,omitempty"`

	// StoreBytes is the store's size on disk right after the import;
	// BytesPerUTXO divides it by the live UTXOs.
	StoreBytes   int64   `json:"store_bytes"`
	BytesPerUTXO float64 `json:"bytes_per_utxo"`
	// CompactionDebtBytes, L0Files and ReadAmp are Pebble's figures at the
	// first open after the import.
	CompactionDebtBytes float64 `json:"compaction_debt_bytes"`
	L0Files             float64 `json:"l0_files"`
	ReadAmp             float64 `json:"read_amplification"`
	CompactionsAtOpen   float64 `json:"compactions_at_open"`

	// SettleSeconds is the time from the service's first request until
	// Pebble is quiet (Settled: no compaction ran or runs for two windows),
	// at most settleLimit.
	SettleSeconds float64        `json:"settle_seconds"`
	Settled       bool           `json:"settled"`
	FirstReadRate float64        `json:"first_read_rps"`   // standard mix, disk only, first window
	ReadRate      float64        `json:"settled_read_rps"` // the last window's
	Windows       []SettleWindow `json:"settle_windows,omitempty"`
	// SettledStoreBytes is the store's size once settled.
	SettledStoreBytes   int64   `json:"settled_store_bytes"`
	SettledBytesPerUTXO float64 `json:"settled_bytes_per_utxo"`

	State StoreState `json:"state"` // the imported store's, as the service reports it

	// Reference is the comparison with the PostgreSQL reference at the
	// same N (reference.go), nil when not run.
	Reference *ReferenceResult `json:"reference,omitempty"`
}

// ImportPoint is one progress line of the import.
type ImportPoint struct {
	Seconds float64 `json:"s"`
	Changes int64   `json:"changes"`
}

// SettleWindow is one window of the settle step.
type SettleWindow struct {
	Seconds            float64 `json:"s"` // since the first request, at the window's end
	ReqPerSec          float64 `json:"rps"`
	DebtBytes          float64 `json:"debt_bytes"`
	CompactionsRunning float64 `json:"compactions_running"`
	Compactions        float64 `json:"compactions_total"`
	L0Files            float64 `json:"l0_files"`
	ReadAmp            float64 `json:"read_amplification"`
}

// scaleFigures are the figures Compare lines up for two scale reports.
var scaleFigures = []struct {
	name, format string
	get          func(*ScaleResult) float64
}{
	{"live UTXOs", "%.0f", func(s *ScaleResult) float64 { return float64(s.Chain.UTXOs) }},
	{"generator peak RSS MiB", "%.0f", func(s *ScaleResult) float64 { return float64(s.HarnessRSSPeak >> 20) }},
	{"import changes/s", "%.0f", func(s *ScaleResult) float64 { return s.ChangesPerSec }},
	{"import first tenth changes/s", "%.0f", func(s *ScaleResult) float64 { return s.FirstTenthChangesPerSec }},
	{"import last tenth changes/s", "%.0f", func(s *ScaleResult) float64 { return s.LastTenthChangesPerSec }},
	{"import peak RSS MiB", "%.0f", func(s *ScaleResult) float64 { return float64(s.ImportRSSPeak >> 20) }},
	{"bytes per UTXO after import", "%.1f", func(s *ScaleResult) float64 { return s.BytesPerUTXO }},
	{"bytes per UTXO settled", "%.1f", func(s *ScaleResult) float64 { return s.SettledBytesPerUTXO }},
	{"compaction debt MiB at open", "%.1f", func(s *ScaleResult) float64 { return s.CompactionDebtBytes / (1 << 20) }},
	{"L0 files at open", "%.0f", func(s *ScaleResult) float64 { return s.L0Files }},
	{"read amplification at open", "%.0f", func(s *ScaleResult) float64 { return s.ReadAmp }},
	{"seconds until reads settle", "%.1f", func(s *ScaleResult) float64 { return s.SettleSeconds }},
	{"compaction debt MiB settled", "%.1f", func(s *ScaleResult) float64 {
		if len(s.Windows) == 0 {
			return 0
		}
		return s.Windows[len(s.Windows)-1].DebtBytes / (1 << 20)
	}},
	{"first window req/s (disk)", "%.0f", func(s *ScaleResult) float64 { return s.FirstReadRate }},
	{"settled req/s (disk)", "%.0f", func(s *ScaleResult) float64 { return s.ReadRate }},
	{"reference load s", "%.1f", func(s *ScaleResult) float64 {
		if s.Reference == nil {
			return 0
		}
		return s.Reference.Load.Seconds
	}},
	{"reference MiB on disk", "%.0f", func(s *ScaleResult) float64 {
		if s.Reference == nil {
			return 0
		}
		return float64(s.Reference.Load.Bytes >> 20)
	}},
	refFigure("balance", "disk req/s", func(r *ReferenceRead) float64 { return r.DiskMedianRPS }),
	refFigure("balance", "reference req/s", func(r *ReferenceRead) float64 { return r.RefMedianRPS }),
	refFigure("page", "disk req/s", func(r *ReferenceRead) float64 { return r.DiskMedianRPS }),
	refFigure("page", "reference req/s", func(r *ReferenceRead) float64 { return r.RefMedianRPS }),
	refFigure("outpoint", "disk req/s", func(r *ReferenceRead) float64 { return r.DiskMedianRPS }),
	refFigure("outpoint", "reference req/s", func(r *ReferenceRead) float64 { return r.RefMedianRPS }),
}

// refFigure is a scaleFigures entry of the reference comparison: 0 when
// it did not run.
func refFigure(k, what string, get func(*ReferenceRead) float64) struct {
	name, format string
	get          func(*ScaleResult) float64
} {
	return struct {
		name, format string
		get          func(*ScaleResult) float64
	}{k + " " + what, "%.0f", func(s *ScaleResult) float64 {
		if rd := s.Reference.read(k); rd != nil {
			return get(rd)
		}
		return 0
	}}
}

// Targets of the scale scenario (meant for 12M UTXOs, reported at any N).
const (
	scaleImportRate      = 100_000 // changes/s over the whole import
	scaleLastTenthShare  = 0.8     // last tenth's rate over the first's
	scaleBytesPerUTXO    = 150     // on disk right after the import
	scaleMemoryOverDisk  = 1.5     // memory tier over disk-only, standard mix
	scaleRedisOverDiskLo = 1.0     // Redis tier never slower than disk-only
)

func (s *ScaleResult) verdicts(r *Report) []Verdict {
	var out []Verdict
	add := func(target, value, threshold string, pass bool) {
		st := "MISS"
		if pass {
			st = "PASS"
		}
		out = append(out, Verdict{Target: target, Value: value, Threshold: threshold, Status: st})
	}
	add("import UTXO changes/s (whole import)", fmt.Sprintf("%.0f", s.ChangesPerSec), fmt.Sprintf("≥ %d", scaleImportRate),
		s.ChangesPerSec >= scaleImportRate)
	if s.FirstTenthChangesPerSec > 0 {
		share := s.LastTenthChangesPerSec / s.FirstTenthChangesPerSec
		add("import last tenth over first tenth", fmt.Sprintf("%.2f × (%.0f / %.0f changes/s)", share, s.LastTenthChangesPerSec, s.FirstTenthChangesPerSec),
			fmt.Sprintf("≥ %.1f ×", scaleLastTenthShare), share >= scaleLastTenthShare)
	}
	add("store bytes per live UTXO right after the import", fmt.Sprintf("%.1f", s.BytesPerUTXO), fmt.Sprintf("≤ %d", scaleBytesPerUTXO),
		s.BytesPerUTXO > 0 && s.BytesPerUTXO <= scaleBytesPerUTXO)
	for _, k := range referenceKinds {
		if rd := s.Reference.read(k.String()); rd != nil && rd.RefMedianRPS > 0 {
			add("cold "+rd.Kind+" over the PostgreSQL reference (req/s)",
				fmt.Sprintf("%.2f × (%.0f / %.0f req/s; p99 %.2f / %.2f ms)", rd.Ratio, rd.DiskMedianRPS, rd.RefMedianRPS, rd.DiskMedianP99, rd.RefMedianP99),
				fmt.Sprintf("≥ %.0f ×", referenceOverDisk), rd.Ratio >= referenceOverDisk)
		}
	}
	disk := r.config(ConfigDisk)
	if disk == nil || disk.Max.AchievedRate <= 0 {
		return out
	}
	if m := r.config(ConfigMemory); m != nil {
		x := m.Max.AchievedRate / disk.Max.AchievedRate
		add("memory tier over disk-only (standard mix)", fmt.Sprintf("%.2f ×", x), fmt.Sprintf("≥ %.1f ×", scaleMemoryOverDisk), x >= scaleMemoryOverDisk)
	}
	for _, name := range []string{ConfigRedis, ConfigFull} {
		if c := r.config(name); c != nil {
			x := c.Max.AchievedRate / disk.Max.AchievedRate
			add(name+" configuration over disk-only (standard mix)", fmt.Sprintf("%.2f ×", x), fmt.Sprintf("≥ %.1f ×", scaleRedisOverDiskLo), x >= scaleRedisOverDiskLo)
		}
	}
	return out
}

// scaleImport carries out the scale scenario's steps 1 to 3 into dataDir
// and leaves the readers' pools in r.w.
func (r *runner) scaleImport(ctx context.Context, dataDir string) error {
	s := &ScaleResult{}
	r.report.Scale = s
	start := time.Now()

	// 1. Generate.
	path := filepath.Join(r.dir, "chain.cbor")
	if !r.o.KeepData {
		defer os.Remove(path)
	}
	wo := r.o.workloadOptions()
	wo.Spendable = streamSpendable
	g, err := workload.New(wo)
	if err != nil {
		return err
	}
	bf, err := createBlockFile(path)
	if err != nil {
		return err
	}
	r.logf("scale: generating %d UTXOs (%s, seed %d, %d addresses) into %s", r.o.UTXOs, r.o.Profile, r.o.Seed, wo.Addresses, path)
	st, err := streamChain(g, r.o.plan(), bf.write)
	if cerr := bf.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("generate: %w", err)
	}
	s.Chain, s.GenerateSeconds = st, time.Since(start).Seconds()
	if fi, err := os.Stat(path); err == nil {
		s.ChainFileBytes = fi.Size()
	}
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		_, s.HarnessRSSPeak, _ = parseProcStatus(b)
	}
	r.logf("scale: %d blocks, %d UTXO changes, %d live UTXOs (%d frozen) in %.1fs, %d MiB; harness peak RSS %d MiB",
		st.Blocks, st.Changes, st.UTXOs, st.Frozen, s.GenerateSeconds, s.ChainFileBytes>>20, s.HarnessRSSPeak>>20)
	r.scaleReaders(g, wo.Addresses)
	g = nil // the pools above are copies: the generator can go

	// 2. Import.
	if err := r.scaleIngest(ctx, s, dataDir, path); err != nil {
		return err
	}
	var dropReference func()
	if r.o.ReferenceRounds > 0 {
		if dropReference, err = r.referenceLoad(ctx, s, path); err != nil {
			return err
		}
		defer dropReference()
	}
	if !r.o.KeepData {
		os.Remove(path)
	}
	n, err := dirSize(dataDir)
	if err != nil {
		return err
	}
	s.StoreBytes, s.BytesPerUTXO = n, float64(n)/float64(max(1, st.UTXOs))
	r.report.Preload = PreloadResult{Blocks: st.Blocks, UTXOs: st.UTXOs, Height: uint64(st.Blocks), Addresses: wo.Addresses,
		Seconds: time.Since(start).Seconds(), Via: "ingest"}

	// 3. Settle.
	if err := r.scaleSettle(ctx, s, dataDir); err != nil {
		return fmt.Errorf("settle: %w", err)
	}
	if n, err := dirSize(dataDir); err == nil {
		s.SettledStoreBytes, s.SettledBytesPerUTXO = n, float64(n)/float64(max(1, st.UTXOs))
	}

	// 4. The reference comparison, on the settled store.
	if s.Reference != nil {
		if err := r.referenceCompare(ctx, s, dataDir); err != nil {
			s.Reference.Error = err.Error()
			return err
		}
	}
	return nil
}

// scaleReaders fills the readers' address table and outpoint pool from the
// generator: its most popular ordinary addresses by rank, and a shuffled
// sample of the live outputs it kept.
func (r *runner) scaleReaders(g *workload.Generator, addresses int) {
	r.w.exchange = g.HotAddresses()
	r.w.addrs = make([]string, min(addresses, scaleAddresses))
	for i := range r.w.addrs {
		r.w.addrs[i] = g.OrdinaryAddress(i)
	}
	kept := g.Live() - g.Frozen()
	step := max(1, (kept+scaleOutPoints-1)/scaleOutPoints)
	ops := make([]chain.OutPoint, 0, min(kept, scaleOutPoints))
	i := 0
	for op := range g.LiveOutPoints() {
		if i%step == 0 {
			ops = append(ops, op)
		}
		i++
	}
	rng := rand.New(rand.NewPCG(uint64(r.o.Seed), 0x5ca1e))
	rng.Shuffle(len(ops), func(i, j int) { ops[i], ops[j] = ops[j], ops[i] })
	r.w.ops.Store(&opPool{base: ops})
}

// scaleIngest runs `utxo-cache ingest` on the chain file and reads its
// progress lines.
func (r *runner) scaleIngest(ctx context.Context, s *ScaleResult, dataDir, path string) error {
	logPath := filepath.Join(r.dir, "ingest.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logf.Close()
	args := []string{"ingest", "--data-dir", dataDir, "--progress-every", "1s"}
	if r.o.Profile == workload.Cardano {
		s.Indexes = cardanoIndexes
		args = append(args, "--indexes", cardanoIndexes)
	} else {
		s.Indexes = "none"
	}
	if f := strings.Fields(r.o.ImportFlags); len(f) > 0 {
		s.ImportFlags = strings.Join(f, " ")
		args = append(args, f...)
	}
	cmd := exec.CommandContext(ctx, r.o.Bin, append(args, path)...)
	cmd.Env = childEnv()
	cmd.Stdout, cmd.Stderr = logf, logf
	r.logf("scale: importing with %s %s", r.o.Bin, strings.Join(append(args, path), " "))
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("ingest: %w (see %s)", err, logPath)
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		s.ImportRSSPeak = ru.Maxrss << 10 // KiB on Linux
	}
	b, err := os.ReadFile(logPath)
	if err != nil {
		return err
	}
	points, secs, changes, err := parseIngestLog(string(b))
	if err != nil {
		return fmt.Errorf("ingest log %s: %w", logPath, err)
	}
	if changes != s.Chain.Changes {
		return fmt.Errorf("ingest applied %d UTXO changes, the chain makes %d (see %s)", changes, s.Chain.Changes, logPath)
	}
	s.Progress, s.ImportSeconds = points, secs
	s.ChangesPerSec = float64(changes) / secs
	if s.BulkLoad = bulkLoaded(string(b)); !s.BulkLoad {
		s.FirstTenthChangesPerSec, s.LastTenthChangesPerSec = tenthRates(points, secs, changes)
	}
	r.logf("scale: imported %d changes in %.1fs: %.0f changes/s (first tenth %.0f, last tenth %.0f), ingest peak RSS %d MiB",
		changes, secs, s.ChangesPerSec, s.FirstTenthChangesPerSec, s.LastTenthChangesPerSec, s.ImportRSSPeak>>20)
	return nil
}

// parseIngestLog reads ingest's progress lines (--progress-every) and its
// summary line: the points, the import's seconds and its UTXO changes.
func parseIngestLog(log string) (points []ImportPoint, secs float64, changes int64, err error) {
	found := false
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		var p ImportPoint
		var blocks, tip uint64
		if _, e := fmt.Sscanf(line, "ingest: progress %fs: applied %d blocks, %d UTXO changes, tip %d", &p.Seconds, &blocks, &p.Changes, &tip); e == nil {
			points = append(points, p)
			continue
		}
		if rest, ok := strings.CutPrefix(line, "ingest: applied "); ok {
			// ingest: applied N blocks, skipped K already applied, C UTXO changes in D; tip …
			var applied, skipped int64
			var dur string
			if _, e := fmt.Sscanf(rest, "%d blocks, skipped %d already applied, %d UTXO changes in %s", &applied, &skipped, &changes, &dur); e != nil {
				return nil, 0, 0, fmt.Errorf("summary line %q: %w", line, e)
			}
			d, e := time.ParseDuration(strings.TrimSuffix(dur, ";"))
			if e != nil {
				return nil, 0, 0, fmt.Errorf("summary line %q: %w", line, e)
			}
			secs, found = d.Seconds(), true
		}
	}
	if !found || secs <= 0 {
		return nil, 0, 0, errors.New("no summary line")
	}
	return points, secs, changes, nil
}

// bulkLoaded reports whether ingest's log is a bulk load's (ingest --bulk
// loaded the blocks, rather than leaving them to the writer).
func bulkLoaded(log string) bool { return strings.Contains(log, "\ningest: bulk loaded blocks ") }

// tenthRates returns the changes/s of the import's first and last tenths
// of its changes, the times at which it reached a tenth and nine tenths of
// them interpolated linearly between progress points (the start, each
// progress line, the end).
func tenthRates(points []ImportPoint, secs float64, changes int64) (first, last float64) {
	if changes <= 0 || secs <= 0 {
		return 0, 0
	}
	pts := append([]ImportPoint{{}}, points...)
	pts = append(pts, ImportPoint{Seconds: secs, Changes: changes})
	at := func(c float64) float64 {
		for i := 1; i < len(pts); i++ {
			a, b := pts[i-1], pts[i]
			if float64(b.Changes) >= c && b.Changes > a.Changes {
				return a.Seconds + (b.Seconds-a.Seconds)*(c-float64(a.Changes))/float64(b.Changes-a.Changes)
			}
		}
		return secs
	}
	tenth := float64(changes) / 10
	if t := at(tenth); t > 0 {
		first = tenth / t
	}
	if t := secs - at(9*tenth); t > 0 {
		last = tenth / t
	}
	return first, last
}

// scaleSettle serves the standard mix from a disk-only service on the
// imported store in windows until Pebble owes no compaction.
func (r *runner) scaleSettle(ctx context.Context, s *ScaleResult, dataDir string) error {
	svc, err := r.startServe(ctx, "serve (settle)", dataDir, "serve-settle.log", nil, r.serviceArgs(ConfigDisk))
	if err != nil {
		return err
	}
	defer svc.stop(20 * time.Second)
	if s.State, err = storeState(ctx, r.ctl, svc.base); err != nil {
		return err
	}
	gauge := func(m Samples, name string) float64 { return m.Sum(name, nil) }
	m, err := scrape(ctx, r.ctl, svc.base)
	if err != nil {
		return err
	}
	s.CompactionDebtBytes = gauge(m, "utxo_cache_store_compaction_debt_bytes")
	s.L0Files = gauge(m, "utxo_cache_store_l0_files")
	s.ReadAmp = gauge(m, "utxo_cache_store_read_amplification")
	s.CompactionsAtOpen = gauge(m, "utxo_cache_store_compactions_total")
	r.logf("scale: the imported store opens at %s with %.0f MiB of compaction debt, %.0f L0 files, read amplification %.0f",
		s.State, s.CompactionDebtBytes/(1<<20), s.L0Files, s.ReadAmp)
	t := target{name: "settle", bases: []string{svc.base}}
	start := time.Now()
	r.phaseN = 200 // its own request seeds
	for ctx.Err() == nil {
		ph := r.phase(ctx, t, "settle", phaseClosed, 0, settleWindow)
		m, err := scrape(ctx, r.ctl, svc.base)
		if err != nil {
			return err
		}
		w := SettleWindow{Seconds: time.Since(start).Seconds(), ReqPerSec: ph.AchievedRate,
			DebtBytes: gauge(m, "utxo_cache_store_compaction_debt_bytes"), CompactionsRunning: gauge(m, "utxo_cache_store_compactions_running"),
			Compactions: gauge(m, "utxo_cache_store_compactions_total"),
			L0Files:     gauge(m, "utxo_cache_store_l0_files"), ReadAmp: gauge(m, "utxo_cache_store_read_amplification")}
		s.Windows = append(s.Windows, w)
		if ph.OK == 0 {
			return fmt.Errorf("no request succeeded (errors %v)", ph.Errors)
		}
		if len(s.Windows) == 1 {
			s.FirstReadRate = w.ReqPerSec
		}
		s.ReadRate, s.SettleSeconds = w.ReqPerSec, w.Seconds
		if n := len(s.Windows); n >= 3 && w.CompactionsRunning == 0 && s.Windows[n-3].Compactions == w.Compactions {
			// Quiet for two windows: the time it became so.
			s.Settled, s.SettleSeconds = true, s.Windows[n-3].Seconds
			break
		}
		if time.Since(start) > settleLimit {
			break
		}
	}
	r.logf("scale: reads settled=%v after %.1fs: %.0f req/s in the first window, %.0f in the last", s.Settled, s.SettleSeconds, s.FirstReadRate, s.ReadRate)
	return ctx.Err()
}

// markdown is the report's import section: every figure of scaleFigures
// and the settle windows.
func (s *ScaleResult) markdown(configs []ConfigResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Import (scale)\n\n%d blocks, %d UTXO changes, %d live UTXOs (%d of them frozen by the bounded generator); chain file %d MiB written in %.1f s; indexes %s; import %.1f s; store %d MiB right after the import, %d MiB settled (ballast excluded).\n\n",
		s.Chain.Blocks, s.Chain.Changes, s.Chain.UTXOs, s.Chain.Frozen, s.ChainFileBytes>>20, s.GenerateSeconds, s.Indexes, s.ImportSeconds,
		s.StoreBytes>>20, s.SettledStoreBytes>>20)
	if s.ImportFlags != "" {
		fmt.Fprintf(&b, "The import ran with `%s`.\n\n", s.ImportFlags)
	}
	b.WriteString("| figure | value |\n|---|---|\n")
	for _, f := range scaleFigures {
		fmt.Fprintf(&b, "| %s | "+f.format+" |\n", f.name, f.get(s))
	}
	if len(s.Windows) > 0 {
		b.WriteString("\nSettle windows (disk only, standard mix):\n\n| s | req/s | debt MiB | compactions (running) | L0 files | read amp |\n|---|---|---|---|---|---|\n")
		for _, w := range s.Windows {
			fmt.Fprintf(&b, "| %.1f | %.0f | %.1f | %.0f (%.0f) | %.0f | %.0f |\n", w.Seconds, w.ReqPerSec, w.DebtBytes/(1<<20), w.Compactions, w.CompactionsRunning, w.L0Files, w.ReadAmp)
		}
	}
	if rr := s.Reference; rr != nil && len(rr.Reads) > 0 {
		fmt.Fprintf(&b, "\nCold reads (disk only, memory tier off) against the PostgreSQL reference at the same N (%d live UTXOs loaded in %.1f s, %d MiB with indexes): each read alone, %d connections, %.0f s per side, median of %d interleaved rounds:\n\n"+
			"| read | disk req/s | reference req/s | disk / reference | disk p99 ms | reference p99 ms | rounds (disk / reference req/s) |\n|---|---|---|---|---|---|---|\n",
			rr.Load.Live, rr.Load.Seconds, rr.Load.Bytes>>20, rr.Workers, rr.PhaseSeconds, rr.Rounds)
		for _, rd := range rr.Reads {
			var rounds []string
			for i := range rd.DiskRPS {
				if i < len(rd.RefRPS) {
					rounds = append(rounds, fmt.Sprintf("%.0f / %.0f", rd.DiskRPS[i], rd.RefRPS[i]))
				}
			}
			fmt.Fprintf(&b, "| %s | %.0f | %.0f | %.2f × | %.2f | %.2f | %s |\n", rd.Kind, rd.DiskMedianRPS, rd.RefMedianRPS, rd.Ratio,
				rd.DiskMedianP99, rd.RefMedianP99, strings.Join(rounds, ", "))
		}
	}
	if len(configs) > 0 {
		b.WriteString("\nReads on the imported store (max phase; p99 per kind in ms):\n\n" +
			"| config | req/s | balance | page | deep | outpoint | lookup | tier hit ratios | block cache hit ratio | block-cache misses / request | disk reads / request |\n" +
			"|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, c := range configs {
			p99 := func(kind string) string {
				if e, ok := c.Max.Endpoints[kind]; ok && e.Latency.Count > 0 {
					return fmt.Sprintf("%.2f", e.Latency.P99)
				}
				return "-"
			}
			hits, bc, misses, reads := "-", "-", "-", "-"
			if ts := c.Max.Cache; ts != nil {
				hits = hitRatios(ts)
				if ts.BlockCacheHits+ts.BlockCacheMisses > 0 {
					bc = fmt.Sprintf("%.3f", ts.BlockCacheHitRatio)
				}
				if c.Max.Requests > 0 {
					misses = fmt.Sprintf("%.2f", ts.BlockCacheMisses/float64(c.Max.Requests))
					reads = fmt.Sprintf("%.2f", ts.DiskReads/float64(c.Max.Requests))
				}
			}
			fmt.Fprintf(&b, "| %s | %.0f | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", c.Name, c.Max.AchievedRate,
				p99("balance"), p99("page"), p99("deep"), p99("outpoint"), p99("lookup"), hits, bc, misses, reads)
		}
	}
	b.WriteString("\n")
	return b.String()
}

// dirSize returns the bytes of the regular files under dir, but for the
// ballast file serve keeps there (room held for a full disk, not data).
func dirSize(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() && !(d.Name() == "ballast" && filepath.Dir(path) == filepath.Clean(dir)) {
			fi, err := d.Info()
			if err != nil {
				return err
			}
			n += fi.Size()
		}
		return nil
	})
	return n, err
}

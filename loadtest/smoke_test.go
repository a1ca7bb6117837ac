package loadtest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// testLog writes the harness's progress lines to the test log.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// smokeBinary builds cmd/utxo-cache (without -race: it is the system under
// test, not the test) unless UTXO_CACHE_BIN names one. It builds in the
// service's module (the parent directory), whose go.sum covers the service.
func smokeBinary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("UTXO_CACHE_BIN"); bin != "" {
		return bin
	}
	return buildBinary(t, "..", "utxo-cache", "./cmd/utxo-cache")
}

// bareBinary builds cmd/utxo-loadtest, which serves the bare ceiling in a
// subprocess (Options.BareBin).
func bareBinary(t *testing.T) string {
	t.Helper()
	return buildBinary(t, ".", "utxo-loadtest", "./cmd/utxo-loadtest")
}

func buildBinary(t *testing.T, dir, name, pkg string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), name)
	cmd := exec.Command("go", "build", "-o", bin, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

// TestSmoke runs the whole harness for a few seconds: preload through
// ingest, the machine warm-up, real serve subprocesses (memory tier, then
// disk only) each on its own copy of the store with the feed and the
// correctness sample, the bare ceiling in its own subprocess, the CPU
// placement, and the reports.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts subprocesses")
	}
	bin, bareBin := smokeBinary(t), bareBinary(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	cpusBefore, err := allowedCPUs(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	rep, err := Run(ctx, Options{
		Scenario: ScenarioSmoke, Bin: bin, BareBin: bareBin, ResultsDir: dir, Log: testLog{t},
		Warmup: 300 * time.Millisecond, MaxDuration: time.Second, RateDuration: 1500 * time.Millisecond,
		// A rollback right after the first block: even a busy machine's
		// short rate phase posts one, and its new branch at once.
		CheckFraction: 0.05, CheckBudget: 0.5, RollbackEvery: 1,
		Configs: []string{ConfigMemory, ConfigDisk, ConfigBare},
	})
	if err != nil {
		logTails(t, dir)
		t.Fatal(err)
	}
	t.Logf("\n%s", rep.Headline())
	if rep.Failed {
		t.Fatalf("run failed: %v", rep.FailReasons)
	}
	if len(rep.Configs) != 3 || rep.Configs[0].Name != ConfigMemory || rep.Configs[1].Name != ConfigDisk || rep.Configs[2].Name != ConfigBare {
		t.Fatalf("configurations %+v", rep.Configs)
	}
	mem, disk, bare := rep.Configs[0], rep.Configs[1], rep.Configs[2]
	for _, p := range []PhaseResult{mem.Max, mem.Rate, disk.Max, disk.Rate, bare.Max, bare.Rate} {
		if p.Requests == 0 || p.OK == 0 {
			t.Errorf("%s phase: %d requests, %d ok", p.Name, p.Requests, p.OK)
		}
	}
	// Each service started on the preloaded store, whatever the previous
	// one's feed did to its own copy, and its feed went through.
	if st := rep.Preload.State; st.Height != rep.Preload.Height || st.UTXOs != uint64(rep.Preload.UTXOs) || len(st.Digest) != 64 {
		t.Errorf("preload state %+v, preload %+v", st, rep.Preload)
	}
	for _, c := range []ConfigResult{mem, disk} {
		if c.Start == nil || !c.Start.sameFigures(rep.Preload.State) || c.Start.Seq == 0 {
			t.Errorf("%s started at %+v, want the preload's %+v", c.Name, c.Start, rep.Preload.State)
		}
		if f := c.Rate.Feed; f == nil || f.Blocks == 0 || f.Rollbacks == 0 || f.Apply.Count == 0 || len(f.Errors) > 0 {
			t.Errorf("%s feed: %+v", c.Name, f)
		} else if v := f.Visible; len(v) != 1 {
			t.Errorf("%s visibility: %+v", c.Name, v)
		}
	}
	fair := rep.Fairness
	if !fair.StoreCopies || fair.StoreBytes == 0 || fair.ScriptBlocks == 0 || fair.ScriptRollbacks == 0 || len(fair.Comparable) == 0 {
		t.Errorf("fairness %+v", fair)
	}
	if w := fair.MachineWarmup; w == nil || w.Config != ConfigMemory || w.Requests == 0 || w.Error != "" {
		t.Errorf("machine warm-up %+v", w)
	}
	// Where taskset and two CPUs exist, every service and the bare handler
	// ran on the service's CPUs and the harness on the others; either way
	// the harness is back on its own CPUs afterwards.
	if pl := fair.Placement; pl.Pinned {
		for _, c := range []ConfigResult{mem, disk, bare} {
			if c.Max.Service == nil || c.Max.Service.CPUs != pl.ServiceCPUs || c.Max.Harness == nil || c.Max.Harness.CPUs != pl.LoadCPUs {
				t.Errorf("%s: service %+v, harness %+v; placement %+v", c.Name, c.Max.Service, c.Max.Harness, pl)
			}
		}
	} else if _, err := exec.LookPath("taskset"); err == nil && len(cpusBefore) >= 2 {
		t.Errorf("not pinned with taskset and %d CPUs: %+v", len(cpusBefore), pl)
	} else if pl.Note == "" {
		t.Errorf("not pinned, and no note says why: %+v", pl)
	}
	if after, err := allowedCPUs(os.Getpid()); err != nil || !slices.Equal(after, cpusBefore) {
		t.Errorf("the harness's CPUs after the run: %v, %v; before: %v", after, err, cpusBefore)
	}
	checked := mem.Max.Checks.Checked + mem.Rate.Checks.Checked
	if checked == 0 {
		t.Errorf("no answer was checked: %+v %+v", mem.Max.Checks, mem.Rate.Checks)
	}
	if mem.Max.Cache == nil || mem.Max.Cache.Tiers["memory"].Hits == 0 {
		t.Errorf("no memory-tier hits scraped: %+v", mem.Max.Cache)
	}
	if mem.Max.Service == nil || mem.Max.Service.CPUSeconds <= 0 || mem.Max.Service.RSSPeak <= 0 {
		t.Errorf("service process figures: %+v", mem.Max.Service)
	}
	if bare.CeilingRatio != 1 || mem.CeilingRatio <= 0 {
		t.Errorf("ceiling ratios: memory %v, bare %v", mem.CeilingRatio, bare.CeilingRatio)
	}
	if len(bare.BodySizes) < 4 {
		t.Errorf("bare bodies: %v", bare.BodySizes)
	}
	for _, f := range []string{"report.json", "report.md", "report.html", "serve-memory.log", "serve-disk.log", "serve-warmup.log", "bare.log", "ingest.log"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "data")); err == nil {
		t.Error("the preloaded store was not removed")
	}
	if copies, _ := filepath.Glob(filepath.Join(dir, "store-*")); len(copies) > 0 {
		t.Errorf("store copies left: %v", copies)
	}
}

// TestSmokeConfigurationFails: a configuration whose service does not
// start fails the run, the others still run on their own copies, the
// report is written, and the headline names the configuration and why.
func TestSmokeConfigurationFails(t *testing.T) {
	if testing.Short() {
		t.Skip("starts subprocesses")
	}
	bin := smokeBinary(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	dir := t.TempDir()
	// serve with --memory-cache-bytes 0 (the disk configuration) exits at
	// once; everything else is the real binary.
	wrapper := filepath.Join(t.TempDir(), "utxo-cache")
	script := "#!/bin/sh\nprev=\nfor a in \"$@\"; do\n" +
		"  if [ \"$prev\" = --memory-cache-bytes ] && [ \"$a\" = 0 ]; then echo 'no disk today' >&2; exit 3; fi\n" +
		"  prev=$a\ndone\nexec '" + bin + "' \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	rep, err := Run(ctx, Options{
		Scenario: ScenarioSmoke, Bin: wrapper, ResultsDir: dir, Log: testLog{t},
		Configs: []string{ConfigDisk, ConfigMemory}, MachineWarmup: -1, HotDuration: -1,
		Warmup: 200 * time.Millisecond, MaxDuration: 500 * time.Millisecond, RateDuration: 500 * time.Millisecond,
	})
	if err == nil || !strings.Contains(err.Error(), "configuration disk: serve (disk) exited before it was ready") {
		t.Fatalf("Run error %v", err)
	}
	if rep == nil || !rep.Failed || len(rep.Configs) != 2 {
		t.Fatalf("report %+v", rep)
	}
	if disk := rep.Configs[0]; disk.Name != ConfigDisk || !strings.Contains(disk.Error, "exited before it was ready") || disk.Max.Requests != 0 {
		t.Errorf("disk: %+v", disk)
	}
	if mem := rep.Configs[1]; mem.Name != ConfigMemory || mem.Error != "" || mem.Max.OK == 0 || mem.Start == nil || !mem.Start.sameFigures(rep.Preload.State) {
		t.Errorf("memory did not run after disk failed: %+v", mem)
	}
	head := rep.Headline()
	if !strings.Contains(head, "FAILED: run error: configuration disk: serve (disk) exited before it was ready") {
		t.Errorf("headline:\n%s", head)
	}
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil || !strings.Contains(string(md), "**FAILED:** run error: configuration disk:") {
		t.Errorf("report.md (%v) lacks the failure", err)
	}
	if copies, _ := filepath.Glob(filepath.Join(dir, "store-*")); len(copies) > 0 {
		t.Errorf("store copies left: %v", copies)
	}
}

// gone fails t for every process of ps that still exists: the harness
// stops (and reaps) every process it started.
// logTails logs the end of every process log in dir: the temporary
// directory goes with the test, and a failed run's cause is in them.
func logTails(t *testing.T, dir string) {
	t.Helper()
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	for _, l := range logs {
		b, err := os.ReadFile(l)
		if err != nil {
			t.Logf("%s: %v", filepath.Base(l), err)
			continue
		}
		if len(b) > 4096 {
			b = b[len(b)-4096:]
		}
		t.Logf("--- %s (end):\n%s", filepath.Base(l), b)
	}
}

func gone(t *testing.T, what string, ps []ProcessInfo) {
	t.Helper()
	for _, p := range ps {
		if p.PID <= 0 {
			t.Errorf("%s: %s without a pid", what, p.Role)
			continue
		}
		if err := syscall.Kill(p.PID, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("%s: %s (pid %d) still exists after the run: %v", what, p.Role, p.PID, err)
		}
	}
}

// TestLoadtestReplicaSmoke runs the replica configuration at smoke size: a
// writer and a replica bootstrapped from it, the feed to the writer, the
// reads and the correctness sample to the replica, and the replication lag
// of every acknowledged write. The report holds the lag figures (no
// assertion on their size: a busy machine sets them), no mismatch, no 5xx,
// and every process is gone afterwards.
func TestLoadtestReplicaSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts subprocesses")
	}
	bin := smokeBinary(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	rep, err := Run(ctx, Options{
		Scenario: ScenarioSmoke, Bin: bin, ResultsDir: dir, Log: testLog{t},
		Configs: []string{ConfigReplica}, MachineWarmup: -1, HotDuration: -1,
		Warmup: 200 * time.Millisecond, MaxDuration: 700 * time.Millisecond, RateDuration: 1500 * time.Millisecond,
		CheckFraction: 0.05, CheckBudget: 0.5, RollbackEvery: 1,
	})
	if err != nil {
		logTails(t, dir)
		t.Fatal(err)
	}
	t.Logf("\n%s", rep.Headline())
	if rep.Failed {
		t.Fatalf("run failed: %v", rep.FailReasons)
	}
	if len(rep.Configs) != 1 || rep.Configs[0].Name != ConfigReplica {
		t.Fatalf("configurations %+v", rep.Configs)
	}
	c := rep.Configs[0]
	if c.Start == nil || !c.Start.sameFigures(rep.Preload.State) || c.Start.Seq == 0 {
		t.Errorf("the replica started at %+v, want the preload's %+v", c.Start, rep.Preload.State)
	}
	for _, p := range []PhaseResult{c.Max, c.Rate} {
		if p.Requests == 0 || p.OK == 0 || count5xx(p.Errors) != 0 {
			t.Errorf("%s phase: %d requests, %d ok, errors %v", p.Name, p.Requests, p.OK, p.Errors)
		}
		if p.Checks == nil || p.Checks.Mismatches != 0 {
			t.Errorf("%s phase checks: %+v", p.Name, p.Checks)
		}
	}
	if c.Max.Checks.Checked == 0 {
		t.Errorf("no answer of the replica was checked: %+v", c.Max.Checks)
	}
	f := c.Rate.Feed
	if f == nil || f.Blocks == 0 || f.Rollbacks == 0 || len(f.Errors) > 0 {
		t.Fatalf("feed: %+v", f)
	}
	rr := f.Replication
	if rr == nil || rr.Replica == "" {
		t.Fatalf("replication figures: %+v", rr)
	}
	// Every acknowledged write (blocks and rollbacks) was observed and
	// reached the replica.
	if rr.Writes != f.Blocks+f.Rollbacks || rr.Lag.Count != rr.Writes || rr.NotReached != 0 || rr.Unobserved != 0 || len(rr.Errors) > 0 {
		t.Errorf("replication: %+v; feed %d blocks, %d rollbacks", rr, f.Blocks, f.Rollbacks)
	}
	if rr.Lag.Max <= 0 || rr.Lag.P50 > rr.Lag.P99 || rr.Lag.P99 > rr.Lag.Max {
		t.Errorf("lag figures %+v", rr.Lag)
	}
	var lagVerdict *Verdict
	for i := range rep.Targets {
		if strings.HasPrefix(rep.Targets[i].Target, "replication lag p99") {
			lagVerdict = &rep.Targets[i]
		}
	}
	if lagVerdict == nil || (lagVerdict.Status != "PASS" && lagVerdict.Status != "MISS") {
		t.Errorf("replication lag verdict %+v", lagVerdict)
	}
	if len(c.Processes) != 2 || c.Processes[0].Role != "writer" || c.Processes[1].Role != "replica 1" {
		t.Fatalf("processes %+v", c.Processes)
	}
	gone(t, "replica configuration", c.Processes)
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil || !strings.Contains(string(md), "replication lag on ") {
		t.Errorf("report.md (%v) lacks the replication lag", err)
	}
	for _, f := range []string{"serve-replica-writer.log", "serve-replica-replica-1.log", "report.json", "report.html"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "store-*")); len(left) > 0 {
		t.Errorf("stores left: %v", left)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*.token")); len(left) > 0 {
		t.Errorf("token files left: %v", left)
	}
}

// TestLoadtestReplicasScenarioSmoke runs the replicas scenario at smoke
// size: one round of a leg without and a leg with two replicas, the same
// script from the same preloaded store. Both legs end at the same state,
// which every replica reached; the ratio is reported (not judged: a busy
// machine sets it), and every process is gone afterwards.
func TestLoadtestReplicasScenarioSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts subprocesses")
	}
	bin := smokeBinary(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	rep, err := Run(ctx, Options{
		Scenario: ScenarioReplicas, Bin: bin, ResultsDir: dir, Log: testLog{t},
		UTXOs: 2000, TxsPerBlock: 20, RollbackEvery: 4, Replicas: 2, ApplyBlocks: 12, ApplyRounds: 1,
	})
	if err != nil {
		logTails(t, dir)
		t.Fatal(err)
	}
	t.Logf("\n%s", rep.Headline())
	if rep.Failed {
		t.Fatalf("run failed: %v", rep.FailReasons)
	}
	tr := rep.Throughput
	if tr == nil || len(tr.Legs) != 2 || tr.Replicas != 2 || tr.Blocks < 12 || tr.Rollbacks == 0 {
		t.Fatalf("throughput %+v", tr)
	}
	if tr.Legs[0].Replicas != 0 || tr.Legs[1].Replicas != 2 {
		t.Errorf("legs %+v", tr.Legs)
	}
	for i, l := range tr.Legs {
		if l.Error != "" || l.Blocks != int64(tr.Blocks) || l.Rollbacks != int64(tr.Rollbacks) || l.Seconds <= 0 || l.Final == nil ||
			l.WriterApplied != l.Blocks || l.WriterApplySeconds <= 0 || l.ApplyBlocksPerSec <= 0 {
			t.Errorf("leg %d: %+v", i+1, l)
		}
		if len(l.Processes) != 1+l.Replicas {
			t.Errorf("leg %d processes %+v", i+1, l.Processes)
		}
		gone(t, fmt.Sprintf("leg %d", i+1), l.Processes)
	}
	if *tr.Legs[0].Final != *tr.Legs[1].Final {
		t.Errorf("legs ended at %+v and %+v", *tr.Legs[0].Final, *tr.Legs[1].Final)
	}
	if tr.Without <= 0 || tr.With <= 0 || tr.Ratio <= 0 {
		t.Errorf("rates %v / %v, ratio %v", tr.With, tr.Without, tr.Ratio)
	}
	found := false
	for _, v := range rep.Targets {
		if strings.HasPrefix(v.Target, "writer apply throughput with 2 replicas") && (v.Status == "PASS" || v.Status == "MISS") {
			found = true
		}
	}
	if !found {
		t.Errorf("no throughput verdict in %+v", rep.Targets)
	}
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil || !strings.Contains(string(md), "Writer apply throughput with and without replicas") {
		t.Errorf("report.md (%v) lacks the throughput section", err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "store-*")); len(left) > 0 {
		t.Errorf("stores left: %v", left)
	}
}

// TestLoadtestFanoutScenarioSmoke runs the fanout scenario at smoke size:
// two rounds, each transport with no follower and with three. Every leg
// read every block's own apply time (as many as the script has blocks, and
// summing to the writer's total apply seconds over the leg), the legs ran
// in the palindromic order, every follower had every change, and the
// summary compares each count with its transport's legs with none.
func TestLoadtestFanoutScenarioSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts subprocesses")
	}
	if _, err := os.Stat("/usr/sbin/nats-server"); err != nil {
		if _, err := exec.LookPath("nats-server"); err != nil {
			t.Fatal("the fanout scenario needs nats-server: apt-get install nats-server")
		}
	}
	bin := smokeBinary(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rep, err := Run(ctx, Options{
		Scenario: ScenarioFanout, Bin: bin, ResultsDir: dir, Log: testLog{t},
		UTXOs: 2000, TxsPerBlock: 20, RollbackEvery: 5, ApplyBlocks: 10, ApplyRounds: 2,
		FanoutFollowers: []int{3}, FanoutRate: 20,
	})
	if err != nil {
		logTails(t, dir)
		t.Fatal(err)
	}
	fr := rep.Fanout
	if fr == nil || fr.Blocks < 10 || fr.Rollbacks == 0 || fr.Rounds != 2 {
		t.Fatalf("fanout %+v", fr)
	}
	want := []string{"http 0", "http 3", "jetstream 0", "jetstream 3", "jetstream 3", "jetstream 0", "http 3", "http 0"}
	if len(fr.Legs) != len(want) {
		t.Fatalf("%d legs, want %d: %+v", len(fr.Legs), len(want), fr.Legs)
	}
	for i, l := range fr.Legs {
		if got := fmt.Sprintf("%s %d", l.Transport, l.Followers); got != want[i] {
			t.Errorf("leg %d is %s, want %s", i+1, got, want[i])
		}
		if l.Error != "" || l.Bad != 0 || l.Steps != fr.Blocks+fr.Rollbacks {
			t.Errorf("leg %d: %+v", i+1, l)
		}
		if l.Apply.Count != int64(fr.Blocks) || l.Apply.P50 <= 0 || l.ApplyBlocksPerSec <= 0 || l.MeanApplyBlocksPerSec <= 0 || l.AllocsPerStep <= 0 {
			t.Errorf("leg %d: apply %+v, %v blocks/s (mean %v), %v allocs/step", i+1, l.Apply, l.ApplyBlocksPerSec, l.MeanApplyBlocksPerSec, l.AllocsPerStep)
		}
		// The blocks' own times add up to the writer's total over the leg
		// (the histogram keeps 3 significant digits).
		total := float64(fr.Blocks) / l.MeanApplyBlocksPerSec * 1000
		if sum := l.Apply.Mean * float64(l.Apply.Count); math.Abs(sum-total) > 0.01*total {
			t.Errorf("leg %d: the blocks' apply times add up to %.3f ms, the writer's total is %.3f ms", i+1, sum, total)
		}
		if l.Followers > 0 && l.Lag.Count != int64(l.Followers*l.Steps) {
			t.Errorf("leg %d: lag of %d changes, want %d", i+1, l.Lag.Count, l.Followers*l.Steps)
		}
	}
	if len(fr.Summary) != 4 {
		t.Fatalf("summary %+v", fr.Summary)
	}
	for _, s := range fr.Summary {
		if s.Legs != 2 || s.ApplyP50 <= 0 || s.ApplyP50Min > s.ApplyP50 || s.ApplyP50 > s.ApplyP50Max {
			t.Errorf("summary %+v", s)
		}
		if (s.Followers > 0) != (s.ApplyRatio > 0) {
			t.Errorf("summary %+v: a ratio with followers only", s)
		}
	}
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil || !strings.Contains(string(md), "Fan-out: what followers cost the writer") {
		t.Errorf("report.md (%v) lacks the fan-out section", err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "store-*")); len(left) > 0 {
		t.Errorf("stores left: %v", left)
	}
}

// TestLoadtestEventsScenarioSmoke runs the events scenario at smoke size:
// one round of a leg without and a leg with 40 streams. The leg with
// streams measures its memory at 0, 10, 20, 30 and 40 idle streams, each
// point settled by repeated GCs, and fits a line through them; every event
// the service flushed is read.
func TestLoadtestEventsScenarioSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts subprocesses")
	}
	bin := smokeBinary(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	rep, err := Run(ctx, Options{
		Scenario: ScenarioEvents, Bin: bin, ResultsDir: dir, Log: testLog{t},
		UTXOs: 2000, TxsPerBlock: 20, RollbackEvery: 4, ApplyBlocks: 12, ApplyRounds: 1,
		EventStreams: 40, EventKeys: 2, BlockRate: 20,
	})
	if err != nil {
		logTails(t, dir)
		t.Fatal(err)
	}
	t.Logf("\n%s", rep.Headline())
	if rep.Failed {
		t.Fatalf("run failed: %v", rep.FailReasons)
	}
	er := rep.Events
	if er == nil || len(er.Legs) != 2 || er.Streams != 40 || er.Addresses != 80 {
		t.Fatalf("events %+v", er)
	}
	if l := er.Legs[0]; l.Streams != 0 || len(l.Memory) != 0 || l.HeapPerStream != 0 {
		t.Errorf("leg without streams: %+v", l)
	}
	l := er.Legs[1]
	if l.Error != "" || l.Streams != 40 || l.Events == 0 || l.Events != l.Delivered {
		t.Fatalf("leg with streams: %+v", l)
	}
	if len(l.Memory) != idleMemorySteps+1 {
		t.Fatalf("memory points %+v", l.Memory)
	}
	for i, p := range l.Memory {
		if p.Streams != 40*i/idleMemorySteps || p.GCs < settleCalm+1 || p.Live <= 0 || p.Stacks <= 0 || p.Inuse <= 0 || p.RSS <= 0 {
			t.Errorf("memory point %d: %+v", i, p)
		}
	}
	last := l.Memory[len(l.Memory)-1]
	if l.HeapPerStream <= 0 || l.HeapFitR2 <= 0 || l.HeapFitR2 > 1 || l.StackPerStream <= 0 || l.StackPerStream >= l.HeapPerStream ||
		er.IdleStreamBytes != l.HeapPerStream || er.IdleStreamStack != l.StackPerStream {
		t.Errorf("per stream: heap %v (R² %v), stacks %v; points %+v; report %v, %v", l.HeapPerStream, l.HeapFitR2, l.StackPerStream, l.Memory,
			er.IdleStreamBytes, er.IdleStreamStack)
	}
	if got := (last.Live - l.Memory[0].Live) / 40; got <= 0 {
		t.Errorf("the live memory with 40 streams is %v bytes per stream over none", got)
	}
	found := false
	for _, v := range rep.Targets {
		if strings.HasPrefix(v.Target, "memory per idle stream") && (v.Status == "PASS" || v.Status == "MISS") && strings.HasPrefix(v.Detail, "legs: ") {
			found = true
		}
	}
	if !found {
		t.Errorf("no idle-stream memory verdict in %+v", rep.Targets)
	}
}

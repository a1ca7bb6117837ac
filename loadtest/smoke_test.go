package loadtest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
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
// test, not the test) unless UTXO_CACHE_BIN names one.
func smokeBinary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("UTXO_CACHE_BIN"); bin != "" {
		return bin
	}
	bin := filepath.Join(t.TempDir(), "utxo-cache")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/utxo-cache/utxo-cache/cmd/utxo-cache")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
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
	bin := smokeBinary(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	cpusBefore, err := allowedCPUs(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	rep, err := Run(ctx, Options{
		Scenario: ScenarioSmoke, Bin: bin, ResultsDir: dir, Log: testLog{t},
		Warmup: 300 * time.Millisecond, MaxDuration: time.Second, RateDuration: 1500 * time.Millisecond,
		// A rollback right after the first block: even a busy machine's
		// short rate phase posts one, and its new branch at once.
		CheckFraction: 0.05, CheckBudget: 0.5, RollbackEvery: 1,
		Configs: []string{ConfigMemory, ConfigDisk, ConfigBare},
	})
	if err != nil {
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

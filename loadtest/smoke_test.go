package loadtest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
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
// ingest, a real serve subprocess (memory tier) with the feed and the
// correctness sample, the bare ceiling in its own subprocess, and the
// reports.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts subprocesses")
	}
	bin := smokeBinary(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	rep, err := Run(ctx, Options{
		Scenario: ScenarioSmoke, Bin: bin, ResultsDir: dir, Log: testLog{t},
		Warmup: 300 * time.Millisecond, MaxDuration: time.Second, RateDuration: 1500 * time.Millisecond,
		CheckFraction: 0.05, CheckBudget: 0.5, RollbackEvery: 4,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", rep.Headline())
	if rep.Failed {
		t.Fatalf("run failed: %v", rep.FailReasons)
	}
	if len(rep.Configs) != 2 || rep.Configs[0].Name != ConfigMemory || rep.Configs[1].Name != ConfigBare {
		t.Fatalf("configurations %+v", rep.Configs)
	}
	mem, bare := rep.Configs[0], rep.Configs[1]
	for _, p := range []PhaseResult{mem.Max, mem.Rate, bare.Max, bare.Rate} {
		if p.Requests == 0 || p.OK == 0 {
			t.Errorf("%s phase: %d requests, %d ok", p.Name, p.Requests, p.OK)
		}
	}
	if f := mem.Rate.Feed; f == nil || f.Blocks == 0 || f.Rollbacks == 0 || f.Apply.Count == 0 {
		t.Errorf("feed: %+v", f)
	} else if v := f.Visible; len(v) != 1 {
		t.Errorf("visibility: %+v", v)
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
	for _, f := range []string{"report.json", "report.md", "report.html", "serve-memory.log", "bare.log", "ingest.log"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "data")); err == nil {
		t.Error("the preloaded store was not removed")
	}
}

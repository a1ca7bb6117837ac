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

// soakSamples makes a run of n samples over d seconds whose figure name
// follows f(fraction of the run), every other figure steady.
func soakSamples(n int, d float64, name string, f func(q float64) float64) []SoakSample {
	var out []SoakSample
	for i := range n {
		t := d * float64(i) / float64(n-1)
		v := map[string]float64{}
		for _, fig := range soakFigures {
			v[fig.name] = 100
		}
		v[name] = f(t / d)
		out = append(out, SoakSample{Seconds: t, Values: v})
	}
	return out
}

// TestSoakGrowthRule: a figure whose last quarter's mean exceeds the second
// quarter's by more than 10% plus its tolerance fails the soak; one that
// fills in the first quarter and then holds, or wobbles, passes; a figure
// that only grows with the chain is never judged.
func TestSoakGrowthRule(t *testing.T) {
	o := Options{Duration: 100 * time.Second, RedisRestarts: 1}
	judge := func(samples []SoakSample) *SoakResult {
		s := &SoakResult{Samples: samples, Requests: 10, OK: 10, Checked: 5, RedisRestarts: []RedisRestart{{AtSeconds: 50}}}
		s.judge(o, true)
		return s
	}
	figure := func(s *SoakResult, name string) SoakFigure {
		for _, f := range s.Figures {
			if f.Name == name {
				return f
			}
		}
		t.Fatalf("no figure %s in %+v", name, s.Figures)
		return SoakFigure{}
	}
	const mib = 1 << 20
	// A leak: 2 MiB a second of RSS, doubling it over the run.
	s := judge(soakSamples(41, 100, "rss_bytes", func(q float64) float64 { return 200*mib + q*200*mib }))
	if f := figure(s, "rss_bytes"); s.Verdict != "FAIL" || !f.Growing || !strings.Contains(strings.Join(s.Reasons, ";"), "rss_bytes grows") {
		t.Errorf("a leaking RSS: verdict %s, %+v, reasons %v", s.Verdict, f, s.Reasons)
	}
	// A goroutine leak of 160 over the run.
	s = judge(soakSamples(41, 100, "goroutines", func(q float64) float64 { return 50 + q*160 }))
	if f := figure(s, "goroutines"); s.Verdict != "FAIL" || !f.Growing {
		t.Errorf("leaking goroutines: verdict %s, %+v", s.Verdict, f)
	}
	// Caches filling in the first quarter, then steady with noise.
	s = judge(soakSamples(41, 100, "rss_bytes", func(q float64) float64 {
		if q < 0.25 {
			return 100*mib + q*4*200*mib
		}
		return 300*mib + float64(int(q*40)%3)*8*mib
	}))
	if f := figure(s, "rss_bytes"); s.Verdict != "PASS" || f.Growing || f.Start != 100*mib || f.Max < 300*mib {
		t.Errorf("a filling then steady RSS: verdict %s %v, %+v", s.Verdict, s.Reasons, f)
	}
	// Disk bytes double with the chain: reported, not judged.
	s = judge(soakSamples(41, 100, "pebble_disk_bytes", func(q float64) float64 { return (1 + q) * 100 * mib }))
	if f := figure(s, "pebble_disk_bytes"); s.Verdict != "PASS" || f.Judged || f.End != 200*mib {
		t.Errorf("growing disk bytes: verdict %s %v, %+v", s.Verdict, s.Reasons, f)
	}
	// Too few samples, a 5xx, a mismatch, a failed restart: each fails it.
	for name, spoil := range map[string]func(*SoakResult){
		"samples":  func(s *SoakResult) { s.Samples = s.Samples[:minSoakSamples-1] },
		"5xx":      func(s *SoakResult) { s.FiveXX = 1 },
		"mismatch": func(s *SoakResult) { s.Mismatches = 1 },
		"restart":  func(s *SoakResult) { s.RedisRestarts[0].Error = "no PONG" },
		"restarts": func(s *SoakResult) { s.RedisRestarts = nil },
		"unchecked": func(s *SoakResult) {
			s.Checked = 0
		},
	} {
		s := &SoakResult{Samples: soakSamples(41, 100, "open_fds", func(float64) float64 { return 40 }),
			Requests: 10, OK: 10, Checked: 5, RedisRestarts: []RedisRestart{{AtSeconds: 50}}}
		spoil(s)
		if s.judge(o, true); s.Verdict != "FAIL" || len(s.Reasons) == 0 {
			t.Errorf("%s: verdict %s, reasons %v", name, s.Verdict, s.Reasons)
		}
	}
}

// TestSoakLoadtest runs the soak scenario end to end, smoke-sized: a small
// preload through ingest, the full configuration (memory tier and the
// harness's redis-server) under reads, blocks and rollbacks for a few
// seconds, one Redis kill and restart in the middle, and the samples and
// verdict in the report.
func TestSoakLoadtest(t *testing.T) {
	if testing.Short() {
		t.Skip("starts subprocesses")
	}
	redis, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal("redis-server not found: install it with `apt-get install redis-server`")
	}
	bin := smokeBinary(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	rep, err := Run(ctx, Options{
		Scenario: ScenarioSoak, Bin: bin, RedisServer: redis, ResultsDir: dir, Log: testLog{t},
		UTXOs: 2_000, Duration: 4 * time.Second, SampleEvery: 200 * time.Millisecond, RedisRestarts: 1,
		Rate: 100, BlockRate: 5, RollbackEvery: 2, CheckFraction: 0.2, CheckBudget: 0.5,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", rep.Headline())
	s := rep.Soak
	if s == nil {
		t.Fatal("no soak in the report")
	}
	if rep.Failed || s.Verdict != "PASS" {
		t.Fatalf("soak %s: %v", s.Verdict, rep.FailReasons)
	}
	if len(s.Samples) < minSoakSamples {
		t.Fatalf("%d samples", len(s.Samples))
	}
	for _, smp := range []SoakSample{s.Samples[0], s.Samples[len(s.Samples)-1]} {
		for _, f := range soakFigures {
			if _, ok := smp.Values[f.name]; !ok {
				t.Errorf("sample at %.1fs lacks %s (%s)", smp.Seconds, f.name, smp.Error)
			}
		}
		if smp.Values["rss_bytes"] <= 0 || smp.Values["goroutines"] <= 0 || smp.Values["open_fds"] <= 0 {
			t.Errorf("sample at %.1fs: %v", smp.Seconds, smp.Values)
		}
	}
	if last := s.Samples[len(s.Samples)-1].Seconds; last < 4 {
		t.Errorf("the last sample is at %.1fs, before the end", last)
	}
	if len(s.RedisRestarts) != 1 || s.RedisRestarts[0].Error != "" || s.RedisRestarts[0].AtSeconds < 1 {
		t.Errorf("Redis restarts %+v", s.RedisRestarts)
	}
	if s.Requests == 0 || s.FiveXX != 0 || s.Mismatches != 0 || s.Checked == 0 || s.Blocks == 0 || s.Rollbacks == 0 {
		t.Errorf("soak figures: %d requests, %d 5xx, %d of %d checked differ, %d blocks, %d rollbacks",
			s.Requests, s.FiveXX, s.Mismatches, s.Checked, s.Blocks, s.Rollbacks)
	}
	judged := 0
	for _, f := range s.Figures {
		if f.Judged {
			judged++
		}
	}
	if judged < 5 || len(rep.Targets) != judged+1 {
		t.Errorf("%d figures judged, %d targets", judged, len(rep.Targets))
	}
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil || !strings.Contains(string(md), "## Soak: PASS") || !strings.Contains(string(md), "| rss_bytes |") {
		t.Errorf("report.md (%v) lacks the soak section", err)
	}
	for _, f := range []string{"report.json", "report.html", "serve-soak.log", "redis/redis.log", "redis/redis-1.log"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "data")); err == nil {
		t.Error("the preloaded store was not removed")
	}
}

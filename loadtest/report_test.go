package loadtest

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/report_shape.golden")

func TestRecorderSummaries(t *testing.T) {
	start := epoch
	r := newRecorder(start)
	// 1000 page requests of 1..1000 µs spread over workers and two seconds,
	// plus failures of each class.
	for i := 1; i <= 1000; i++ {
		at := start.Add(time.Duration(i) * 2 * time.Millisecond)
		r.record(i, outcome{kind: kindPage, status: 200, intended: at, sent: at.Add(time.Duration(i) * time.Microsecond),
			latency: time.Duration(i) * time.Microsecond})
	}
	r.record(1, outcome{kind: kindBalance, status: 503, errClass: classify(nil, 503), intended: start, sent: start, latency: time.Millisecond})
	r.record(2, outcome{kind: kindBalance, status: 404, errClass: classify(nil, 404), intended: start, sent: start, latency: time.Millisecond})
	r.record(3, outcome{kind: kindRevalidate, status: 304, errClass: classify(nil, 304), intended: start, sent: start, latency: time.Millisecond})
	m := r.merge()
	page := m.endpoints["page"].Latency
	if page.Count != 1000 {
		t.Fatalf("page count %d", page.Count)
	}
	for _, c := range []struct {
		name      string
		got, want float64
	}{{"p50", page.P50, 0.5}, {"p90", page.P90, 0.9}, {"p99", page.P99, 0.99}, {"p99.9", page.P999, 0.999}, {"max", page.Max, 1.0}} {
		if c.got < c.want*0.999 || c.got > c.want*1.001 {
			t.Errorf("%s = %v ms, want %v ms within 0.1%%", c.name, c.got, c.want)
		}
	}
	if m.errors["5xx:503"] != 1 || m.errors["4xx:404"] != 1 || len(m.errors) != 2 {
		t.Errorf("errors %v", m.errors)
	}
	if m.ok != 1001 {
		t.Errorf("ok %d, want 1000 pages and one 304", m.ok)
	}
	if len(m.timeline) != 3 || m.timeline[0].Requests+m.timeline[1].Requests+m.timeline[2].Requests != 1003 {
		t.Errorf("timeline %+v", m.timeline)
	}
	if lag := summarize(m.lag); lag.Max < 0.999 || lag.Max > 1.001 {
		t.Errorf("send lag max %v ms, want 1", lag.Max)
	}
	if got := classify(fmt.Errorf("dial: %w", os.ErrDeadlineExceeded), 0); got != "timeout" {
		t.Errorf("deadline classified %q", got)
	}
}

// sampleReport is a report as a standard run would produce, with made-up
// numbers.
func sampleReport() (*Report, Options) {
	o := Options{Bin: "x"}.EnsureDefaults()
	r := newReport(o, "results/x")
	r.Started = epoch
	r.Machine = Machine{CPUs: 2, GOOS: "linux", GOARCH: "amd64", GoVersion: "go1.26", Kernel: "6", LoadAvgStart: "0.1 0.1 0.1"}
	state := StoreState{Height: 70, Hash: strings.Repeat("ab", 32), UTXOs: 200_000, Digest: strings.Repeat("cd", 32)}
	r.Preload = PreloadResult{Blocks: 70, UTXOs: 200_000, Height: 70, Addresses: 50_000, Exchanges: map[string]uint64{"bc1x": 2500}, Seconds: 9, Via: "ingest",
		State: state}
	r.Fairness = Fairness{StoreCopies: true, StoreBytes: 50 << 20, ConfigWarmup: "2s", ScriptBlocks: 81, ScriptRollbacks: 1,
		MachineWarmup: &WarmupResult{Config: ConfigMemory, Seconds: 5, Requests: 40_000},
		Placement:     Placement{Pinned: true, Via: "taskset", Allowed: "0-1", ServiceCPUs: "1", LoadCPUs: "0"}}
	phase := func(name string, rps, p99 float64, feed bool) PhaseResult {
		lat := LatencySummary{Count: int64(rps * 8), Mean: p99 / 4, P50: p99 / 5, P90: p99 / 2, P99: p99, P999: p99 * 2, Max: p99 * 3}
		p := PhaseResult{Name: name, Mode: "closed", Workers: 16, Seconds: 8, AchievedRate: rps, Sent: lat.Count, Requests: lat.Count,
			OK: lat.Count, Latency: lat, Endpoints: map[string]EndpointResult{"page": {Latency: lat, Status: map[string]int64{"200": lat.Count}}},
			Errors: map[string]int64{}, Timeline: []TimePoint{{0, 100, 1, 2, 3}, {1, 120, 1, 2, 4}},
			Cache:   &TierStats{Tiers: map[string]TierLookups{"memory": {Hits: 90, Misses: 10, HitRatio: 0.9}}, DiskReads: 10},
			Service: &ProcStats{PID: 1, CPUSeconds: 8, CPUCores: 1, RSSPeak: 100 << 20, RSSEnd: 90 << 20, CPUs: "1"},
			Harness: &ProcStats{PID: 2, CPUSeconds: 4, CPUCores: 0.5, RSSPeak: 50 << 20, RSSEnd: 50 << 20, CPUs: "0"},
			Checks:  &CheckResult{Sampled: 10, Checked: 9, SkippedTip: 1}}
		if feed {
			p.Mode, p.OfferedRate = "open", rps
			p.SendLag = &LatencySummary{Count: 1, P99: 0.1}
			visible := lat
			visible.Count = 80
			p.Feed = &FeedResult{TargetRate: 10, AchievedRate: 10, Blocks: 80, Rollbacks: 1, Apply: lat, Rollback: lat,
				Visible: map[string]LatencySummary{"http://127.0.0.1:1": visible}, FirstPoll: map[string]int64{"http://127.0.0.1:1": 80}}
		}
		return p
	}
	for _, c := range []struct {
		name       string
		rps, p99ms float64
	}{{ConfigMemory, 9000, 2}, {ConfigRedis, 6000, 3}, {ConfigDisk, 3000, 6}, {ConfigFull, 8800, 2}, {ConfigReplica, 8500, 2}, {ConfigBare, 10000, 1}} {
		cr := ConfigResult{Name: c.name, Kind: "service", Args: []string{"serve"},
			Max: phase("max", c.rps, c.p99ms, false), Rate: phase("rate", c.rps/2, c.p99ms/2, true), Start: &state,
			Processes: []ProcessInfo{{Role: "service", PID: 10, Log: "serve-" + c.name + ".log"}}}
		if c.name == ConfigReplica {
			f := cr.Rate.Feed
			f.Visible, f.FirstPoll = map[string]LatencySummary{}, map[string]int64{} // the feed polls no target for visibility
			f.Replication = &ReplicationResult{Replica: "http://127.0.0.1:2", Writes: 81, ReplicaApplied: 81, ReplicaApplyMeanMs: 12,
				Lag: LatencySummary{Count: 81, Mean: 25, P50: 20, P90: 30, P99: 40, P999: 60, Max: 60}}
			cr.Processes = []ProcessInfo{{Role: "writer", PID: 11, Log: "serve-replica-writer.log"}, {Role: "replica 1", PID: 12, Log: "serve-replica-replica-1.log"}}
		}
		cr.Max.Profile = &ProfileResult{Path: "cpu-" + c.name + "-max.pprof", Top: "flat  flat%\n"}
		if c.name == ConfigMemory || c.name == ConfigBare {
			hot := phase("hot", c.rps*1.5, c.p99ms/2, false)
			cr.Hot = &hot
		}
		if c.name == ConfigBare {
			cr.Kind, cr.Max.Profile, cr.BodySizes, cr.Start = "bare", nil, map[string]int{"GET /v1/tip": 190}, nil
			cr.Max.Cache, cr.Rate.Cache, cr.Rate.Feed, cr.Max.Checks, cr.Rate.Checks = nil, nil, nil, nil, nil
			// At each configuration's rate: p99 0.5 ms.
			for _, other := range r.Configs {
				p := phase("rate-as-"+other.Name, other.Rate.OfferedRate, 0.5, true)
				p.Feed, p.Cache, p.Checks = nil, nil, nil
				cr.RatesAs = append(cr.RatesAs, BareRate{Config: other.Name, Phase: p})
			}
		}
		r.Configs = append(r.Configs, cr)
	}
	return r, o
}

// verdict returns the target whose name starts with prefix.
func verdict(r *Report, prefix string) Verdict {
	for _, v := range r.Targets {
		if strings.HasPrefix(v.Target, prefix) {
			return v
		}
	}
	return Verdict{}
}

// sampleThroughput is a replicas scenario's result with made-up numbers.
func sampleThroughput() *ThroughputResult {
	final := &StoreState{Height: 370, Hash: strings.Repeat("ef", 32), UTXOs: 200_500, Digest: strings.Repeat("01", 32), Seq: 450}
	leg := func(n int, bps float64) ApplyLeg {
		return ApplyLeg{Replicas: n, Blocks: 300, Rollbacks: 5, Seconds: 360 / bps, BlocksPerSec: bps / 1.2,
			WriterApplied: 300, WriterApplySeconds: 300 / bps, ApplyBlocksPerSec: bps,
			Apply: LatencySummary{Count: 300, P50: 1000 / bps, P99: 2000 / bps}, CatchUpSeconds: float64(n) / 10, Final: final,
			Writer: &ProcStats{PID: 3, CPUSeconds: 10, CPUCores: 0.9}, Processes: []ProcessInfo{{Role: "writer", PID: 3, Log: "w.log"}}}
	}
	return &ThroughputResult{Replicas: 3, Blocks: 300, Rollbacks: 5,
		Legs: []ApplyLeg{leg(0, 40), leg(3, 36), leg(3, 38), leg(0, 40)}, Without: 40, With: 37, Ratio: 37.0 / 40}
}

// TestEvaluateReplicasScenario: the replicas scenario's report judges the
// throughput ratio only (no configuration ran), and says so in its
// headline and report.md.
func TestEvaluateReplicasScenario(t *testing.T) {
	o := Options{Bin: "x", Scenario: ScenarioReplicas}.EnsureDefaults()
	r := newReport(o, "results/x")
	r.Throughput = sampleThroughput()
	r.evaluate(o)
	if len(r.Targets) != 1 || r.Targets[0].Status != "PASS" || !strings.Contains(r.Targets[0].Value, "0.93 (37.0 / 40.0 blocks/s)") {
		t.Fatalf("targets %+v", r.Targets)
	}
	if r.Failed {
		t.Errorf("failed: %v", r.FailReasons)
	}
	r.Throughput.Ratio, r.Throughput.With = 0.8, 32
	r.evaluate(o)
	if r.Targets[0].Status != "MISS" || r.Failed {
		t.Errorf("ratio 0.8: %+v, failed %v", r.Targets[0], r.Failed)
	}
	o.Strict = true
	r.evaluate(o)
	if !r.Failed {
		t.Error("a missed ratio under --strict did not fail the run")
	}
	head := r.Headline()
	if strings.Contains(head, "max req/s") || !strings.Contains(head, "blocks/s") || !strings.Contains(head, "MISS  writer apply throughput with 3 replicas") {
		t.Errorf("headline:\n%s", head)
	}
	if md := r.Markdown(); !strings.Contains(md, "## Writer apply throughput with and without replicas") || !strings.Contains(md, "| 4 | 0 | 300 | 5 | 7.50 | 40.0 |") {
		t.Errorf("report.md:\n%s", md)
	}
	// A leg that did not finish leaves nothing to compare.
	r.Throughput.With = 0
	r.evaluate(o)
	if r.Targets[0].Status != "SKIP" {
		t.Errorf("without a leg with replicas: %+v", r.Targets[0])
	}
}

func TestEvaluate(t *testing.T) {
	r, o := sampleReport()
	r.evaluate(o)
	got := map[string]string{}
	for _, v := range r.Targets {
		got[v.Target] = v.Status
	}
	want := map[string]string{
		"memory tier hot reads ≥ 0.85 × bare ceiling (hot mix)":                           "PASS", // 0.90
		"memory tier p99 < 5 ms at 50% of its max rate":                                   "PASS", // 1 ms
		"memory requests/s ≥ 0.50 × bare ceiling (standard mix, under the feed)":          "PASS", // 0.90
		"redis requests/s ≥ 0.50 × bare ceiling (standard mix, under the feed)":           "PASS", // 0.60
		"disk requests/s ≥ 0.50 × bare ceiling (standard mix, under the feed)":            "MISS", // 0.30
		"full requests/s ≥ 0.50 × bare ceiling (standard mix, under the feed)":            "PASS", // 0.88
		"replica requests/s ≥ 0.50 × bare ceiling (standard mix, under the feed)":         "PASS", // 0.85
		"every block visible to the first read sent after its acknowledgement":            "PASS", // 80 of 80 on each
		"zero mismatches and zero 5xx under a 10 blocks/s feed":                           "PASS",
		"replication lag p99 < 100 ms (writer acknowledgement to the replica at its seq)": "PASS", // 40 ms
		"read p99 at 50% of max under the feed ≤ 3 × the bare handler's at the same rate": "MISS", // disk: 3 ms against 0.5 ms
		"memory tier requests/s ≥ disk-only requests/s (standard mix)":                    "PASS", // 9000 against 3000
	}
	if len(got) != len(want) {
		t.Fatalf("targets %v", got)
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: %s, want %s", k, got[k], w)
		}
	}
	if r.Failed {
		t.Errorf("failed: %v", r.FailReasons)
	}
	if v := verdict(r, "read p99 at 50% of max"); v.Config != ConfigDisk || !strings.HasPrefix(v.Value, "6.00 ×") {
		t.Errorf("feed read verdict names %q with %q, want disk at 6.00 ×", v.Config, v.Value)
	}
	if c := r.config(ConfigRedis); c.CeilingRatio != 0.6 {
		t.Errorf("redis ratio %v", c.CeilingRatio)
	}

	// A replica that lags past the target, or whose writes were not all
	// reached, misses it; an error of the lag observer fails the run.
	rr := r.config(ConfigReplica).Rate.Feed.Replication
	rr.Lag.P99 = 150
	r.evaluate(o)
	if v := verdict(r, "replication lag p99"); v.Status != "MISS" || !strings.Contains(v.Value, "150.00 ms") || r.Failed {
		t.Errorf("lag 150 ms: %+v, failed %v", v, r.Failed)
	}
	rr.Lag.P99, rr.NotReached = 40, 1
	r.evaluate(o)
	if v := verdict(r, "replication lag p99"); v.Status != "MISS" || !strings.Contains(v.Detail, "1 not reached") {
		t.Errorf("a write not reached: %+v", v)
	}
	rr.NotReached, rr.Errors = 0, []string{"seq 9: GET /v1/tip?min_seq=9 answered 500"}
	r.evaluate(o)
	if !r.Failed || len(r.FailReasons) != 1 || r.FailReasons[0] != "configuration replica: the replication lag observer: seq 9: GET /v1/tip?min_seq=9 answered 500" {
		t.Errorf("observer error: failed %v %q", r.Failed, r.FailReasons)
	}
	rr.Errors = nil
	if md := r.Markdown(); !strings.Contains(md, "replication lag on http://127.0.0.1:2") || !strings.Contains(md, "81 changes, 12.00 ms each") {
		t.Error("report.md lacks the replication lag notes")
	}

	// A mismatch or a 5xx fails the run; a missed target only with Strict.
	r.Configs[1].Rate.Checks.Mismatches = 1
	r.Configs[2].Max.Errors["5xx:500"] = 3
	r.Configs[0].Hot.AchievedRate = 5000
	r.evaluate(o)
	// Each reason names its configuration.
	if !r.Failed || len(r.FailReasons) != 2 ||
		r.FailReasons[0] != "configuration redis: 1 answers differ from the model" ||
		r.FailReasons[1] != "configuration disk: 3 answers were 5xx" {
		t.Errorf("failed %v: %q", r.Failed, r.FailReasons)
	}
	o.Strict = true
	r.evaluate(o)
	if len(r.FailReasons) != 6 { // + memory's hot share, disk's share, the feed's read p99 (disk's 6 ×) and the mismatch target
		t.Errorf("strict: %v", r.FailReasons)
	}
	// A feed that stops mid-phase: the headline names the configuration and
	// the writer's answer.
	o.Strict = false
	r.Configs[1].Rate.Checks.Mismatches = 0
	r.Configs[2].Max.Errors = map[string]int64{}
	r.Configs[3].Rate.Feed.Errors = []string{"block 194: status 409: not_next_block", "rollback to 190: status 409"}
	r.evaluate(o)
	if want := "configuration full: the writer feed: block 194: status 409: not_next_block (and 1 more)"; len(r.FailReasons) != 1 || r.FailReasons[0] != want {
		t.Errorf("feed failure: %q, want %q", r.FailReasons, want)
	}
	// A configuration that could not run is the run's error, named there.
	r.Configs[3].Rate.Feed.Errors = nil
	r.Error = "configuration redis: the writer feed failed: block 194: status 409"
	r.evaluate(o)
	head := r.Headline()
	if !strings.Contains(head, "FAILED: run error: configuration redis: the writer feed failed: block 194: status 409") {
		t.Errorf("headline does not name the failed configuration:\n%s", head)
	}
	for _, s := range []string{"config", "memory", "bare", "MISS  memory tier hot reads", "FAILED:"} {
		if !strings.Contains(head, s) {
			t.Errorf("headline lacks %q:\n%s", s, head)
		}
	}
}

// TestComparability: the report says which figures compare with which,
// from what the run did (store copies, warm-ups, placement) and what it
// measured (a saturated load generator), and says so when a measure did not
// hold.
func TestComparability(t *testing.T) {
	r, o := sampleReport()
	r.evaluate(o)
	has := func(want ...string) {
		t.Helper()
		all := strings.Join(r.Fairness.Comparable, "\n")
		for _, w := range want {
			if !strings.Contains(all, w) {
				t.Errorf("comparability notes lack %q:\n%s", w, all)
			}
		}
	}
	has("own copy of the preloaded store (height 70, 200000 UTXOs, digest cdcdcdcdcdcdcdcd…",
		"81 blocks, 1 rollbacks", "5.0 s of the standard mix against a memory service", "then 2s per configuration",
		"the service and the bare handler on CPU 1, the harness (load generator, checker, feed) and redis-server on CPU 0",
		"same share (50%) of their own max", "Hot req/s compares the memory tier with the bare handler only")
	if md := r.Markdown(); !strings.Contains(md, "## Comparability\n\n- Every service configuration ran on its own copy") {
		t.Error("report.md has no comparability section")
	}

	// The bare ceiling measured with the harness's one CPU saturated.
	r.config(ConfigBare).Max.Harness.CPUCores = 0.97
	// A service that ran somewhere else than planned.
	r.config(ConfigDisk).Max.Service.CPUs = "0-1"
	r.evaluate(o)
	has("used 0.97 of its 1 CPU(s) during the bare handler's max phase", "some services ran elsewhere: disk on CPUs 0-1")
	if strings.Contains(strings.Join(r.Fairness.Comparable, "\n"), "neither the service nor the harness") {
		t.Error("a starvation note with the service using its CPU")
	}
	// The machine's other work took CPU from both sides.
	for i := range r.Configs {
		r.Configs[i].Max.Service.CPUCores, r.Configs[i].Max.Harness.CPUCores = 0.5, 0.6
	}
	r.evaluate(o)
	has("neither the service nor the harness used its CPUs fully (cores used, service/harness: memory 0.50/0.60, redis 0.50/0.60")

	// Nothing pinned, no machine warm-up.
	r.Fairness.Placement = Placement{Allowed: "0", Note: "1 CPU available: nothing to pin apart"}
	r.Fairness.MachineWarmup = nil
	r.evaluate(o)
	has("Not pinned (1 CPU available: nothing to pin apart)", "the first configuration, memory, ran on a colder machine")
	if strings.Contains(strings.Join(r.Fairness.Comparable, "\n"), "during the bare handler's max phase") {
		t.Error("a saturation note without pinning")
	}
}

// TestReportShape pins the JSON report's shape (paths and value types, not
// values) to testdata/report_shape.golden: a change there is a change of
// ReportVersion's format. Run with -update to accept a deliberate change.
func TestReportShape(t *testing.T) {
	r, o := sampleReport()
	r.Throughput = sampleThroughput() // a replicas scenario's, for its shape
	r.evaluate(o)
	dir := t.TempDir()
	if err := r.write(dir); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	paths := map[string]bool{}
	shape(v, "", paths)
	var lines []string
	for p := range paths {
		lines = append(lines, p)
	}
	sort.Strings(lines)
	got := strings.Join(lines, "\n") + "\n"
	golden := filepath.Join("testdata", "report_shape.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -run ReportShape -update)", err)
	}
	if got != string(want) {
		t.Errorf("report.json shape changed (bump ReportVersion if deliberate, then -update):\n%s", diffLines(string(want), got))
	}

	md, _ := os.ReadFile(filepath.Join(dir, "report.md"))
	for _, s := range []string{"## Headline", "| config | max req/s |", "## Targets", "### rate phase", "commit-to-visible on"} {
		if !strings.Contains(string(md), s) {
			t.Errorf("report.md lacks %q", s)
		}
	}
	page, _ := os.ReadFile(filepath.Join(dir, "report.html"))
	h := string(page)
	if !strings.HasPrefix(h, "<!DOCTYPE html>") || !strings.HasSuffix(h, "</html>\n") {
		t.Error("report.html is not a complete page")
	}
	if n, m := strings.Count(h, "<svg "), strings.Count(h, "</svg>"); n < 3 || n != m {
		t.Errorf("report.html has %d <svg> and %d </svg>", n, m)
	}
	if strings.Contains(h, "<script") || strings.Contains(h, "http://www.w3.org/2000/svg\" href") {
		t.Error("report.html is not self-contained")
	}
}

// shape adds "path: type" for every value under v; arrays collapse to [],
// and map keys that are data (URLs, routes, status codes, tiers) to *.
func shape(v any, path string, out map[string]bool) {
	switch x := v.(type) {
	case map[string]any:
		data := strings.HasSuffix(path, ".endpoints") || strings.HasSuffix(path, ".status") || strings.HasSuffix(path, ".errors") ||
			strings.HasSuffix(path, ".tiers") || strings.HasSuffix(path, ".visible") || strings.HasSuffix(path, ".first_poll") ||
			strings.HasSuffix(path, "exchange_utxos") ||
			strings.HasSuffix(path, "body_sizes")
		out[path+": object"] = true
		for k, e := range x {
			if data {
				k = "*"
			}
			shape(e, path+"."+k, out)
		}
	case []any:
		out[path+": array"] = true
		for _, e := range x {
			shape(e, path+"[]", out)
		}
	case string:
		out[path+": string"] = true
	case float64:
		out[path+": number"] = true
	case bool:
		out[path+": bool"] = true
	case nil:
		out[path+": null"] = true
	}
}

func diffLines(want, got string) string {
	w := map[string]bool{}
	for _, l := range strings.Split(want, "\n") {
		w[l] = true
	}
	g := map[string]bool{}
	var b strings.Builder
	for _, l := range strings.Split(got, "\n") {
		g[l] = true
		if !w[l] {
			b.WriteString("+ " + l + "\n")
		}
	}
	for _, l := range strings.Split(want, "\n") {
		if !g[l] {
			b.WriteString("- " + l + "\n")
		}
	}
	return b.String()
}

// TestIntroLinesWithoutModel: a run without a model of the chain (the scale
// scenario: no feed, BlockRate -1) says so, rather than printing an empty
// list of exchange counts and a feed of -1 blocks/s.
func TestIntroLinesWithoutModel(t *testing.T) {
	r := &Report{}
	r.Settings.BlockRate = -1
	r.Settings.CheckFraction = -1
	lines := strings.Join(r.introLines(), "\n")
	for _, want := range []string{"no model of the chain", "no writer feed in the rate phase"} {
		if !strings.Contains(lines, want) {
			t.Errorf("intro lacks %q:\n%s", want, lines)
		}
	}
	for _, bad := range []string{"hold  UTXOs", "-1 blocks/s", "-100.0%"} {
		if strings.Contains(lines, bad) {
			t.Errorf("intro has %q:\n%s", bad, lines)
		}
	}
	r.Settings.BlockRate, r.Settings.CheckFraction = 10, 0.1
	r.Preload.Exchanges = map[string]uint64{"x": 5000}
	if lines := strings.Join(r.introLines(), "\n"); !strings.Contains(lines, "exchange addresses hold 5000 UTXOs") || !strings.Contains(lines, "10 blocks/s") {
		t.Errorf("intro of a run with a model:\n%s", lines)
	}
}

// TestShellJoin: the report's command line can be pasted into a shell.
func TestShellJoin(t *testing.T) {
	got := shellJoin([]string{"utxo-loadtest", "--import-flags", "--block-cache-bytes 1GiB", "--x", "", "it's"})
	want := `utxo-loadtest --import-flags '--block-cache-bytes 1GiB' --x '' 'it'\''s'`
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

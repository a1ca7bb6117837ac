package loadtest

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

// TestParseIngestLog reads ingest's progress and summary lines as ingest
// prints them (cmd/utxo-cache's TestProgressLogLines pins that form).
func TestParseIngestLog(t *testing.T) {
	log := "ingest: progress 1.031s: applied 1 blocks, 24951 UTXO changes, tip 1\n" +
		"some other line\n" +
		"ingest: progress 8.850s: applied 65 blocks, 171907 UTXO changes, tip 65\n" +
		"ingest: applied 105 blocks, skipped 0 already applied, 223051 UTXO changes in 1m2.5s; tip 105/a8f2; 109333 UTXOs; 91 blocks in 3 catch-up windows\n"
	pts, secs, changes, err := parseIngestLog(log)
	if err != nil {
		t.Fatal(err)
	}
	if len(pts) != 2 || pts[1] != (ImportPoint{Seconds: 8.85, Changes: 171907}) || secs != 62.5 || changes != 223051 {
		t.Fatalf("points %v, %v s, %d changes", pts, secs, changes)
	}
	if _, _, _, err := parseIngestLog("ingest: progress 1.0s: applied 1 blocks, 5 UTXO changes, tip 1\n"); err == nil {
		t.Fatal("a log without a summary line accepted")
	}
}

// TestParseBulkIngestLog: a bulk load's log (its own lines, one progress
// line at its end, the summary) parses, and says it was a bulk load.
func TestParseBulkIngestLog(t *testing.T) {
	log := "ingest: bulk 1.000s: bulk: read 3261 blocks of chain.cbor, tip 3261\n" +
		"ingest: bulk 9.000s: bulk: merged the outputs' events: 2097152 of 10207220\n" +
		"ingest: progress 76.188s: applied 7884 blocks, 9847072 UTXO changes, tip 7884\n" +
		"ingest: bulk loaded blocks 1..7884 (9847072 UTXO changes, 2000046 UTXOs) in 1m16.188s\n" +
		"ingest: applied 7884 blocks, skipped 0 already applied, 9847072 UTXO changes in 1m16.517s; tip 7884/fc; 2000046 UTXOs; 7884 blocks bulk loaded; 0 blocks in 0 catch-up windows\n"
	pts, secs, changes, err := parseIngestLog(log)
	if err != nil || len(pts) != 1 || secs != 76.517 || changes != 9847072 {
		t.Fatalf("parsed %v, %v, %v, %v", pts, secs, changes, err)
	}
	if !bulkLoaded(log) || bulkLoaded("ingest: applied 1 blocks, skipped 0 already applied, 5 UTXO changes in 1s; tip 1/ab; 5 UTXOs; 1 blocks in 1 catch-up windows\n") {
		t.Fatal("bulkLoaded does not tell a bulk load's log from a windows import's")
	}
}

// TestTenthRates: an import at 100 changes/s for 9 s, then 10 changes/s:
// the first tenth runs at 100/s, the last tenth (the 100 changes from 900
// to 1000, in the slow part) at 10/s; the times are interpolated between
// progress points.
func TestTenthRates(t *testing.T) {
	var pts []ImportPoint
	for s := 1; s <= 9; s++ {
		pts = append(pts, ImportPoint{Seconds: float64(s), Changes: int64(100 * s)})
	}
	// 900 changes at 9 s, then 10/s: 1000 at 19 s.
	pts = append(pts, ImportPoint{Seconds: 14, Changes: 950})
	first, last := tenthRates(pts, 19, 1000)
	if math.Abs(first-100) > 1e-9 || math.Abs(last-10) > 1e-9 {
		t.Fatalf("first %v, last %v; want 100 and 10", first, last)
	}
	if f, l := tenthRates(nil, 10, 1000); math.Abs(f-100) > 1e-9 || math.Abs(l-100) > 1e-9 {
		t.Fatalf("no progress points: %v, %v; want the mean rate", f, l)
	}
}

// TestCompare: one table with both reports' targets (matched by name and
// configuration, B's own appended), configuration figures with B/A, and
// the scale figures.
func TestCompare(t *testing.T) {
	a := &Report{Version: ReportVersion, Scenario: ScenarioScale,
		Targets: []Verdict{{Target: "t1", Config: "disk", Value: "1.0", Status: "PASS"}, {Target: "t2", Value: "x", Status: "MISS"}},
		Configs: []ConfigResult{{Name: "disk", Max: PhaseResult{AchievedRate: 1000}}},
		Scale:   &ScaleResult{ChangesPerSec: 50_000, BytesPerUTXO: 200}}
	b := &Report{Version: ReportVersion, Scenario: ScenarioScale,
		Targets: []Verdict{{Target: "t1", Config: "disk", Value: "2.0", Status: "PASS"}, {Target: "t3", Value: "y", Status: "PASS"}},
		Configs: []ConfigResult{{Name: "disk", Max: PhaseResult{AchievedRate: 1500}}},
		Scale:   &ScaleResult{ChangesPerSec: 100_000, BytesPerUTXO: 150}}
	var out bytes.Buffer
	if err := Compare(&out, a, b, "a.json", "b.json"); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"t1 [disk]":                   {"PASS 1.0", "PASS 2.0"},
		"t2":                          {"MISS x", "-"},
		"t3":                          {"-", "PASS y"},
		"disk max req/s":              {"1000.00", "1500.00", "1.50"},
		"import changes/s":            {"50000", "100000", "2.00"},
		"bytes per UTXO after import": {"200.0", "150.0", "0.75"},
	}
	lines := strings.Split(out.String(), "\n")
	for name, cells := range want {
		found := false
		for _, l := range lines {
			if !strings.HasPrefix(l, name+"  ") {
				continue
			}
			found = true
			f := strings.Fields(strings.TrimPrefix(l, name))
			if strings.Join(f, " ") != strings.Join(cells, " ") {
				t.Errorf("row %q: %q, want %q", name, f, cells)
			}
		}
		if !found {
			t.Errorf("no row %q in\n%s", name, out.String())
		}
	}
}

// TestScaleMarkdown: the report's scale section lists every figure, the
// settle windows and, per configuration, the block cache's hit ratio and
// misses per request from the phase's scraped deltas.
func TestScaleMarkdown(t *testing.T) {
	s := &ScaleResult{ChangesPerSec: 12345, Windows: []SettleWindow{{Seconds: 2, ReqPerSec: 900, DebtBytes: 3 << 20, Compactions: 4, CompactionsRunning: 1}}}
	configs := []ConfigResult{{Name: "disk", Max: PhaseResult{AchievedRate: 1000, Requests: 200,
		Endpoints: map[string]EndpointResult{"page": {Latency: LatencySummary{Count: 5, P99: 7.5}}},
		Cache:     &TierStats{Tiers: map[string]TierLookups{}, DiskReads: 100, BlockCacheHits: 300, BlockCacheMisses: 100, BlockCacheHitRatio: 0.75}}}}
	md := s.markdown(configs)
	for _, want := range []string{
		"| import changes/s | 12345 |",
		"| 2.0 | 900 | 3.0 | 4 (1) |",
		"| disk | 1000 | - | 7.50 | - | - | - | none | 0.750 | 0.50 | 0.50 |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("no %q in\n%s", want, md)
		}
	}
}

// TestReferenceFigures: the reference comparison's medians, ratio, table
// row and verdicts, from rounds computed by hand.
func TestReferenceFigures(t *testing.T) {
	rd := ReferenceRead{Kind: "page", DiskRPS: []float64{900, 300, 600}, RefRPS: []float64{100, 200, 400}, DiskP99: []float64{3, 1, 2}, RefP99: []float64{9, 8, 7}}
	if m := median(rd.DiskRPS); m != 600 {
		t.Fatalf("median %v", m)
	}
	if m := median([]float64{4, 1, 3, 2}); m != 2.5 {
		t.Fatalf("even median %v", m)
	}
	rd.DiskMedianRPS, rd.RefMedianRPS, rd.DiskMedianP99, rd.RefMedianP99, rd.Ratio = 600, 200, 2, 8, 3
	bal := ReferenceRead{Kind: "balance", DiskMedianRPS: 500, RefMedianRPS: 250, Ratio: 2}
	s := &ScaleResult{Reference: &ReferenceResult{Rounds: 3, Workers: 32, PhaseSeconds: 5, Reads: []ReferenceRead{bal, rd}}}
	md := s.markdown(nil)
	if want := "| page | 600 | 200 | 3.00 × | 2.00 | 8.00 | 900 / 100, 300 / 200, 600 / 400 |"; !strings.Contains(md, want) {
		t.Errorf("no %q in\n%s", want, md)
	}
	got := map[string]string{}
	for _, v := range s.verdicts(&Report{}) {
		got[v.Target] = v.Status
	}
	if got["cold page over the PostgreSQL reference (req/s)"] != "PASS" || got["cold balance over the PostgreSQL reference (req/s)"] != "MISS" {
		t.Errorf("verdicts %v", got)
	}
	if _, ok := got["cold outpoint over the PostgreSQL reference (req/s)"]; ok {
		t.Errorf("a verdict for a read that did not run: %v", got)
	}
}

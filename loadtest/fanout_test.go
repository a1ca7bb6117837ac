package loadtest

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestFanoutOrder: each round runs every transport's legs, none first, and
// every other round the same legs backwards, so each count's legs sit as
// early as late in the run on average.
func TestFanoutOrder(t *testing.T) {
	name := func(ls []FanoutLeg) []string {
		var out []string
		for _, l := range ls {
			out = append(out, fmt.Sprintf("%s%d", l.Transport[:1], l.Followers))
		}
		return out
	}
	for _, c := range []struct {
		transports []string
		counts     []int
		rounds     int
		want       []string
	}{
		{[]string{FanoutJetStream}, []int{100}, 1, []string{"j0", "j100"}},
		{[]string{FanoutJetStream}, []int{100}, 4, []string{"j0", "j100", "j100", "j0", "j0", "j100", "j100", "j0"}},
		{[]string{FanoutHTTP, FanoutJetStream}, []int{10, 100}, 2,
			[]string{"h0", "h10", "h100", "j0", "j10", "j100", "j100", "j10", "j0", "h100", "h10", "h0"}},
	} {
		if got := name(fanoutOrder(c.transports, c.counts, c.rounds)); !slices.Equal(got, c.want) {
			t.Errorf("fanoutOrder(%v, %v, %d) = %v, want %v", c.transports, c.counts, c.rounds, got, c.want)
		}
	}
}

// TestSummarizeFanout checks the summary against figures worked out by
// hand: medians over each count's legs, the ratio of the medians of the
// apply p50 (none over with), the spread of the legs, the per-follower
// excesses of CPU and allocations, and failed legs left out.
func TestSummarizeFanout(t *testing.T) {
	leg := func(tr string, n int, p50, p99, cores, allocs, mean, lag float64) FanoutLeg {
		return FanoutLeg{Transport: tr, Followers: n, Apply: LatencySummary{Count: 300, P50: p50, P99: p99},
			Writer: &ProcStats{CPUCores: cores}, AllocsPerStep: allocs, MeanApplyBlocksPerSec: mean, Lag: LatencySummary{P99: lag}}
	}
	failed := leg(FanoutJetStream, 100, 100, 100, 9, 1e6, 1, 1e4)
	failed.Error = "boom"
	legs := []FanoutLeg{
		leg(FanoutJetStream, 0, 4.0, 9, 0.060, 17000, 240, 0),
		leg(FanoutJetStream, 100, 4.2, 12, 0.070, 17100, 230, 40),
		failed,
		leg(FanoutJetStream, 100, 4.0, 10, 0.064, 17050, 250, 50),
		leg(FanoutJetStream, 0, 3.6, 11, 0.062, 17010, 260, 0),
		leg(FanoutJetStream, 100, 4.1, 30, 0.080, 17200, 200, 45),
		leg(FanoutJetStream, 0, 3.8, 8, 0.058, 17020, 250, 0),
		leg(FanoutHTTP, 0, 5, 10, 0.05, 17000, 200, 0),
	}
	got := summarizeFanout(legs)
	if len(got) != 3 || got[0].Transport != FanoutHTTP || got[1].Followers != 0 || got[2].Followers != 100 {
		t.Fatalf("summary %+v", got)
	}
	if got[0].ApplyRatio != 0 || got[0].Legs != 1 || got[0].Spread != 0 {
		t.Errorf("http, none: %+v", got[0])
	}
	none, with := got[1], got[2]
	near := func(what string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-9*math.Max(1, math.Abs(want)) {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}
	// None: p50s 4.0, 3.6, 3.8; with (the failed leg left out): 4.2, 4.0, 4.1.
	if none.Legs != 3 || with.Legs != 3 {
		t.Errorf("legs %d and %d, want 3 and 3", none.Legs, with.Legs)
	}
	near("none p50", none.ApplyP50, 3.8)
	near("none spread", none.Spread, (4.0-3.6)/3.8)
	near("with p50", with.ApplyP50, 4.1)
	near("with min", with.ApplyP50Min, 4.0)
	near("with max", with.ApplyP50Max, 4.2)
	near("with p99", with.ApplyP99, 12)
	near("ratio", with.ApplyRatio, 3.8/4.1)
	near("mean ratio", with.MeanApplyRatio, 230.0/250)
	near("cores", with.CPUCores, 0.070)
	near("mcores per follower", with.MilliCoresPerFollower, (0.070-0.060)/100*1000)
	near("allocs per step", with.AllocsPerStep, 17100)
	near("allocs per follower-step", with.AllocsPerFollowerStep, (17100.0-17010)/100)
	near("lag p99", with.LagP99, 45)
	near("lag p99 max", with.LagP99Max, 50)
}

// TestFanoutVerdicts: the targets judge the JetStream legs with 100
// followers (with the most followers when none had 100) against the
// JetStream legs with none, never the HTTP ones.
func TestFanoutVerdicts(t *testing.T) {
	sum := func(tr string, n int, ratio, lag float64) FanoutSummary {
		return FanoutSummary{Transport: tr, Followers: n, Legs: 2, ApplyP50: 4, ApplyRatio: ratio, LagP99: lag}
	}
	for _, c := range []struct {
		name         string
		summary      []FanoutSummary
		wantN        string
		apply, lag   string
		wantApplyVal string
	}{
		{"100 of several", []FanoutSummary{sum(FanoutHTTP, 0, 0, 0), sum(FanoutHTTP, 100, 0.5, 900),
			sum(FanoutJetStream, 0, 0, 0), sum(FanoutJetStream, 10, 0.90, 20), sum(FanoutJetStream, 100, 0.96, 249), sum(FanoutJetStream, 200, 0.5, 900)},
			"with 100 JetStream", "PASS", "PASS", "0.960"},
		{"the most when none had 100", []FanoutSummary{sum(FanoutJetStream, 0, 0, 0), sum(FanoutJetStream, 50, 0.99, 10), sum(FanoutJetStream, 10, 0.90, 20)},
			"with 50 JetStream", "PASS", "PASS", "0.990"},
		{"missed", []FanoutSummary{sum(FanoutJetStream, 0, 0, 0), sum(FanoutJetStream, 100, 0.94, 250)},
			"with 100 JetStream", "MISS", "MISS", "0.940"},
		{"no leg with none", []FanoutSummary{sum(FanoutJetStream, 100, 0.99, 10)},
			"with 100 JetStream", "SKIP", "SKIP", ""},
	} {
		r := &Report{Fanout: &FanoutResult{Summary: c.summary}}
		v := r.fanoutVerdicts()
		if len(v) != 2 {
			t.Fatalf("%s: %+v", c.name, v)
		}
		for i, want := range []string{c.apply, c.lag} {
			if v[i].Status != want || !strings.Contains(v[i].Target, c.wantN) {
				t.Errorf("%s: verdict %d %+v, want %s for %q", c.name, i, v[i], want, c.wantN)
			}
		}
		if !strings.HasPrefix(v[0].Value, c.wantApplyVal) {
			t.Errorf("%s: apply value %q, want it to start with %q", c.name, v[0].Value, c.wantApplyVal)
		}
	}
}

// TestSummarizeFanoutPooledLag: the pooled lag is over every change of
// every leg of a count at once. Leg A: 99 changes at 10 ms and one at
// 1,000 ms (its p99 is 10 ms); leg B: 100 at 20 ms. Pooled, the 198th of
// the 200 sorted values, the p99, is 20 ms, and the largest 1,000 ms.
func TestSummarizeFanoutPooledLag(t *testing.T) {
	leg := func(values map[time.Duration]int) FanoutLeg {
		h := newSyncHist()
		for d, n := range values {
			for range n {
				h.record(d)
			}
		}
		return FanoutLeg{Transport: FanoutJetStream, Followers: 100, Apply: LatencySummary{Count: 1, P50: 1}, Lag: h.summary(), lag: h.h}
	}
	got := summarizeFanout([]FanoutLeg{
		leg(map[time.Duration]int{10 * time.Millisecond: 99, time.Second: 1}),
		leg(map[time.Duration]int{20 * time.Millisecond: 100}),
	})
	if len(got) != 1 {
		t.Fatalf("summary %+v", got)
	}
	p := got[0].LagPooled
	if p.Count != 200 || math.Abs(p.P99-20) > 0.02 || math.Abs(p.Max-1000) > 1 {
		t.Errorf("pooled lag %+v, want 200 values, p99 20 ms, max 1000 ms", p)
	}
	if math.Abs(got[0].LagP99-15) > 0.02 {
		t.Errorf("median of the legs' p99 %v, want 15 ms (10 and 20)", got[0].LagP99)
	}
}

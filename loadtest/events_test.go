package loadtest

import (
	"math"
	"testing"
)

// TestPromHistQuantile: quantiles of a scraped histogram are interpolated
// within their bucket, as Prometheus' histogram_quantile does, from the
// growth between two scrapes.
func TestPromHistQuantile(t *testing.T) {
	page := func(b1, b2, inf float64) Samples {
		out := Samples{}
		for _, b := range []struct {
			le string
			v  float64
		}{{"0.01", b1}, {"0.05", b2}, {"+Inf", inf}} {
			out = append(out, Sample{Name: "x_bucket", Labels: map[string]string{"le": b.le}, Value: b.v})
		}
		return append(out, Sample{Name: "x_count", Value: inf}, Sample{Name: "x_sum", Value: inf * 0.02})
	}
	before := promHistOf(page(10, 10, 10), "x")
	// 100 more: 50 at or below 10 ms, 40 in (10, 50] ms, 10 above.
	d := promHistOf(page(60, 100, 110), "x").minus(before)
	if d.count != 100 {
		t.Fatalf("count %v", d.count)
	}
	for _, c := range []struct{ q, want float64 }{
		{0.25, 0.005},      // rank 25 of the 50 in [0, 0.01]
		{0.5, 0.01},        // the bucket's top
		{0.7, 0.03},        // rank 70: 20 of the 40 in (0.01, 0.05]
		{0.99, 0.05},       // in +Inf: its lower bound
		{0.9, 0.05},        // rank 90: the last of (0.01, 0.05]
		{0.55, 0.015},      // rank 55: 5 of 40
		{0.0001, 0.000002}, // rank 0.01 of 50 in [0, 0.01]
	} {
		if got := d.quantile(c.q); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("quantile %v: %v, want %v", c.q, got, c.want)
		}
	}
	var sum promHist
	sum.add(d)
	sum.add(d)
	if sum.count != 200 || sum.quantile(0.7) != d.quantile(0.7) {
		t.Fatalf("sum of two equal histograms: count %v, p70 %v", sum.count, sum.quantile(0.7))
	}
}

// TestLineFit: the slope and R² of a least-squares line, against points on
// a known line and a set worked out by hand.
func TestLineFit(t *testing.T) {
	xs := []float64{0, 250, 500, 750, 1000}
	ys := make([]float64, len(xs))
	for i, x := range xs {
		ys[i] = 30e6 + 11264*x
	}
	if slope, r2 := lineFit(xs, ys); math.Abs(slope-11264) > 1e-6 || math.Abs(r2-1) > 1e-12 {
		t.Fatalf("points on y = 30e6 + 11264x: slope %v, R² %v", slope, r2)
	}
	// x 0,1,2,3; y 1,3,2,5: mean x 1.5, mean y 2.75; Sxy = 5.5, Sxx = 5,
	// Syy = 8.75: slope 1.1, R² 30.25/43.75.
	if slope, r2 := lineFit([]float64{0, 1, 2, 3}, []float64{1, 3, 2, 5}); math.Abs(slope-1.1) > 1e-12 || math.Abs(r2-30.25/43.75) > 1e-12 {
		t.Fatalf("slope %v, R² %v; want 1.1, %v", slope, r2, 30.25/43.75)
	}
	if slope, r2 := lineFit([]float64{2, 2}, []float64{1, 5}); slope != 0 || r2 != 0 {
		t.Fatalf("one x: slope %v, R² %v", slope, r2)
	}
}

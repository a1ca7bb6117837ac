package loadtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Sample is one line of the Prometheus text exposition format: a metric name,
// its labels and its value.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// Samples is a scraped /metrics page.
type Samples []Sample

// ErrBadExposition marks a /metrics page the parser cannot read.
var ErrBadExposition = errors.New("loadtest: bad metrics page")

// ParseMetrics parses the Prometheus text format (version 0.0.4) with
// expfmt's parser. The harness reads counters only; a histogram or summary
// flattens into its plain samples: _bucket (with le) or the quantiles, _sum
// and _count.
func ParseMetrics(text string) (Samples, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadExposition, err)
	}
	names := make([]string, 0, len(families))
	for name := range families {
		names = append(names, name)
	}
	sort.Strings(names)
	var out Samples
	for _, name := range names {
		mf := families[name]
		for _, m := range mf.GetMetric() {
			out = appendSamples(out, name, m)
		}
	}
	return out, nil
}

// appendSamples appends the samples of m, a metric of the family name, as
// the text format writes them.
func appendSamples(out Samples, name string, m *dto.Metric) Samples {
	labels := func(extra ...string) map[string]string {
		l := make(map[string]string, len(m.GetLabel())+len(extra)/2)
		for _, lp := range m.GetLabel() {
			l[lp.GetName()] = lp.GetValue()
		}
		for i := 0; i+1 < len(extra); i += 2 {
			l[extra[i]] = extra[i+1]
		}
		return l
	}
	switch {
	case m.Counter != nil:
		out = append(out, Sample{Name: name, Labels: labels(), Value: m.Counter.GetValue()})
	case m.Gauge != nil:
		out = append(out, Sample{Name: name, Labels: labels(), Value: m.Gauge.GetValue()})
	case m.Untyped != nil:
		out = append(out, Sample{Name: name, Labels: labels(), Value: m.Untyped.GetValue()})
	case m.Histogram != nil:
		h := m.Histogram
		for _, b := range h.GetBucket() {
			le := strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64)
			out = append(out, Sample{Name: name + "_bucket", Labels: labels("le", le), Value: float64(b.GetCumulativeCount())})
		}
		out = append(out,
			Sample{Name: name + "_sum", Labels: labels(), Value: h.GetSampleSum()},
			Sample{Name: name + "_count", Labels: labels(), Value: float64(h.GetSampleCount())})
	case m.Summary != nil:
		sm := m.Summary
		for _, q := range sm.GetQuantile() {
			qs := strconv.FormatFloat(q.GetQuantile(), 'g', -1, 64)
			out = append(out, Sample{Name: name, Labels: labels("quantile", qs), Value: q.GetValue()})
		}
		out = append(out,
			Sample{Name: name + "_sum", Labels: labels(), Value: sm.GetSampleSum()},
			Sample{Name: name + "_count", Labels: labels(), Value: float64(sm.GetSampleCount())})
	}
	return out
}

// Sum adds the values of the samples named name whose labels include every
// pair of match (nil matches all).
func (ss Samples) Sum(name string, match map[string]string) float64 {
	var total float64
	for _, s := range ss {
		if s.Name != name || !labelsMatch(s.Labels, match) {
			continue
		}
		total += s.Value
	}
	return total
}

// LabelValues returns the distinct values of label among the samples named
// name, sorted.
func (ss Samples) LabelValues(name, label string) []string {
	seen := map[string]bool{}
	for _, s := range ss {
		if v, ok := s.Labels[label]; ok && s.Name == name && !seen[v] {
			seen[v] = true
		}
	}
	out := make([]string, 0, len(seen))
	for v := range seen {
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}

func labelsMatch(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// Metric names the harness reads from the service's /metrics.
const (
	metricTierLookups = "utxo_cache_tier_lookups_total" // {tier, result=hit|miss}
	metricDiskReads   = "utxo_cache_disk_reads_total"
	// Pebble's block cache, for the scale scenario's cold reads.
	metricBlockCacheHits   = "utxo_cache_store_block_cache_hits_total"
	metricBlockCacheMisses = "utxo_cache_store_block_cache_misses_total"
	// The Go runtime's heap allocations since the process started.
	metricMallocs    = "go_memstats_mallocs_total"
	metricAllocBytes = "go_memstats_alloc_bytes_total"
)

// TierStats is the cache activity of a phase: the difference of two scrapes.
type TierStats struct {
	// Tiers maps a tier name to its lookups in the phase.
	Tiers map[string]TierLookups `json:"tiers"`
	// DiskReads is the number of answers computed from a disk snapshot.
	DiskReads float64 `json:"disk_reads"`
	// BlockCacheHits and BlockCacheMisses are Pebble's block cache
	// lookups in the phase (a miss reads a block from the file system);
	// BlockCacheHitRatio is hits / (hits + misses), 0 without lookups.
	BlockCacheHits     float64 `json:"block_cache_hits,omitempty"`
	BlockCacheMisses   float64 `json:"block_cache_misses,omitempty"`
	BlockCacheHitRatio float64 `json:"block_cache_hit_ratio,omitempty"`
}

// TierLookups counts one tier's hits and misses.
type TierLookups struct {
	Hits     float64 `json:"hits"`
	Misses   float64 `json:"misses"`
	HitRatio float64 `json:"hit_ratio"` // hits / (hits + misses); 0 without lookups
}

// tierDelta returns the cache activity between two scrapes of one service.
func tierDelta(before, after Samples) TierStats {
	st := TierStats{Tiers: map[string]TierLookups{}}
	for _, tier := range after.LabelValues(metricTierLookups, "tier") {
		var t TierLookups
		for _, r := range []struct {
			result string
			into   *float64
		}{{"hit", &t.Hits}, {"miss", &t.Misses}} {
			m := map[string]string{"tier": tier, "result": r.result}
			*r.into = after.Sum(metricTierLookups, m) - before.Sum(metricTierLookups, m)
		}
		if t.Hits+t.Misses > 0 {
			t.HitRatio = t.Hits / (t.Hits + t.Misses)
		}
		st.Tiers[tier] = t
	}
	st.DiskReads = after.Sum(metricDiskReads, nil) - before.Sum(metricDiskReads, nil)
	st.BlockCacheHits = after.Sum(metricBlockCacheHits, nil) - before.Sum(metricBlockCacheHits, nil)
	st.BlockCacheMisses = after.Sum(metricBlockCacheMisses, nil) - before.Sum(metricBlockCacheMisses, nil)
	if n := st.BlockCacheHits + st.BlockCacheMisses; n > 0 {
		st.BlockCacheHitRatio = st.BlockCacheHits / n
	}
	return st
}

// scrape fetches and parses base + "/metrics".
func scrape(ctx context.Context, c *http.Client, base string) (Samples, error) {
	return scrapeURL(ctx, c, base+"/metrics")
}

// scrapeURL fetches and parses a metrics page: u may name the families it
// wants ("/metrics?name[]=NAME", which the service's handler honours), and
// the page then holds only those.
func scrapeURL(ctx context.Context, c *http.Client, u string) (Samples, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", u, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: status %d", u, resp.StatusCode)
	}
	return ParseMetrics(string(body))
}

package loadtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
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

// ErrBadExposition marks a /metrics line the parser cannot read.
var ErrBadExposition = errors.New("loadtest: bad metrics line")

// ParseMetrics parses the Prometheus text format (version 0.0.4): comment
// and blank lines are skipped, every other line is
//
//	name[{label="value",...}] value [timestamp]
//
// with \\, \" and \n escapes in label values. The harness reads counters
// only; histogram and summary series parse as their plain _bucket, _sum and
// _count samples.
func ParseMetrics(text string) (Samples, error) {
	var out Samples
	for n, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		s, err := parseSampleLine(line)
		if err != nil {
			return nil, fmt.Errorf("%w %d: %v: %q", ErrBadExposition, n+1, err, line)
		}
		out = append(out, s)
	}
	return out, nil
}

func parseSampleLine(line string) (Sample, error) {
	i := strings.IndexAny(line, "{ \t")
	if i <= 0 {
		return Sample{}, errors.New("no value")
	}
	s := Sample{Name: line[:i]}
	rest := line[i:]
	if rest[0] == '{' {
		var err error
		s.Labels, rest, err = parseLabels(rest[1:])
		if err != nil {
			return Sample{}, err
		}
	}
	fields := strings.Fields(rest)
	if len(fields) < 1 || len(fields) > 2 {
		return Sample{}, errors.New("want a value and an optional timestamp")
	}
	v, err := parseValue(fields[0])
	if err != nil {
		return Sample{}, err
	}
	s.Value = v
	return s, nil
}

// parseLabels parses `a="x",b="y"}` and returns what follows the brace.
func parseLabels(s string) (map[string]string, string, error) {
	labels := map[string]string{}
	for {
		s = strings.TrimLeft(s, " \t")
		if s == "" {
			return nil, "", errors.New("unterminated labels")
		}
		if s[0] == '}' {
			return labels, s[1:], nil
		}
		eq := strings.IndexByte(s, '=')
		if eq <= 0 {
			return nil, "", errors.New("label without =")
		}
		name := strings.TrimSpace(s[:eq])
		s = strings.TrimLeft(s[eq+1:], " \t")
		if s == "" || s[0] != '"' {
			return nil, "", errors.New("label value not quoted")
		}
		var val strings.Builder
		j := 1
		for ; j < len(s) && s[j] != '"'; j++ {
			if s[j] != '\\' {
				val.WriteByte(s[j])
				continue
			}
			j++
			if j == len(s) {
				return nil, "", errors.New("dangling escape")
			}
			switch s[j] {
			case 'n':
				val.WriteByte('\n')
			case '\\', '"':
				val.WriteByte(s[j])
			default:
				return nil, "", fmt.Errorf("unknown escape \\%c", s[j])
			}
		}
		if j == len(s) {
			return nil, "", errors.New("unterminated label value")
		}
		labels[name] = val.String()
		s = strings.TrimLeft(s[j+1:], " \t")
		if s != "" && s[0] == ',' {
			s = s[1:]
		}
	}
}

func parseValue(s string) (float64, error) {
	switch s {
	case "+Inf":
		return math.Inf(1), nil
	case "-Inf":
		return math.Inf(-1), nil
	case "NaN":
		return math.NaN(), nil
	}
	return strconv.ParseFloat(s, 64)
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
)

// TierStats is the cache activity of a phase: the difference of two scrapes.
type TierStats struct {
	// Tiers maps a tier name to its lookups in the phase.
	Tiers map[string]TierLookups `json:"tiers"`
	// DiskReads is the number of answers computed from a disk snapshot.
	DiskReads float64 `json:"disk_reads"`
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
	return st
}

// scrape fetches and parses base + "/metrics".
func scrape(ctx context.Context, c *http.Client, base string) (Samples, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", base, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", base, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: status %d", base, resp.StatusCode)
	}
	return ParseMetrics(string(body))
}

package loadtest

import (
	"context"
	"errors"
	"fmt"
	"html"
	"math"
	"os"
	"sort"
	"strings"
	"sync"
	"time"
)

// The soak scenario (ScenarioSoak) is one long, bounded run of the full
// configuration (memory tier and Redis) under a mixed open-loop read load
// with the writer feed's blocks and rollbacks, while the harness kills its
// redis-server (SIGKILL) and starts it again RedisRestarts times, evenly
// spaced. Every SampleEvery it samples the service process: RSS
// (/proc/PID/status), open file descriptors (/proc/PID/fd), goroutines
// (go_goroutines on /metrics) and Pebble's figures (the
// utxo_cache_store_* gauges). The run stops by itself after Duration.
//
// # The growth rule
//
// A figure grows without bound when the mean of its samples in the last
// quarter of the run exceeds the mean in the second quarter by more than
// soakRelTolerance of it plus the figure's absolute tolerance (soakFigures).
// The first quarter is left out: caches fill there by design (the soak runs
// the memory tier at soakMemoryTier so that it fills early and then evicts
// all along). RSS may also rise by Pebble's memtable size on top of its
// tolerance: the memtable's arena is touched as it fills, and at the soak's
// write rate one lasts for minutes. Figures that grow with the chain itself (disk bytes, sstables,
// UTXOs) are reported, not judged. The run fails on any growing figure, any
// 5xx, any answer that differs from the model, a feed error, a failed Redis
// restart, a service that exited, or too few samples to judge.

// SoakResult is what a soak run measured (Report.Soak).
type SoakResult struct {
	Duration    string `json:"duration"`
	SampleEvery string `json:"sample_every"`
	PID         int    `json:"pid"`
	// Samples of the service, the first at the start, the last at the end.
	Samples       []SoakSample     `json:"samples"`
	Figures       []SoakFigure     `json:"figures"`
	RedisRestarts []RedisRestart   `json:"redis_restarts"`
	Requests      int64            `json:"requests"`
	OK            int64            `json:"ok"`
	FiveXX        int64            `json:"5xx"`
	Errors        map[string]int64 `json:"errors,omitempty"` // failed requests by class
	Checked       int64            `json:"checked"`
	Mismatches    int64            `json:"mismatches"`
	Blocks        int64            `json:"blocks"`
	Rollbacks     int64            `json:"rollbacks"`
	// Verdict is PASS or FAIL; Reasons says why it failed.
	Verdict string   `json:"verdict"`
	Reasons []string `json:"reasons,omitempty"`
}

// SoakSample is the service's figures at one moment: Values by figure name
// (soakFigures), Error when a source could not be read (its figures are
// then missing from Values).
type SoakSample struct {
	Seconds float64            `json:"t_s"`
	Values  map[string]float64 `json:"values"`
	Error   string             `json:"error,omitempty"`
}

// SoakFigure is one figure over the run, with the growth rule's verdict.
type SoakFigure struct {
	Name   string  `json:"name"`
	Start  float64 `json:"start"`
	End    float64 `json:"end"`
	Max    float64 `json:"max"`
	Q2Mean float64 `json:"q2_mean"`
	Q4Mean float64 `json:"q4_mean"`
	// Limit is what Q4Mean may reach: Q2Mean × (1 + soakRelTolerance) +
	// the figure's absolute tolerance. Zero for a figure not judged.
	Limit   float64 `json:"limit,omitempty"`
	Judged  bool    `json:"judged"`
	Growing bool    `json:"growing"`
	Note    string  `json:"note,omitempty"`
}

// RedisRestart is one kill and restart of the harness's redis-server.
type RedisRestart struct {
	AtSeconds   float64 `json:"at_s"`
	DownSeconds float64 `json:"down_s"` // from the kill to the first PONG
	Error       string  `json:"error,omitempty"`
}

// soakRelTolerance is the growth rule's relative tolerance.
const soakRelTolerance = 0.10

// minSoakSamples is the fewest samples a soak verdict is made on.
const minSoakSamples = 8

// soakFigure is a sampled figure: where it comes from and how it is judged.
type soakFigure struct {
	name   string
	metric string  // the Prometheus gauge, "" for /proc figures
	abs    float64 // absolute tolerance of the growth rule
	// plusMemtable adds the memtable's size to abs: Pebble's memtable
	// arena is touched page by page as it fills, so RSS rises by up to
	// its size between two flushes (minutes apart at the soak's write rate).
	plusMemtable bool
	judged       bool
	note         string // why it is not judged
}

// soakFigures are the figures a soak samples, in report order.
var soakFigures = []soakFigure{
	{name: "rss_bytes", abs: 32 << 20, plusMemtable: true, judged: true},
	// The harness's connections (at most InFlight, 32 in the soak, plus a
	// few of its own) come and go with the latency: each is a descriptor
	// and a goroutine of the service.
	{name: "open_fds", abs: 48, judged: true},
	{name: "goroutines", metric: "go_goroutines", abs: 48, judged: true},
	{name: "pebble_memtables", metric: "utxo_cache_store_memtables", abs: 2, judged: true},
	{name: "pebble_memtable_bytes", metric: "utxo_cache_store_memtable_bytes", abs: 64 << 20, judged: true},
	{name: "pebble_l0_files", metric: "utxo_cache_store_l0_files", abs: 8, judged: true},
	{name: "pebble_read_amplification", metric: "utxo_cache_store_read_amplification", abs: 4, judged: true},
	{name: "pebble_zombie_sstables", metric: "utxo_cache_store_zombie_sstables", abs: 8, judged: true},
	{name: "pebble_table_iterators", metric: "utxo_cache_store_table_iterators", abs: 64, judged: true},
	{name: "pebble_snapshots", metric: "utxo_cache_store_snapshots", abs: 8, judged: true},
	{name: "go_heap_inuse_bytes", metric: "go_memstats_heap_inuse_bytes", note: "in rss_bytes"},
	{name: "memory_tier_bytes", metric: "utxo_cache_memory_cost_bytes", note: "bounded by --memory-cache-bytes; fills as the chain grows"},
	{name: "redis_restarts_seen", metric: "utxo_cache_redis_restarts_total", note: "the Redis tier's count of restarts it noticed"},
	{name: "pebble_block_cache_bytes", metric: "utxo_cache_store_block_cache_bytes",
		note: "bounded by the block cache's size; fills as the store is read"},
	{name: "pebble_sstables", metric: "utxo_cache_store_sstables", note: "grows with the chain"},
	{name: "pebble_open_sstables", metric: "utxo_cache_store_open_sstables", note: "grows with the chain (counted in open_fds)"},
	{name: "pebble_disk_bytes", metric: "utxo_cache_store_disk_bytes", note: "grows with the chain"},
	{name: "utxo_count", metric: "utxo_cache_store_utxo_count", note: "the chain's"},
	{name: "tip_height", metric: "utxo_cache_store_tip_height", note: "the chain's"},
}

// soakMemoryTier is the soak service's --memory-cache-bytes: small, so that
// the tier is full within the first quarter of the run and its eviction
// path runs for the rest (with the default 256MiB it would fill for hours,
// which the growth rule cannot tell from a leak).
const soakMemoryTier = "16MiB"

// soakSampleEvery is the default sampling period: about 60 samples a run,
// between a quarter second and a minute apart.
func soakSampleEvery(d time.Duration) time.Duration {
	return min(max(d/60, 250*time.Millisecond), time.Minute)
}

// runSoak runs the soak on the preloaded store at dataDir (its only
// configuration: nothing to compare, so no copy).
func (r *runner) runSoak(ctx context.Context, dataDir, token string) (res ConfigResult, err error) {
	res = ConfigResult{Name: ConfigFull, Kind: "service"}
	soak := &SoakResult{Duration: r.o.Duration.String(), SampleEvery: r.o.SampleEvery.String(), Errors: map[string]int64{}}
	r.report.Soak = soak
	r.startConfig()
	svc, err := r.startService(ctx, ConfigFull, dataDir, token, "serve-soak.log")
	if err != nil {
		return res, err
	}
	res.Args = redactToken(svc.args, token)
	defer func() {
		if serr := svc.stop(20 * time.Second); serr != nil {
			res.Error = serr.Error()
			err = errors.Join(err, serr)
		}
	}()
	soak.PID = svc.pid()
	r.logf("soak: serving on %s (pid %d) for %s, sampling every %s, %d Redis restarts",
		svc.base, svc.pid(), r.o.Duration, r.o.SampleEvery, max(r.o.RedisRestarts, 0))
	start, err := storeState(ctx, r.ctl, svc.base)
	if err != nil {
		return res, err
	}
	res.Start = &start
	if want := r.w.base.state; !start.sameFigures(want) {
		return res, fmt.Errorf("the service starts at %s, not at the preloaded store's %s", start, want)
	}

	t0 := time.Now()
	sampleOnce := func() SoakSample { return r.soakSample(ctx, svc, time.Since(t0)) }
	soak.Samples = append(soak.Samples, sampleOnce())
	bg, stopBG := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var mu sync.Mutex // guards soak.Samples and soak.RedisRestarts while bg runs
	wg.Add(2)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(r.o.SampleEvery)
		defer tick.Stop()
		for {
			select {
			case <-bg.Done():
				return
			case <-tick.C:
				s := sampleOnce()
				mu.Lock()
				soak.Samples = append(soak.Samples, s)
				mu.Unlock()
			}
		}
	}()
	go func() {
		defer wg.Done()
		n := r.o.RedisRestarts
		for i := 1; i <= n; i++ {
			at := t0.Add(r.o.Duration * time.Duration(i) / time.Duration(n+1))
			if !(realClock{}).SleepUntil(bg, at) {
				return
			}
			rr := RedisRestart{AtSeconds: time.Since(t0).Seconds()}
			down, err := r.redis.restart(r.cpus, 10*time.Second)
			rr.DownSeconds = down.Seconds()
			if err != nil {
				rr.Error = err.Error()
			}
			r.logf("soak: redis-server killed and restarted (down %.2fs) %s", rr.DownSeconds, rr.Error)
			mu.Lock()
			soak.RedisRestarts = append(soak.RedisRestarts, rr)
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	rate := r.o.Rate
	ph := r.phase(ctx, target{name: ConfigFull, bases: []string{svc.base}, writer: svc.base, token: token, pid: svc.pid(), metrics: true, admin: svc.admin},
		"soak", phaseOpen, rate, r.o.Duration)
	stopBG()
	wg.Wait()
	soak.Samples = append(soak.Samples, sampleOnce())
	res.Rate = ph

	soak.Requests, soak.OK, soak.FiveXX = ph.Requests, ph.OK, count5xx(ph.Errors)
	for k, v := range ph.Errors {
		soak.Errors[k] = v
	}
	if c := ph.Checks; c != nil {
		soak.Checked, soak.Mismatches = c.Checked, c.Mismatches
	}
	if f := ph.Feed; f != nil {
		soak.Blocks, soak.Rollbacks = f.Blocks, f.Rollbacks
	}
	soak.judge(r.o, svc.running())
	r.logf("soak: %s: %d requests, %d 5xx, %d of %d checked answers differ, %d blocks, %d rollbacks, %d Redis restarts",
		soak.Verdict, soak.Requests, soak.FiveXX, soak.Mismatches, soak.Checked, soak.Blocks, soak.Rollbacks, len(soak.RedisRestarts))
	if !svc.running() {
		return res, fmt.Errorf("the service exited during the soak (see %s)", svc.log.Name())
	}
	return res, nil
}

// soakSample reads the service's figures.
func (r *runner) soakSample(ctx context.Context, svc *service, at time.Duration) SoakSample {
	s := SoakSample{Seconds: at.Seconds(), Values: map[string]float64{}}
	var errs []string
	if p, err := readProc(svc.pid()); err != nil {
		errs = append(errs, err.Error())
	} else {
		s.Values["rss_bytes"] = float64(p.rssBytes)
	}
	if fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", svc.pid())); err != nil {
		errs = append(errs, err.Error())
	} else {
		s.Values["open_fds"] = float64(len(fds))
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if m, err := scrape(sctx, r.ctl, svc.base); err != nil {
		errs = append(errs, err.Error())
	} else {
		for _, f := range soakFigures {
			if f.metric == "" {
				continue
			}
			if i := m.index(f.metric); i >= 0 {
				s.Values[f.name] = m[i].Value
			} else {
				errs = append(errs, "no "+f.metric+" on /metrics")
			}
		}
	}
	s.Error = strings.Join(errs, "; ")
	return s
}

// index is the position of the first sample named name, or -1.
func (ss Samples) index(name string) int {
	for i, s := range ss {
		if s.Name == name {
			return i
		}
	}
	return -1
}

// judge applies the growth rule to every figure and sets the verdict.
func (s *SoakResult) judge(o Options, serviceRunning bool) {
	s.Figures, s.Reasons = nil, nil
	fail := func(format string, args ...any) { s.Reasons = append(s.Reasons, fmt.Sprintf(format, args...)) }
	sort.SliceStable(s.Samples, func(i, j int) bool { return s.Samples[i].Seconds < s.Samples[j].Seconds })
	total := o.Duration.Seconds()
	if n := len(s.Samples); n > 0 {
		total = max(total, s.Samples[n-1].Seconds)
	}
	var memtable float64 // the largest memtable size sampled
	for _, smp := range s.Samples {
		memtable = max(memtable, smp.Values["pebble_memtable_bytes"])
	}
	for _, f := range soakFigures {
		fig := SoakFigure{Name: f.name, Judged: f.judged, Note: f.note, Max: math.Inf(-1)}
		var q2, q4 []float64
		seen := 0
		for _, smp := range s.Samples {
			v, ok := smp.Values[f.name]
			if !ok {
				continue
			}
			if seen == 0 {
				fig.Start = v
			}
			seen++
			fig.End, fig.Max = v, max(fig.Max, v)
			switch q := smp.Seconds / total; {
			case q >= 0.25 && q < 0.5:
				q2 = append(q2, v)
			case q >= 0.75:
				q4 = append(q4, v)
			}
		}
		if seen == 0 {
			fig.Max = 0
			fig.Judged = false
			fig.Note = "never sampled"
			if f.judged {
				fail("%s was never sampled", f.name)
			}
			s.Figures = append(s.Figures, fig)
			continue
		}
		fig.Q2Mean, fig.Q4Mean = mean(q2), mean(q4)
		if f.judged {
			if len(q2) == 0 || len(q4) == 0 {
				fail("%s: no samples in the second or the last quarter to judge its growth", f.name)
			} else {
				abs := f.abs
				if f.plusMemtable {
					abs += memtable
				}
				fig.Limit = fig.Q2Mean*(1+soakRelTolerance) + abs
				fig.Growing = fig.Q4Mean > fig.Limit
				if fig.Growing {
					fail("%s grows: last quarter's mean %.0f over the second quarter's %.0f (limit %.0f)", f.name, fig.Q4Mean, fig.Q2Mean, fig.Limit)
				}
			}
		}
		s.Figures = append(s.Figures, fig)
	}
	if len(s.Samples) < minSoakSamples {
		fail("%d samples, fewer than %d", len(s.Samples), minSoakSamples)
	}
	if s.FiveXX > 0 {
		fail("%d answers were 5xx", s.FiveXX)
	}
	if s.Mismatches > 0 {
		fail("%d of %d checked answers differ from the model", s.Mismatches, s.Checked)
	}
	if s.Checked == 0 {
		fail("no answer was checked against the model")
	}
	if s.Requests == 0 || s.OK == 0 {
		fail("%d requests, %d answered 2xx/304", s.Requests, s.OK)
	}
	if want := max(o.RedisRestarts, 0); len(s.RedisRestarts) != want {
		fail("%d of %d Redis restarts done", len(s.RedisRestarts), want)
	}
	for _, rr := range s.RedisRestarts {
		if rr.Error != "" {
			fail("Redis restart at %.0fs: %s", rr.AtSeconds, rr.Error)
		}
	}
	if !serviceRunning {
		fail("the service exited")
	}
	s.Verdict = "PASS"
	if len(s.Reasons) > 0 {
		s.Verdict = "FAIL"
	}
}

func mean(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	var sum float64
	for _, x := range v {
		sum += x
	}
	return sum / float64(len(v))
}

// soakTargets are the soak's verdict lines for the report's targets.
func (s *SoakResult) soakTargets() []Verdict {
	var out []Verdict
	for _, f := range s.Figures {
		if !f.Judged {
			continue
		}
		out = append(out, Verdict{
			Target: f.Name + " does not grow (last quarter's mean ≤ second quarter's × 1.1 + tolerance)", Config: ConfigFull,
			Value:     fmt.Sprintf("%s → %s (start %s, end %s)", figureValue(f.Name, f.Q2Mean), figureValue(f.Name, f.Q4Mean), figureValue(f.Name, f.Start), figureValue(f.Name, f.End)),
			Threshold: "≤ " + figureValue(f.Name, f.Limit), Status: passMiss(!f.Growing),
		})
	}
	out = append(out, Verdict{
		Target: "zero mismatches and zero 5xx through Redis restarts and rollbacks", Config: ConfigFull, Threshold: "0 and 0",
		Value:  fmt.Sprintf("%d mismatches in %d checked answers, %d 5xx in %d requests", s.Mismatches, s.Checked, s.FiveXX, s.Requests),
		Status: passMiss(s.Mismatches == 0 && s.FiveXX == 0 && s.Checked > 0),
		Detail: fmt.Sprintf("%d blocks, %d rollbacks, %d Redis restarts", s.Blocks, s.Rollbacks, len(s.RedisRestarts)),
	})
	return out
}

// figureValue renders a figure's value (bytes in MiB).
func figureValue(name string, v float64) string {
	if strings.HasSuffix(name, "_bytes") {
		return fmt.Sprintf("%.1f MiB", v/(1<<20))
	}
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

// summary is the soak's one-paragraph account.
func (s *SoakResult) summary() string {
	return fmt.Sprintf("%s of the full configuration (pid %d), %d samples every %s; %d requests (%d ok, %d 5xx), "+
		"%d of %d checked answers differ from the model; %d blocks, %d rollbacks, %d Redis restarts.",
		s.Duration, s.PID, len(s.Samples), s.SampleEvery, s.Requests, s.OK, s.FiveXX, s.Mismatches, s.Checked,
		s.Blocks, s.Rollbacks, len(s.RedisRestarts))
}

// tables are the soak's figures and its Redis restarts.
func (s *SoakResult) tables() (figures, restarts *table) {
	figures = &table{head: []string{"figure", "start", "end", "max", "2nd quarter mean", "last quarter mean", "limit", "verdict"}}
	for _, f := range s.Figures {
		verdict, limit := "not judged: "+f.Note, "-"
		if f.Judged {
			verdict, limit = "steady", figureValue(f.Name, f.Limit)
			if f.Growing {
				verdict = "GROWS"
			}
		}
		figures.add(f.Name, figureValue(f.Name, f.Start), figureValue(f.Name, f.End), figureValue(f.Name, f.Max),
			figureValue(f.Name, f.Q2Mean), figureValue(f.Name, f.Q4Mean), limit, verdict)
	}
	restarts = &table{head: []string{"Redis restart at", "down", "error"}}
	for _, r := range s.RedisRestarts {
		restarts.add(fmt.Sprintf("%.1f s", r.AtSeconds), fmt.Sprintf("%.2f s", r.DownSeconds), r.Error)
	}
	return figures, restarts
}

// errorsLine lists the failed requests by class ("" for none).
func (s *SoakResult) errorsLine() string {
	if len(s.Errors) == 0 {
		return ""
	}
	var parts []string
	for _, k := range sortedKeys(s.Errors) {
		parts = append(parts, fmt.Sprintf("%s %d", k, s.Errors[k]))
	}
	return "Failed requests by class: " + strings.Join(parts, ", ") + "."
}

// markdown renders the soak section of report.md.
func (s *SoakResult) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Soak: %s\n\n%s\n\n", s.Verdict, s.summary())
	for _, r := range s.Reasons {
		fmt.Fprintf(&b, "- **%s**\n", r)
	}
	if len(s.Reasons) > 0 {
		b.WriteString("\n")
	}
	figures, restarts := s.tables()
	b.WriteString(figures.markdown())
	if len(s.RedisRestarts) > 0 {
		b.WriteString("\n" + restarts.markdown())
	}
	if l := s.errorsLine(); l != "" {
		b.WriteString("\n" + l + "\n")
	}
	b.WriteString("\n")
	return b.String()
}

// html renders the soak section of report.html: the tables and charts of
// the judged figures over time, Redis restarts marked.
func (s *SoakResult) html() string {
	var b strings.Builder
	b.WriteString("<h2>Soak: " + html.EscapeString(s.Verdict) + "</h2>\n<p>" + html.EscapeString(s.summary()) + "</p>\n")
	if len(s.Reasons) > 0 {
		b.WriteString("<ul class=\"notes\">")
		for _, r := range s.Reasons {
			b.WriteString("<li class=\"miss\">" + html.EscapeString(r) + "</li>")
		}
		b.WriteString("</ul>\n")
	}
	figures, restarts := s.tables()
	b.WriteString(figures.html())
	var marks []float64
	for _, r := range s.RedisRestarts {
		marks = append(marks, r.AtSeconds)
	}
	for _, c := range []struct {
		title, ylabel string
		names         []string
		scale         float64
	}{
		{"Service RSS (dashed: Redis restarts)", "MiB", []string{"rss_bytes", "pebble_memtable_bytes", "pebble_block_cache_bytes"}, 1 << 20},
		{"Goroutines, open files, Pebble tables", "count", []string{"goroutines", "open_fds", "pebble_sstables", "pebble_table_iterators"}, 1},
	} {
		var ss []series
		for _, name := range c.names {
			sr := series{name: name}
			for _, smp := range s.Samples {
				if v, ok := smp.Values[name]; ok {
					sr.xs, sr.ys = append(sr.xs, smp.Seconds), append(sr.ys, v/c.scale)
				}
			}
			ss = append(ss, sr)
		}
		b.WriteString(lineChart(c.title, c.ylabel, "seconds", ss, marks))
	}
	if len(s.RedisRestarts) > 0 {
		b.WriteString(restarts.html())
	}
	if l := s.errorsLine(); l != "" {
		b.WriteString("<p class=\"notes\">" + html.EscapeString(l) + "</p>\n")
	}
	return b.String()
}

package loadtest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// ReportVersion is the version of the JSON report's shape: a change that
// renames or removes a field bumps it.
const ReportVersion = 2

// Report is everything a run measured. It is written as report.json
// (machines), report.md (people) and report.html (charts).
type Report struct {
	Version    int            `json:"version"`
	Started    time.Time      `json:"started"`
	Seconds    float64        `json:"seconds"`
	Command    []string       `json:"command,omitempty"` // set by the caller, for the record
	ResultsDir string         `json:"results_dir"`
	Scenario   string         `json:"scenario"`
	Settings   Settings       `json:"settings"`
	Machine    Machine        `json:"machine"`
	Preload    PreloadResult  `json:"preload"`
	Fairness   Fairness       `json:"fairness"`
	Configs    []ConfigResult `json:"configs"`
	// Throughput is the replicas scenario's (the writer's apply throughput
	// with and without replicas); nil in the other scenarios.
	Throughput *ThroughputResult `json:"replica_throughput,omitempty"`
	// Fanout is the fanout scenario's (what followers cost the writer over
	// HTTP and over NATS JetStream).
	Fanout *FanoutResult `json:"fanout,omitempty"`
	// Events is the events scenario's (event streams: delivery, their
	// cost to the writer, idle memory); nil in the other scenarios.
	Events      *EventsResult `json:"events,omitempty"`
	Targets     []Verdict     `json:"targets"`
	Soak        *SoakResult   `json:"soak,omitempty"`  // the soak scenario's samples and verdict
	Scale       *ScaleResult  `json:"scale,omitempty"` // the scale scenario's generation, import and settling
	Failed      bool          `json:"failed"`
	FailReasons []string      `json:"fail_reasons,omitempty"`
	Error       string        `json:"error,omitempty"`
}

// Settings are the options that shaped the numbers.
type Settings struct {
	Profile        string  `json:"profile"`
	Seed           int64   `json:"seed"`
	UTXOs          int     `json:"utxos"`
	TxsPerBlock    int     `json:"txs_per_block"`
	Mix            string  `json:"mix"`
	Workers        int     `json:"workers"`
	InFlight       int     `json:"in_flight"`
	Rate           float64 `json:"rate,omitempty"`
	RateFraction   float64 `json:"rate_fraction"`
	Warmup         string  `json:"warmup"`
	MachineWarmup  string  `json:"machine_warmup"`
	MaxDuration    string  `json:"max_duration"`
	RateDuration   string  `json:"rate_duration"`
	MaxRequests    int64   `json:"max_requests,omitempty"`
	PageLimit      int     `json:"page_limit"`
	LookupBatch    int     `json:"lookup_batch"`
	MaxDepth       int     `json:"max_depth"`
	BlockRate      float64 `json:"block_rate"`
	RollbackEvery  int     `json:"rollback_every"`
	RollbackDepth  int     `json:"rollback_depth"`
	CheckFraction  float64 `json:"check_fraction"`
	RequestTimeout string  `json:"request_timeout"`
}

// Machine describes where the run happened. The load average matters: the
// harness and the service share the machine's cores with anything else
// running.
type Machine struct {
	CPUs         int    `json:"cpus"`
	GOOS         string `json:"goos"`
	GOARCH       string `json:"goarch"`
	GoVersion    string `json:"go_version"`
	Kernel       string `json:"kernel,omitempty"`
	LoadAvgStart string `json:"loadavg_start,omitempty"`
	LoadAvgEnd   string `json:"loadavg_end,omitempty"`
}

// PreloadResult describes the store the configurations ran on.
type PreloadResult struct {
	Blocks    int               `json:"blocks"`
	UTXOs     int               `json:"utxos"`
	Height    uint64            `json:"height"`
	Addresses int               `json:"addresses"`
	Exchanges map[string]uint64 `json:"exchange_utxos"`
	Seconds   float64           `json:"seconds"`
	Via       string            `json:"via"` // ingest or http
	// State is the preloaded store's figures (the model's): every
	// configuration's service must start from exactly these.
	State StoreState `json:"state"`
}

// StoreState is a store's figures as GET /v1/tip reports them (CONTRACT
// §5).
type StoreState struct {
	Height uint64 `json:"height"`
	Hash   string `json:"hash"`
	UTXOs  uint64 `json:"utxo_count"`
	Digest string `json:"utxo_digest"`
	// Seq is the state's commit sequence (X-Commit-Seq), when a service
	// reported it (the model's figures have none: the preload's seq is the
	// store's to count).
	Seq uint64 `json:"seq,omitempty"`
}

// sameFigures reports whether s and o are the same state by tip, count and
// digest (the figures a store and the model both have).
func (s StoreState) sameFigures(o StoreState) bool {
	s.Seq, o.Seq = 0, 0
	return s == o
}

func (s StoreState) String() string {
	return fmt.Sprintf("height %d, %d UTXOs, digest %.16s…", s.Height, s.UTXOs, s.Digest)
}

// Fairness is what a run did to make its configurations comparable, and
// which of its figures compare with which (Comparable, set by evaluate).
type Fairness struct {
	// StoreCopies: every service configuration ran on its own copy of the
	// preloaded store, made after the machine warm-up and removed after the
	// configuration (StoreBytes each).
	StoreCopies bool  `json:"store_copies"`
	StoreBytes  int64 `json:"store_bytes,omitempty"`
	// MachineWarmup is the unmeasured load before the first configuration.
	MachineWarmup *WarmupResult `json:"machine_warmup,omitempty"`
	// ConfigWarmup is each configuration's own unmeasured warmup.
	ConfigWarmup string `json:"config_warmup"`
	// ScriptBlocks and ScriptRollbacks are the feed script made before the
	// first configuration; every configuration's feed replays it from its
	// first step.
	ScriptBlocks    int       `json:"script_blocks"`
	ScriptRollbacks int       `json:"script_rollbacks"`
	Placement       Placement `json:"placement"`
	Comparable      []string  `json:"comparable"`
}

// WarmupResult is the machine warm-up: a service on the preloaded store
// under the standard mix, not measured.
type WarmupResult struct {
	Config   string  `json:"config"`
	Seconds  float64 `json:"seconds"`
	Requests int64   `json:"requests"`
	Error    string  `json:"error,omitempty"`
}

// ConfigResult is one configuration's phases.
type ConfigResult struct {
	Name string `json:"name"`
	Kind string `json:"kind"` // service, bare or external
	// Start is what the service reported before its first request: the
	// preloaded store's figures, for a managed run's every service.
	Start *StoreState `json:"start,omitempty"`
	Args  []string    `json:"args,omitempty"`
	// Processes are the processes the configuration started (all stopped
	// when it ended), with their logs.
	Processes []ProcessInfo  `json:"processes,omitempty"`
	BodySizes map[string]int `json:"body_sizes,omitempty"` // bare: bytes per route
	Max       PhaseResult    `json:"max"`
	Rate      PhaseResult    `json:"rate"`
	Hot       *PhaseResult   `json:"hot,omitempty"` // memory and bare only
	// RatesAs (bare only) are open-loop phases at each configuration's
	// offered rate, for its reads under the feed to be compared with.
	RatesAs      []BareRate `json:"rates_as,omitempty"`
	CeilingRatio float64    `json:"ceiling_ratio,omitempty"` // Max requests/s over the bare handler's
	// HotCeilingRatio is Hot requests/s over the bare handler's Hot.
	HotCeilingRatio float64 `json:"hot_ceiling_ratio,omitempty"`

	Error string `json:"error,omitempty"`
}

// BareRate is the bare handler's open-loop phase at the offered rate of
// configuration Config's rate phase.
type BareRate struct {
	Config string      `json:"config"`
	Phase  PhaseResult `json:"phase"`
}

// rateAs returns the bare handler's phase at config's rate, nil if none.
func (c *ConfigResult) rateAs(config string) *PhaseResult {
	for i := range c.RatesAs {
		if c.RatesAs[i].Config == config {
			return &c.RatesAs[i].Phase
		}
	}
	return nil
}

// PhaseResult is one phase's measurements.
type PhaseResult struct {
	Name         string                    `json:"name"`
	Mode         string                    `json:"mode"` // closed or open
	Workers      int                       `json:"workers"`
	Seconds      float64                   `json:"seconds"`
	OfferedRate  float64                   `json:"offered_rps,omitempty"`
	AchievedRate float64                   `json:"achieved_rps"`
	Sent         int64                     `json:"sent"`
	Requests     int64                     `json:"requests"` // answered or failed (not cut off by the phase's end)
	OK           int64                     `json:"ok"`       // 2xx and 304
	Latency      LatencySummary            `json:"latency"`
	SendLag      *LatencySummary           `json:"send_lag,omitempty"` // open loop: how late requests left
	Endpoints    map[string]EndpointResult `json:"endpoints"`
	Errors       map[string]int64          `json:"errors"`
	Timeline     []TimePoint               `json:"timeline"`
	Cache        *TierStats                `json:"cache,omitempty"`
	Profile      *ProfileResult            `json:"profile,omitempty"` // the service's CPU during the phase
	Service      *ProcStats                `json:"service,omitempty"`
	Harness      *ProcStats                `json:"harness,omitempty"`
	Feed         *FeedResult               `json:"feed,omitempty"`
	Checks       *CheckResult              `json:"checks,omitempty"`
}

// ProfileResult is a CPU profile of the service, with `go tool pprof -top`.
type ProfileResult struct {
	Path  string `json:"path"`
	Top   string `json:"top,omitempty"`
	Error string `json:"error,omitempty"`
}

// Verdict is one target's outcome.
type Verdict struct {
	Target    string `json:"target"`
	Config    string `json:"config,omitempty"`
	Value     string `json:"value"`
	Threshold string `json:"threshold"`
	Status    string `json:"status"` // PASS, MISS or SKIP
	Detail    string `json:"detail,omitempty"`
}

func newReport(o Options, dir string) *Report {
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return &Report{
		Version: ReportVersion, Started: time.Now().UTC(), Command: o.Command, ResultsDir: dir, Scenario: o.Scenario,
		Settings: Settings{
			Profile: o.Profile.String(), Seed: o.Seed, UTXOs: o.UTXOs, TxsPerBlock: o.TxsPerBlock, Mix: o.Mix.String(),
			Workers: o.Workers, InFlight: o.InFlight, Rate: o.Rate, RateFraction: o.RateFraction,
			Warmup: o.Warmup.String(), MachineWarmup: o.MachineWarmup.String(), MaxDuration: o.MaxDuration.String(), RateDuration: o.RateDuration.String(),
			MaxRequests: o.MaxRequests, PageLimit: o.PageLimit, LookupBatch: o.LookupBatch, MaxDepth: o.MaxDepth,
			BlockRate: o.BlockRate, RollbackEvery: o.RollbackEvery, RollbackDepth: o.RollbackDepth,
			CheckFraction: o.CheckFraction, RequestTimeout: o.RequestTimeout.String(),
		},
		Machine: Machine{
			CPUs: runtime.NumCPU(), GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, GoVersion: runtime.Version(),
			Kernel: strings.TrimSpace(string(kernel)), LoadAvgStart: loadAvg(),
		},
	}
}

// Thresholds of the targets (issue 5).
const (
	memoryCeilingShare = 0.85
	// configCeilingShare is every configuration's least share of the
	// bare ceiling on the standard mix (issue 25 §3).
	configCeilingShare = 0.5
	memoryRateP99Ms    = 5.0
	replicaLagP99Ms    = 100.0
	replicaApplyShare  = 0.9  // writer apply throughput with replicas over without
	feedRateShare      = 0.95 // of BlockRate, for the feed to count as sustained
	// feedReadP99Ratio bounds a configuration's read p99 under the feed
	// against the bare handler's at the same rate (issue 25 §3).
	feedReadP99Ratio = 3.0
)

// feedReadVerdict: under the writer feed, every configuration's read p99 at
// RateFraction of its max (measured under the feed too) is at most
// feedReadP99Ratio times the bare handler's at the same rate; the value
// names the worst.
func (r *Report) feedReadVerdict(o Options) Verdict {
	v := Verdict{Target: fmt.Sprintf("read p99 at %.0f%% of max under the feed ≤ %.0f × the bare handler's at the same rate", 100*o.RateFraction, feedReadP99Ratio),
		Threshold: fmt.Sprintf("≤ %.0f ×", feedReadP99Ratio)}
	bare := r.config(ConfigBare)
	if bare == nil || len(bare.RatesAs) == 0 {
		v.Status, v.Detail = "SKIP", "no bare phase at a configuration's rate in this run"
		return v
	}
	worst, worstAt := -1.0, ""
	var each []string
	for i := range r.Configs {
		c := &r.Configs[i]
		if c.Name == ConfigBare || c.Rate.Requests == 0 {
			continue
		}
		b := bare.rateAs(c.Name)
		if b == nil || b.Requests == 0 || b.Latency.P99 <= 0 {
			continue
		}
		ratio := c.Rate.Latency.P99 / b.Latency.P99
		each = append(each, fmt.Sprintf("%s %.2f (%.2f / %.2f ms at %.0f req/s)", c.Name, ratio, c.Rate.Latency.P99, b.Latency.P99, c.Rate.OfferedRate))
		if ratio > worst {
			worst, worstAt = ratio, c.Name
		}
	}
	if worstAt == "" {
		v.Status, v.Detail = "SKIP", "no configuration with a rate phase and a bare phase at its rate"
		return v
	}
	c := r.config(worstAt)
	v.Config = worstAt
	v.Value = fmt.Sprintf("%.2f × (worst: %s, p99 %.2f ms at %.0f/%.0f req/s; bare %.2f ms)",
		worst, worstAt, c.Rate.Latency.P99, c.Rate.AchievedRate, c.Rate.OfferedRate, bare.rateAs(worstAt).Latency.P99)
	v.Status = passMiss(worst <= feedReadP99Ratio)
	v.Detail = "p99 over the bare handler's at the same rate: " + strings.Join(each, ", ")
	return v
}

// memoryOverDiskVerdict: the memory tier serves at least as many requests/s
// as the disk tier alone on the standard mix (issue 10).
func (r *Report) memoryOverDiskVerdict() Verdict {
	v := Verdict{Target: "memory tier requests/s ≥ disk-only requests/s (standard mix)", Config: ConfigMemory, Threshold: "≥ 1.00 ×"}
	m, d := r.config(ConfigMemory), r.config(ConfigDisk)
	if m == nil || d == nil || m.Max.AchievedRate == 0 || d.Max.AchievedRate == 0 {
		v.Status, v.Detail = "SKIP", "memory and disk did not both run"
		return v
	}
	ratio := m.Max.AchievedRate / d.Max.AchievedRate
	v.Value = fmt.Sprintf("%.2f × (%.0f / %.0f req/s)", ratio, m.Max.AchievedRate, d.Max.AchievedRate)
	v.Status = passMiss(ratio >= 1)
	return v
}

func (r *Report) config(name string) *ConfigResult {
	for i := range r.Configs {
		if r.Configs[i].Name == name {
			return &r.Configs[i]
		}
	}
	return nil
}

// evaluate computes the ceiling ratios, the target verdicts and whether the
// run failed.
func (r *Report) evaluate(o Options) {
	if r.Soak != nil {
		r.evaluateSoak()
		return
	}
	ceiling, hotCeiling := r.ceilingRatios()
	if o.Scenario == ScenarioReplicas {
		// No configuration ran: the tiers' targets do not apply.
		r.Targets = r.replicationVerdicts(o)
	} else if o.Scenario == ScenarioEvents {
		r.Targets = r.eventsVerdicts()
	} else if o.Scenario == ScenarioFanout {
		r.Targets = r.fanoutVerdicts()
	} else {
		r.Targets = append(r.tierVerdicts(o, ceiling, hotCeiling), r.feedVerdicts(o)...)
	}
	if r.Scale != nil {
		r.Targets = append(r.Targets, r.Scale.verdicts(r)...)
	}
	reasons := r.failures(o)
	r.Failed, r.FailReasons = len(reasons) > 0, reasons
	r.Fairness.Comparable = r.comparability(o)
}

// ceilingRatios sets each configuration's share of the bare ceiling, on the
// standard mix and on the hot mix, and returns the two ceilings (0: no bare
// run, or none with a hot phase).
func (r *Report) ceilingRatios() (ceiling, hotCeiling float64) {
	bare := r.config(ConfigBare)
	if bare != nil {
		ceiling = bare.Max.AchievedRate
		if bare.Hot != nil {
			hotCeiling = bare.Hot.AchievedRate
		}
	}
	for i := range r.Configs {
		c := &r.Configs[i]
		if ceiling > 0 {
			c.CeilingRatio = c.Max.AchievedRate / ceiling
		}
		if c.Hot != nil && hotCeiling > 0 {
			c.HotCeilingRatio = c.Hot.AchievedRate / hotCeiling
		}
	}
	return ceiling, hotCeiling
}

// tierVerdicts are the cache tiers' targets: each tier's share of the bare
// ceiling, the memory tier's latency at its rate phase, reads under the
// writer feed, and the memory tier against the disk.
func (r *Report) tierVerdicts(o Options, ceiling, hotCeiling float64) []Verdict {
	var targets []Verdict
	bare := r.config(ConfigBare)
	share := func(name string, want float64) {
		v := Verdict{Target: fmt.Sprintf("%s requests/s ≥ %.2f × bare ceiling (standard mix, under the feed)", name, want), Config: name,
			Threshold: fmt.Sprintf("≥ %.2f", want)}
		c := r.config(name)
		switch {
		case c == nil || c.Max.AchievedRate == 0:
			v.Status, v.Detail = "SKIP", "configuration not run"
		case ceiling == 0:
			v.Status, v.Detail = "SKIP", "no bare ceiling in this run"
		default:
			v.Value = fmt.Sprintf("%.2f (%.0f / %.0f req/s)", c.CeilingRatio, c.Max.AchievedRate, ceiling)
			v.Status = passMiss(c.CeilingRatio >= want)
		}
		targets = append(targets, v)
	}
	{
		v := Verdict{Target: fmt.Sprintf("memory tier hot reads ≥ %.2f × bare ceiling (hot mix)", memoryCeilingShare),
			Config: ConfigMemory, Threshold: fmt.Sprintf("≥ %.2f", memoryCeilingShare)}
		c := r.config(ConfigMemory)
		switch {
		case c == nil || c.Hot == nil || c.Hot.AchievedRate == 0:
			v.Status, v.Detail = "SKIP", "no hot phase of the memory tier in this run"
		case hotCeiling == 0:
			v.Status, v.Detail = "SKIP", "no bare ceiling with a hot phase in this run"
		default:
			v.Value = fmt.Sprintf("%.2f (%.0f / %.0f req/s)", c.HotCeilingRatio, c.Hot.AchievedRate, hotCeiling)
			v.Status = passMiss(c.HotCeilingRatio >= memoryCeilingShare)
			v.Detail = fmt.Sprintf("hit ratio %s; standard mix: %.2f × ceiling", hitRatios(c.Hot.Cache), c.CeilingRatio)
		}
		targets = append(targets, v)
	}
	{
		v := Verdict{Target: fmt.Sprintf("memory tier p99 < %.0f ms at %.0f%% of its max rate", memoryRateP99Ms, 100*o.RateFraction),
			Config: ConfigMemory, Threshold: fmt.Sprintf("< %.0f ms", memoryRateP99Ms)}
		if c := r.config(ConfigMemory); c == nil || c.Rate.Requests == 0 {
			v.Status, v.Detail = "SKIP", "configuration not run"
		} else {
			v.Value = fmt.Sprintf("%.2f ms at %.0f req/s", c.Rate.Latency.P99, c.Rate.OfferedRate)
			v.Status = passMiss(c.Rate.Latency.P99 < memoryRateP99Ms)
			if bare != nil && bare.Rate.Requests > 0 {
				// What the machine manages with no service work at all: a
				// stalling machine shows here first.
				v.Detail = fmt.Sprintf("the bare handler at half its max: p99 %.2f ms", bare.Rate.Latency.P99)
			}
		}
		targets = append(targets, v)
	}
	for _, c := range r.Configs {
		if c.Name != ConfigBare && c.Kind != "external" {
			share(c.Name, configCeilingShare)
		}
	}
	targets = append(targets, r.feedReadVerdict(o), r.memoryOverDiskVerdict())

	return targets
}

// feedVerdicts are the targets that depend on the writer feed, over every
// configuration with a writer: commit-to-visible latency, the replicas',
// and zero mismatches and 5xx.
func (r *Report) feedVerdicts(o Options) []Verdict {
	var targets []Verdict
	var worstVisible float64
	worstAt := ""
	var mismatches, fiveXX, checked, feedErrs, notVisible, visible, firstPoll int64
	minFeed := -1.0
	fed := false
	for i := range r.Configs {
		c := &r.Configs[i]
		for _, p := range c.phases() {
			if c.Kind != "bare" {
				fiveXX += count5xx(p.Errors)
			}
			if p.Checks != nil {
				mismatches += p.Checks.Mismatches
				checked += p.Checks.Checked
			}
			if f := p.Feed; f != nil {
				fed = true
				feedErrs += int64(len(f.Errors))
				notVisible += f.NotVisible
				if minFeed < 0 || f.AchievedRate < minFeed {
					minFeed = f.AchievedRate
				}
				for t, v := range f.Visible {
					visible += v.Count
					firstPoll += f.FirstPoll[t]
					if v.P99 > worstVisible || worstAt == "" {
						worstVisible, worstAt = v.P99, c.Name+" "+t
					}
				}
			}
		}
	}
	{
		v := Verdict{Target: "every block visible to the first read sent after its acknowledgement", Threshold: "all"}
		switch {
		case !fed:
			v.Status, v.Detail = "SKIP", "no writer feed in this run"
		case worstAt == "":
			v.Status, v.Detail = "SKIP", "no configuration read from its writer (a replica's delay is its replication lag)"
		default:
			v.Value = fmt.Sprintf("%d of %d blocks", firstPoll, visible)
			v.Status = passMiss(firstPoll == visible && visible > 0 && notVisible == 0)
			// The latency of that read is read latency under load, not a
			// target of its own.
			v.Detail = fmt.Sprintf("each by the first GET /v1/tip sent after the acknowledgement; that read's p99 %.2f ms (worst: %s)",
				worstVisible, worstAt)
			if notVisible > 0 {
				v.Detail += fmt.Sprintf("; %d blocks not visible within %s", notVisible, visibleTimeout)
			}
		}
		targets = append(targets, v)
	}
	targets = append(targets, r.replicationVerdicts(o)...)
	{
		v := Verdict{Target: fmt.Sprintf("zero mismatches and zero 5xx under a %.0f blocks/s feed", o.BlockRate), Threshold: "0 and 0"}
		v.Value = fmt.Sprintf("%d mismatches in %d checked answers, %d 5xx", mismatches, checked, fiveXX)
		switch {
		case !fed:
			v.Status, v.Detail = "SKIP", "no writer feed in this run"
		default:
			ok := mismatches == 0 && fiveXX == 0 && feedErrs == 0 && minFeed >= feedRateShare*o.BlockRate
			v.Status = passMiss(ok)
			v.Detail = fmt.Sprintf("feed sustained ≥ %.1f blocks/s (target %.0f), %d feed errors", minFeed, o.BlockRate, feedErrs)
		}
		targets = append(targets, v)
	}

	return targets
}

// failures are the reasons the run failed (none: it passed): a run error,
// per configuration its mismatches, 5xx, replication observer and feed
// errors, and with --strict every missed target.
func (r *Report) failures(o Options) (reasons []string) {
	fail := func(format string, args ...any) {
		reasons = append(reasons, fmt.Sprintf(format, args...))
	}
	if r.Error != "" {
		fail("run error: %s", strings.ReplaceAll(r.Error, "\n", "; "))
	}
	// Per configuration, so that the headline says which one failed and why.
	for i := range r.Configs {
		c := &r.Configs[i]
		var mism, fiveXX int64
		var example string
		var feedErrs []string
		for _, p := range c.phases() {
			if c.Kind != "bare" {
				fiveXX += count5xx(p.Errors)
			}
			if p.Checks != nil {
				mism += p.Checks.Mismatches
				if example == "" && len(p.Checks.Examples) > 0 {
					example = p.Checks.Examples[0]
				}
			}
			if p.Feed != nil {
				feedErrs = append(feedErrs, p.Feed.Errors...)
			}
		}
		if mism > 0 {
			if example != "" {
				example = " (first: " + example + ")"
			}
			fail("configuration %s: %d answers differ from the model%s", c.Name, mism, example)
		}
		if fiveXX > 0 {
			fail("configuration %s: %d answers were 5xx", c.Name, fiveXX)
		}
		if rr := c.Rate.Feed.replication(); rr != nil && len(rr.Errors) > 0 {
			fail("configuration %s: the replication lag observer: %s", c.Name, rr.Errors[0])
		}
		// A feed that failed outright is the configuration's error, in the
		// run error already.
		if len(feedErrs) > 0 && !strings.Contains(r.Error, feedErrs[0]) {
			more := ""
			if len(feedErrs) > 1 {
				more = fmt.Sprintf(" (and %d more)", len(feedErrs)-1)
			}
			fail("configuration %s: the writer feed: %s%s", c.Name, feedErrs[0], more)
		}
	}
	if o.Strict {
		for _, v := range r.Targets {
			if v.Status == "MISS" {
				fail("target missed: %s", v.Target)
			}
		}
	}
	return reasons
}

func (r *Report) evaluateSoak() {
	r.Targets = r.Soak.soakTargets()
	r.Failed, r.FailReasons = false, nil
	if r.Error != "" {
		r.Failed = true
		r.FailReasons = append(r.FailReasons, "run error: "+strings.ReplaceAll(r.Error, "\n", "; "))
	}
	if r.Soak.Verdict != "PASS" {
		r.Failed = true
		r.FailReasons = append(r.FailReasons, r.Soak.Reasons...)
		if len(r.Soak.Reasons) == 0 {
			r.FailReasons = append(r.FailReasons, "the soak did not finish")
		}
	}
	r.Fairness.Comparable = []string{"A soak compares the service with itself over time (its second quarter with its last): " +
		"its figures do not compare with another scenario's, and its throughput is the offered rate, not a maximum."}
}

// replication returns the feed's replication lag figures, nil for none.
func (f *FeedResult) replication() *ReplicationResult {
	if f == nil {
		return nil
	}
	return f.Replication
}

// replicationVerdicts are the replica targets of issue 9: the replica
// configuration's lag and the replicas scenario's throughput ratio.
func (r *Report) replicationVerdicts(o Options) []Verdict {
	var out []Verdict
	if c := r.config(ConfigReplica); c != nil || slices.Contains(o.Configs, ConfigReplica) {
		v := Verdict{Target: fmt.Sprintf("replication lag p99 < %.0f ms (writer acknowledgement to the replica at its seq)", replicaLagP99Ms),
			Config: ConfigReplica, Threshold: fmt.Sprintf("< %.0f ms", replicaLagP99Ms)}
		rr := (*FeedResult)(nil).replication()
		if c != nil {
			rr = c.Rate.Feed.replication()
		}
		switch {
		case rr == nil || rr.Lag.Count == 0:
			v.Status, v.Detail = "SKIP", "no replication lag measured (the configuration did not run its feed)"
		default:
			v.Value = fmt.Sprintf("%.2f ms (p50 %.2f, max %.2f ms)", rr.Lag.P99, rr.Lag.P50, rr.Lag.Max)
			v.Status = passMiss(rr.Lag.P99 < replicaLagP99Ms && rr.NotReached == 0 && rr.Unobserved == 0 && len(rr.Errors) == 0)
			v.Detail = fmt.Sprintf("%d of %d acknowledged writes observed", rr.Lag.Count, rr.Writes)
			if rr.NotReached > 0 || rr.Unobserved > 0 {
				v.Detail += fmt.Sprintf("; %d not reached within %s or by the phase's end, %d not observed", rr.NotReached, lagTimeout, rr.Unobserved)
			}
		}
		out = append(out, v)
	}
	if tr := r.Throughput; tr != nil {
		v := Verdict{Target: fmt.Sprintf("writer apply throughput with %d replicas ≥ %.1f× with none (same run)", tr.Replicas, replicaApplyShare),
			Threshold: fmt.Sprintf("≥ %.2f", replicaApplyShare)}
		if tr.Without == 0 || tr.With == 0 {
			v.Status, v.Detail = "SKIP", "a leg without or with replicas did not finish"
		} else {
			v.Value = fmt.Sprintf("%.2f (%.1f / %.1f blocks/s)", tr.Ratio, tr.With, tr.Without)
			v.Status = passMiss(tr.Ratio >= replicaApplyShare)
			v.Detail = fmt.Sprintf("%d legs of %d blocks and %d rollbacks each", len(tr.Legs), tr.Blocks, tr.Rollbacks)
		}
		out = append(out, v)
	}
	return out
}

// comparability says which of the run's figures compare with which, from
// what the run did to make them comparable (Fairness) and what it measured.
func (r *Report) comparability(o Options) []string {
	f := &r.Fairness
	var n []string
	services := 0
	for _, c := range r.Configs {
		if c.Kind == "service" {
			services++
		}
	}
	switch {
	case f.StoreCopies:
		n = append(n, fmt.Sprintf("Every service configuration ran on its own copy of the preloaded store (%s; each service reported exactly that "+
			"before its first request) and its feed replayed the same script from there (%d blocks, %d rollbacks made before the first "+
			"configuration): within this run, the configurations' figures compare with each other.",
			r.Preload.State, f.ScriptBlocks, f.ScriptRollbacks))
	case len(r.Configs) > 0 && r.Configs[0].Kind == "external":
		n = append(n, "An external run: one configuration, the services' placement and warm-up are not the harness's; "+
			"its figures compare only with another external run against the same services.")
	}
	if services > 0 {
		if w := f.MachineWarmup; w != nil && w.Requests > 0 {
			n = append(n, fmt.Sprintf("Warm-ups, not measured: %.1f s of the standard mix against a %s service on the preloaded store "+
				"before the first configuration (%d requests), then %s per configuration: the first configuration does not start on a "+
				"colder machine than the others.", w.Seconds, w.Config, w.Requests, f.ConfigWarmup))
		} else if len(r.Configs) > 0 && r.Configs[0].Kind == "service" {
			n = append(n, fmt.Sprintf("No machine warm-up before the first configuration (only %s per configuration): the first "+
				"configuration, %s, ran on a colder machine than the others; discount its figures.", f.ConfigWarmup, r.Configs[0].Name))
		}
	}
	pl := f.Placement
	switch {
	case pl.Pinned:
		line := fmt.Sprintf("CPU placement (%s): the service and the bare handler on CPU %s, the harness (load generator, checker, feed) "+
			"and redis-server on CPU %s: × ceiling compares each configuration with the bare handler in the same place.",
			pl.Via, pl.ServiceCPUs, pl.LoadCPUs)
		var off []string
		for _, c := range r.Configs {
			if s := c.Max.Service; s != nil && s.CPUs != "" && s.CPUs != pl.ServiceCPUs {
				off = append(off, fmt.Sprintf("%s on CPUs %s", c.Name, s.CPUs))
			}
		}
		if len(off) > 0 {
			line += " But some services ran elsewhere: " + strings.Join(off, ", ") + "."
		}
		n = append(n, line)
		svcCPUs, err1 := parseCPUList(pl.ServiceCPUs)
		loadCPUs, err2 := parseCPUList(pl.LoadCPUs)
		if err1 != nil || err2 != nil {
			break
		}
		if b := r.config(ConfigBare); b != nil && b.Max.Harness != nil && b.Max.Harness.CPUCores >= 0.9*float64(len(loadCPUs)) {
			n = append(n, fmt.Sprintf("The harness used %.2f of its %d CPU(s) during the bare handler's max phase: the ceiling was "+
				"bounded by the load generator, so × ceiling overstates each configuration's share of what the machine can serve.",
				b.Max.Harness.CPUCores, len(loadCPUs)))
		}
		// A closed loop keeps the service or the harness busy: when
		// neither used its CPUs, something else did.
		var starved []string
		for _, c := range r.Configs {
			s, h := c.Max.Service, c.Max.Harness
			if s != nil && h != nil && s.CPUCores < 0.8*float64(len(svcCPUs)) && h.CPUCores < 0.8*float64(len(loadCPUs)) {
				starved = append(starved, fmt.Sprintf("%s %.2f/%.2f", c.Name, s.CPUCores, h.CPUCores))
			}
		}
		if len(starved) > 0 {
			n = append(n, fmt.Sprintf("In the max phase neither the service nor the harness used its CPUs fully (cores used, service/harness: %s): "+
				"other work on the machine took the rest, so the configurations compare only as far as that share held steady.",
				strings.Join(starved, ", ")))
		}
	case services > 0:
		n = append(n, fmt.Sprintf("Not pinned (%s): the service, the harness and redis-server shared CPUs %s as the scheduler chose, "+
			"which can differ from one configuration to the next.", pl.Note, pl.Allowed))
	}
	n = append(n, fmt.Sprintf("p99 @rate compares configurations at the same share (%.0f%%) of their own max, not at the same request rate; "+
		"block-apply and commit-to-visible figures compare across configurations (the same blocks at %.0f blocks/s).",
		100*o.RateFraction, o.BlockRate))
	if r.config(ConfigMemory) != nil && r.config(ConfigMemory).Hot != nil {
		n = append(n, "Hot req/s compares the memory tier with the bare handler only: no other configuration runs the hot phase.")
	}
	n = append(n, "Across runs, figures compare only under the same scenario, settings, CPU placement and machine load: a pinned "+
		"service gets GOMAXPROCS from its own CPUs (1 of 2 on a 2-CPU machine), and in runs whose report has no fairness "+
		"section each configuration started where the previous one's feed had left the store, after a cold start for the first.")
	if w := r.busyWarning(); w != "" {
		n = append(n, "Machine: "+w+".")
	}
	return n
}

func passMiss(ok bool) string {
	if ok {
		return "PASS"
	}
	return "MISS"
}

// Headline is the table the command prints: requests/s and p99 per
// configuration, the ratio to the bare ceiling, then the targets.
func (r *Report) Headline() string {
	var b strings.Builder
	if r.Soak != nil {
		// A soak has no maximum to compare: its account, then its targets.
		fmt.Fprintf(&b, "soak %s: %s\n\n", r.Soak.Verdict, r.Soak.summary())
		r.writeTargets(&b)
		return b.String()
	}
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	if len(r.Configs) > 0 {
		fmt.Fprintln(tw, "config\tmax req/s\t× ceiling\tp99 @max\trate req/s\tp99 @rate\thot req/s (×)\thit ratio\tsvc CPU\tsvc RSS\t5xx\tmismatch\t")
		for _, c := range r.Configs {
			ratio := "-"
			if c.CeilingRatio > 0 {
				ratio = fmt.Sprintf("%.2f", c.CeilingRatio)
			}
			cpu, rss := "-", "-"
			if s := c.Max.Service; s != nil {
				cpu = fmt.Sprintf("%.2f", s.CPUCores)
				rss = fmt.Sprintf("%d MiB", max(s.RSSPeak, maxRSS(c.Rate.Service))>>20)
			}
			var mism int64
			if c.Rate.Checks != nil {
				mism += c.Rate.Checks.Mismatches
			}
			if c.Max.Checks != nil {
				mism += c.Max.Checks.Mismatches
			}
			fmt.Fprintf(tw, "%s\t%.0f\t%s\t%.2f ms\t%.0f/%.0f\t%.2f ms\t%s\t%s\t%s\t%s\t%d\t%d\t\n",
				c.Name, c.Max.AchievedRate, ratio, c.Max.Latency.P99, c.Rate.AchievedRate, c.Rate.OfferedRate,
				c.Rate.Latency.P99, c.hotCell(), hitRatios(c.Max.Cache), cpu, rss, count5xx(c.Max.Errors)+count5xx(c.Rate.Errors), mism)
		}
	}
	tw.Flush()
	if tr := r.Throughput; tr != nil {
		b.WriteString("\n")
		tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "leg\treplicas\tblocks\tapplying\tapply blocks/s\tposting\tposted blocks/s\tPOST p99\tcatch-up\t")
		for i, l := range tr.Legs {
			fmt.Fprintf(tw, "%d\t%d\t%d\t%.2f s\t%.1f\t%.2f s\t%.1f\t%.2f ms\t%.2f s\t\n", i+1, l.Replicas, l.Blocks,
				l.WriterApplySeconds, l.ApplyBlocksPerSec, l.Seconds, l.BlocksPerSec, l.Apply.P99, l.CatchUpSeconds)
		}
		tw.Flush()
	}
	if er := r.Events; er != nil {
		b.WriteString("\n")
		tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "leg\tstreams\tblocks\tPOST p50\tPOST p99\tevents\tdelivery p50\tdelivery p99\tidle stream heap\tfit R²\tidle stream RSS\t")
		for i, l := range er.Legs {
			fmt.Fprintf(tw, "%d\t%d\t%d\t%.2f ms\t%.2f ms\t%d\t%.2f ms\t%.2f ms\t%.1f KiB\t%.4f\t%.1f KiB\t\n", i+1, l.Streams, l.Blocks,
				l.Apply.P50, l.Apply.P99, l.Events, l.Delivery.P50, l.Delivery.P99, l.HeapPerStream/1024, l.HeapFitR2, l.RSSPerStream/1024)
		}
		tw.Flush()
		fmt.Fprintf(&b, "events: read after the acknowledgement p50 %.2f p99 %.2f max %.2f ms; after the POST's send p50 %.2f p99 %.2f ms\n",
			er.ReceivedAfterAck.P50, er.ReceivedAfterAck.P99, er.ReceivedAfterAck.Max, er.ReceivedAfterSend.P50, er.ReceivedAfterSend.P99)
	}
	for _, c := range r.Configs {
		if rr := c.Rate.Feed.replication(); rr != nil {
			fmt.Fprintf(&b, "\n%s: replication lag p50 %.2f p99 %.2f max %.2f ms over %d writes\n", c.Name, rr.Lag.P50, rr.Lag.P99, rr.Lag.Max, rr.Lag.Count)
		}
	}
	b.WriteString("\n")
	r.writeTargets(&b)
	return b.String()
}

// writeTargets writes the targets' lines, the busy-machine warning and the
// failure reasons of the headline.
func (r *Report) writeTargets(b *strings.Builder) {
	for _, v := range r.Targets {
		fmt.Fprintf(b, "%-4s  %s: %s", v.Status, v.Target, v.Value)
		if v.Detail != "" {
			fmt.Fprintf(b, " (%s)", v.Detail)
		}
		b.WriteString("\n")
	}
	if w := r.busyWarning(); w != "" {
		fmt.Fprintf(b, "WARNING: %s\n", w)
	}
	if r.Failed {
		fmt.Fprintf(b, "FAILED: %s\n", strings.Join(r.FailReasons, "; "))
	}
}

// busyWarning says when the machine was busy with other work as the run
// started (the load at the end is mostly the run's own): the harness and the
// service then compete for the cores with it, and absolute figures say
// little.
func (r *Report) busyWarning() string {
	f := strings.Fields(r.Machine.LoadAvgStart)
	if len(f) == 0 {
		return ""
	}
	var one float64
	if _, err := fmt.Sscan(f[0], &one); err != nil || one <= float64(r.Machine.CPUs)/2 {
		return ""
	}
	return fmt.Sprintf("load average %s on %d CPUs when the run started: other work competed with it; compare configurations within this run only",
		r.Machine.LoadAvgStart, r.Machine.CPUs)
}

func maxRSS(s *ProcStats) int64 {
	if s == nil {
		return 0
	}
	return s.RSSPeak
}

// hitRatios renders a phase's hit ratio per tier ("memory 0.97 redis 0.50").
func hitRatios(ts *TierStats) string {
	if ts == nil {
		return "-"
	}
	var parts []string
	for _, name := range sortedKeys(ts.Tiers) {
		t := ts.Tiers[name]
		if t.Hits+t.Misses > 0 {
			parts = append(parts, fmt.Sprintf("%s %.2f", name, t.HitRatio))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}

// write writes report.json, report.md and report.html into dir.
func (r *Report) write(dir string) error {
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "report.json"), append(js, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "report.md"), []byte(r.Markdown()), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "report.html"), []byte(r.HTML()), 0o644)
}

package loadtest

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/utxo-cache/utxo-cache/internal/workload"
	"github.com/utxo-cache/utxo-cache/loadtest/pgref"
)

// Configurations the harness can start, in the order of a full run. Each is
// `utxo-cache serve` with one tier layout, except bare (the ceiling).
const (
	ConfigMemory = "memory" // --memory-cache-bytes 256MiB, no Redis
	ConfigRedis  = "redis"  // --memory-cache-bytes 0 --redis-url …
	ConfigDisk   = "disk"   // --memory-cache-bytes 0, no Redis
	ConfigFull   = "full"   // --memory-cache-bytes 256MiB --redis-url …
	// ConfigReplica is a writer (the memory layout, --replication-token)
	// and one replica of it (--replica-of, the memory layout) bootstrapped
	// from its checkpoint: the feed posts to the writer, the reads go to
	// the replica, and the feed measures the replication lag of every
	// acknowledged write (lagObserver).
	ConfigReplica = "replica"
	ConfigBare    = "bare" // bare.NewHandler in a subprocess
)

// AllConfigs is the default: every tier alone, the full stack, a read
// replica, the ceiling.
var AllConfigs = []string{ConfigMemory, ConfigRedis, ConfigDisk, ConfigFull, ConfigReplica, ConfigBare}

// Scenarios.
const (
	ScenarioStandard = "standard" // 200k UTXOs, every configuration, about 3.5 minutes
	ScenarioBig      = "big"      // 1.2M UTXOs, exchanges with 100k+ each: the disk-tier target
	ScenarioSmoke    = "smoke"    // a tiny store, two configurations, a few seconds
	ScenarioSoak     = "soak"     // the full configuration for Duration (1h), Redis restarts, resource samples (soak.go)
	// ScenarioReplicas runs no configuration: it measures the writer's
	// apply throughput with none and with Replicas replicas tailing its
	// change log (replicas.go), on the standard store.
	ScenarioReplicas = "replicas"
	// ScenarioFanout runs no configuration: it measures what followers
	// cost the writer over HTTP and over NATS JetStream (fanout.go).
	ScenarioFanout = "fanout"
	// ScenarioEvents runs no configuration: one writer fed at BlockRate,
	// in legs without and with EventStreams event streams of EventKeys
	// addresses each (events.go), on the standard store: the streams'
	// delivery latency, their cost to the writer's apply, and the memory
	// of an idle stream.
	ScenarioEvents = "events"
	// ScenarioScale measures a store of mainnet size (scale.go): it streams
	// the chain to a file in bounded memory, imports it with `utxo-cache
	// ingest`, measures the import, then runs the read configurations on
	// the result. It keeps no model of the chain (it would not fit): no
	// feed, no correctness sample. Not for CI: 12M UTXOs by default.
	ScenarioScale = "scale"
)

// scaleTailBlocks is the scale scenario's ordinary blocks after its seed
// blocks: more than the default prune depth and rollback window together
// (2160 + 4320 blocks), the depth below which the store prunes a spent
// record (a record is shown for PruneDepth blocks and the tip may go back
// by RollbackWindow).
const scaleTailBlocks = 6600

// ScaleConfigs are the scale scenario's default configurations: every tier
// layout on the imported store.
var ScaleConfigs = []string{ConfigDisk, ConfigMemory, ConfigRedis, ConfigFull}

// Options configure a run. The zero value of a field means the default of
// the Scenario (see EnsureDefaults); durations are wall time per phase.
type Options struct {
	// Scenario picks the defaults: standard (default), big, smoke, soak or
	// replicas.
	Scenario string
	// Profile is the chain's shape. Default workload.Bitcoin.
	Profile workload.Profile
	// Seed makes the chain and the request stream reproducible.
	Seed int64
	// UTXOs is the live set the preload builds. Scenario default: 200k
	// (standard), 1.2M (big), 5k (smoke).
	UTXOs int
	// TxsPerBlock is the size of the preload's ordinary blocks and of the
	// feed's blocks. Default 300 (50 for smoke).
	TxsPerBlock int

	// Configs are the configurations a managed run starts, in order (bare
	// always runs last: it serves bodies captured from the first service).
	Configs []string

	// Warmup is each configuration's unmeasured warmup (it fills the
	// caches); MaxDuration and RateDuration are its measured phases'.
	Warmup, MaxDuration, RateDuration time.Duration
	// MachineWarmup is an unmeasured closed loop against a service on the
	// preloaded store before the first configuration, so that the first is
	// not the one that meets a cold machine (CPU frequency, page cache, the
	// harness's heap). Scenario default: 5s (standard), 10s (big), 500ms
	// (smoke); negative: none. Managed runs only.
	MachineWarmup time.Duration
	// HotDuration is the hot phase's (HotMix, closed loop, after a warmup
	// of two fifths of it), run for the memory and bare configurations: the
	// memory tier's target compares hot reads. Default 5/8 of MaxDuration;
	// negative: no hot phase.
	HotDuration time.Duration
	// MaxRequests bounds each phase's requests as well as its duration
	// (whichever comes first). 0: no bound.
	MaxRequests int64
	// Workers is the closed loop's concurrency. Default 16.
	Workers int
	// Rate is the open loop's offered rate in requests/s. 0: RateFraction of
	// the configuration's max-phase requests/s.
	Rate float64
	// RateFraction: default 0.5.
	RateFraction float64
	// InFlight bounds the open loop's requests in flight. Default 128 (soak
	// 32).
	InFlight int
	// Mix of request kinds. Default DefaultMix.
	Mix Mix
	// PageLimit (default 100), LookupBatch (default 20) and MaxDepth (pages
	// of a deep walk, default 50) shape the requests.
	PageLimit, LookupBatch, MaxDepth int
	// RequestTimeout bounds one request. Default 5s.
	RequestTimeout time.Duration

	// BlockRate is the writer feed's blocks/s during the rate phase (the
	// soak). Default 10 (soak 2); negative: no feed.
	BlockRate float64
	// RollbackEvery is how many blocks go between rollbacks of RollbackDepth
	// blocks. Defaults 50 and 3; RollbackEvery < 0: no rollbacks.
	RollbackEvery, RollbackDepth int

	// Replicas is how many replicas tail the writer in the replicas
	// scenario's legs with replicas. Default 3.
	Replicas int
	// ApplyBlocks is the blocks of the feed script (and the rollbacks
	// among them) that each leg of the replicas scenario posts back to
	// back. Default 300.
	ApplyBlocks int
	// ApplyRounds is the replicas scenario's rounds of two legs, without
	// and with replicas, in ABBA order (none, with; with, none; …), so that
	// a machine that drifts during the run weighs on both alike; the events
	// scenario's likewise, and the fanout scenario's rounds of a leg with no
	// follower and one with each count, every other round backwards.
	// Default 2.
	ApplyRounds int
	// ApplyTimeout bounds one leg of the replicas scenario: its posts and
	// its replicas' catching up. Default 2m.
	ApplyTimeout time.Duration

	// FanoutFollowers are the follower counts of the fanout scenario's
	// legs (each transport also runs a leg with none). Default 10, 50, 100.
	FanoutFollowers []int
	// FanoutTransports are the transports of the fanout scenario's legs
	// (FanoutHTTP, FanoutJetStream). Default both.
	FanoutTransports []string
	// FanoutRate is the fanout scenario's steps (blocks and rollbacks) a
	// second. Default 10.
	FanoutRate float64
	// NATSServer is the nats-server binary of the fanout scenario.
	// Default: nats-server on PATH, or /usr/sbin/nats-server.
	NATSServer string
	// EventStreams is how many event streams the events scenario opens
	// (its legs with streams), EventKeys the addresses of each. Defaults
	// 1000 and 10.
	EventStreams, EventKeys int

	// CheckFraction of the answers is checked against the model. Default
	// 0.01; negative: none.
	CheckFraction float64
	// CheckBudget is the share of one core the checker may use. Default 0.25.
	CheckBudget float64

	// Duration is the soak's length (soak.go). Default 1h.
	Duration time.Duration
	// SampleEvery is the soak's sampling period of the service's figures.
	// Default Duration/60, between 250ms and 1m.
	SampleEvery time.Duration
	// RedisRestarts is how many times the soak kills and restarts its
	// redis-server, evenly spaced. Default 5; negative: none.
	RedisRestarts int

	// Targets switch to an external run: base URLs of running services
	// (reads go round-robin), whose writer (Writer, default Targets[0]) must
	// hold an empty store, which the harness preloads over HTTP.
	Targets []string
	Writer  string
	// AdminToken authorizes the feed's writes (managed runs make one up).
	AdminToken string
	// AllowRemote permits targets that are not loopback addresses.
	AllowRemote bool

	// Bin is the utxo-cache binary a managed run starts. Required for
	// managed runs.
	Bin string
	// BareBin is the utxo-loadtest binary the bare configuration starts
	// with --bare-serve, so that the ceiling runs in a process of its own,
	// like the service. Required for managed runs that include bare.
	BareBin string
	// RedisServer is the redis-server binary. Default: found on PATH.
	RedisServer string
	// ResultsDir receives the reports, logs and profiles. Default
	// ./results/<start time>.
	ResultsDir string
	// ReferenceDSN is the PostgreSQL database the scale scenario loads its
	// reference into (a schema of its own, dropped at the end). Default
	// pgref.DefaultDSN.
	ReferenceDSN string
	// ReferenceRounds is how many times the scale scenario runs each read
	// against the imported store and then the reference (0: 3; -1: no
	// reference comparison); ReferenceDuration is each such phase's
	// length (default 5s).
	ReferenceRounds   int
	ReferenceDuration time.Duration
	// ImportFlags are more flags for the scale scenario's `utxo-cache
	// ingest` (split on spaces), such as "--block-cache-bytes 1GiB
	// --replication-retention 1"; the report records them.
	ImportFlags string
	// KeepData keeps the preloaded store (ResultsDir/data) after the run;
	// the configurations' copies of it are removed whatever KeepData says.
	KeepData bool
	// NoPin leaves process placement to the scheduler. By default a managed
	// run on two or more CPUs pins the service to CPUs of its own and the
	// harness and redis-server to the others (see cpuPlan).
	NoPin bool
	// CPUProfile records the service's CPU profile during each max, rate and hot
	// phase (pprof on serve's --admin-listen) and summarizes it with `go
	// tool pprof` when go is on PATH.
	CPUProfile bool
	// Strict makes a missed performance target fail the run, like a
	// correctness failure always does.
	Strict bool

	// Command is the command line that started the run, for the report.
	Command []string
	// Log receives progress lines. Default: discard.
	Log io.Writer
}

// scenarioDefaults are the per-scenario values EnsureDefaults applies.
type scenarioDefaults struct {
	utxos, txs          int
	warmup, max, rate   time.Duration
	machineWarmup       time.Duration
	configs             []string
	rollbackEvery       int
	plan                func(utxos int) preloadPlan
	hotAddresses        int
	hotFraction         float64
	soakRate, blockRate float64 // 0: the general defaults
	inFlight            int     // 0: the general default
	// addresses returns the ordinary addresses of a chain of n UTXOs; nil:
	// the generator's default.
	addresses func(n int, p workload.Profile) int
}

func defaultsOf(scenario string) (scenarioDefaults, error) {
	switch scenario {
	case ScenarioStandard:
		return scenarioDefaults{
			utxos: 200_000, txs: 300, warmup: 2 * time.Second, max: 8 * time.Second, rate: 8 * time.Second,
			machineWarmup: 5 * time.Second,
			configs:       AllConfigs, rollbackEvery: 50,
			plan: func(n int) preloadPlan {
				return preloadPlan{utxos: n, seedUTXOs: n * 9 / 10, seedBlockOutputs: 20_000, minBlocks: 60}
			},
		}, nil
	case ScenarioBig:
		return scenarioDefaults{
			utxos: 1_200_000, txs: 300, warmup: 5 * time.Second, max: 20 * time.Second, rate: 20 * time.Second,
			machineWarmup: 10 * time.Second,
			configs:       AllConfigs, rollbackEvery: 50,
			plan: func(n int) preloadPlan {
				return preloadPlan{utxos: n, seedUTXOs: n * 19 / 20, seedBlockOutputs: 25_000, minBlocks: 100}
			},
			// Three exchanges take 30% of the outputs: 120k+ UTXOs each.
			hotAddresses: 3, hotFraction: 0.3,
		}, nil
	case ScenarioSmoke:
		return scenarioDefaults{
			utxos: 5_000, txs: 50, warmup: 500 * time.Millisecond, max: 1500 * time.Millisecond,
			rate: 2 * time.Second, machineWarmup: 500 * time.Millisecond,
			configs: []string{ConfigMemory, ConfigBare}, rollbackEvery: 5,
			plan: func(n int) preloadPlan {
				return preloadPlan{utxos: n, seedUTXOs: n / 2, seedBlockOutputs: 1_000, minBlocks: 10}
			},
		}, nil
	case ScenarioSoak:
		// A modest load for a long time on a busy machine: what it looks
		// for is growth, not throughput.
		return scenarioDefaults{
			utxos: 20_000, txs: 20, warmup: 2 * time.Second, max: time.Second, rate: time.Second,
			machineWarmup: -1, configs: []string{ConfigFull}, rollbackEvery: 20,
			plan: func(n int) preloadPlan {
				return preloadPlan{utxos: n, seedUTXOs: n / 2, seedBlockOutputs: 2_000, minBlocks: 20}
			},
			soakRate: 150, blockRate: 2, inFlight: 32,
		}, nil
	case ScenarioFanout:
		return scenarioDefaults{
			utxos: 20_000, txs: 100, rollbackEvery: 50,
			plan: func(n int) preloadPlan {
				return preloadPlan{utxos: n, seedUTXOs: n * 9 / 10, seedBlockOutputs: 5_000, minBlocks: 20}
			},
		}, nil
	case ScenarioReplicas, ScenarioEvents:
		return scenarioDefaults{
			utxos: 200_000, txs: 300, rollbackEvery: 50,
			plan: func(n int) preloadPlan {
				return preloadPlan{utxos: n, seedUTXOs: n * 9 / 10, seedBlockOutputs: 20_000, minBlocks: 60}
			},
		}, nil
	case ScenarioScale:
		return scenarioDefaults{
			utxos: 12_000_000, txs: 300, warmup: 10 * time.Second, max: 20 * time.Second, rate: 20 * time.Second,
			machineWarmup: -1, configs: ScaleConfigs, rollbackEvery: 50,
			// Seed blocks of n/2000 outputs (1k to 25k): some 2,000 of
			// them, so that ingest's progress lines, one per run of up to
			// 64 blocks, time each tenth of the import to a few percent.
			// Then scaleTailBlocks ordinary blocks (each adds some 150
			// UTXOs), so that the seed blocks end up below the default
			// rollback window plus prune depth, as the bulk of a real
			// chain does after an import: the store prunes their undo
			// data and spent records.
			plan: func(n int) preloadPlan {
				return preloadPlan{utxos: n, seedUTXOs: max(n/2, n-scaleTailBlocks*150),
					seedBlockOutputs: min(25_000, max(1000, n/2000)), minBlocks: scaleTailBlocks}
			},
			// Mainnet's ratios: Cardano about 5M addresses for 12M
			// UTXOs, Bitcoin about 50M for 180M.
			addresses: func(n int, p workload.Profile) int {
				if p == workload.Cardano {
					return max(1000, n*5/12)
				}
				return max(1000, n*5/18)
			},
		}, nil
	}
	return scenarioDefaults{}, fmt.Errorf("loadtest: unknown scenario %q (want standard, big, smoke, soak, replicas, events, fanout or scale)", scenario)
}

// EnsureDefaults returns o with every zero field set to its default. An
// unknown scenario has no defaults of its own (Validate reports it).
func (o Options) EnsureDefaults() Options {
	if o.Scenario == "" {
		o.Scenario = ScenarioStandard
	}
	d, err := defaultsOf(o.Scenario)
	if err != nil {
		return o
	}
	setInt := func(v *int, def int) {
		if *v == 0 {
			*v = def
		}
	}
	setDur := func(v *time.Duration, def time.Duration) {
		if *v == 0 {
			*v = def
		}
	}
	setFloat := func(v *float64, def float64) {
		if *v == 0 {
			*v = def
		}
	}
	if o.Profile == 0 {
		o.Profile = workload.Bitcoin
	}
	setInt(&o.UTXOs, d.utxos)
	setInt(&o.TxsPerBlock, d.txs)
	if len(o.Configs) == 0 {
		o.Configs = slices.Clone(d.configs)
	}
	setDur(&o.Warmup, d.warmup)
	setDur(&o.MachineWarmup, d.machineWarmup)
	setDur(&o.MaxDuration, d.max)
	setDur(&o.RateDuration, d.rate)
	setDur(&o.HotDuration, o.MaxDuration*5/8)
	setInt(&o.Workers, 16)
	setFloat(&o.RateFraction, 0.5)
	if d.inFlight > 0 {
		setInt(&o.InFlight, d.inFlight)
	}
	setInt(&o.InFlight, 128)
	if o.Mix == (Mix{}) {
		o.Mix = DefaultMix
	}
	setInt(&o.PageLimit, 100)
	setInt(&o.LookupBatch, 20)
	setInt(&o.MaxDepth, 50)
	setDur(&o.RequestTimeout, 5*time.Second)
	if o.Rate == 0 {
		o.Rate = d.soakRate
	}
	if d.blockRate > 0 {
		setFloat(&o.BlockRate, d.blockRate)
	}
	if o.Scenario == ScenarioScale {
		if o.ReferenceDSN == "" {
			o.ReferenceDSN = pgref.DefaultDSN
		}
		setInt(&o.ReferenceRounds, 3)
		setDur(&o.ReferenceDuration, 5*time.Second)
		// No model: no feed and no correctness sample (Validate).
		setFloat(&o.BlockRate, -1)
		setFloat(&o.CheckFraction, -1)
	}
	setFloat(&o.BlockRate, 10)
	if o.Scenario == ScenarioSoak {
		setDur(&o.Duration, time.Hour)
		setDur(&o.SampleEvery, soakSampleEvery(o.Duration))
		setInt(&o.RedisRestarts, 5)
		if o.RedisRestarts < 0 {
			o.RedisRestarts = 0
		}
	}
	setInt(&o.RollbackEvery, d.rollbackEvery)
	setInt(&o.RollbackDepth, 3)
	setInt(&o.Replicas, 3)
	setInt(&o.ApplyBlocks, 300)
	setInt(&o.ApplyRounds, 2)
	if len(o.FanoutFollowers) == 0 {
		o.FanoutFollowers = []int{10, 50, 100}
	}
	if len(o.FanoutTransports) == 0 {
		o.FanoutTransports = []string{FanoutHTTP, FanoutJetStream}
	}
	if o.FanoutRate == 0 {
		o.FanoutRate = 10
	}
	setDur(&o.ApplyTimeout, 2*time.Minute)
	setInt(&o.EventStreams, 1000)
	setInt(&o.EventKeys, 10)
	setFloat(&o.CheckFraction, 0.01)
	setFloat(&o.CheckBudget, 0.25)
	if o.Log == nil {
		o.Log = io.Discard
	}
	return o
}

// Validate reports settings that cannot work; run it after EnsureDefaults.
// An unknown scenario is reported alone.
func (o Options) Validate() error {
	if _, err := defaultsOf(o.Scenario); err != nil {
		return err
	}
	var errs []error
	for _, c := range o.Configs {
		if !slices.Contains(AllConfigs, c) {
			errs = append(errs, fmt.Errorf("unknown configuration %q (want %v)", c, AllConfigs))
		}
	}
	if len(o.Configs) == 1 && o.Configs[0] == ConfigBare {
		errs = append(errs, errors.New("configuration bare alone: the bare handler serves bodies of the sizes a service configuration answered before it; add one, e.g. --configs disk,bare"))
	}
	if o.UTXOs < 100 {
		errs = append(errs, fmt.Errorf("utxos %d: at least 100", o.UTXOs))
	}
	if o.Workers < 1 || o.InFlight < 1 {
		errs = append(errs, errors.New("workers and in-flight must be positive"))
	}
	if o.RateFraction <= 0 || o.RateFraction > 1 {
		errs = append(errs, fmt.Errorf("rate fraction %v outside (0, 1]", o.RateFraction))
	}
	if o.PageLimit < 1 || o.PageLimit > 1000 || o.LookupBatch < 1 || o.LookupBatch > 1000 {
		errs = append(errs, errors.New("page limit and lookup batch must be in 1..1000"))
	}
	if o.RollbackDepth < 1 || o.RollbackDepth > 32 {
		errs = append(errs, fmt.Errorf("rollback depth %d outside 1..32", o.RollbackDepth))
	}
	if o.Scenario == ScenarioFanout {
		if len(o.Configs) > 0 || len(o.Targets) > 0 {
			errs = append(errs, errors.New("the fanout scenario starts its own writer and followers: it takes no configuration or target"))
		}
		for _, n := range o.FanoutFollowers {
			if n < 1 || n > 1000 {
				errs = append(errs, fmt.Errorf("fanout followers %d outside 1..1000", n))
			}
		}
		for i, t := range o.FanoutTransports {
			if (t != FanoutHTTP && t != FanoutJetStream) || slices.Contains(o.FanoutTransports[:i], t) {
				errs = append(errs, fmt.Errorf("fanout transports %v: want http, jetstream or both, each once", o.FanoutTransports))
				break
			}
		}
		if o.FanoutRate <= 0 || o.ApplyBlocks < 1 || o.ApplyRounds < 1 || o.ApplyTimeout <= 0 {
			errs = append(errs, errors.New("fanout rate, apply blocks, apply rounds and apply timeout must be positive"))
		}
	} else if o.Scenario == ScenarioReplicas || o.Scenario == ScenarioEvents {
		if len(o.Configs) > 0 {
			errs = append(errs, fmt.Errorf("the %s scenario runs no configuration (got %v): leave the configurations out", o.Scenario, o.Configs))
		}
		if len(o.Targets) > 0 {
			errs = append(errs, fmt.Errorf("the %s scenario starts its own services: it takes no targets", o.Scenario))
		}
		if o.Scenario == ScenarioEvents && (o.EventStreams < 1 || o.EventStreams > 10000 || o.EventKeys < 1 || o.EventKeys > 10000 || o.BlockRate <= 0) {
			errs = append(errs, fmt.Errorf("events scenario: streams %d (1..10000), keys per stream %d (1..10000) and block rate %v (> 0)", o.EventStreams, o.EventKeys, o.BlockRate))
		}
		if o.Scenario == ScenarioReplicas && (o.Replicas < 1 || o.Replicas > 16) {
			errs = append(errs, fmt.Errorf("replicas %d outside 1..16", o.Replicas))
		}
		if o.ApplyBlocks < 1 || o.ApplyRounds < 1 || o.ApplyTimeout <= 0 {
			errs = append(errs, errors.New("apply blocks, apply rounds and apply timeout must be positive"))
		}
	} else if o.MaxDuration <= 0 || o.RateDuration <= 0 {
		errs = append(errs, errors.New("phase durations must be positive"))
	}
	if o.Scenario == ScenarioScale {
		if o.ReferenceRounds < -1 || (o.ReferenceRounds > 0 && o.ReferenceDuration <= 0) {
			errs = append(errs, errors.New("--reference-rounds is -1 (none) or positive, with a positive --reference-duration"))
		}
		switch {
		case len(o.Targets) > 0:
			errs = append(errs, errors.New("the scale scenario is a managed run: it imports the chain with utxo-cache ingest"))
		case o.BlockRate > 0 || o.CheckFraction > 0:
			errs = append(errs, errors.New("the scale scenario keeps no model of the chain: no feed (--block-rate) and no correctness sample (--check-fraction)"))
		case slices.Contains(o.Configs, ConfigReplica) || slices.Contains(o.Configs, ConfigBare):
			errs = append(errs, fmt.Errorf("the scale scenario runs %v, not the replica or bare configurations", ScaleConfigs))
		}
	}
	if o.Scenario == ScenarioSoak {
		switch {
		case len(o.Targets) > 0:
			errs = append(errs, errors.New("the soak scenario is a managed run: it restarts its own redis-server and samples the service's process"))
		case !slices.Equal(o.Configs, []string{ConfigFull}):
			errs = append(errs, fmt.Errorf("the soak scenario runs the full configuration only, not %v", o.Configs))
		case o.Duration <= 0 || o.SampleEvery <= 0:
			errs = append(errs, errors.New("the soak's duration and sampling period must be positive"))
		case o.Rate <= 0:
			errs = append(errs, errors.New("the soak needs an offered rate (--rate)"))
		}
	}
	if len(o.Targets) == 0 && o.Bin == "" {
		errs = append(errs, errors.New("a managed run needs the utxo-cache binary (Bin)"))
	}
	if len(o.Targets) == 0 && slices.Contains(o.Configs, ConfigBare) && o.BareBin == "" {
		errs = append(errs, errors.New("a managed run with the bare configuration needs the utxo-loadtest binary (BareBin)"))
	}
	if len(o.Targets) > 0 && o.AdminToken == "" {
		errs = append(errs, errors.New("an external run needs the writer's admin token (it preloads the store over HTTP)"))
	}
	for _, t := range append(slices.Clone(o.Targets), o.Writer) {
		if t == "" {
			continue
		}
		if _, err := CheckTarget(t, o.AllowRemote); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (o Options) workloadOptions() workload.Options {
	d, _ := defaultsOf(o.Scenario)
	wo := workload.Options{
		Seed: o.Seed, Profile: o.Profile, TxsPerBlock: o.TxsPerBlock,
		HotAddresses: d.hotAddresses, HotOutputFraction: d.hotFraction,
	}
	if d.addresses != nil {
		wo.Addresses = d.addresses(o.UTXOs, o.Profile)
	}
	return wo
}

func (o Options) plan() preloadPlan {
	d, _ := defaultsOf(o.Scenario)
	return d.plan(o.UTXOs)
}

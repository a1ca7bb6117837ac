// Command utxo-loadtest is the load harness of utxo-cache (package
// loadtest): it starts `utxo-cache serve` processes, a redis-server and the
// bare ceiling, loads them and reports. It is a binary of its own, outside
// the service's module, so that the service binary and its image carry no
// load generator.
//
// Every flag --NAME can also come from the environment variable
// UTXO_CACHE_<NAME>, as for utxo-cache's commands; a flag given on the
// command line wins.
//
// Exit status: 0 success (also --help), 1 an operational error or a failed
// run, 2 a usage error, 130 interrupted.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/utxo-cache/utxo-cache/internal/workload"
	"github.com/utxo-cache/utxo-cache/loadtest"
)

const about = `
Measure the service under load and print the headline table: requests/s and
p99 per tier configuration, and their ratio to a bare Gin handler that
answers prepared bytes of the same sizes (the machine's ceiling).

A managed run (the default) generates a seeded chain (Bitcoin- or
Cardano-like, Zipf-popular addresses and a few exchange addresses piling up
outputs), streams it into a fresh store with 'utxo-cache ingest', starts a
redis-server on a free loopback port, warms the machine up (--machine-warmup,
not measured), then runs 'utxo-cache serve' once per configuration, each on
its own fresh copy of the preloaded store and fed the same blocks and
rollbacks (a configuration that fails does not stop the others):
  memory  --memory-cache-bytes 256MiB, no Redis
  redis   --memory-cache-bytes 0 --redis-url …
  disk    --memory-cache-bytes 0, no Redis
  full    --memory-cache-bytes 256MiB --redis-url …
  replica a writer (memory layout, --replication-token-file) and one replica
          of it (--replica-of, memory layout) bootstrapped from its
          checkpoint: the feed posts to the writer, the reads and the
          correctness sample go to the replica, and each acknowledged
          write's replication lag is measured (writer acknowledgement of
          seq S to the replica's answer to GET /v1/tip?min_seq=S, which it
          sends the moment it publishes S): p50/p99/max, target p99 < 100 ms
  bare    the ceiling: bare.NewHandler (api/bare) in a subprocess of this
          binary (runs last)
Each runs a warmup, a max phase (closed loop, --workers in flight) and a rate
phase (open loop at --rate-fraction of the max, after a quarter of
--rate-duration at that rate not recorded, latency measured from each
request's intended send time), both under a writer feed of --block-rate
blocks/s with a rollback every --rollback-every blocks; memory and bare then
run a hot phase (a cache-friendly mix over 1000 addresses and 4096 outpoints:
the memory tier's target compares hot reads), and bare one open-loop phase at
each configuration's rate (their read p99 under the feed is held to the bare
handler's at the same rate). --cpu-profile records the service's
CPU profile during its max, rate and hot phases. The children get no UTXO_CACHE_* variables: only the flags
the harness gives them. A sample of the answers (--check-fraction) is compared with a reference
model of the chain; any mismatch, 5xx or feed error fails the run (exit 1).
Performance targets are printed as PASS/MISS and fail the run only with
--strict.

On two or more CPUs the service (and the bare handler) is pinned with
taskset to the upper half of them, the harness and redis-server to the rest
(--no-pin: leave it to the scheduler); the report says where each ran and
which figures compare with which.

Scenarios: standard (200k UTXOs, about 3.5 minutes), big (1.2M UTXOs with
exchange addresses of 100k+ UTXOs each, for the disk-tier target; several
minutes, mostly the preload), smoke (5k UTXOs, memory and bare, seconds),
soak (20k UTXOs, the full configuration for --duration, default 1h: an open
loop at --rate, default 150 req/s (--in-flight 32), a feed of 2 blocks/s with a rollback every
20 blocks, redis-server killed with SIGKILL and restarted --redis-restarts
times; every --sample-every it samples the service's RSS, open files,
goroutines and Pebble figures, and fails the run when one of them grows: the
last quarter's mean above the second quarter's by more than 10% plus a fixed
tolerance; or on any 5xx or answer that differs from the model. make soak
runs it; SOAK_DURATION=10m shortens it),
replicas (200k UTXOs, no read load: the writer's apply throughput, blocks
over its own apply seconds, with no replica and with --replicas replicas
tailing its change log, the same
--apply-blocks script posted back to back on a fresh store copy per leg, in
--apply-rounds ABBA rounds; target ratio ≥ 0.9; the writer on the service's
CPUs, the replicas on the harness's; each leg is bounded by --apply-timeout),
events (200k UTXOs, no read load: one writer fed the --apply-blocks script at
--block-rate, in --apply-rounds ABBA rounds of a leg without and a leg with
--event-streams event streams of --event-keys addresses each; reports the
delivery p99 from publish to the event on the wire (target < 50 ms), the
POST /v1/blocks p99 with and without streams (within 10%) and the memory per
idle stream (≤ 16 KiB: the slope of the service's live heap and stacks, each
point settled by repeated GCs, over its streams opened in four batches)),
fanout (20k UTXOs, no read load: one writer fed the --apply-blocks script at
--fanout-rate, with no follower and with each of --fanout-followers
lightweight followers over each of --fanout-transports (the HTTP change log,
NATS JetStream through a nats-server it starts), in --apply-rounds rounds,
every other one backwards; reports the writer's apply rate from each block's
own apply time, its CPU and allocations per follower, nats-server's CPU per
follower and the lag p99; targets with 100 JetStream followers: apply rate ≥
0.95 of that with none, lag p99 < 250 ms).

scale (12M UTXOs by default, not for CI: streams the chain to a file in
bounded memory, imports it with 'utxo-cache ingest' (every Cardano index for
--chain-profile cardano), measures the import (changes/s overall and in its
first and last tenths, peak RSS, bytes on disk per live UTXO, compaction debt)
and how long reads take to settle on a disk-only service, then runs disk,
memory, redis and full on copies of the store; no model, so no feed and no
correctness sample).

--compare A.json B.json prints two reports' targets and figures side by side.

An external run (--target URL, repeatable) loads running services instead:
reads go round-robin to the targets, the feed posts to --writer (default the
first target) with --admin-token, whose store must be empty (the harness
preloads it over HTTP, to know every answer). Targets must be loopback
addresses (localhost, 127.0.0.0/8, ::1) unless --allow-remote: the harness
sends tens of thousands of requests a second and writes blocks, which is an
attack on any service you did not mean to load.

Reports go to --results (default ./results/<time>/): report.json,
report.md, report.html (inline SVG charts), the processes' logs and CPU
profiles. --write-chain FILE.jsonl|.cbor only writes the scenario's preload
chain for 'utxo-cache ingest' and exits.`

// stringList is a repeatable flag; from the environment it is
// comma-separated.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}

// env is what the command sees of its process, so that everything it prints
// and reads from the environment goes through one place.
type env struct {
	stdout, stderr io.Writer
	getenv         func(string) string
}

func main() {
	os.Exit(run(&env{stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv}, os.Args[1:]))
}

// run runs the harness with args and returns the process's exit status.
func run(e *env, args []string) int {
	err := runLoadtest(e, args)
	var ue *usageError
	var xe *exitError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &xe):
		return xe.code
	case errors.As(err, &ue):
		fmt.Fprintf(e.stderr, "utxo-loadtest: %s\nRun 'utxo-loadtest --help' for usage.\n", ue.msg)
		return 2
	default:
		fmt.Fprintf(e.stderr, "utxo-loadtest: %s\n", strings.TrimSpace(err.Error()))
		return 1
	}
}

func runLoadtest(e *env, args []string) error {
	cl := newCommandLine("utxo-loadtest", "utxo-loadtest [flags]", about)
	fs := cl.fs
	var o loadtest.Options
	var targets stringList
	var profile, configs, mix, writeChain, bareServe, bareBodies, refServe, refSchema string
	var compare bool
	fs.StringVar(&o.Scenario, "scenario", loadtest.ScenarioStandard, "`NAME`: standard, big, smoke, soak, replicas, events, fanout or scale (sets the defaults of the flags below marked 0)")
	var fanoutFollowers string
	fs.StringVar(&fanoutFollowers, "fanout-followers", "10,50,100", "comma-separated follower `COUNTS` of the fanout scenario's legs (each transport also runs one with none)")
	var fanoutTransports string
	fs.StringVar(&fanoutTransports, "fanout-transports", "http,jetstream", "comma-separated `TRANSPORTS` of the fanout scenario's legs: http, jetstream or both")
	fs.Float64Var(&o.FanoutRate, "fanout-rate", 10, "`STEPS/S` (blocks and rollbacks) the fanout scenario feeds the writer")
	fs.StringVar(&o.NATSServer, "nats-server", "", "nats-server `BINARY` of the fanout scenario (default: from PATH, or /usr/sbin/nats-server)")
	fs.StringVar(&profile, "chain-profile", "bitcoin", "shape of the generated chain: bitcoin or cardano")
	fs.Int64Var(&o.Seed, "seed", 1, "`SEED` of the chain and of the request stream")
	fs.IntVar(&o.UTXOs, "utxos", 0, "live `UTXOS` of the preloaded store (0: the scenario's)")
	fs.IntVar(&o.TxsPerBlock, "txs-per-block", 0, "transactions per ordinary and feed block (0: the scenario's: 300, smoke 50)")
	fs.StringVar(&configs, "configs", "", "comma-separated configurations to run, from memory,redis,disk,full,replica,bare (empty: the scenario's)")
	fs.IntVar(&o.Replicas, "replicas", 3, "replicas tailing the writer in the replicas scenario's legs with replicas")
	fs.IntVar(&o.ApplyBlocks, "apply-blocks", 300, "`BLOCKS` of the script each leg of the replicas scenario posts")
	fs.IntVar(&o.ApplyRounds, "apply-rounds", 2, "`ROUNDS` of two legs (without, with replicas or streams; ABBA order) in the replicas or events scenario; in the fanout scenario, of a leg with no follower and one with each count, every other round backwards")
	fs.DurationVar(&o.ApplyTimeout, "apply-timeout", 2*time.Minute, "bound of one leg of the replicas or events scenario (its posts and its replicas catching up)")
	fs.IntVar(&o.EventStreams, "event-streams", 1000, "event streams the events scenario opens in its legs with streams")
	fs.IntVar(&o.EventKeys, "event-keys", 10, "addresses of each event stream in the events scenario")
	fs.DurationVar(&o.Warmup, "warmup", 0, "warmup `DURATION` per configuration (0: the scenario's)")
	fs.DurationVar(&o.MachineWarmup, "machine-warmup", 0, "unmeasured warm-up `DURATION` before the first configuration (0: the scenario's; standard 5s; -1s: none)")
	fs.DurationVar(&o.MaxDuration, "max-duration", 0, "max phase `DURATION` (0: the scenario's; standard 8s)")
	fs.DurationVar(&o.RateDuration, "rate-duration", 0, "rate phase `DURATION` (0: the scenario's; standard 8s)")
	fs.DurationVar(&o.HotDuration, "hot-duration", 0, "hot phase `DURATION` of memory and bare (0: 5/8 of the max phase's; -1s: none)")
	fs.Int64Var(&o.MaxRequests, "max-requests", 0, "at most `N` requests per phase, besides the duration (0: no bound)")
	fs.IntVar(&o.Workers, "workers", 16, "closed-loop concurrency of the max phase")
	fs.Float64Var(&o.Rate, "rate", 0, "offered `REQ/S` of the rate phase (0: --rate-fraction of the max phase's)")
	fs.Float64Var(&o.RateFraction, "rate-fraction", 0.5, "rate phase load as a `FRACTION` of the max phase's requests/s")
	fs.IntVar(&o.InFlight, "in-flight", 128, "open-loop bound on requests in flight")
	fs.StringVar(&mix, "mix", loadtest.DefaultMix.String(), "request `MIX` as kind=weight,... (kinds: tip, page, deep, balance, outpoint, lookup, revalidate)")
	fs.IntVar(&o.PageLimit, "page-limit", 100, "`LIMIT` of address pages")
	fs.IntVar(&o.LookupBatch, "lookup-batch", 20, "outpoints per POST /v1/utxos/lookup")
	fs.IntVar(&o.MaxDepth, "max-depth", 50, "pages a deep walk follows through next_cursor")
	fs.DurationVar(&o.RequestTimeout, "request-timeout", 5*time.Second, "timeout of one request")
	fs.Float64Var(&o.BlockRate, "block-rate", 10, "writer feed `BLOCKS/S` during the max and rate phases (0: no feed)")
	fs.IntVar(&o.RollbackEvery, "rollback-every", 0, "`BLOCKS` between rollbacks of the feed (0: the scenario's, 50; -1: none)")
	fs.IntVar(&o.RollbackDepth, "rollback-depth", 3, "`BLOCKS` each rollback undoes before a new branch is applied")
	fs.Float64Var(&o.CheckFraction, "check-fraction", 0.01, "`FRACTION` of answers checked against the model (0: none)")
	fs.Float64Var(&o.CheckBudget, "check-budget", 0.25, "share of one core the checker may use")
	fs.DurationVar(&o.Duration, "duration", 0, "soak: `DURATION` of the run (0: 1h)")
	fs.DurationVar(&o.SampleEvery, "sample-every", 0, "soak: sampling `PERIOD` of the service's RSS, goroutines, open files and Pebble figures (0: duration/60, 250ms..1m)")
	fs.IntVar(&o.RedisRestarts, "redis-restarts", 0, "soak: times redis-server is killed and restarted, evenly spaced (0: 5; -1: none)")
	fs.Var(&targets, "target", "base `URL` of a running service to load instead of starting one (repeatable)")
	fs.StringVar(&o.Writer, "writer", "", "base `URL` the feed posts blocks to in an external run (default: the first --target)")
	fs.StringVar(&o.AdminToken, "admin-token", "", "the writer's bearer `TOKEN` in an external run")
	fs.BoolVar(&o.AllowRemote, "allow-remote", false, "allow targets that are not loopback addresses (see above)")
	fs.StringVar(&o.Bin, "bin", "", "utxo-cache `BINARY` to start (default: the utxo-cache beside this executable, else from PATH)")
	fs.StringVar(&o.RedisServer, "redis-server", "", "redis-server `BINARY` (default: from PATH)")
	fs.StringVar(&o.ResultsDir, "results", "", "results `DIR` (default ./results/<time>)")
	fs.StringVar(&o.ReferenceDSN, "reference-dsn", "", "scale: the PostgreSQL `DSN` the reference is loaded into, in a schema of its own that the run drops (default "+loadtest.DefaultReferenceDSN+")")
	fs.IntVar(&o.ReferenceRounds, "reference-rounds", 0, "scale: `ROUNDS` of the reads against the imported store and then the PostgreSQL reference (0: 3; -1: no reference)")
	fs.DurationVar(&o.ReferenceDuration, "reference-duration", 0, "scale: `DURATION` of each read on each side of the reference comparison (0: 5s)")
	fs.StringVar(&o.ImportFlags, "import-flags", "", "scale: more `FLAGS` for the import's utxo-cache ingest, space separated (as \"--block-cache-bytes 1GiB --replication-retention 1\"); the report records them")
	fs.StringVar(&refServe, "reference-serve", "", "internal: serve the PostgreSQL reference on `ADDRESS` (the harness starts this)")
	fs.StringVar(&refSchema, "reference-schema", "", "internal: the reference's `SCHEMA`")
	fs.BoolVar(&o.KeepData, "keep-data", false, "keep the preloaded store in the results directory")
	fs.BoolVar(&o.NoPin, "no-pin", false, "do not pin the service and the harness to CPUs of their own")
	fs.BoolVar(&o.CPUProfile, "cpu-profile", false, "record the service's CPU profile in each max, rate and hot phase (pprof via serve's --admin-listen) and summarize it")
	fs.BoolVar(&o.Strict, "strict", false, "exit 1 when a performance target is missed")
	fs.StringVar(&writeChain, "write-chain", "", "write the scenario's preload chain to `FILE` (.jsonl or .cbor) and exit")
	fs.BoolVar(&compare, "compare", false, "print the two report.json files given as arguments (A B) side by side, targets and figures in one table, and exit")
	fs.StringVar(&bareServe, "bare-serve", "", "internal: serve the bare handler on `ADDRESS` (the harness starts this)")
	fs.StringVar(&bareBodies, "bare-bodies", "", "internal: the bare handler's bodies `FILE`")
	if err := cl.parse(e, args); err != nil {
		return err
	}
	if compare {
		if fs.NArg() != 2 {
			return usagef("--compare takes two report.json files (A B), got %q", fs.Args())
		}
		a, err := loadtest.ReadReport(fs.Arg(0))
		if err != nil {
			return err
		}
		b, err := loadtest.ReadReport(fs.Arg(1))
		if err != nil {
			return err
		}
		return loadtest.Compare(e.stdout, a, b, fs.Arg(0), fs.Arg(1))
	}
	if fs.NArg() > 0 {
		return usagef("utxo-loadtest takes no arguments (but with --compare), got %q", fs.Args())
	}
	for _, f := range strings.Split(fanoutFollowers, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return usagef("--fanout-followers %q: comma-separated counts", fanoutFollowers)
		}
		o.FanoutFollowers = append(o.FanoutFollowers, n)
	}
	for _, t := range strings.Split(fanoutTransports, ",") {
		o.FanoutTransports = append(o.FanoutTransports, strings.TrimSpace(t))
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if refServe != "" {
		if refSchema == "" {
			return usagef("--reference-serve needs --reference-schema")
		}
		dsn := o.ReferenceDSN
		if dsn == "" {
			dsn = loadtest.DefaultReferenceDSN
		}
		return loadtest.ServeReference(ctx, refServe, dsn, refSchema)
	}
	if bareServe != "" {
		if bareBodies == "" {
			return usagef("--bare-serve needs --bare-bodies")
		}
		return loadtest.ServeBare(ctx, bareServe, bareBodies)
	}

	switch strings.ToLower(profile) {
	case "bitcoin":
		o.Profile = workload.Bitcoin
	case "cardano":
		o.Profile = workload.Cardano
	default:
		return usagef("--chain-profile %q: want bitcoin or cardano", profile)
	}
	var err error
	if o.Mix, err = loadtest.ParseMix(mix); err != nil {
		return usagef("--mix: %v", err)
	}
	if configs != "" {
		for _, c := range strings.Split(configs, ",") {
			o.Configs = append(o.Configs, strings.TrimSpace(c))
		}
	}
	o.Targets = targets
	// The library reads 0 as "default" and a negative value as "off".
	if o.BlockRate == 0 {
		o.BlockRate = -1
	}
	if o.CheckFraction == 0 {
		o.CheckFraction = -1
	}
	if o.Scenario == loadtest.ScenarioScale {
		// No model: no feed and no correctness sample, unless given (and
		// refused).
		if !cl.given("block-rate") {
			o.BlockRate = 0
		}
		if !cl.given("check-fraction") {
			o.CheckFraction = 0
		}
	}
	if o.Scenario == loadtest.ScenarioSoak {
		// The soak's own defaults, unless given.
		if !cl.given("block-rate") {
			o.BlockRate = 0
		}
		if !cl.given("in-flight") {
			o.InFlight = 0
		}
	}

	if writeChain != "" {
		blocks, utxos, err := loadtest.WriteChain(o, writeChain)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "loadtest: wrote %d blocks (%d live UTXOs) to %s; apply them with: utxo-cache ingest --data-dir DIR %s\n",
			blocks, utxos, writeChain, writeChain)
		return nil
	}
	if len(o.Targets) == 0 {
		if o.Bin == "" {
			if o.Bin, err = serviceBinary(); err != nil {
				return fmt.Errorf("find the utxo-cache binary (give --bin): %w", err)
			}
		}
		// The bare ceiling runs in a process of its own: this binary,
		// with --bare-serve.
		if o.BareBin, err = os.Executable(); err != nil {
			return fmt.Errorf("find this executable: %w", err)
		}
	}
	// The harness holds the reference model (hundreds of MB for a big
	// store): fewer GC cycles leave more CPU to the load it generates.
	debug.SetGCPercent(400)
	o.Log = e.stderr
	o.Command = append([]string{"utxo-loadtest"}, args...)
	if err := validate(o); err != nil {
		return err
	}
	rep, err := loadtest.Run(ctx, o)
	if rep != nil && (len(rep.Configs) > 0 || rep.Throughput != nil) {
		fmt.Fprintf(e.stdout, "\n%s\nreports: %s\n", rep.Headline(),
			strings.Join([]string{filepath.Join(rep.ResultsDir, "report.md"), filepath.Join(rep.ResultsDir, "report.html"),
				filepath.Join(rep.ResultsDir, "report.json")}, ", "))
	}
	if ctx.Err() != nil {
		fmt.Fprintf(e.stderr, "utxo-loadtest: interrupted; the processes it started were stopped\n")
		return &exitError{code: 130}
	}
	if err != nil {
		return err
	}
	if rep.Failed {
		return &exitError{code: 1}
	}
	return nil
}

// validate reports bad option values (a remote target without
// --allow-remote among them) as usage errors: exit status 2.
func validate(o loadtest.Options) error {
	if err := o.EnsureDefaults().Validate(); err != nil {
		return usagef("%v", err)
	}
	return nil
}

// serviceBinary finds the utxo-cache binary a managed run starts: the one
// beside this executable (make builds both into bin/), else the one on PATH.
func serviceBinary() (string, error) {
	if self, err := os.Executable(); err == nil {
		bin := filepath.Join(filepath.Dir(self), "utxo-cache")
		if fi, err := os.Stat(bin); err == nil && fi.Mode().IsRegular() {
			return bin, nil
		}
	}
	return exec.LookPath("utxo-cache")
}

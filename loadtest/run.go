package loadtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/internal/workload"
)

// runner is one run of the harness: the world, the client, the processes it
// started and the results so far. Not safe for concurrent use: phases run
// one after another.
type runner struct {
	o       Options
	dir     string // results directory
	w       *world
	gen     *reqGen
	hotGen  *reqGen // the hot phase's: HotMix over few keys, its own pools
	client  *http.Client
	ctl     *http.Client // for scrapes, readiness, profiles: not the load's pool
	redis   *redisServer
	cpus    cpuPlan      // where children run; the zero plan while nothing is pinned
	capture *bodyCapture // set while the first service's warmup records bodies
	bodies  map[string][]byte
	report  *Report
	phaseN  int64
	start   time.Time
}

// Run performs a run and returns its report, which it has also written to
// the results directory. The error is for a run that could not be carried
// out (a service that does not start, a refused block); a run that finishes
// with mismatches returns its report and no error: see Report.Failed.
func Run(ctx context.Context, o Options) (*Report, error) {
	o = o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	r := &runner{o: o, start: time.Now()}
	r.dir = o.ResultsDir
	if r.dir == "" {
		r.dir = filepath.Join("results", time.Now().Format("20060102-150405"))
	}
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		return nil, err
	}
	r.report = newReport(o, r.dir)
	r.client = newClient(max(o.Workers, o.InFlight), o.RequestTimeout)
	r.ctl = newClient(4, 60*time.Second)
	defer r.client.CloseIdleConnections()
	defer r.ctl.CloseIdleConnections()
	var err error
	r.w, err = newWorld(o.workloadOptions())
	if err != nil {
		return nil, err
	}
	r.w.setScript(o.RollbackEvery, o.RollbackDepth)
	r.gen = &reqGen{mix: o.Mix, w: r.w, limit: o.PageLimit, batch: o.LookupBatch, maxDepth: o.MaxDepth}
	r.hotGen = &reqGen{mix: HotMix, w: r.w, limit: o.PageLimit, batch: o.LookupBatch, maxDepth: o.MaxDepth, hot: true}

	start := time.Now()
	if len(o.Targets) > 0 {
		err = r.external(ctx)
	} else {
		err = r.managed(ctx)
	}
	r.report.Seconds = time.Since(start).Seconds()
	r.report.Machine.LoadAvgEnd = loadAvg()
	if err != nil {
		r.report.Error = err.Error()
	}
	r.report.evaluate(o)
	if werr := r.report.write(r.dir); werr != nil && err == nil {
		err = werr
	}
	return r.report, err
}

func (r *runner) logf(format string, args ...any) {
	fmt.Fprintf(r.o.Log, "loadtest: %5.1fs "+format+"\n", append([]any{time.Since(r.start).Seconds()}, args...)...)
}

// managed preloads a fresh store with `utxo-cache ingest`, warms the
// machine up, then runs each configuration as a subprocess on its own copy
// of the preloaded store (see the package doc's "Fair comparison").
func (r *runner) managed(ctx context.Context) error {
	dataDir := filepath.Join(r.dir, "data")
	if !r.o.KeepData {
		defer os.RemoveAll(dataDir)
	}
	if err := os.RemoveAll(dataDir); err != nil {
		return err
	}
	if r.o.Scenario == ScenarioScale {
		if err := r.scaleImport(ctx, dataDir); err != nil {
			return err
		}
	} else if err := r.preloadIngest(ctx, dataDir); err != nil {
		return err
	}
	r.w.freeze()
	if r.o.Scenario == ScenarioScale {
		// No model: the store's own figures are the ones to start from.
		r.w.base.state = r.report.Scale.State
	}
	r.report.Preload.State = r.w.base.state
	if r.o.Scenario == ScenarioSoak {
		// Blocks are made as the feed posts them, and forgotten once
		// posted: an hour's script is not held in memory.
		r.w.forgetPosted = true
	} else if r.o.Scenario == ScenarioReplicas || r.o.Scenario == ScenarioFanout || r.o.Scenario == ScenarioEvents {
		r.w.prepareScript(r.o.ApplyBlocks)
	} else {
		r.prepareFeed()
	}
	fair := &r.report.Fairness
	fair.StoreCopies, fair.ConfigWarmup = true, r.o.Warmup.String()

	token := r.o.AdminToken
	if token == "" {
		var b [16]byte
		_, _ = rand.Read(b[:])
		token = hex.EncodeToString(b[:])
	}
	// Pinned from here on: the preload above may use every core.
	if restore := r.place(); restore != nil {
		defer restore()
	}
	if r.o.Scenario == ScenarioReplicas {
		return r.replicaThroughput(ctx, dataDir, token)
	}
	if r.o.Scenario == ScenarioFanout {
		return r.fanout(ctx, dataDir, token)
	}
	if r.o.Scenario == ScenarioEvents {
		return r.eventsScenario(ctx, dataDir, token)
	}
	needRedis := slices.Contains(r.o.Configs, ConfigRedis) || slices.Contains(r.o.Configs, ConfigFull)
	if needRedis {
		bin := r.o.RedisServer
		if bin == "" {
			var err error
			if bin, err = exec.LookPath("redis-server"); err != nil {
				return errors.New("loadtest: the redis and full configurations need redis-server on PATH (or --redis-server; or leave them out with --configs)")
			}
		}
		redisDir := filepath.Join(r.dir, "redis")
		if err := os.MkdirAll(redisDir, 0o755); err != nil {
			return err
		}
		var err error
		if r.redis, err = startRedis(r.cpus, bin, redisDir); err != nil {
			return err
		}
		defer func() { _ = r.redis.stop(5 * time.Second) }()
		r.logf("redis-server on %s", r.redis.addr)
	}
	if r.o.Scenario == ScenarioSoak {
		res, err := r.runSoak(ctx, dataDir, token)
		if err != nil {
			err = fmt.Errorf("soak: %w", err)
			res.Error = joinNonEmpty(res.Error, err.Error())
		}
		r.report.Configs = append(r.report.Configs, res)
		return err
	}
	var services []string
	for _, c := range r.o.Configs {
		if c != ConfigBare {
			services = append(services, c)
		}
	}
	if len(services) > 0 && r.o.MachineWarmup > 0 {
		if err := r.machineWarmup(ctx, services[0], dataDir, token); err != nil {
			return fmt.Errorf("machine warm-up: %w", err)
		}
	}
	// A configuration that fails does not stop the others: each has its own
	// store, so none can fail on another's leftovers.
	var errs []error
	for i, c := range services {
		if ctx.Err() != nil {
			return errors.Join(append(errs, ctx.Err())...)
		}
		if i == 0 && slices.Contains(r.o.Configs, ConfigBare) {
			r.capture = newBodyCapture()
		}
		res, err := r.runOnCopy(ctx, c, dataDir, token)
		if r.capture != nil {
			r.bodies, r.capture = r.capture.medians(), nil
		}
		if err != nil {
			err = fmt.Errorf("configuration %s: %w", c, err)
			res.Error = joinNonEmpty(res.Error, err.Error())
			errs = append(errs, err)
		}
		r.report.Configs = append(r.report.Configs, res)
	}
	if slices.Contains(r.o.Configs, ConfigBare) && ctx.Err() == nil {
		r.startConfig()
		res, err := r.runBare(ctx)
		if err != nil {
			err = fmt.Errorf("configuration bare: %w", err)
			res.Error = joinNonEmpty(res.Error, err.Error())
			errs = append(errs, err)
		}
		r.report.Configs = append(r.report.Configs, res)
	}
	return errors.Join(errs...)
}

func joinNonEmpty(a, b string) string {
	if a == "" || a == b {
		return b
	}
	return a + "; " + b
}

// prepareFeed makes the feed script every configuration replays: enough
// blocks for a rate phase at BlockRate (and the branch of a rollback that
// falls at its end), so that no configuration generates blocks while it is
// measured.
func (r *runner) prepareFeed() {
	if r.o.BlockRate <= 0 {
		return
	}
	// The max, settle and rate phases all run under the feed.
	r.w.prepareScript(int(math.Ceil(r.o.BlockRate*(r.o.MaxDuration+r.o.RateDuration*5/4).Seconds())) + 1)
	for _, st := range r.w.script.steps {
		if st.block == nil {
			r.report.Fairness.ScriptRollbacks++
		} else {
			r.report.Fairness.ScriptBlocks++
		}
	}
}

// startConfig puts the harness's side of a configuration where every
// configuration starts: the model and the feed script at the preload, fresh
// request generators (no deep walks or ETags carried over), the same request
// seeds, and no garbage of the previous configuration left for the
// collector to find during this one's measurement.
func (r *runner) startConfig() {
	r.w.reset()
	r.gen = &reqGen{mix: r.o.Mix, w: r.w, limit: r.o.PageLimit, batch: r.o.LookupBatch, maxDepth: r.o.MaxDepth}
	r.hotGen = &reqGen{mix: HotMix, w: r.w, limit: r.o.PageLimit, batch: r.o.LookupBatch, maxDepth: r.o.MaxDepth, hot: true}
	r.phaseN = 0
	runtime.GC()
}

// runOnCopy runs config on a fresh copy of the preloaded store at dataDir
// and removes the copy afterwards.
func (r *runner) runOnCopy(ctx context.Context, config, dataDir, token string) (ConfigResult, error) {
	dir := filepath.Join(r.dir, "store-"+config)
	defer os.RemoveAll(dir)
	if err := os.RemoveAll(dir); err != nil {
		return ConfigResult{Name: config, Kind: "service"}, err
	}
	t0 := time.Now()
	n, err := copyStore(dataDir, dir)
	if err != nil {
		return ConfigResult{Name: config, Kind: "service"}, err
	}
	r.report.Fairness.StoreBytes = n
	r.logf("%s: copied the preloaded store (%d MiB) in %.1fs", config, n>>20, time.Since(t0).Seconds())
	r.startConfig()
	if config == ConfigReplica {
		return r.runReplica(ctx, dir, token)
	}
	return r.runService(ctx, config, dir, token)
}

// machineWarmup runs a service of config's layout on the preloaded store
// itself under the standard mix for MachineWarmup, unmeasured, and stops
// it. It only reads, so the chain is unchanged (each configuration checks
// that its copy starts at the preload's figures); any compaction the store
// owes after the ingest happens here, before the copies are made.
func (r *runner) machineWarmup(ctx context.Context, config, dataDir, token string) error {
	wr := &WarmupResult{Config: config}
	r.report.Fairness.MachineWarmup = wr
	r.startConfig()
	r.phaseN = 100 // its own request seeds
	svc, err := r.startService(ctx, config, dataDir, token, "serve-warmup.log")
	if err != nil {
		wr.Error = err.Error()
		return err
	}
	t := target{name: "warm-up", bases: []string{svc.base}}
	ph := r.phase(ctx, t, "machine-warmup", phaseClosed, 0, r.o.MachineWarmup)
	wr.Seconds, wr.Requests = ph.Seconds, ph.Requests
	if err := svc.stop(20 * time.Second); err != nil {
		wr.Error = err.Error()
		return err
	}
	r.logf("machine warm-up: %s on the preloaded store, %d requests in %.1fs (not measured)", config, ph.Requests, ph.Seconds)
	if ph.OK == 0 {
		wr.Error = fmt.Sprintf("no request succeeded (errors %v)", ph.Errors)
		return errors.New(wr.Error)
	}
	return nil
}

// place pins the harness and plans the children's CPUs (see cpuPlan) and
// records the placement in the report. It returns the function that undoes
// the harness's pinning, or nil when nothing was pinned.
func (r *runner) place() (restore func()) {
	pl := &r.report.Fairness.Placement
	allowed, err := allowedCPUs(os.Getpid())
	if err != nil {
		pl.Note = fmt.Sprintf("cannot read this process's CPUs (%v): nothing pinned", err)
		return nil
	}
	pl.Allowed = formatCPUList(allowed)
	taskset, _ := exec.LookPath("taskset")
	plan, why := planCPUs(allowed, taskset, r.o.NoPin)
	if !plan.pinned() {
		pl.Note = why
		r.logf("CPU placement: %s", why)
		return nil
	}
	if err := plan.pinAll(os.Getpid(), plan.load); err != nil {
		pl.Note = fmt.Sprintf("pinning the harness failed (%v): nothing pinned", err)
		r.logf("CPU placement: %s", pl.Note)
		_ = plan.pinAll(os.Getpid(), allowed)
		return nil
	}
	r.cpus = plan
	pl.Pinned, pl.Via = true, "taskset"
	pl.ServiceCPUs, pl.LoadCPUs = formatCPUList(plan.service), formatCPUList(plan.load)
	r.logf("CPU placement: service on CPUs %s; harness and redis-server on CPUs %s", pl.ServiceCPUs, pl.LoadCPUs)
	return func() {
		if err := plan.pinAll(os.Getpid(), allowed); err != nil {
			r.logf("CPU placement: restoring the harness's CPUs: %v", err)
		}
		r.cpus = cpuPlan{}
	}
}

// preloadIngest streams the preload chain into `utxo-cache ingest` while
// generating it: the generator and the model work while the store syncs.
func (r *runner) preloadIngest(ctx context.Context, dataDir string) error {
	start := time.Now()
	logPath := filepath.Join(r.dir, "ingest.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.CommandContext(ctx, r.o.Bin, "ingest", "--data-dir", dataDir, "--format", "cbor", "-")
	cmd.Env = childEnv()
	cmd.Stdout, cmd.Stderr = logf, logf
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start ingest: %w", err)
	}
	r.logf("preloading %d UTXOs (%s, seed %d) into %s", r.o.UTXOs, r.o.Profile, r.o.Seed, dataDir)
	w := chain.NewCBORSeqWriter(stdin)
	blocks, perr := r.w.preload(r.o.plan(), w.Write)
	if perr == nil {
		perr = w.Flush()
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("ingest: %w (see %s)", err, logPath)
	}
	if perr != nil {
		return perr
	}
	r.report.Preload = PreloadResult{
		Blocks: blocks, UTXOs: r.w.gen.Live(), Height: r.w.modelTip().Height,
		Addresses: len(r.w.addrs), Exchanges: r.exchangeSizes(), Seconds: time.Since(start).Seconds(), Via: "ingest",
	}
	r.logf("preloaded %d blocks, %d UTXOs in %.1fs", blocks, r.w.gen.Live(), r.report.Preload.Seconds)
	return nil
}

func (r *runner) exchangeSizes() map[string]uint64 {
	r.w.mu.RLock()
	defer r.w.mu.RUnlock()
	out := map[string]uint64{}
	for _, a := range r.w.exchange {
		out[a] = r.w.model.Balance(a).Count
	}
	return out
}

// serviceArgs are the serve flags of a configuration.
func (r *runner) serviceArgs(config string) []string {
	switch config {
	case ConfigMemory, ConfigReplica: // the replica's writer and replica both
		return []string{"--memory-cache-bytes", "256MiB"}
	case ConfigRedis:
		return []string{"--memory-cache-bytes", "0", "--redis-url", r.redis.url()}
	case ConfigDisk:
		return []string{"--memory-cache-bytes", "0"}
	case ConfigFull:
		if r.o.Scenario == ScenarioSoak {
			return []string{"--memory-cache-bytes", soakMemoryTier, "--redis-url", r.redis.url()}
		}
		return []string{"--memory-cache-bytes", "256MiB", "--redis-url", r.redis.url()}
	}
	panic("unknown configuration " + config)
}

// service is a serve process the harness started.
type service struct {
	*process
	base, admin string   // base URLs of the API and of the pprof listener
	args        []string // serve's arguments
}

// startService starts serve with config's tiers on dataDir (pinned to the
// service's CPUs) and waits until it is ready.
func (r *runner) startService(ctx context.Context, config, dataDir, token, logName string) (*service, error) {
	return r.startServe(ctx, "serve ("+config+")", dataDir, logName, r.cpus.service,
		append([]string{"--admin-token", token}, r.serviceArgs(config)...))
}

// startServe starts `serve --data-dir dataDir` on free loopback ports with
// extra flags, on cpus (when the run pins), and waits until its /readyz
// answers 200.
//
// A serve that exits because another program took one of its ports between
// freePort and its bind (it opens nothing else before it listens) is started
// again on new ports, up to 3 times.
func (r *runner) startServe(ctx context.Context, name, dataDir, logName string, cpus []int, extra []string) (*service, error) {
	for attempt := 1; ; attempt++ {
		port, err1 := freePort()
		adminPort, err2 := freePort()
		if err := errors.Join(err1, err2); err != nil {
			return nil, err
		}
		s := &service{base: "http://127.0.0.1:" + strconv.Itoa(port), admin: "http://127.0.0.1:" + strconv.Itoa(adminPort)}
		s.args = append([]string{"serve", "--data-dir", dataDir, "--listen", "127.0.0.1:" + strconv.Itoa(port),
			"--admin-listen", "127.0.0.1:" + strconv.Itoa(adminPort), "--log-level", "warn"}, extra...)
		bin, args := r.cpus.command(cpus, r.o.Bin, s.args)
		logPath := filepath.Join(r.dir, logName)
		var err error
		if s.process, err = startProcess(name, logPath, bin, args...); err != nil {
			return nil, err
		}
		err = waitHTTP(ctx, r.ctl, s.base+"/readyz", s.process, 60*time.Second)
		if err == nil {
			return s, nil
		}
		err = errors.Join(err, s.stop(5*time.Second))
		if attempt == 3 || !lostPort(logPath) {
			return nil, err
		}
		r.logf("%s: a port was taken before it could bind it; starting it again on new ports", name)
	}
}

// runService starts serve with config's tiers on the store, checks that it
// starts at the preload's figures and runs the phases against it.
func (r *runner) runService(ctx context.Context, config, dataDir, token string) (res ConfigResult, err error) {
	res = ConfigResult{Name: config, Kind: "service"}
	if r.redis != nil {
		if err := r.redis.command("FLUSHALL", "+OK"); err != nil {
			return res, fmt.Errorf("flush redis: %w", err)
		}
	}
	svc, err := r.startService(ctx, config, dataDir, token, "serve-"+config+".log")
	if err != nil {
		return res, err
	}
	res.Args = redactToken(svc.args, token)
	res.Processes = append(res.Processes, svc.info("service"))
	defer func() {
		if serr := svc.stop(20 * time.Second); serr != nil {
			res.Error = serr.Error()
			err = errors.Join(err, serr)
		}
	}()
	r.logf("%s: serving on %s (pid %d)", config, svc.base, svc.pid())
	start, err := storeState(ctx, r.ctl, svc.base)
	if err != nil {
		return res, err
	}
	res.Start = &start
	if want := r.w.base.state; !start.sameFigures(want) {
		return res, fmt.Errorf("the service starts at %s, not at the preloaded store's %s", start, want)
	}
	r.w.setSeq(start.Seq)
	t := target{name: config, bases: []string{svc.base}, writer: svc.base, token: token, pid: svc.pid(), metrics: true, admin: svc.admin}
	return r.phases(ctx, t, res)
}

// target is what the phases of one configuration talk to.
type target struct {
	name    string
	bases   []string // read targets
	writer  string   // "" for no feed
	token   string
	pid     int    // service process, 0 when not ours
	metrics bool   // has /metrics with the tier counters
	admin   string // base URL of the service's pprof listener, "" for none
	bare    bool
	// replica: bases[0] is a replica of writer; the feed measures its
	// replication lag instead of polling it for visibility.
	replica bool
}

// phases runs warmup, max, rate and (memory and bare) hot against t.
func (r *runner) phases(ctx context.Context, t target, res ConfigResult) (ConfigResult, error) {
	if r.o.Warmup > 0 {
		r.phase(ctx, t, "warmup", phaseClosed, 0, r.o.Warmup)
	}
	res.Max = r.phase(ctx, t, "max", phaseClosed, 0, r.o.MaxDuration)
	rate := r.o.Rate
	if rate <= 0 {
		rate = r.o.RateFraction * res.Max.AchievedRate
	}
	if rate < 1 {
		return res, fmt.Errorf("the max phase reached %.1f requests/s: too little to pace the rate phase", res.Max.AchievedRate)
	}
	r.settle(ctx, t, rate)
	res.Rate = r.phase(ctx, t, "rate", phaseOpen, rate, r.o.RateDuration)
	if fr := res.Rate.Feed; fr != nil && len(fr.Errors) > 0 && fr.Blocks == 0 {
		return res, fmt.Errorf("the writer feed failed: %s", fr.Errors[0])
	}
	if (t.name == ConfigMemory || t.name == ConfigBare) && r.o.HotDuration > 0 {
		r.phase(ctx, t, "hot-warmup", phaseClosed, 0, r.o.HotDuration*2/5)
		hot := r.phase(ctx, t, "hot", phaseClosed, 0, r.o.HotDuration)
		res.Hot = &hot
	}
	r.logf("%s: max %.0f req/s p99 %.2f ms; rate %.0f/%.0f req/s p99 %.2f ms", t.name,
		res.Max.AchievedRate, res.Max.Latency.P99, res.Rate.AchievedRate, res.Rate.OfferedRate, res.Rate.Latency.P99)
	return res, nil
}

// settle runs the open loop at rate for a quarter of RateDuration, not
// recorded, before a measured open-loop phase at that rate. A closed loop
// at saturation (the max phase under the feed, the hot phase) leaves the
// service with queued Pebble flushes and compactions and the harness with
// a burst of its own; the first seconds of an open loop after it measured
// that hand-over (requests left the harness up to 190 ms late) rather than
// the service at that load.
func (r *runner) settle(ctx context.Context, t target, rate float64) {
	if d := r.o.RateDuration / 4; d > 0 {
		r.phase(ctx, t, "settle", phaseOpen, rate, d)
	}
}

type phaseMode int

const (
	phaseClosed phaseMode = iota
	phaseOpen
)

// phase runs one phase and collects its results.
func (r *runner) phase(ctx context.Context, t target, name string, mode phaseMode, rate float64, dur time.Duration) PhaseResult {
	r.phaseN++
	workers := r.o.Workers
	if mode == phaseOpen {
		workers = r.o.InFlight
	}
	start := time.Now()
	end := start.Add(dur)
	rec := newRecorder(start)
	gen := r.gen
	if strings.HasPrefix(name, "hot") {
		gen = r.hotGen
	}
	d := newDriver(r.client, t.bases, gen, rec, workers, r.o.Seed*1000+r.phaseN)
	if name == "warmup" {
		d.capture = r.capture
	}
	measured := name == "max" || name == "rate" || name == "hot" || name == "soak"
	// The max phase runs under the feed too: the rate phase's share of it
	// is then a share of what the service serves while blocks arrive, as
	// it always does in production (issue 25 §3).
	fed := (mode == phaseOpen || name == "max") && t.writer != "" && r.o.BlockRate > 0
	if measured && !t.bare && r.o.CheckFraction > 0 {
		d.check, d.checkFraction = newChecker(r.w, r.o.CheckBudget, !fed), r.o.CheckFraction
	}
	var before Samples
	if t.metrics && measured {
		before, _ = scrape(ctx, r.ctl, t.bases[0])
	}
	svc := watchProc(t.pid)
	self := watchProc(os.Getpid())
	var profiled chan *ProfileResult
	if r.o.CPUProfile && t.admin != "" && (name == "max" || name == "rate" || name == "hot") {
		profiled = make(chan *ProfileResult, 1)
		go func() { profiled <- r.profile(ctx, t, name, dur) }()
	}

	// Requests due before end are sent; a stalled service gets one request
	// timeout past the end to answer them.
	pctx, cancel := context.WithDeadline(ctx, end.Add(r.o.RequestTimeout+time.Second))
	defer cancel()
	var feedDone chan FeedResult
	if fed {
		f := &feed{w: r.w, client: r.ctl, writer: t.writer, token: t.token, rate: r.o.BlockRate, targets: t.bases}
		if t.replica {
			lc := newClient(maxLagInFlight, lagTimeout+5*time.Second)
			defer lc.CloseIdleConnections()
			f.targets, f.lag = nil, newLagObserver(lc, t.bases[0])
		}
		feedDone = make(chan FeedResult, 1)
		go func() { feedDone <- f.run(pctx, end) }()
	}
	var sent int64
	if mode == phaseOpen {
		ol := &openLoop{sched: Schedule{Start: start, Rate: rate}, end: end, limit: r.o.MaxRequests, workers: workers, clk: realClock{}}
		sent = ol.run(pctx, d.do)
	} else {
		cl := &closedLoop{end: end, limit: r.o.MaxRequests, workers: workers, clk: realClock{}}
		sent = cl.run(pctx, d.do)
	}
	// Until the last answer: a backlog the service drains after the end
	// lowers the achieved rate, as it should.
	wall := time.Since(start)
	res := PhaseResult{Name: name, Mode: "closed", Workers: workers, Seconds: wall.Seconds(), Sent: sent}
	if mode == phaseOpen {
		res.Mode, res.OfferedRate = "open", rate
	}
	if feedDone != nil {
		fr := <-feedDone
		res.Feed = &fr
	}
	if d.check != nil {
		cr := d.check.finish()
		res.Checks = &cr
	}
	m := rec.merge()
	res.Requests = m.all.TotalCount()
	res.OK = m.ok
	res.Latency = summarize(m.all)
	res.Endpoints = m.endpoints
	res.Errors = m.errors
	res.Timeline = m.timeline
	if mode == phaseOpen {
		lag := summarize(m.lag)
		res.SendLag = &lag
	}
	if res.Seconds > 0 {
		res.AchievedRate = float64(res.Requests) / res.Seconds
	}
	if t.metrics && measured && before != nil {
		if after, err := scrape(ctx, r.ctl, t.bases[0]); err == nil {
			ts := tierDelta(before, after)
			res.Cache = &ts
			if res.Feed != nil && res.Feed.Replication != nil {
				res.Feed.Replication.applyDelta(before, after)
			}
		}
	}
	res.Service = svc.finish()
	res.Harness = self.finish()
	if profiled != nil {
		res.Profile = <-profiled
	}
	if measured {
		r.logf("%s %s: %d requests, %.0f req/s, p99 %.2f ms, errors %v", t.name, name, res.Requests, res.AchievedRate, res.Latency.P99, res.Errors)
	}
	return res
}

// profile records a CPU profile of the service for the phase's duration
// (whole seconds, at least one) and summarizes it with `go tool pprof` when
// go is on PATH.
func (r *runner) profile(ctx context.Context, t target, phase string, dur time.Duration) *ProfileResult {
	secs := max(1, int(dur/time.Second))
	path := filepath.Join(r.dir, "cpu-"+t.name+"-"+phase+".pprof")
	pr := &ProfileResult{Path: filepath.Base(path)}
	err := func() error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.admin+"/debug/pprof/profile?seconds="+strconv.Itoa(secs), nil)
		if err != nil {
			return err
		}
		resp, err := r.ctl.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("pprof: status %d", resp.StatusCode)
		}
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		_, err = io.Copy(f, resp.Body)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	}()
	if err != nil {
		pr.Error = err.Error()
		return pr
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		return pr
	}
	// Flat (where the cycles burn) and cumulative (which paths).
	for _, args := range [][]string{{"-top", "-nodecount=20"}, {"-top", "-cum", "-nodecount=30"}} {
		cmd := append(append([]string{"tool", "pprof"}, args...), r.o.Bin, path)
		out, err := exec.CommandContext(ctx, gobin, cmd...).CombinedOutput()
		if err != nil {
			pr.Error = fmt.Sprintf("go tool pprof: %v", err)
			break
		}
		if pr.Top != "" {
			out = out[bytes.Index(out, []byte("\n      flat"))+1:] // the header once
			pr.Top += "\n"
		}
		pr.Top += string(out)
	}
	return pr
}

// runBare serves the captured bodies from the bare handler and runs the
// max and rate phases against it (no feed, no checks: it has no state).
func (r *runner) runBare(ctx context.Context) (res ConfigResult, err error) {
	res = ConfigResult{Name: ConfigBare, Kind: "bare"}
	bodies := r.bodies
	if len(bodies) == 0 {
		return res, errors.New("no answers were captured from a service to size the bare bodies")
	}
	raw, err := json.Marshal(bodies)
	if err != nil {
		return res, err
	}
	bodiesPath := filepath.Join(r.dir, "bare-bodies.json")
	if err := os.WriteFile(bodiesPath, raw, 0o644); err != nil {
		return res, err
	}
	res.BodySizes = map[string]int{}
	for k, b := range bodies {
		res.BodySizes[k] = len(b)
	}
	port, err := freePort()
	if err != nil {
		return res, err
	}
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	args := []string{"--bare-serve", "127.0.0.1:" + strconv.Itoa(port), "--bare-bodies", bodiesPath}
	res.Args = args
	bin, cmdArgs := r.cpus.command(r.cpus.service, r.o.BareBin, args)
	p, err := startProcess("bare server", filepath.Join(r.dir, "bare.log"), bin, cmdArgs...)
	if err != nil {
		return res, err
	}
	res.Processes = append(res.Processes, p.info("bare"))
	defer func() {
		if serr := p.stop(10 * time.Second); serr != nil {
			res.Error = serr.Error()
			err = errors.Join(err, serr)
		}
	}()
	if err := waitHTTP(ctx, r.ctl, base+"/readyz", p, 30*time.Second); err != nil {
		return res, err
	}
	r.logf("bare: serving on %s (pid %d)", base, p.pid())
	t := target{name: ConfigBare, bases: []string{base}, pid: p.pid(), bare: true}
	if res, err = r.phases(ctx, t, res); err != nil {
		return res, err
	}
	// The reads under the feed are held to the bare handler's p99 at the
	// same rate: one open-loop phase at each configuration's offered rate.
	for _, c := range r.report.Configs {
		if c.Rate.OfferedRate <= 0 || ctx.Err() != nil {
			continue
		}
		r.settle(ctx, t, c.Rate.OfferedRate)
		p := r.phase(ctx, t, "rate-as-"+c.Name, phaseOpen, c.Rate.OfferedRate, r.o.RateDuration)
		res.RatesAs = append(res.RatesAs, BareRate{Config: c.Name, Phase: p})
		r.logf("bare at %s's rate: %.0f/%.0f req/s p99 %.2f ms", c.Name, p.AchievedRate, p.OfferedRate, p.Latency.P99)
	}
	return res, nil
}

// external preloads an empty writer over HTTP and runs the phases against
// the given targets.
func (r *runner) external(ctx context.Context) error {
	var bases []string
	for _, raw := range r.o.Targets {
		u, err := CheckTarget(raw, r.o.AllowRemote)
		if err != nil {
			return err
		}
		bases = append(bases, u.String())
	}
	writer := r.o.Writer
	if writer == "" {
		writer = bases[0]
	} else {
		u, err := CheckTarget(writer, r.o.AllowRemote)
		if err != nil {
			return err
		}
		writer = u.String()
	}
	if err := r.preloadHTTP(ctx, writer); err != nil {
		return err
	}
	r.report.Fairness.Placement.Note = "an external run: the services are not the harness's to pin"
	st, err := storeState(ctx, r.ctl, writer)
	if err != nil {
		return fmt.Errorf("loadtest: the writer after the preload: %w", err)
	}
	r.w.setSeq(st.Seq)
	t := target{name: "external", bases: bases, writer: writer, token: r.o.AdminToken, metrics: true}
	if r.o.BlockRate <= 0 {
		t.writer = ""
	}
	res, err := r.phases(ctx, t, ConfigResult{Name: "external", Kind: "external", Args: bases})
	r.report.Configs = append(r.report.Configs, res)
	return err
}

// preloadHTTP posts the preload chain to an empty writer.
func (r *runner) preloadHTTP(ctx context.Context, writer string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, writer+"/v1/tip", nil)
	if err != nil {
		return err
	}
	resp, err := r.ctl.Do(req)
	if err != nil {
		return fmt.Errorf("loadtest: the writer: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("loadtest: the writer's GET /v1/tip answers %d", resp.StatusCode)
	}
	// An empty store's answers carry no tip headers (docs/api.md: tip null).
	if height := resp.Header.Get("X-Tip-Height"); height != "" {
		return fmt.Errorf("loadtest: the writer %s holds a chain (tip %s): an external run needs an empty store, "+
			"because the harness checks answers against the chain it generates", writer, height)
	}
	start := time.Now()
	f := &feed{w: r.w, client: r.ctl, writer: writer, token: r.o.AdminToken}
	blocks, err := r.w.preload(r.o.plan(), func(b *chain.Block) error {
		_, err := f.post(ctx, "/v1/blocks", "application/cbor", chain.AppendBlockCBOR(nil, b))
		return err
	})
	if err != nil {
		return fmt.Errorf("preload over HTTP: %w", err)
	}
	r.report.Preload = PreloadResult{
		Blocks: blocks, UTXOs: r.w.gen.Live(), Height: r.w.modelTip().Height,
		Addresses: len(r.w.addrs), Exchanges: r.exchangeSizes(), Seconds: time.Since(start).Seconds(), Via: "http",
	}
	return nil
}

// storeState reads a service's tip, UTXO count and digest (GET /v1/tip).
func storeState(ctx context.Context, c *http.Client, base string) (StoreState, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/tip", nil)
	if err != nil {
		return StoreState{}, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return StoreState{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return StoreState{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return StoreState{}, fmt.Errorf("GET /v1/tip: status %d: %s", resp.StatusCode, bytes.TrimSpace(body))
	}
	var a wireAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		return StoreState{}, fmt.Errorf("GET /v1/tip: %w", err)
	}
	if a.Tip == nil {
		return StoreState{}, errors.New("GET /v1/tip: the store is empty")
	}
	tip, err := a.Tip.tip()
	if err != nil {
		return StoreState{}, fmt.Errorf("GET /v1/tip: %w", err)
	}
	seq, err := strconv.ParseUint(resp.Header.Get("X-Commit-Seq"), 10, 64)
	if err != nil {
		return StoreState{}, fmt.Errorf("GET /v1/tip: X-Commit-Seq %q: %w", resp.Header.Get("X-Commit-Seq"), err)
	}
	return StoreState{Height: tip.Height, Hash: tip.Hash.String(), UTXOs: a.UtxoCount, Digest: a.Digest, Seq: seq}, nil
}

// WriteChain writes the preload chain of o's scenario to path (.jsonl or
// .cbor), for `utxo-cache ingest`, and returns how many blocks it wrote. It
// streams: its memory does not grow with the chain (streamChain), and no
// model of the chain is kept.
func WriteChain(o Options, path string) (blocks int, utxos int, err error) {
	st, err := writeChain(o, path, streamSpendable)
	return st.Blocks, st.UTXOs, err
}

func writeChain(o Options, path string, spendable int) (ChainStats, error) {
	o.Bin = "-" // not needed: nothing is started
	o = o.EnsureDefaults()
	if _, err := defaultsOf(o.Scenario); err != nil {
		return ChainStats{}, err
	}
	wo := o.workloadOptions()
	wo.Spendable = spendable
	g, err := workload.New(wo)
	if err != nil {
		return ChainStats{}, err
	}
	bf, err := createBlockFile(path)
	if err != nil {
		return ChainStats{}, err
	}
	st, err := streamChain(g, o.plan(), bf.write)
	if cerr := bf.Close(); err == nil {
		err = cerr
	}
	return st, err
}

func redactToken(args []string, token string) []string {
	out := slices.Clone(args)
	for i := range out {
		if out[i] == token {
			out[i] = "<token>"
		}
	}
	return out
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

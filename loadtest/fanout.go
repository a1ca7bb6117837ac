package loadtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/replication"
	"github.com/utxo-cache/utxo-cache/replication/jetstream"
)

// Transports of the fanout scenario.
const (
	FanoutHTTP      = "http"
	FanoutJetStream = "jetstream"
)

// FanoutResult is the fanout scenario's figures: for each transport, legs
// with 0 and each of FanoutFollowers lightweight followers, each on a fresh
// copy of the preloaded store, the same script posted at FanoutRate steps a
// second, in Rounds palindromic rounds (see fanoutOrder); Summary compares
// the legs of each follower count with those with none, by their medians.
type FanoutResult struct {
	Blocks, Rollbacks int
	Rate              float64
	Rounds            int
	NATSServer        string
	Legs              []FanoutLeg
	Summary           []FanoutSummary `json:"summary"`
}

// FanoutLeg is one writer with Followers followers over Transport.
type FanoutLeg struct {
	Transport string `json:"transport"`
	Followers int    `json:"followers"`
	Steps     int    `json:"steps"`
	// LoadAvg is the machine's load average when the leg started.
	LoadAvg string `json:"loadavg,omitempty"`
	// Seconds is the time from the first post to the last acknowledgement.
	Seconds float64 `json:"seconds"`
	// Writer is the writer process's resource use over the posting, NATS
	// nats-server's (which every leg runs, with its followers or not).
	Writer *ProcStats `json:"writer,omitempty"`
	NATS   *ProcStats `json:"nats,omitempty"`
	// Apply is the distribution of the writer's own time to validate and
	// commit each block of the leg (utxo_cache_writer_apply_seconds,
	// outcome applied), read block by block: the harness scrapes the
	// histogram's sum after each acknowledgement, before the next post, and
	// a block's time is the difference of two scrapes that counted it alone.
	// It leaves out the HTTP round trip and the harness's own scheduling.
	Apply LatencySummary `json:"apply"`
	// ApplyBlocksPerSec is the leg's apply rate: 1000 / Apply.P50, the
	// blocks a second the writer would apply back to back at its median
	// block's apply time.
	ApplyBlocksPerSec float64 `json:"apply_blocks_per_second"`
	// MeanApplyBlocksPerSec is the blocks applied over the sum of their
	// apply times (the mean's inverse, which one stalled commit moves).
	MeanApplyBlocksPerSec float64 `json:"mean_apply_blocks_per_second"`
	// AllocsPerStep and AllocBytesPerStep are the writer process's heap
	// allocations (go_memstats_mallocs_total, _alloc_bytes_total) over the
	// posting, per step: everything it did, counted, not timed.
	AllocsPerStep     float64 `json:"writer_allocs_per_step"`
	AllocBytesPerStep float64 `json:"writer_alloc_bytes_per_step"`
	// Lag is, over every follower and change, the time from the writer's
	// acknowledgement of the change to the follower's having decoded and
	// checked it (0 when it had it before the acknowledgement arrived).
	Lag LatencySummary `json:"lag"`
	// ChangeBytes is the bytes a follower read per change, on average:
	// the change log's answers over HTTP, the stream's records over
	// JetStream.
	ChangeBytes float64 `json:"change_bytes,omitempty"`
	// Bad counts the changes a follower found out of order or inconsistent.
	Bad   int64  `json:"bad_changes"`
	Error string `json:"error,omitempty"`

	lag *hdrhistogram.Histogram // Lag's, for the summary's pooled figure
}

// FanoutSummary is one transport's legs with Followers followers (Legs of
// them), by the median over those legs, compared with its legs with none.
type FanoutSummary struct {
	Transport string `json:"transport"`
	Followers int    `json:"followers"`
	Legs      int    `json:"legs"`
	// ApplyP50 is the median over the legs of their apply p50, in ms;
	// ApplyP50Min and ApplyP50Max their range.
	ApplyP50    float64 `json:"apply_p50_ms"`
	ApplyP50Min float64 `json:"apply_p50_min_ms"`
	ApplyP50Max float64 `json:"apply_p50_max_ms"`
	ApplyP99    float64 `json:"apply_p99_ms"` // median over the legs
	// ApplyRatio is the apply rate with these followers over that with
	// none: the legs with none's ApplyP50 over this ApplyP50 (target ≥ 0.95
	// for 100 JetStream followers). Spread is (ApplyP50Max - ApplyP50Min) /
	// ApplyP50: the legs' disagreement, which for the legs with none (the
	// same work each time) is the measure's own noise; a ratio that differs
	// from 1 by less than that spread does not tell the two apart.
	ApplyRatio float64 `json:"apply_ratio"`
	Spread     float64 `json:"spread"`
	// MeanApplyRatio is the same ratio by the medians of the legs'
	// MeanApplyBlocksPerSec.
	MeanApplyRatio float64 `json:"mean_apply_ratio"`
	// CPUCores is the median of the writer's CPU over the legs;
	// MilliCoresPerFollower its excess over the legs with none, per
	// follower, in thousandths of a core.
	CPUCores              float64 `json:"writer_cpu_cores"`
	MilliCoresPerFollower float64 `json:"writer_millicores_per_follower"`
	// AllocsPerStep is the median of the legs' writer allocations per
	// step; AllocsPerFollowerStep its excess over the legs with none, per
	// follower.
	AllocsPerStep         float64 `json:"writer_allocs_per_step"`
	AllocsPerFollowerStep float64 `json:"writer_allocs_per_follower_step"`
	// NATSCores is the median of nats-server's CPU over the legs;
	// NATSMilliCoresPerFollower its excess over the legs with none, per
	// follower.
	NATSCores                 float64 `json:"nats_cpu_cores"`
	NATSMilliCoresPerFollower float64 `json:"nats_millicores_per_follower"`
	// ChangeBytes is the median of the legs' bytes read per change.
	ChangeBytes float64 `json:"change_bytes,omitempty"`
	// LagP99 is the median of the legs' lag p99, LagP99Max the largest,
	// in ms; LagPooled is the lag over every change of every leg at once,
	// which a single leg's burst of other work weighs on more.
	LagP99    float64        `json:"lag_p99_ms"`
	LagP99Max float64        `json:"lag_p99_max_ms"`
	LagPooled LatencySummary `json:"lag_pooled"`
}

// fanout runs the fanout scenario.
func (r *runner) fanout(ctx context.Context, dataDir, token string) error {
	fr := &FanoutResult{Rate: r.o.FanoutRate, Rounds: r.o.ApplyRounds}
	r.report.Fanout = fr
	bodies := make([][]byte, len(r.w.script.steps))
	for i, st := range r.w.script.steps {
		if st.block == nil {
			fr.Rollbacks++
			bodies[i] = []byte(`{"height":` + strconv.FormatUint(st.rollbackTo, 10) + `}`)
		} else {
			fr.Blocks++
			bodies[i] = chain.AppendBlockCBOR(nil, st.block)
		}
	}
	bin := r.o.NATSServer
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("nats-server"); err != nil {
			if _, serr := os.Stat("/usr/sbin/nats-server"); serr != nil {
				return errors.New("loadtest: the fanout scenario needs nats-server (apt-get install nats-server, or --nats-server)")
			}
			bin = "/usr/sbin/nats-server"
		}
	}
	fr.NATSServer = bin
	port, err := freePort()
	if err != nil {
		return err
	}
	natsDir := filepath.Join(r.dir, "nats")
	_ = os.RemoveAll(natsDir)
	defer os.RemoveAll(natsDir)
	// On the harness's CPUs: what NATS costs is not the writer's.
	nbin, nargs := r.cpus.command(r.cpus.load, bin, []string{"-a", "127.0.0.1", "-p", strconv.Itoa(port), "-js", "-sd", natsDir})
	nats, err := startProcess("nats-server", filepath.Join(r.dir, "nats-server.log"), nbin, nargs...)
	if err != nil {
		return err
	}
	defer func() { _ = nats.stop(5 * time.Second) }()
	natsURL := "nats://127.0.0.1:" + strconv.Itoa(port)
	if err := waitTCP(ctx, "127.0.0.1:"+strconv.Itoa(port), 20*time.Second); err != nil {
		return fmt.Errorf("nats-server: %w", err)
	}
	var errs []error
	for _, l := range fanoutOrder(r.o.FanoutTransports, r.o.FanoutFollowers, r.o.ApplyRounds) {
		if ctx.Err() != nil {
			return errors.Join(append(errs, ctx.Err())...)
		}
		leg, err := r.fanoutLeg(ctx, len(fr.Legs), l.Transport, l.Followers, natsURL, nats.pid(), dataDir, token, bodies)
		if err != nil {
			err = fmt.Errorf("fanout leg %s with %d followers: %w", l.Transport, l.Followers, err)
			leg.Error = joinNonEmpty(leg.Error, err.Error())
			errs = append(errs, err)
		}
		cpu := 0.0
		if leg.Writer != nil {
			cpu = leg.Writer.CPUCores
		}
		r.logf("fanout: %s, %d followers: writer apply p50 %.2f ms (%.1f blocks/s), p99 %.2f ms, %.3f cores, %.0f allocs/step; lag p99 %.1f ms, %d bad",
			l.Transport, l.Followers, leg.Apply.P50, leg.ApplyBlocksPerSec, leg.Apply.P99, cpu, leg.AllocsPerStep, leg.Lag.P99, leg.Bad)
		fr.Legs = append(fr.Legs, leg)
	}
	fr.Summary = summarizeFanout(fr.Legs)
	return errors.Join(errs...)
}

// fanoutOrder is the order of the scenario's legs: each round runs, for
// each transport, a leg with no follower and one with each count, and
// every other round runs the same legs backwards (0, 10, 100 | 100, 10, 0
// ...). A machine that drifts over the run (another job starting, a disk
// filling its cache) then weighs on each count alike, and the legs of one
// transport are spread over the whole run, not packed into one half of it.
func fanoutOrder(transports []string, counts []int, rounds int) []FanoutLeg {
	var round []FanoutLeg
	for _, t := range transports {
		round = append(round, FanoutLeg{Transport: t})
		for _, n := range counts {
			round = append(round, FanoutLeg{Transport: t, Followers: n})
		}
	}
	var out []FanoutLeg
	for i := range rounds {
		if i%2 == 0 {
			out = append(out, round...)
			continue
		}
		for j := len(round) - 1; j >= 0; j-- {
			out = append(out, round[j])
		}
	}
	return out
}

// summarizeFanout compares, for each transport, the legs of each follower
// count with its legs with none, by medians over the legs (failed legs left
// out): the median of a few legs is not moved by one leg that a burst of
// other work on the machine slowed down.
func summarizeFanout(legs []FanoutLeg) []FanoutSummary {
	type key struct {
		transport string
		followers int
	}
	var keys []key
	byKey := map[key][]FanoutLeg{}
	for _, l := range legs {
		if l.Error != "" || l.Apply.Count == 0 {
			continue
		}
		k := key{l.Transport, l.Followers}
		if _, ok := byKey[k]; !ok {
			keys = append(keys, k)
		}
		byKey[k] = append(byKey[k], l)
	}
	slices.SortStableFunc(keys, func(a, b key) int {
		if a.transport != b.transport {
			return strings.Compare(a.transport, b.transport)
		}
		return a.followers - b.followers
	})
	col := func(ls []FanoutLeg, f func(FanoutLeg) float64) []float64 {
		v := make([]float64, len(ls))
		for i, l := range ls {
			v[i] = f(l)
		}
		return v
	}
	cpu := func(l FanoutLeg) float64 {
		if l.Writer == nil {
			return 0
		}
		return l.Writer.CPUCores
	}
	natsCPU := func(l FanoutLeg) float64 {
		if l.NATS == nil {
			return 0
		}
		return l.NATS.CPUCores
	}
	var out []FanoutSummary
	for _, k := range keys {
		ls := byKey[k]
		p50s := col(ls, func(l FanoutLeg) float64 { return l.Apply.P50 })
		lags := col(ls, func(l FanoutLeg) float64 { return l.Lag.P99 })
		s := FanoutSummary{Transport: k.transport, Followers: k.followers, Legs: len(ls),
			ApplyP50: median(p50s), ApplyP50Min: slices.Min(p50s), ApplyP50Max: slices.Max(p50s),
			ApplyP99:      median(col(ls, func(l FanoutLeg) float64 { return l.Apply.P99 })),
			CPUCores:      median(col(ls, cpu)),
			AllocsPerStep: median(col(ls, func(l FanoutLeg) float64 { return l.AllocsPerStep })),
			NATSCores:     median(col(ls, natsCPU)),
			ChangeBytes:   median(col(ls, func(l FanoutLeg) float64 { return l.ChangeBytes })),
			LagP99:        median(lags), LagP99Max: slices.Max(lags),
		}
		if s.ApplyP50 > 0 {
			s.Spread = (s.ApplyP50Max - s.ApplyP50Min) / s.ApplyP50
		}
		pooled := newHist()
		for _, l := range ls {
			if l.lag != nil {
				pooled.Merge(l.lag)
			}
		}
		s.LagPooled = summarize(pooled)
		if base, ok := byKey[key{k.transport, 0}]; ok && k.followers > 0 {
			b := median(col(base, func(l FanoutLeg) float64 { return l.Apply.P50 }))
			if s.ApplyP50 > 0 {
				s.ApplyRatio = b / s.ApplyP50
			}
			if bm := median(col(base, func(l FanoutLeg) float64 { return l.MeanApplyBlocksPerSec })); bm > 0 {
				s.MeanApplyRatio = median(col(ls, func(l FanoutLeg) float64 { return l.MeanApplyBlocksPerSec })) / bm
			}
			n := float64(k.followers)
			s.MilliCoresPerFollower = (s.CPUCores - median(col(base, cpu))) / n * 1000
			s.NATSMilliCoresPerFollower = (s.NATSCores - median(col(base, natsCPU))) / n * 1000
			s.AllocsPerFollowerStep = (s.AllocsPerStep - median(col(base, func(l FanoutLeg) float64 { return l.AllocsPerStep }))) / n
		}
		out = append(out, s)
	}
	return out
}

// Targets of the fanout scenario, with fanoutTargetFollowers JetStream
// followers.
const (
	fanoutTargetFollowers = 100
	fanoutApplyShare      = 0.95 // apply rate with the followers over with none
	fanoutLagP99Ms        = 250.0
)

// fanoutVerdicts judge the JetStream legs with fanoutTargetFollowers
// followers (with the most followers when no leg had that many) against
// the legs with none.
func (r *Report) fanoutVerdicts() []Verdict {
	fr := r.Fanout
	if fr == nil {
		return nil
	}
	var s, none *FanoutSummary
	for i := range fr.Summary {
		x := &fr.Summary[i]
		if x.Transport != FanoutJetStream {
			continue
		}
		switch {
		case x.Followers == 0:
			none = x
		case s != nil && s.Followers == fanoutTargetFollowers:
			// the target's count, found already
		case s == nil || x.Followers == fanoutTargetFollowers || x.Followers > s.Followers:
			s = x
		}
	}
	n := fanoutTargetFollowers
	if s != nil {
		n = s.Followers
	}
	a := Verdict{Target: fmt.Sprintf("writer apply rate with %d JetStream followers ≥ %.2f× with none (median block's apply time, medians over legs, same run)", n, fanoutApplyShare),
		Threshold: fmt.Sprintf("≥ %.2f", fanoutApplyShare)}
	l := Verdict{Target: fmt.Sprintf("lag p99 < %.0f ms with %d JetStream followers (writer acknowledgement to every follower having the change)", fanoutLagP99Ms, n),
		Threshold: fmt.Sprintf("< %.0f ms", fanoutLagP99Ms)}
	if s == nil || none == nil {
		a.Status, a.Detail = "SKIP", "no JetStream leg with followers, or none without, finished"
		l.Status, l.Detail = "SKIP", a.Detail
		return []Verdict{a, l}
	}
	a.Value = fmt.Sprintf("%.3f (apply p50 %.3f ms with, %.3f ms without)", s.ApplyRatio, s.ApplyP50, none.ApplyP50)
	a.Status = passMiss(s.ApplyRatio >= fanoutApplyShare)
	a.Detail = fmt.Sprintf("%d and %d legs; the legs with none spread %.1f%%, those with followers %.1f%%; writer %+.1f allocations per step and %+.2f millicores per follower",
		s.Legs, none.Legs, 100*none.Spread, 100*s.Spread, s.AllocsPerFollowerStep, s.MilliCoresPerFollower)
	l.Value = fmt.Sprintf("%.1f ms (median of %d legs; largest %.1f ms)", s.LagP99, s.Legs, s.LagP99Max)
	l.Detail = fmt.Sprintf("over every change of every leg at once: p50 %.1f ms, p99 %.1f ms", s.LagPooled.P50, s.LagPooled.P99)
	l.Status = passMiss(s.LagP99 < fanoutLagP99Ms)
	return []Verdict{a, l}
}

// waitTCP waits until addr accepts connections.
func waitTCP(ctx context.Context, addr string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			return c.Close()
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%s accepts no connection: %w", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// fanoutLeg runs one leg on a fresh copy of the preloaded store.
func (r *runner) fanoutLeg(ctx context.Context, i int, transport string, n int, natsURL string, natsPID int, dataDir, token string, bodies [][]byte) (leg FanoutLeg, err error) {
	leg = FanoutLeg{Transport: transport, Followers: n, LoadAvg: loadAvg()}
	ctx, cancel := context.WithTimeout(ctx, r.o.ApplyTimeout)
	defer cancel()
	dir := filepath.Join(r.dir, "store-fanout")
	defer os.RemoveAll(dir)
	if err := os.RemoveAll(dir); err != nil {
		return leg, err
	}
	if _, err := copyStore(dataDir, dir); err != nil {
		return leg, err
	}
	r.startConfig()
	var b [16]byte
	_, _ = rand.Read(b[:])
	repl := hex.EncodeToString(b[:])
	tokenFile := filepath.Join(r.dir, "replication-fanout.token")
	if err := os.WriteFile(tokenFile, []byte(repl+"\n"), 0o600); err != nil {
		return leg, err
	}
	args := append([]string{"--admin-token", token, "--replication-token-file", tokenFile}, r.serviceArgs(ConfigReplica)...)
	name := fmt.Sprintf("fanout_%d", i+1)
	if transport == FanoutJetStream {
		args = append(args, "--jetstream", natsURL, "--jetstream-name", name)
	}
	w, err := r.startServe(ctx, "writer ("+name+")", dir, "serve-"+name+"-writer.log", r.cpus.service, args)
	if err != nil {
		return leg, err
	}
	defer func() {
		if serr := w.stop(10 * time.Second); serr != nil {
			err = errors.Join(err, serr)
		}
	}()
	start, err := storeState(ctx, r.ctl, w.base)
	if err != nil {
		return leg, err
	}
	steps := len(r.w.script.steps)
	fol := &followers{start: start.Seq, recv: make([][]time.Time, n), bad: new(atomic.Int64)}
	fctx, stopFollowers := context.WithCancel(ctx)
	var wg sync.WaitGroup
	ready := make(chan struct{}, n)
	for k := range n {
		fol.recv[k] = make([]time.Time, steps)
		wg.Add(1)
		go func() {
			defer wg.Done()
			var src replication.ChangeSource
			if transport == FanoutJetStream {
				js, err := jetstream.NewSource(jetstream.Options{URLs: natsURL, Name: name})
				if err != nil {
					fol.bad.Add(1)
					ready <- struct{}{}
					return
				}
				defer js.Close()
				src = js
			} else {
				src = &httpFollower{base: w.base, token: repl, client: &http.Client{}}
			}
			fol.run(fctx, k, src, ready)
		}()
	}
	defer func() { stopFollowers(); wg.Wait() }()
	for range n {
		select {
		case <-ready:
		case <-ctx.Done():
			return leg, ctx.Err()
		}
	}
	before, err := scrape(ctx, r.ctl, w.base)
	if err != nil {
		return leg, err
	}
	applied := map[string]string{"outcome": "applied"}
	applyURL := w.base + "/metrics?name[]=" + metricWriterApply
	sum, count := before.Sum(metricWriterApply+"_sum", applied), before.Sum(metricWriterApply+"_count", applied)
	apply := newSyncHist()
	f := &feed{client: r.ctl, writer: w.base, token: token}
	acks := make([]time.Time, steps)
	wp, np := watchProc(w.pid()), watchProc(natsPID)
	watching := true
	stopWatching := func() {
		if watching {
			watching = false
			leg.Writer, leg.NATS = wp.finish(), np.finish()
		}
	}
	defer stopWatching()
	t0 := time.Now()
	every := time.Duration(float64(time.Second) / r.o.FanoutRate)
	var last uint64
	for k, st := range r.w.script.steps {
		if d := time.Until(t0.Add(time.Duration(k) * every)); d > 0 {
			time.Sleep(d) // the feed's pace
		}
		path, ct := "/v1/blocks", "application/cbor"
		if st.block == nil {
			path, ct = "/v1/rollback", "application/json"
		}
		answer, err := f.postIdempotent(ctx, path, ct, bodies[k])
		if err != nil {
			stopWatching()
			return leg, fmt.Errorf("step %d (%s): %w", k, path, err)
		}
		acks[k] = time.Now()
		if last, err = writeSeq(answer, ""); err != nil {
			stopWatching()
			return leg, fmt.Errorf("step %d (%s): %w", k, path, err)
		}
		leg.Steps++
		// The block's own apply time, read before the next post: the
		// writer is idle between the two at this pace.
		ss, err := scrapeURL(ctx, r.ctl, applyURL)
		if err != nil {
			stopWatching()
			return leg, fmt.Errorf("step %d: %w", k, err)
		}
		s, c := ss.Sum(metricWriterApply+"_sum", applied), ss.Sum(metricWriterApply+"_count", applied)
		if c == count+1 {
			apply.record(time.Duration((s - sum) * float64(time.Second)))
		}
		sum, count = s, c
	}
	leg.Seconds = time.Since(t0).Seconds()
	stopWatching()
	after, err := scrape(ctx, r.ctl, w.base)
	if err != nil {
		return leg, err
	}
	leg.Apply = apply.summary()
	if leg.Apply.P50 > 0 {
		leg.ApplyBlocksPerSec = 1000 / leg.Apply.P50
	}
	blocks := after.Sum(metricWriterApply+"_count", applied) - before.Sum(metricWriterApply+"_count", applied)
	if secs := after.Sum(metricWriterApply+"_sum", applied) - before.Sum(metricWriterApply+"_sum", applied); secs > 0 {
		leg.MeanApplyBlocksPerSec = blocks / secs
	}
	if leg.Steps > 0 {
		leg.AllocsPerStep = (after.Sum(metricMallocs, nil) - before.Sum(metricMallocs, nil)) / float64(leg.Steps)
		leg.AllocBytesPerStep = (after.Sum(metricAllocBytes, nil) - before.Sum(metricAllocBytes, nil)) / float64(leg.Steps)
	}
	if last != start.Seq+uint64(steps) {
		return leg, fmt.Errorf("the writer acknowledged seq %d after %d steps from %d", last, steps, start.Seq)
	}
	// Every follower must have every change.
	deadline := time.Now().Add(30 * time.Second)
	for !fol.complete() {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return leg, fmt.Errorf("followers missing changes 30 s after the last acknowledgement")
		}
		time.Sleep(20 * time.Millisecond)
	}
	lag := newSyncHist()
	fol.mu.Lock()
	for k := range n {
		for s, at := range fol.recv[k] {
			lag.record(max(at.Sub(acks[s]), 0))
		}
	}
	fol.mu.Unlock()
	leg.Lag = lag.summary()
	leg.lag = lag.h
	leg.Bad = fol.bad.Load()
	if n > 0 && leg.Steps > 0 {
		leg.ChangeBytes = float64(fol.bytes.Load()) / float64(n*leg.Steps)
	}
	if leg.Bad > 0 {
		return leg, fmt.Errorf("%d changes out of order or inconsistent", leg.Bad)
	}
	return leg, nil
}

// followers are a leg's lightweight followers: each reads every change
// after start, checks it follows the one before (its seq, and for a block
// its parent and the tip after it), and records when it had it.
type followers struct {
	start uint64
	mu    sync.Mutex
	recv  [][]time.Time // [follower][seq-start-1], guarded by mu
	bad   *atomic.Int64
	bytes atomic.Int64 // read, over every follower
}

func (f *followers) complete() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.recv {
		for _, t := range r {
			if t.IsZero() {
				return false
			}
		}
	}
	return true
}

func (f *followers) run(ctx context.Context, k int, src replication.ChangeSource, ready chan<- struct{}) {
	after := f.start
	var tip chain.Tip
	signalled := false
	for ctx.Err() == nil {
		wait := 10 * time.Second
		if !signalled {
			wait = 0 // ready as soon as the source answers
		}
		b, err := src.Changes(ctx, replication.ChangesRequest{After: after, Wait: wait})
		if err != nil {
			if !signalled && ctx.Err() == nil {
				time.Sleep(50 * time.Millisecond) // the stream is being created
				continue
			}
			if ctx.Err() == nil {
				f.bad.Add(1)
				time.Sleep(100 * time.Millisecond)
			}
			continue
		}
		if !signalled {
			signalled = true
			ready <- struct{}{}
		}
		f.bytes.Add(int64(b.Bytes))
		now := time.Now()
		for _, c := range b.Changes {
			ok := c.Seq == after+1
			if c.Kind == chain.ChangeApply && c.Block != nil {
				ok = ok && c.After.Tip.Hash == c.Block.Hash && (tip.Empty || tip.Hash == (chain.Hash{}) || c.Block.PrevHash == tip.Hash)
			}
			if c.Kind == chain.ChangeRollback {
				ok = ok && c.After.Tip.Height == c.Target.Height
			}
			if !ok {
				f.bad.Add(1)
			}
			tip = c.After.Tip
			after = c.Seq
			if i := int(c.Seq - f.start - 1); i >= 0 {
				f.mu.Lock()
				if i < len(f.recv[k]) {
					f.recv[k][i] = now
				}
				f.mu.Unlock()
			}
		}
		if b.DecodeErr != nil {
			f.bad.Add(1)
		}
	}
}

// httpFollower reads the writer's change log, as a replica does.
type httpFollower struct {
	base, token string
	client      *http.Client
}

func (h *httpFollower) Changes(ctx context.Context, req replication.ChangesRequest) (*replication.ChangeBatch, error) {
	u := h.base + "/v1/replication/changes?after=" + strconv.FormatUint(req.After, 10) + "&wait=" + strconv.FormatFloat(req.Wait.Seconds(), 'f', -1, 64)
	hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	hreq.Header.Set("Authorization", "Bearer "+h.token)
	resp, err := h.client.Do(hreq)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("changes: %d %s", resp.StatusCode, body)
	}
	b := &replication.ChangeBatch{Bytes: len(body)}
	replication.DecodeChanges(body, replication.LimitsFrom(chain.Limits{}, resp.Header.Get), b)
	return b, nil
}

func (h *httpFollower) Checkpoint(context.Context) (*replication.CheckpointDownload, error) {
	return nil, errors.New("loadtest: a follower does not bootstrap")
}

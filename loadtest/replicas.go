package loadtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/utxo-cache/utxo-cache/chain"
)

// replicaSet is a writer started with a replication token and the replicas
// the harness bootstrapped from it (`serve --replica-of`), each on a store
// directory of its own under the results directory.
type replicaSet struct {
	writer    *service
	replicas  []*service
	dirs      []string // the replicas' data directories, removed by stop
	tokenFile string
}

// startReplicaSet starts a writer on writerDir (the memory layout, the
// admin token, a fresh replication token) on writerCPUs, then n replicas of
// it on replicaCPUs (bootstrapped concurrently from its checkpoint), and
// waits until each is ready: bootstrapped, verified and in contact with the
// writer. Logs are serve-<name>-writer.log and serve-<name>-replica-<i>.log.
func (r *runner) startReplicaSet(ctx context.Context, name, writerDir, token string, n int, writerCPUs, replicaCPUs []int) (*replicaSet, error) {
	var b [16]byte
	_, _ = rand.Read(b[:])
	set := &replicaSet{tokenFile: filepath.Join(r.dir, "replication-"+name+".token")}
	if err := os.WriteFile(set.tokenFile, []byte(hex.EncodeToString(b[:])+"\n"), 0o600); err != nil {
		return nil, err
	}
	layout := r.serviceArgs(ConfigReplica)
	var err error
	set.writer, err = r.startServe(ctx, "writer ("+name+")", writerDir, "serve-"+name+"-writer.log", writerCPUs,
		append([]string{"--admin-token", token, "--replication-token-file", set.tokenFile}, layout...))
	if err != nil {
		return nil, errors.Join(err, set.stop())
	}
	set.replicas = make([]*service, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		dir := filepath.Join(r.dir, fmt.Sprintf("store-%s-replica-%d", name, i+1))
		set.dirs = append(set.dirs, dir)
		if err := os.RemoveAll(dir); err != nil {
			return nil, errors.Join(err, set.stop())
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			set.replicas[i], errs[i] = r.startServe(ctx, fmt.Sprintf("replica %d (%s)", i+1, name), dir,
				fmt.Sprintf("serve-%s-replica-%d.log", name, i+1), replicaCPUs,
				append([]string{"--replica-of", set.writer.base, "--replication-token-file", set.tokenFile}, layout...))
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, errors.Join(err, set.stop())
	}
	return set, nil
}

// processes are the set's processes, for the report.
func (s *replicaSet) processes() []ProcessInfo {
	out := []ProcessInfo{s.writer.info("writer")}
	for i, p := range s.replicas {
		out = append(out, p.info("replica "+strconv.Itoa(i+1)))
	}
	return out
}

// stop stops the replicas, then the writer (a writer stopping first would
// only make them retry), and removes the replicas' stores and the token.
func (s *replicaSet) stop() error {
	var errs []error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, p := range s.replicas {
		if p == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := p.stop(20 * time.Second); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if s.writer != nil {
		errs = append(errs, s.writer.stop(20*time.Second))
	}
	for _, d := range s.dirs {
		errs = append(errs, os.RemoveAll(d))
	}
	if err := os.Remove(s.tokenFile); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// runReplica runs the replica configuration: a writer on the store copy at
// writerDir (on the harness's CPUs: it is not what the reads measure) and
// one replica of it (on the service's CPUs); the feed posts to the writer,
// the reads and the correctness sample go to the replica, and the feed
// measures the replication lag of every acknowledged write.
func (r *runner) runReplica(ctx context.Context, writerDir, token string) (res ConfigResult, err error) {
	res = ConfigResult{Name: ConfigReplica, Kind: "service"}
	if r.redis != nil {
		if err := r.redis.command("FLUSHALL", "+OK"); err != nil {
			return res, fmt.Errorf("flush redis: %w", err)
		}
	}
	set, err := r.startReplicaSet(ctx, ConfigReplica, writerDir, token, 1, r.cpus.load, r.cpus.service)
	if err != nil {
		return res, err
	}
	rep := set.replicas[0]
	res.Args = redactToken(rep.args, token)
	res.Processes = set.processes()
	defer func() {
		if serr := set.stop(); serr != nil {
			res.Error = joinNonEmpty(res.Error, serr.Error())
			err = errors.Join(err, serr)
		}
	}()
	r.logf("replica: writer on %s (pid %d), replica on %s (pid %d)", set.writer.base, set.writer.pid(), rep.base, rep.pid())
	want := r.w.base.state
	wst, err := storeState(ctx, r.ctl, set.writer.base)
	if err != nil {
		return res, fmt.Errorf("the writer: %w", err)
	}
	if !wst.sameFigures(want) {
		return res, fmt.Errorf("the writer starts at %s, not at the preloaded store's %s", wst, want)
	}
	start, err := storeState(ctx, r.ctl, rep.base)
	if err != nil {
		return res, fmt.Errorf("the replica: %w", err)
	}
	res.Start = &start
	if start != wst {
		return res, fmt.Errorf("the replica starts at %s (seq %d), not at its writer's %s (seq %d)", start, start.Seq, wst, wst.Seq)
	}
	r.w.setSeq(start.Seq)
	t := target{name: ConfigReplica, bases: []string{rep.base}, writer: set.writer.base, token: token, pid: rep.pid(),
		metrics: true, admin: rep.admin, replica: true}
	return r.phases(ctx, t, res)
}

// ThroughputResult is the replicas scenario: the writer's apply throughput
// with no replica and with Replicas replicas tailing its change log, over
// the same script from the same store.
type ThroughputResult struct {
	Replicas  int `json:"replicas"`
	Blocks    int `json:"blocks"`    // blocks of the script each leg posts
	Rollbacks int `json:"rollbacks"` // rollbacks among them
	// Legs in the order they ran (ABBA: without, with; with, without; …).
	Legs []ApplyLeg `json:"legs"`
	// Without and With are the writer's apply throughput over the legs of
	// each kind: the blocks it applied over the time it spent applying them
	// (utxo_cache_writer_apply_seconds, outcome applied, summed); Ratio is
	// With / Without. See ApplyLeg.ApplyBlocksPerSec.
	Without float64 `json:"without_blocks_per_s"`
	With    float64 `json:"with_blocks_per_s"`
	Ratio   float64 `json:"ratio"`
}

const metricWriterApply = "utxo_cache_writer_apply_seconds"

// ApplyLeg is one leg of the replicas scenario: a writer on a fresh copy of
// the preloaded store, with Replicas replicas, fed the script back to back.
type ApplyLeg struct {
	Replicas     int            `json:"replicas"`
	Blocks       int64          `json:"blocks"`
	Rollbacks    int64          `json:"rollbacks"`
	Seconds      float64        `json:"seconds"` // first post to last acknowledgement
	BlocksPerSec float64        `json:"blocks_per_s"`
	Apply        LatencySummary `json:"apply"` // POST /v1/blocks, send to answer
	// WriterApplied and WriterApplySeconds are, from the writer's
	// utxo_cache_writer_apply_seconds{outcome="applied"} over the posts,
	// the blocks it applied and the time it spent applying them (validate
	// and commit, on its writer goroutine); ApplyBlocksPerSec is their
	// ratio: the writer's apply throughput, whatever the harness's own
	// speed between an acknowledgement and the next post (the harness
	// shares its CPUs with the replicas, so BlocksPerSec, which includes
	// that time, also measures what the replicas cost the harness).
	WriterApplied      int64   `json:"writer_applied"`
	WriterApplySeconds float64 `json:"writer_apply_seconds"`
	ApplyBlocksPerSec  float64 `json:"apply_blocks_per_s"`
	// CatchUpSeconds is how long after the last acknowledgement the last
	// replica reached the writer's seq (0 with no replica).
	CatchUpSeconds float64 `json:"catch_up_seconds,omitempty"`
	// Final is the writer's state after the leg; every replica reported
	// exactly this one (seq, tip, count and digest) after catching up.
	Final     *StoreState   `json:"final,omitempty"`
	Writer    *ProcStats    `json:"writer,omitempty"`
	Processes []ProcessInfo `json:"processes,omitempty"`
	Error     string        `json:"error,omitempty"`
}

// replicaThroughput runs the replicas scenario (see ThroughputResult). The
// writer runs on the service's CPUs and the replicas on the harness's, so
// that the writer's core does the same work in both legs but for what the
// replicas cost it (the change log's long polls and answers); the replicas'
// own applying competes with the harness, not with the writer, except for
// the disk they share.
func (r *runner) replicaThroughput(ctx context.Context, dataDir, token string) error {
	tr := &ThroughputResult{Replicas: r.o.Replicas}
	r.report.Throughput = tr
	bodies := make([][]byte, len(r.w.script.steps))
	for i, st := range r.w.script.steps {
		if st.block == nil {
			tr.Rollbacks++
			bodies[i] = []byte(`{"height":` + strconv.FormatUint(st.rollbackTo, 10) + `}`)
		} else {
			tr.Blocks++
			bodies[i] = chain.AppendBlockCBOR(nil, st.block)
		}
	}
	r.report.Fairness.ScriptBlocks, r.report.Fairness.ScriptRollbacks = tr.Blocks, tr.Rollbacks
	var order []int
	for round := range r.o.ApplyRounds {
		if round%2 == 0 {
			order = append(order, 0, r.o.Replicas)
		} else {
			order = append(order, r.o.Replicas, 0)
		}
	}
	var errs []error
	var secs, blocks [2]float64
	for i, n := range order {
		if ctx.Err() != nil {
			errs = append(errs, ctx.Err())
			break
		}
		leg, err := r.applyLeg(ctx, i, n, dataDir, token, bodies)
		if err != nil {
			err = fmt.Errorf("leg %d (%d replicas): %w", i+1, n, err)
			leg.Error = joinNonEmpty(leg.Error, err.Error())
			errs = append(errs, err)
		} else {
			k := min(n, 1)
			secs[k] += leg.WriterApplySeconds
			blocks[k] += float64(leg.WriterApplied)
		}
		tr.Legs = append(tr.Legs, leg)
		r.logf("replicas: leg %d, %d replicas: %d blocks posted in %.2fs (%.1f blocks/s), applied in %.2fs (%.1f blocks/s), catch-up %.2fs",
			i+1, n, leg.Blocks, leg.Seconds, leg.BlocksPerSec, leg.WriterApplySeconds, leg.ApplyBlocksPerSec, leg.CatchUpSeconds)
	}
	// The same script from the same store ends at the same state.
	var first *StoreState
	for _, l := range tr.Legs {
		if l.Final == nil {
			continue
		}
		if first == nil {
			first = l.Final
		} else if *l.Final != *first {
			errs = append(errs, fmt.Errorf("the legs ended at different states: %s (seq %d) and %s (seq %d)", *first, first.Seq, *l.Final, l.Final.Seq))
		}
	}
	if secs[0] > 0 && secs[1] > 0 {
		tr.Without, tr.With = blocks[0]/secs[0], blocks[1]/secs[1]
		tr.Ratio = tr.With / tr.Without
	}
	return errors.Join(errs...)
}

// applyLeg runs one leg with n replicas on a fresh copy of the preloaded
// store and removes the copy afterwards.
func (r *runner) applyLeg(ctx context.Context, i, n int, dataDir, token string, bodies [][]byte) (leg ApplyLeg, err error) {
	leg = ApplyLeg{Replicas: n}
	ctx, cancel := context.WithTimeout(ctx, r.o.ApplyTimeout)
	defer cancel()
	dir := filepath.Join(r.dir, "store-throughput")
	defer os.RemoveAll(dir)
	if err := os.RemoveAll(dir); err != nil {
		return leg, err
	}
	if _, err := copyStore(dataDir, dir); err != nil {
		return leg, err
	}
	r.startConfig()
	name := "throughput-" + strconv.Itoa(i+1)
	set, err := r.startReplicaSet(ctx, name, dir, token, n, r.cpus.service, r.cpus.load)
	if err != nil {
		return leg, err
	}
	leg.Processes = set.processes()
	defer func() {
		if serr := set.stop(); serr != nil {
			err = errors.Join(err, serr)
		}
	}()
	start, err := storeState(ctx, r.ctl, set.writer.base)
	if err != nil {
		return leg, err
	}
	if !start.sameFigures(r.w.base.state) {
		return leg, fmt.Errorf("the writer starts at %s, not at the preloaded store's %s", start, r.w.base.state)
	}
	before, err := scrape(ctx, r.ctl, set.writer.base)
	if err != nil {
		return leg, err
	}
	f := &feed{client: r.ctl, writer: set.writer.base, token: token}
	apply := newSyncHist()
	wp := watchProc(set.writer.pid())
	watching := true
	defer func() {
		if watching { // the leg failed before its figures
			wp.finish()
		}
	}()
	t0 := time.Now()
	var last uint64
	for k, st := range r.w.script.steps {
		path, ct := "/v1/blocks", "application/cbor"
		if st.block == nil {
			path, ct = "/v1/rollback", "application/json"
		}
		s0 := time.Now()
		answer, err := f.postIdempotent(ctx, path, ct, bodies[k])
		if err != nil {
			return leg, fmt.Errorf("step %d (%s): %w", k, path, err)
		}
		if st.block == nil {
			leg.Rollbacks++
		} else {
			apply.record(time.Since(s0))
			leg.Blocks++
		}
		if last, err = writeSeq(answer, ""); err != nil {
			return leg, fmt.Errorf("step %d (%s): %w", k, path, err)
		}
	}
	acked := time.Now()
	leg.Seconds = acked.Sub(t0).Seconds()
	leg.BlocksPerSec = float64(leg.Blocks) / leg.Seconds
	leg.Apply = apply.summary()
	leg.Writer, watching = wp.finish(), false
	after, err := scrape(ctx, r.ctl, set.writer.base)
	if err != nil {
		return leg, err
	}
	applied := map[string]string{"outcome": "applied"}
	leg.WriterApplied = int64(after.Sum(metricWriterApply+"_count", applied) - before.Sum(metricWriterApply+"_count", applied))
	leg.WriterApplySeconds = after.Sum(metricWriterApply+"_sum", applied) - before.Sum(metricWriterApply+"_sum", applied)
	if leg.WriterApplied != leg.Blocks || leg.WriterApplySeconds <= 0 {
		return leg, fmt.Errorf("the writer's metrics count %d blocks applied in %.3f s; the leg posted %d", leg.WriterApplied, leg.WriterApplySeconds, leg.Blocks)
	}
	leg.ApplyBlocksPerSec = float64(leg.WriterApplied) / leg.WriterApplySeconds
	final, err := storeState(ctx, r.ctl, set.writer.base)
	if err != nil {
		return leg, err
	}
	leg.Final = &final
	if final.Seq != last {
		return leg, fmt.Errorf("the writer is at seq %d after its last acknowledgement at %d", final.Seq, last)
	}
	for j, rep := range set.replicas {
		if err := waitSeq(ctx, r.ctl, rep.base, last); err != nil {
			return leg, fmt.Errorf("replica %d: %w", j+1, err)
		}
		got, err := storeState(ctx, r.ctl, rep.base)
		if err != nil {
			return leg, fmt.Errorf("replica %d: %w", j+1, err)
		}
		if got != final {
			return leg, fmt.Errorf("replica %d is at %s (seq %d), its writer at %s (seq %d)", j+1, got, got.Seq, final, final.Seq)
		}
	}
	if n > 0 {
		leg.CatchUpSeconds = time.Since(acked).Seconds()
	}
	return leg, nil
}

// waitSeq waits until the service at base has published seq, with
// `GET /v1/tip?min_seq=seq&wait=2`, asked again after each 503 behind,
// until ctx ends.
func waitSeq(ctx context.Context, c *http.Client, base string, seq uint64) error {
	url := base + "/v1/tip?min_seq=" + strconv.FormatUint(seq, 10) + "&wait=2"
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := c.Do(req)
		if err != nil {
			return fmt.Errorf("waiting for seq %d: %w", seq, err)
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusOK:
			return nil
		case http.StatusServiceUnavailable:
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("waiting for seq %d: %w", seq, err)
			}
			if !strings.Contains(string(body), `"behind"`) {
				// Not a wait that ran out (bootstrapping again): not in a
				// tight loop.
				if !(realClock{}).SleepUntil(ctx, time.Now().Add(50*time.Millisecond)) {
					return fmt.Errorf("waiting for seq %d: %w", seq, ctx.Err())
				}
			}
		default:
			return fmt.Errorf("waiting for seq %d: status %d: %s", seq, resp.StatusCode, strings.TrimSpace(string(body)))
		}
	}
}

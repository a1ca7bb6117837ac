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
	"strconv"
	"sync"
	"sync/atomic"
	"time"

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
// second.
type FanoutResult struct {
	Blocks, Rollbacks int
	Rate              float64
	NATSServer        string
	Legs              []FanoutLeg
}

// FanoutLeg is one writer with Followers followers over Transport.
type FanoutLeg struct {
	Transport string `json:"transport"`
	Followers int    `json:"followers"`
	Steps     int    `json:"steps"`
	// Seconds is the time from the first post to the last acknowledgement.
	Seconds float64 `json:"seconds"`
	// Writer is the writer process's resource use over the posting.
	Writer *ProcStats `json:"writer,omitempty"`
	// ApplyBlocksPerSec is the blocks the writer applied over the time it
	// spent applying them (utxo_cache_writer_apply_seconds).
	ApplyBlocksPerSec float64 `json:"apply_blocks_per_second"`
	// ApplyRatio is ApplyBlocksPerSec over the transport's leg with no
	// follower.
	ApplyRatio float64 `json:"apply_ratio"`
	// MilliCoresPerFollower is the writer's CPU over the leg with no
	// follower, per follower, in thousandths of a core.
	MilliCoresPerFollower float64 `json:"writer_millicores_per_follower"`
	// Lag is, over every follower and change, the time from the writer's
	// acknowledgement of the change to the follower's having decoded and
	// checked it (0 when it had it before the acknowledgement arrived).
	Lag LatencySummary `json:"lag"`
	// Bad counts the changes a follower found out of order or inconsistent.
	Bad   int64  `json:"bad_changes"`
	Error string `json:"error,omitempty"`
}

// fanout runs the fanout scenario.
func (r *runner) fanout(ctx context.Context, dataDir, token string) error {
	fr := &FanoutResult{Rate: r.o.FanoutRate}
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
	for _, transport := range []string{FanoutHTTP, FanoutJetStream} {
		var base *FanoutLeg
		for _, n := range append([]int{0}, r.o.FanoutFollowers...) {
			if ctx.Err() != nil {
				return errors.Join(append(errs, ctx.Err())...)
			}
			leg, err := r.fanoutLeg(ctx, len(fr.Legs), transport, n, natsURL, dataDir, token, bodies)
			if err != nil {
				err = fmt.Errorf("fanout leg %s with %d followers: %w", transport, n, err)
				leg.Error = joinNonEmpty(leg.Error, err.Error())
				errs = append(errs, err)
			}
			if n == 0 && err == nil {
				base = &leg
			} else if base != nil && n > 0 {
				if base.ApplyBlocksPerSec > 0 {
					leg.ApplyRatio = leg.ApplyBlocksPerSec / base.ApplyBlocksPerSec
				}
				if leg.Writer != nil && base.Writer != nil {
					leg.MilliCoresPerFollower = (leg.Writer.CPUCores - base.Writer.CPUCores) / float64(n) * 1000
				}
			}
			r.logf("fanout: %s, %d followers: writer %.1f applied blocks/s, lag p99 %.1f ms, %d bad", transport, n, leg.ApplyBlocksPerSec, leg.Lag.P99, leg.Bad)
			fr.Legs = append(fr.Legs, leg)
		}
	}
	return errors.Join(errs...)
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
func (r *runner) fanoutLeg(ctx context.Context, i int, transport string, n int, natsURL, dataDir, token string, bodies [][]byte) (leg FanoutLeg, err error) {
	leg = FanoutLeg{Transport: transport, Followers: n}
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
	f := &feed{client: r.ctl, writer: w.base, token: token}
	acks := make([]time.Time, steps)
	wp := watchProc(w.pid())
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
			wp.finish()
			return leg, fmt.Errorf("step %d (%s): %w", k, path, err)
		}
		acks[k] = time.Now()
		if last, err = writeSeq(answer, ""); err != nil {
			wp.finish()
			return leg, fmt.Errorf("step %d (%s): %w", k, path, err)
		}
		leg.Steps++
	}
	leg.Seconds = time.Since(t0).Seconds()
	leg.Writer = wp.finish()
	after, err := scrape(ctx, r.ctl, w.base)
	if err != nil {
		return leg, err
	}
	applied := map[string]string{"outcome": "applied"}
	blocks := after.Sum(metricWriterApply+"_count", applied) - before.Sum(metricWriterApply+"_count", applied)
	if secs := after.Sum(metricWriterApply+"_sum", applied) - before.Sum(metricWriterApply+"_sum", applied); secs > 0 {
		leg.ApplyBlocksPerSec = blocks / secs
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
	leg.Bad = fol.bad.Load()
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

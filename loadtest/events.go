package loadtest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/utxo-cache/utxo-cache/chain"
)

// The events scenario (EventsResult): one writer, the feed at BlockRate,
// and EventStreams Server-Sent Event streams of EventKeys addresses each,
// opened by the harness, in legs without and with the streams.

// EventsResult is the events scenario's figures.
type EventsResult struct {
	Streams       int     `json:"streams"`
	KeysPerStream int     `json:"keys_per_stream"`
	Addresses     int     `json:"addresses"` // distinct addresses watched, all paid by the script
	BlockRate     float64 `json:"block_rate"`
	Blocks        int     `json:"blocks"`    // blocks of the script each leg posts
	Rollbacks     int     `json:"rollbacks"` // rollbacks among them
	// Legs in the order they ran (ABBA: without, with; with, without; …).
	Legs []EventsLeg `json:"legs"`
	// ApplyWithout and ApplyWith are the POST /v1/blocks latencies (send to
	// acknowledgement, the writer's apply and publish included) over the
	// legs of each kind; ApplyRatio is With's p99 over Without's.
	ApplyWithout LatencySummary `json:"apply_without"`
	ApplyWith    LatencySummary `json:"apply_with"`
	ApplyRatio   float64        `json:"apply_p99_ratio"`
	// Delivery is the service's utxo_cache_event_delivery_seconds over
	// the legs with streams: from a change's publish to its event flushed
	// on a stream's connection (per stream and event). Its percentiles are
	// interpolated within the histogram's buckets.
	Delivery BucketSummary `json:"delivery"`
	// Received is, over the same events, the harness's view: from the
	// writer's acknowledgement of the block (a moment after its publish)
	// to the event read by the harness's client; an event read before the
	// acknowledgement counts as 0. Sent is from the block's POST being
	// sent (an upper bound: it includes the apply).
	ReceivedAfterAck  LatencySummary `json:"received_after_ack"`
	ReceivedAfterSend LatencySummary `json:"received_after_send"`
	// IdleStreamBytes is the service's memory per idle stream: the slope
	// of its settled live Go heap and goroutine stacks (memFigures) over the
	// number of idle streams open, a least-squares fit over the points of
	// each leg with streams (EventsLeg.Memory), averaged over those legs.
	// IdleStreamInuse is the same from the heap's spans in use (which also
	// counts the free room the subscriptions' garbage left in spans that
	// hold live objects), IdleStreamRSS from its resident set (which a GC
	// does not give back at once): both are reported, not targets.
	IdleStreamBytes float64 `json:"idle_stream_bytes"`
	IdleStreamStack float64 `json:"idle_stream_stack_bytes"` // the stacks' part of IdleStreamBytes
	IdleStreamInuse float64 `json:"idle_stream_inuse_bytes"`
	IdleStreamRSS   float64 `json:"idle_stream_rss_bytes"`
}

// BucketSummary is a latency distribution from a Prometheus histogram, in
// milliseconds.
type BucketSummary struct {
	Count int64   `json:"count"`
	Mean  float64 `json:"mean_ms"`
	P50   float64 `json:"p50_ms"`
	P99   float64 `json:"p99_ms"`
}

// EventsLeg is one leg of the events scenario.
type EventsLeg struct {
	Streams   int            `json:"streams"`
	Blocks    int64          `json:"blocks"`
	Rollbacks int64          `json:"rollbacks"`
	Seconds   float64        `json:"seconds"`
	Apply     LatencySummary `json:"apply"` // POST /v1/blocks, send to answer
	// Events the streams' clients read, and the service's count of events
	// flushed on live streams over the leg (they must be equal).
	Events    int64         `json:"events"`
	Delivered int64         `json:"delivered"`
	Delivery  BucketSummary `json:"delivery"`
	// The memory per idle stream of the leg (the slopes of Memory's
	// figures; StackPerStream is the stacks' part of HeapPerStream) and how
	// well a line fits Memory's live figures (R²).
	HeapPerStream  float64       `json:"heap_per_idle_stream_bytes,omitempty"`
	StackPerStream float64       `json:"stack_per_idle_stream_bytes,omitempty"`
	InusePerStream float64       `json:"inuse_per_idle_stream_bytes,omitempty"`
	RSSPerStream   float64       `json:"rss_per_idle_stream_bytes,omitempty"`
	HeapFitR2      float64       `json:"heap_fit_r2,omitempty"`
	Memory         []MemPoint    `json:"memory,omitempty"`
	Final          *StoreState   `json:"final,omitempty"`
	Writer         *ProcStats    `json:"writer,omitempty"`
	Processes      []ProcessInfo `json:"processes,omitempty"`
	Error          string        `json:"error,omitempty"`
}

const metricEventDelivery = "utxo_cache_event_delivery_seconds"

// eventAddresses returns up to n distinct addresses the script's blocks
// pay, in the order they first appear.
func eventAddresses(steps []feedStep, n int) []string {
	seen := map[string]bool{}
	var out []string
	for _, st := range steps {
		if st.block == nil {
			continue
		}
		for i := range st.block.Txs {
			for _, o := range st.block.Txs[i].Outputs {
				if o.Address == "" || seen[o.Address] {
					continue
				}
				seen[o.Address] = true
				out = append(out, o.Address)
				if len(out) == n {
					return out
				}
			}
		}
	}
	return out
}

// eventsScenario runs the events scenario's legs (ABBA, like the replicas
// scenario's) on fresh copies of the preloaded store.
func (r *runner) eventsScenario(ctx context.Context, dataDir, token string) error {
	er := &EventsResult{Streams: r.o.EventStreams, KeysPerStream: r.o.EventKeys, BlockRate: r.o.BlockRate}
	r.report.Events = er
	bodies := make([][]byte, len(r.w.script.steps))
	for i, st := range r.w.script.steps {
		if st.block == nil {
			er.Rollbacks++
			bodies[i] = []byte(`{"height":` + strconv.FormatUint(st.rollbackTo, 10) + `}`)
		} else {
			er.Blocks++
			bodies[i] = chain.AppendBlockCBOR(nil, st.block)
		}
	}
	r.report.Fairness.ScriptBlocks, r.report.Fairness.ScriptRollbacks = er.Blocks, er.Rollbacks
	addrs := eventAddresses(r.w.script.steps, r.o.EventStreams*r.o.EventKeys)
	er.Addresses = len(addrs)
	streams := make([][]string, r.o.EventStreams)
	for i, a := range addrs {
		streams[i%len(streams)] = append(streams[i%len(streams)], a)
	}
	var order []int
	for round := range r.o.ApplyRounds {
		if round%2 == 0 {
			order = append(order, 0, r.o.EventStreams)
		} else {
			order = append(order, r.o.EventStreams, 0)
		}
	}
	var errs []error
	applies := [2]*syncHist{newSyncHist(), newSyncHist()}
	afterAck, afterSend := newSyncHist(), newSyncHist()
	var delivery promHist
	var heap, stack, inuse, rss []float64
	for i, n := range order {
		if ctx.Err() != nil {
			errs = append(errs, ctx.Err())
			break
		}
		var legStreams [][]string
		if n > 0 {
			legStreams = streams
		}
		leg, d, err := r.eventsLeg(ctx, i, legStreams, dataDir, token, bodies, applies[min(n, 1)], afterAck, afterSend)
		if err != nil {
			err = fmt.Errorf("leg %d (%d streams): %w", i+1, n, err)
			leg.Error = joinNonEmpty(leg.Error, err.Error())
			errs = append(errs, err)
		} else if n > 0 {
			delivery.add(d)
			heap, stack = append(heap, leg.HeapPerStream), append(stack, leg.StackPerStream)
			inuse, rss = append(inuse, leg.InusePerStream), append(rss, leg.RSSPerStream)
		}
		er.Legs = append(er.Legs, leg)
		r.logf("events: leg %d, %d streams: %d blocks in %.1fs, POST p99 %.2f ms, %d events read (%d delivered), delivery p99 %.2f ms, idle stream %.1f KiB heap and stacks (fit R² %.4f), %.1f KiB RSS",
			i+1, n, leg.Blocks, leg.Seconds, leg.Apply.P99, leg.Events, leg.Delivered, leg.Delivery.P99, leg.HeapPerStream/1024, leg.HeapFitR2, leg.RSSPerStream/1024)
	}
	er.ApplyWithout, er.ApplyWith = applies[0].summary(), applies[1].summary()
	if er.ApplyWithout.P99 > 0 && er.ApplyWith.Count > 0 {
		er.ApplyRatio = er.ApplyWith.P99 / er.ApplyWithout.P99
	}
	er.Delivery = delivery.summary()
	er.ReceivedAfterAck, er.ReceivedAfterSend = afterAck.summary(), afterSend.summary()
	if len(heap) > 0 {
		er.IdleStreamBytes, er.IdleStreamStack, er.IdleStreamInuse, er.IdleStreamRSS = mean(heap), mean(stack), mean(inuse), mean(rss)
	}
	return errors.Join(errs...)
}

// eventsLeg runs one leg: a writer on a fresh copy of the preloaded store,
// the streams (none: a leg without), the script posted at BlockRate. It
// returns the delivery histogram's growth over the leg.
func (r *runner) eventsLeg(ctx context.Context, i int, streams [][]string, dataDir, token string, bodies [][]byte,
	apply, afterAck, afterSend *syncHist) (leg EventsLeg, delivery promHist, err error) {
	leg = EventsLeg{Streams: len(streams)}
	ctx, cancel := context.WithTimeout(ctx, r.o.ApplyTimeout)
	defer cancel()
	dir := filepath.Join(r.dir, "store-events")
	defer os.RemoveAll(dir)
	if err := os.RemoveAll(dir); err != nil {
		return leg, delivery, err
	}
	if _, err := copyStore(dataDir, dir); err != nil {
		return leg, delivery, err
	}
	r.startConfig()
	svc, err := r.startServe(ctx, fmt.Sprintf("writer (events leg %d)", i+1), dir, fmt.Sprintf("serve-events-%d.log", i+1), r.cpus.service,
		append([]string{"--admin-token", token, "--max-event-streams", strconv.Itoa(max(len(streams), 1))}, r.serviceArgs(ConfigMemory)...))
	if err != nil {
		return leg, delivery, err
	}
	leg.Processes = []ProcessInfo{svc.info("writer")}
	defer func() {
		if serr := svc.stop(20 * time.Second); serr != nil {
			err = errors.Join(err, serr)
		}
	}()
	start, err := storeState(ctx, r.ctl, svc.base)
	if err != nil {
		return leg, delivery, err
	}
	if !start.sameFigures(r.w.base.state) {
		return leg, delivery, fmt.Errorf("the writer starts at %s, not at the preloaded store's %s", start, r.w.base.state)
	}

	// Open the streams in idleMemorySteps equal batches, the service's
	// settled memory measured before the first and after each (idleMemory),
	// and keep them open for the feed.
	cl := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: len(streams) + 1, DisableCompression: true}}
	defer cl.CloseIdleConnections()
	var clients []*sseClient
	var wg sync.WaitGroup
	sctx, stopStreams := context.WithCancel(ctx)
	defer func() {
		stopStreams()
		wg.Wait()
	}()
	open := func(batch [][]string) error {
		opened := make(chan error, len(batch))
		for _, keys := range batch {
			c := &sseClient{}
			clients = append(clients, c)
			wg.Add(1)
			go func() {
				defer wg.Done()
				c.run(sctx, cl, svc.base, keys, opened)
			}()
		}
		for range batch {
			if err := <-opened; err != nil {
				return fmt.Errorf("opening a stream: %w", err)
			}
		}
		return nil
	}
	if len(streams) > 0 {
		if err := r.idleMemory(ctx, svc, &leg, len(streams), func(n int) error { return open(streams[len(clients):n]) }); err != nil {
			return leg, delivery, err
		}
	}

	before, err := scrape(ctx, r.ctl, svc.base)
	if err != nil {
		return leg, delivery, err
	}
	f := &feed{client: r.ctl, writer: svc.base, token: token}
	legApply := newSyncHist()
	type posted struct{ sent, acked time.Time }
	times := map[uint64]posted{}
	wp := watchProc(svc.pid())
	watching := true
	defer func() {
		if watching {
			wp.finish()
		}
	}()
	t0 := time.Now()
	var last uint64
	for k, st := range r.w.script.steps {
		at := t0.Add(time.Duration(float64(k) / r.o.BlockRate * float64(time.Second)))
		if !(realClock{}).SleepUntil(ctx, at) {
			return leg, delivery, ctx.Err()
		}
		path, ct := "/v1/blocks", "application/cbor"
		if st.block == nil {
			path, ct = "/v1/rollback", "application/json"
		}
		s0 := time.Now()
		answer, err := f.postIdempotent(ctx, path, ct, bodies[k])
		if err != nil {
			return leg, delivery, fmt.Errorf("step %d (%s): %w", k, path, err)
		}
		acked := time.Now()
		if st.block == nil {
			leg.Rollbacks++
		} else {
			apply.record(acked.Sub(s0))
			legApply.record(acked.Sub(s0))
			leg.Blocks++
		}
		if last, err = writeSeq(answer, ""); err != nil {
			return leg, delivery, fmt.Errorf("step %d (%s): %w", k, path, err)
		}
		times[last] = posted{s0, acked}
	}
	leg.Seconds = time.Since(t0).Seconds()
	leg.Apply = legApply.summary()
	leg.Writer, watching = wp.finish(), false
	final, err := storeState(ctx, r.ctl, svc.base)
	if err != nil {
		return leg, delivery, err
	}
	leg.Final = &final
	if final.Seq != last {
		return leg, delivery, fmt.Errorf("the writer is at seq %d after its last acknowledgement at %d", final.Seq, last)
	}
	if len(streams) == 0 {
		return leg, delivery, nil
	}
	// Wait until the clients have read every event the service flushed, and
	// the service flushes no more (its dispatcher is past the last seq).
	var after Samples
	deadline := time.Now().Add(15 * time.Second)
	for prev := int64(-1); ; {
		if after, err = scrape(ctx, r.ctl, svc.base); err != nil {
			return leg, delivery, err
		}
		delivered := int64(after.Sum(metricEventDelivery+"_count", nil) - before.Sum(metricEventDelivery+"_count", nil))
		read := int64(0)
		for _, c := range clients {
			read += c.count()
		}
		if delivered == prev && read == delivered {
			leg.Events, leg.Delivered = read, delivered
			break
		}
		if time.Now().After(deadline) {
			return leg, delivery, fmt.Errorf("after the last block: the clients read %d events, the service flushed %d", read, delivered)
		}
		prev = delivered
		if !(realClock{}).SleepUntil(ctx, time.Now().Add(300*time.Millisecond)) {
			return leg, delivery, ctx.Err()
		}
	}
	stopStreams()
	wg.Wait()
	for j, c := range clients {
		if c.err != nil {
			return leg, delivery, fmt.Errorf("stream %d: %w", j, c.err)
		}
		for _, ev := range c.events {
			p, ok := times[ev.seq]
			if !ok {
				continue // a seq the leg did not post (none: every step is acknowledged)
			}
			afterAck.record(max(ev.at.Sub(p.acked), 0))
			afterSend.record(ev.at.Sub(p.sent))
		}
	}
	delivery = promHistOf(after, metricEventDelivery).minus(promHistOf(before, metricEventDelivery))
	leg.Delivery = delivery.summary()
	if leg.Events == 0 {
		return leg, delivery, errors.New("the streams read no event: the script pays none of their addresses")
	}
	return leg, delivery, nil
}

// idleMemorySteps is the number of equal batches a leg opens its streams
// in; its memory is measured before the first and after each.
const idleMemorySteps = 4

// MemPoint is the service's settled memory (settledMemory) with Streams
// idle streams open.
type MemPoint struct {
	Streams int     `json:"streams"`
	Live    float64 `json:"live_bytes"`  // live Go heap and goroutine stacks
	Stacks  float64 `json:"stack_bytes"` // goroutine stacks (in Live and Inuse)
	Inuse   float64 `json:"inuse_bytes"` // heap spans in use and stacks
	RSS     float64 `json:"rss_bytes"`
	GCs     int     `json:"gcs"` // GCs forced until the figures settled
	// The store's compactions so far: the same at every point of a leg
	// when none ran during its measurement.
	Compactions float64 `json:"compactions"`
}

// idleMemory measures the service's memory per idle stream: once the
// store has stopped compacting (storeQuiet), it opens the leg's n streams
// in idleMemorySteps equal batches (open(k) opens streams up to the kth),
// measures the service's settled memory before the first batch and after
// each, and sets leg's per-stream figures to the slopes of least-squares
// lines through the points. A slope over several points, each the minimum
// of several samples after repeated GCs, leaves out what does not grow with
// the streams (the service's own heap, the garbage of the measuring
// requests) and does not depend on what closing the streams gives back (a
// Go map never shrinks, a dead goroutine keeps its stack for reuse).
func (r *runner) idleMemory(ctx context.Context, svc *service, leg *EventsLeg, n int, open func(k int) error) error {
	if err := r.storeQuiet(ctx, svc); err != nil {
		return err
	}
	for step := 0; step <= idleMemorySteps; step++ {
		k := n * step / idleMemorySteps
		if err := open(k); err != nil {
			return err
		}
		p, err := r.settledMemory(ctx, svc)
		if err != nil {
			return fmt.Errorf("memory with %d idle streams: %w", k, err)
		}
		p.Streams = k
		leg.Memory = append(leg.Memory, p)
	}
	xs := make([]float64, len(leg.Memory))
	live, stacks, inuse, rss := make([]float64, len(xs)), make([]float64, len(xs)), make([]float64, len(xs)), make([]float64, len(xs))
	for i, p := range leg.Memory {
		xs[i], live[i], stacks[i], inuse[i], rss[i] = float64(p.Streams), p.Live, p.Stacks, p.Inuse, p.RSS
	}
	leg.HeapPerStream, leg.HeapFitR2 = lineFit(xs, live)
	leg.StackPerStream, _ = lineFit(xs, stacks)
	leg.InusePerStream, _ = lineFit(xs, inuse)
	leg.RSSPerStream, _ = lineFit(xs, rss)
	return nil
}

// lineFit returns the slope of the least-squares line through (xs, ys)
// and its coefficient of determination R² (1: every point on the line).
func lineFit(xs, ys []float64) (slope, r2 float64) {
	mx, my := mean(xs), mean(ys)
	var sxy, sxx, syy float64
	for i := range xs {
		dx, dy := xs[i]-mx, ys[i]-my
		sxy, sxx, syy = sxy+dx*dy, sxx+dx*dx, syy+dy*dy
	}
	if sxx == 0 {
		return 0, 0
	}
	slope = sxy / sxx
	if syy == 0 {
		return slope, 1
	}
	return slope, sxy * sxy / (sxx * syy)
}

// Settling: settledMemory forces a GC and samples until settleCalm samples
// in a row come no more than settleTolerance under the lowest before them
// (at most settleMaxGCs, then the lowest is taken as it is).
const (
	settleCalm      = 3
	settleTolerance = 64 << 10
	settleMaxGCs    = 20
	settleTimeout   = 30 * time.Second
	storeQuietFor   = 2 * time.Second
)

// settledMemory returns svc's memory once the garbage of the past no longer
// shows in it: each figure the lowest of the samples it took, each sample
// after a GC it forced. One forced GC is not enough: what the service's
// start left in sync.Pools (a compaction's buffers) is only freed by the
// second, and the first samples after its start still see it. While the
// store compacts (its buffers live, its new tables' metadata to come), it
// waits, and it starts over after one.
func (r *runner) settledMemory(ctx context.Context, svc *service) (MemPoint, error) {
	deadline := time.Now().Add(settleTimeout)
	var best MemPoint
	calm := -1 // no sample yet
	for {
		m, err := r.serviceMemory(ctx, svc)
		if err != nil {
			return best, err
		}
		changed := calm >= 0 && m.compactions != best.Compactions
		switch {
		case (m.compacting || changed) && time.Now().Before(deadline):
			calm = -1
			if !(realClock{}).SleepUntil(ctx, time.Now().Add(100*time.Millisecond)) {
				return best, ctx.Err()
			}
			continue
		case calm < 0:
			best, calm = MemPoint{Live: m.live, Stacks: m.stacks, Inuse: m.inuse, Compactions: m.compactions}, 0
		case m.live < best.Live-settleTolerance:
			calm = 0
		default:
			calm++
		}
		best.GCs++
		if m.live < best.Live {
			best.Live, best.Stacks = m.live, m.stacks
		}
		best.Inuse, best.RSS = min(best.Inuse, m.inuse), m.rss
		if calm >= settleCalm || best.GCs >= settleMaxGCs {
			return best, nil
		}
	}
}

// storeQuiet waits until svc's store has run no compaction for
// storeQuietFor (at most settleTimeout): a store copied for a leg compacts
// soon after it opens, and the tables it writes add to the live heap for
// good, so memory measured before that would count them with the streams.
func (r *runner) storeQuiet(ctx context.Context, svc *service) error {
	deadline := time.Now().Add(settleTimeout)
	last, since := -1.0, time.Now()
	for time.Now().Before(deadline) {
		ss, err := scrape(ctx, r.ctl, svc.base)
		if err != nil {
			return err
		}
		total := ss.Sum("utxo_cache_store_compactions_total", nil)
		if ss.Sum("utxo_cache_store_compactions_running", nil) > 0 || total != last {
			last, since = total, time.Now()
		} else if time.Since(since) >= storeQuietFor {
			return nil
		}
		if !(realClock{}).SleepUntil(ctx, time.Now().Add(100*time.Millisecond)) {
			return ctx.Err()
		}
	}
	return nil
}

// serviceMemory forces a GC in svc (its heap profile with gc=1, as text:
// less garbage to count after the GC than the compressed profile) and
// returns its memory and the store's compactions.
func (r *runner) serviceMemory(ctx context.Context, svc *service) (m memFigures, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, svc.admin+"/debug/pprof/heap?gc=1&debug=1", nil)
	if err != nil {
		return m, err
	}
	resp, err := r.ctl.Do(req)
	if err != nil {
		return m, fmt.Errorf("forcing a GC: %w", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return m, fmt.Errorf("forcing a GC: status %d", resp.StatusCode)
	}
	ss, err := scrape(ctx, r.ctl, svc.base)
	if err != nil {
		return m, err
	}
	stacks := ss.Sum("go_memstats_stack_inuse_bytes", nil)
	m.live, m.stacks = ss.Sum("go_memstats_heap_alloc_bytes", nil)+stacks, stacks
	m.inuse = ss.Sum("go_memstats_heap_inuse_bytes", nil) + stacks
	ps, err := readProc(svc.pid())
	if err != nil {
		return m, err
	}
	m.rss = float64(ps.rssBytes)
	m.compacting = ss.Sum("utxo_cache_store_compactions_running", nil) > 0
	m.compactions = ss.Sum("utxo_cache_store_compactions_total", nil)
	return m, nil
}

// memFigures are a service's memory figures, in bytes: its live Go heap
// (go_memstats_heap_alloc_bytes after a GC) and goroutine stacks, its heap
// spans in use and stacks, its resident set; and whether its store is
// compacting, and its compactions so far.
type memFigures struct {
	live, stacks, inuse, rss float64
	compacting               bool
	compactions              float64
}

// sseClient is one stream of the harness: it reads events, checks that
// their ids only grow, and records when each arrived.
type sseClient struct {
	mu     sync.Mutex
	n      int64 // guarded by mu
	events []sseArrival
	err    error // set before run returns
}

type sseArrival struct {
	seq uint64
	at  time.Time
}

func (c *sseClient) count() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// run opens the stream (POST /v1/events), reports on opened once its
// first line (the heartbeat) is read, and reads until ctx ends.
func (c *sseClient) run(ctx context.Context, cl *http.Client, base string, keys []string, opened chan<- error) {
	type key struct {
		Address string `json:"address"`
	}
	body := struct {
		Keys []key `json:"keys"`
	}{}
	for _, k := range keys {
		body.Keys = append(body.Keys, key{k})
	}
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/events", bytes.NewReader(b))
	if err != nil {
		opened <- err
		return
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := cl.Do(req)
	if err != nil {
		opened <- err
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		opened <- fmt.Errorf("status %d: %s", resp.StatusCode, strings.TrimSpace(string(msg)))
		return
	}
	br := bufio.NewReaderSize(resp.Body, 64<<10)
	if _, err := br.ReadString('\n'); err != nil {
		opened <- err
		return
	}
	opened <- nil
	var last uint64
	for {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			for err == bufio.ErrBufferFull { // a long data line
				_, err = br.ReadSlice('\n')
			}
			continue
		}
		if err != nil {
			if ctx.Err() == nil {
				c.err = fmt.Errorf("the stream ended: %w", err)
			}
			return
		}
		if !bytes.HasPrefix(line, []byte("id: ")) {
			if bytes.HasPrefix(line, []byte("event: ")) && !bytes.Equal(line, []byte("event: apply\n")) && !bytes.Equal(line, []byte("event: rollback\n")) {
				c.err = fmt.Errorf("unexpected %q after id %d", strings.TrimSpace(string(line)), last)
				return
			}
			continue
		}
		at := time.Now()
		seq, perr := strconv.ParseUint(string(bytes.TrimSpace(line[4:])), 10, 64)
		if perr != nil || seq <= last {
			c.err = fmt.Errorf("event id %q after %d: ids must only grow", strings.TrimSpace(string(line)), last)
			return
		}
		last = seq
		c.mu.Lock()
		c.n++
		c.events = append(c.events, sseArrival{seq, at})
		c.mu.Unlock()
	}
}

// promHist is a Prometheus histogram's cumulative buckets.
type promHist struct {
	le    []float64 // upper bounds, ascending (+Inf last)
	cum   []float64
	sum   float64
	count float64
}

// promHistOf reads histogram name from ss.
func promHistOf(ss Samples, name string) promHist {
	var h promHist
	for _, s := range ss {
		if s.Name != name+"_bucket" {
			continue
		}
		le, err := strconv.ParseFloat(s.Labels["le"], 64)
		if err != nil {
			continue
		}
		h.le = append(h.le, le)
		h.cum = append(h.cum, s.Value)
	}
	idx := make([]int, len(h.le))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return h.le[idx[a]] < h.le[idx[b]] })
	le, cum := make([]float64, len(idx)), make([]float64, len(idx))
	for i, j := range idx {
		le[i], cum[i] = h.le[j], h.cum[j]
	}
	h.le, h.cum = le, cum
	h.sum, h.count = ss.Sum(name+"_sum", nil), ss.Sum(name+"_count", nil)
	return h
}

// minus is h's growth since earlier (the same buckets).
func (h promHist) minus(earlier promHist) promHist {
	out := promHist{le: h.le, cum: make([]float64, len(h.cum)), sum: h.sum - earlier.sum, count: h.count - earlier.count}
	for i := range h.cum {
		out.cum[i] = h.cum[i]
		if i < len(earlier.cum) {
			out.cum[i] -= earlier.cum[i]
		}
	}
	return out
}

// add adds o's counts to h (the same buckets; h may be empty).
func (h *promHist) add(o promHist) {
	if len(h.le) == 0 {
		h.le, h.cum = o.le, make([]float64, len(o.cum))
	}
	for i := range h.cum {
		if i < len(o.cum) {
			h.cum[i] += o.cum[i]
		}
	}
	h.sum += o.sum
	h.count += o.count
}

// quantile interpolates linearly within the bucket holding quantile q
// (as Prometheus' histogram_quantile does); the +Inf bucket answers its
// lower bound.
func (h promHist) quantile(q float64) float64 {
	if h.count <= 0 || len(h.cum) == 0 {
		return 0
	}
	rank := q * h.count
	lower, below := 0.0, 0.0
	for i, c := range h.cum {
		if c >= rank {
			if i == len(h.cum)-1 && h.le[i] > 1e300 {
				return lower
			}
			if c == below {
				return h.le[i]
			}
			return lower + (h.le[i]-lower)*(rank-below)/(c-below)
		}
		lower, below = h.le[i], c
	}
	return lower
}

func (h promHist) summary() BucketSummary {
	if h.count <= 0 {
		return BucketSummary{}
	}
	return BucketSummary{Count: int64(h.count), Mean: h.sum / h.count * 1000, P50: h.quantile(0.5) * 1000, P99: h.quantile(0.99) * 1000}
}

// The events scenario's targets.
const (
	eventDeliveryP99Ms  = 50
	eventApplyP99Share  = 1.10 // with streams over without
	eventIdleStreamMaxB = 16 << 10
)

// eventsVerdicts are the events scenario's targets.
func (r *Report) eventsVerdicts() []Verdict {
	er := r.Events
	if er == nil {
		return nil
	}
	d := Verdict{Target: fmt.Sprintf("event delivery p99 < %d ms (publish to the event flushed on a stream; %d streams × %d addresses, %.0f blocks/s)",
		eventDeliveryP99Ms, er.Streams, er.KeysPerStream, er.BlockRate), Threshold: fmt.Sprintf("< %d ms", eventDeliveryP99Ms)}
	if er.Delivery.Count == 0 {
		d.Status, d.Detail = "SKIP", "no leg with streams finished"
	} else {
		d.Value = fmt.Sprintf("%.2f ms (p50 %.2f ms)", er.Delivery.P99, er.Delivery.P50)
		d.Status = passMiss(er.Delivery.P99 < eventDeliveryP99Ms)
		d.Detail = fmt.Sprintf("%d events; read by the harness after the writer's acknowledgement: p99 %.2f ms", er.Delivery.Count, er.ReceivedAfterAck.P99)
	}
	a := Verdict{Target: fmt.Sprintf("writer apply p99 with %d streams ≤ %.2f× without (POST /v1/blocks, same run)", er.Streams, eventApplyP99Share),
		Threshold: fmt.Sprintf("≤ %.2f", eventApplyP99Share)}
	if er.ApplyWithout.Count == 0 || er.ApplyWith.Count == 0 {
		a.Status, a.Detail = "SKIP", "a leg without or with streams did not finish"
	} else {
		a.Value = fmt.Sprintf("%.2f (%.2f / %.2f ms)", er.ApplyRatio, er.ApplyWith.P99, er.ApplyWithout.P99)
		a.Status = passMiss(er.ApplyRatio <= eventApplyP99Share)
		a.Detail = fmt.Sprintf("%d legs of %d blocks and %d rollbacks each", len(er.Legs), er.Blocks, er.Rollbacks)
	}
	m := Verdict{Target: fmt.Sprintf("memory per idle stream ≤ %d KiB (live Go heap after GCs and stacks, slope over 0..%d streams of %d addresses)", eventIdleStreamMaxB>>10, er.Streams, er.KeysPerStream),
		Threshold: fmt.Sprintf("≤ %d KiB", eventIdleStreamMaxB>>10)}
	if er.Delivery.Count == 0 {
		m.Status, m.Detail = "SKIP", "no leg with streams finished"
	} else {
		m.Value = fmt.Sprintf("%.1f KiB (%.1f KiB of it stacks; heap spans in use and stacks %.1f KiB, RSS %.1f KiB)",
			er.IdleStreamBytes/1024, er.IdleStreamStack/1024, er.IdleStreamInuse/1024, er.IdleStreamRSS/1024)
		m.Status = passMiss(er.IdleStreamBytes <= eventIdleStreamMaxB)
		var legs []string
		for _, l := range er.Legs {
			if len(l.Memory) > 0 && l.Error == "" {
				legs = append(legs, fmt.Sprintf("%.1f KiB (R² %.4f)", l.HeapPerStream/1024, l.HeapFitR2))
			}
		}
		m.Detail = "legs: " + strings.Join(legs, ", ")
	}
	return []Verdict{d, a, m}
}

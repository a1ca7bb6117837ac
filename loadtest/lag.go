package loadtest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// ReplicationResult is the replication lag a phase measured on one replica:
// for each write the writer acknowledged, the delay from the arrival of the
// acknowledgement (its seq S) to the arrival of the replica's answer at a
// state with seq ≥ S.
type ReplicationResult struct {
	Replica string         `json:"replica"`
	Lag     LatencySummary `json:"lag"`
	// Writes is the acknowledged writes (blocks and rollbacks) observed;
	// Lag.Count of them reached the replica within lagTimeout.
	Writes int64 `json:"writes"`
	// Unobserved counts writes acknowledged while maxLagInFlight
	// observations were already waiting (none on a healthy replica).
	Unobserved int64 `json:"unobserved"`
	// NotReached counts writes the replica did not reach within lagTimeout,
	// or before the phase ended (its requests get one request timeout more).
	NotReached int64 `json:"not_reached"`
	// ReplicaApplied and ReplicaApplyMeanMs are, from the replica's
	// utxo_cache_replica_apply_seconds over the phase, the changes it
	// applied and the mean time one took to apply, verify and publish:
	// the part of the lag spent applying, the rest being the delivery
	// from the writer and the wait for the replica's CPU.
	ReplicaApplied     int64    `json:"replica_applied"`
	ReplicaApplyMeanMs float64  `json:"replica_apply_mean_ms"`
	Errors             []string `json:"errors,omitempty"`
}

const metricReplicaApply = "utxo_cache_replica_apply_seconds"

// applyDelta fills the replica's apply figures from its metrics scraped
// before and after the phase.
func (r *ReplicationResult) applyDelta(before, after Samples) {
	n := after.Sum(metricReplicaApply+"_count", nil) - before.Sum(metricReplicaApply+"_count", nil)
	sum := after.Sum(metricReplicaApply+"_sum", nil) - before.Sum(metricReplicaApply+"_sum", nil)
	if n > 0 {
		r.ReplicaApplied, r.ReplicaApplyMeanMs = int64(n), 1000*sum/n
	}
}

// lagObserver measures the replication lag of each acknowledged write.
//
// # Exact and cheap
//
// Right after the writer acknowledges a write with seq S, the observer asks
// the replica `GET /v1/tip?min_seq=S&wait=W` (CONTRACT §7, read-your-writes).
// The replica answers it the moment it publishes a state with seq ≥ S: its
// wait wakes on the publish itself, not on a poll (query.Server.WaitFor), so
// the answer leaves when S becomes visible to the replica's readers, and the
// delay from the acknowledgement to the answer's arrival is the lag plus
// one loopback trip back (tens of microseconds) — or, when the replica was
// already at S, at most the request's own round trip. Either way nothing is
// polled: a write costs the replica one request, whose wait costs no CPU.
// A 503 `behind` (the replica's --max-wait passed) is asked again, until
// lagTimeout after the acknowledgement. Observations run concurrently (one
// per write, at most maxLagInFlight), so a slow one delays no other.
type lagObserver struct {
	client  *http.Client
	replica string        // base URL
	wait    time.Duration // of each request; a 503 behind is asked again
	timeout time.Duration // after the acknowledgement: not reached

	h   *syncHist
	sem chan struct{}
	wg  sync.WaitGroup
	mu  sync.Mutex
	res ReplicationResult // guarded by mu (but Lag, filled by finish)
}

const (
	lagTimeout     = 10 * time.Second
	lagWait        = 2 * time.Second // the service's default --max-wait
	maxLagInFlight = 64
)

func newLagObserver(client *http.Client, replica string) *lagObserver {
	return &lagObserver{client: client, replica: replica, wait: lagWait, timeout: lagTimeout, h: newSyncHist(),
		sem: make(chan struct{}, maxLagInFlight), res: ReplicationResult{Replica: replica}}
}

// observe starts the observation of the write acknowledged at ackAt with
// seq. A nil observer observes nothing.
func (o *lagObserver) observe(ctx context.Context, seq uint64, ackAt time.Time) {
	if o == nil {
		return
	}
	o.mu.Lock()
	o.res.Writes++
	o.mu.Unlock()
	select {
	case o.sem <- struct{}{}:
	default:
		o.count(func(r *ReplicationResult) { r.Unobserved++ })
		return
	}
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		defer func() { <-o.sem }()
		o.run(ctx, seq, ackAt)
	}()
}

func (o *lagObserver) count(f func(*ReplicationResult)) {
	o.mu.Lock()
	f(&o.res)
	o.mu.Unlock()
}

func (o *lagObserver) fail(err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.res.Errors) < maxExamples {
		o.res.Errors = append(o.res.Errors, err.Error())
	}
}

func (o *lagObserver) run(ctx context.Context, seq uint64, ackAt time.Time) {
	url := o.replica + "/v1/tip?min_seq=" + strconv.FormatUint(seq, 10) + "&wait=" + strconv.FormatFloat(o.wait.Seconds(), 'f', -1, 64)
	deadline := ackAt.Add(o.timeout)
	for {
		t0 := time.Now()
		got, status, err := o.ask(ctx, url)
		switch {
		case err != nil && ctx.Err() != nil:
			o.count(func(r *ReplicationResult) { r.NotReached++ })
			return
		case err != nil:
			o.fail(fmt.Errorf("seq %d: %w", seq, err))
			return
		case status == http.StatusOK && got >= seq:
			o.h.record(time.Since(ackAt))
			return
		case status == http.StatusOK:
			o.fail(fmt.Errorf("seq %d: GET /v1/tip?min_seq=%d answered 200 at seq %d", seq, seq, got))
			return
		case status != http.StatusServiceUnavailable:
			o.fail(fmt.Errorf("seq %d: GET /v1/tip?min_seq=%d answered %d", seq, seq, status))
			return
		}
		if time.Now().After(deadline) {
			o.count(func(r *ReplicationResult) { r.NotReached++ })
			return
		}
		if time.Since(t0) < o.wait/2 {
			// A 503 that did not wait (a replica bootstrapping again):
			// ask again shortly, not in a tight loop.
			if !(realClock{}).SleepUntil(ctx, time.Now().Add(20*time.Millisecond)) {
				o.count(func(r *ReplicationResult) { r.NotReached++ })
				return
			}
		}
	}
}

// ask sends one long wait and returns the answer's X-Commit-Seq and status.
func (o *lagObserver) ask(ctx context.Context, url string) (uint64, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, 0, err
	}
	resp, err := o.client.Do(req)
	if err != nil {
		return 0, 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, resp.StatusCode, nil
	}
	got, err := strconv.ParseUint(resp.Header.Get("X-Commit-Seq"), 10, 64)
	if err != nil {
		return 0, resp.StatusCode, fmt.Errorf("X-Commit-Seq %q: %v", resp.Header.Get("X-Commit-Seq"), err)
	}
	return got, resp.StatusCode, nil
}

// finish waits for the observations in flight (each ends within lagTimeout
// or when the feed's context ends) and returns the figures.
func (o *lagObserver) finish() ReplicationResult {
	o.wg.Wait()
	o.mu.Lock()
	defer o.mu.Unlock()
	r := o.res
	r.Lag = o.h.summary()
	return r
}

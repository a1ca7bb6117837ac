package loadtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/utxo-cache/utxo-cache/chain"
)

// FeedResult is what the writer feed did in a phase.
type FeedResult struct {
	TargetRate   float64        `json:"target_blocks_per_s"`
	AchievedRate float64        `json:"achieved_blocks_per_s"`
	Blocks       int64          `json:"blocks"`
	Rollbacks    int64          `json:"rollbacks"`
	Apply        LatencySummary `json:"apply"`    // POST /v1/blocks, send to answer
	Rollback     LatencySummary `json:"rollback"` // POST /v1/rollback
	// Visible is, per target, the delay from a block's acknowledgement to
	// the arrival of the first GET /v1/tip answer at or past it (one round
	// trip included).
	Visible map[string]LatencySummary `json:"visible"`
	// FirstPoll counts, per target, the blocks the first poll already
	// showed: for those the delay is at most one round trip (the poll's
	// own latency under the load), not a lag of the target.
	FirstPoll  map[string]int64 `json:"first_poll"`
	NotVisible int64            `json:"not_visible"` // not seen within visibleTimeout
	// Replication is the replication lag of the replica the reads went to
	// (the replica configuration), nil for the others.
	Replication *ReplicationResult `json:"replication,omitempty"`
	Errors      []string           `json:"errors,omitempty"`
}

// feed posts the world's feed script (blocks, and a rollback now and then)
// to the writer at a fixed rate, keeps the model in step and measures when
// each target shows each block.
type feed struct {
	w       *world
	client  *http.Client
	writer  string
	token   string
	rate    float64
	targets []string
	// lag, when set, measures the replication lag of a replica of writer
	// for every acknowledged write (see lagObserver).
	lag *lagObserver

	apply, rollback *syncHist
	visible         []*syncHist // per target
	firstPoll       []atomic.Int64

	mu         sync.Mutex
	notVisible int64    // guarded by mu
	errs       []string // guarded by mu
}

const (
	visibleTimeout = 5 * time.Second
	visiblePoll    = 200 * time.Microsecond
)

// ack is an acknowledged block for the visibility pollers.
type ack struct {
	height uint64
	hash   chain.Hash
	at     time.Time
}

func (f *feed) fail(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.errs) < maxExamples {
		f.errs = append(f.errs, fmt.Sprintf(format, args...))
	}
}

// run feeds blocks until end or ctx is done. It stops early on the first
// block or rollback the writer refuses: the chain cannot go on from there.
func (f *feed) run(ctx context.Context, end time.Time) FeedResult {
	f.apply, f.rollback = newSyncHist(), newSyncHist()
	f.visible = make([]*syncHist, len(f.targets))
	f.firstPoll = make([]atomic.Int64, len(f.targets))
	acks := make([]chan ack, len(f.targets))
	var pollers sync.WaitGroup
	for i, t := range f.targets {
		f.visible[i] = newSyncHist()
		acks[i] = make(chan ack, 64)
		pollers.Add(1)
		go func() {
			defer pollers.Done()
			f.poll(ctx, t, acks[i], f.visible[i], &f.firstPoll[i])
		}()
	}
	res := FeedResult{TargetRate: f.rate}
	start := time.Now()
	sched := Schedule{Start: start, Rate: f.rate}
	for i := int64(0); ; i++ {
		due := sched.At(i)
		// A writer slower than the rate makes the feed late; it stops at
		// the end all the same (the shortfall shows in AchievedRate).
		if !due.Before(end) || !time.Now().Before(end) || !(realClock{}).SleepUntil(ctx, due) {
			break
		}
		// A write in flight is never cancelled: its outcome would be unknown.
		wctx := context.WithoutCancel(ctx)
		b, ackAt, seq, isRollback, err := f.step(wctx)
		if err == nil && isRollback {
			// A rollback does not take a block's slot: the new branch's
			// first block goes at once.
			res.Rollbacks++
			f.lag.observe(ctx, seq, ackAt)
			b, ackAt, seq, _, err = f.step(wctx)
		}
		if err == nil {
			f.lag.observe(ctx, seq, ackAt)
		}
		if err != nil {
			f.fail("%v", err)
			break
		}
		res.Blocks++
		a := ack{height: b.Height, hash: b.Hash, at: ackAt}
		for _, ch := range acks {
			select {
			case ch <- a:
			default: // the poller is behind: skip this block for it
			}
		}
	}
	// Over the scheduled span, or longer when the writer made the feed late.
	if el := max(end.Sub(start), time.Since(start)).Seconds(); el > 0 {
		res.AchievedRate = float64(res.Blocks) / el
	}
	for _, ch := range acks {
		close(ch)
	}
	pollers.Wait()
	if f.lag != nil {
		rr := f.lag.finish()
		res.Replication = &rr
	}
	res.Apply, res.Rollback = f.apply.summary(), f.rollback.summary()
	res.Visible, res.FirstPoll = map[string]LatencySummary{}, map[string]int64{}
	for i, t := range f.targets {
		res.Visible[t] = f.visible[i].summary()
		res.FirstPoll[t] = f.firstPoll[i].Load()
	}
	f.mu.Lock()
	res.NotVisible, res.Errors = f.notVisible, f.errs
	f.mu.Unlock()
	return res
}

// step posts the script's next step and keeps the model in step with what
// the writer acknowledged. It returns the block (nil for a rollback), when
// its acknowledgement arrived and the commit sequence it reported.
func (f *feed) step(ctx context.Context) (*chain.Block, time.Time, uint64, bool, error) {
	st := f.w.nextStep()
	if st.block == nil {
		target := st.rollbackTo
		t0 := time.Now()
		// A repeated rollback to the same height is a no-op that succeeds.
		answer, err := f.postIdempotent(ctx, "/v1/rollback", "application/json", []byte(`{"height":`+strconv.FormatUint(target, 10)+`}`))
		ackAt := time.Now()
		if err != nil {
			return nil, ackAt, 0, true, fmt.Errorf("rollback to %d: %w", target, err)
		}
		f.rollback.record(ackAt.Sub(t0))
		seq, err := writeSeq(answer, "")
		if err != nil {
			return nil, ackAt, 0, true, fmt.Errorf("rollback to %d: %w", target, err)
		}
		if err := f.w.rollbackModel(target, seq); err != nil {
			return nil, ackAt, 0, true, err
		}
		return nil, ackAt, seq, true, nil
	}
	b := st.block
	body := chain.AppendBlockCBOR(nil, b)
	t0 := time.Now()
	// Posting the block already applied at its height is a no-op that
	// succeeds ("applied": false), so a post without an answer is retried.
	answer, err := f.postIdempotent(ctx, "/v1/blocks", "application/cbor", body)
	ackAt := time.Now()
	if err != nil {
		return nil, ackAt, 0, false, fmt.Errorf("block %d: %w", b.Height, err)
	}
	f.apply.record(ackAt.Sub(t0))
	seq, err := writeSeq(answer, "applied")
	if err != nil {
		return nil, ackAt, 0, false, fmt.Errorf("block %d: %w", b.Height, err)
	}
	if err := f.w.applyToModel(b, seq); err != nil {
		return nil, ackAt, 0, false, err
	}
	f.w.noteCreated(b)
	return b, ackAt, seq, false, nil
}

// writeSeq returns the commit sequence of a write's answer (CONTRACT §3:
// `"seq": S`, the state the write left), which must also hold the member
// named need unless need is "".
func writeSeq(answer []byte, need string) (uint64, error) {
	var a map[string]json.RawMessage
	if err := json.Unmarshal(answer, &a); err != nil {
		return 0, fmt.Errorf("unexpected answer %s: %v", answer, err)
	}
	if _, ok := a[need]; need != "" && !ok {
		return 0, fmt.Errorf("unexpected answer %s: no %q", answer, need)
	}
	var seq uint64
	if err := json.Unmarshal(a["seq"], &seq); err != nil || seq == 0 {
		return 0, fmt.Errorf("unexpected answer %s: no commit sequence (seq)", answer)
	}
	return seq, nil
}

// postIdempotent posts an idempotent write, retrying (up to three times in
// all) when no answer came back: a timeout or a dropped connection leaves
// the first attempt's outcome unknown, and the retry's answer settles it.
func (f *feed) postIdempotent(ctx context.Context, path, contentType string, body []byte) ([]byte, error) {
	var errs []error
	for range 3 {
		answer, err := f.post(ctx, path, contentType, body)
		var se *statusError
		if err == nil || errors.As(err, &se) || ctx.Err() != nil {
			if len(errs) > 0 && err == nil {
				f.fail("%s: answered after %d failed attempts: %v", path, len(errs), errors.Join(errs...))
			}
			return answer, err
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

// statusError is a write the service answered with an error status.
type statusError struct {
	status int
	body   []byte
}

func (e *statusError) Error() string { return fmt.Sprintf("status %d: %s", e.status, e.body) }

// post sends a write with the admin token and returns the 200 answer's body.
func (f *feed) post(ctx context.Context, path, contentType string, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.writer+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Authorization", "Bearer "+f.token)
	resp, err := f.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, &statusError{status: resp.StatusCode, body: bytes.TrimSpace(answer)}
	}
	return answer, nil
}

// poll measures, for each acknowledged block, how long until target's
// GET /v1/tip shows it (or a later block).
func (f *feed) poll(ctx context.Context, target string, acks <-chan ack, h *syncHist, first *atomic.Int64) {
	c := f.client
	for a := range acks {
		for polls := 1; ; polls++ {
			height, hash, err := getTip(ctx, c, target)
			if err == nil && (height > a.height || (height == a.height && hash == a.hash)) {
				h.record(time.Since(a.at))
				if polls == 1 {
					first.Add(1)
				}
				break
			}
			if ctx.Err() != nil {
				return
			}
			if time.Since(a.at) > visibleTimeout {
				f.mu.Lock()
				f.notVisible++
				f.mu.Unlock()
				break
			}
			time.Sleep(visiblePoll)
		}
	}
}

// getTip reads a target's tip from the X-Tip-* headers of GET /v1/tip.
func getTip(ctx context.Context, c *http.Client, base string) (uint64, chain.Hash, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/tip", nil)
	if err != nil {
		return 0, chain.Hash{}, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, chain.Hash{}, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, chain.Hash{}, fmt.Errorf("tip: status %d", resp.StatusCode)
	}
	height, err := strconv.ParseUint(resp.Header.Get("X-Tip-Height"), 10, 64)
	if err != nil {
		return 0, chain.Hash{}, fmt.Errorf("tip: X-Tip-Height: %w", err)
	}
	hash, err := chain.ParseHash(resp.Header.Get("X-Tip-Hash"))
	return height, hash, err
}

package redis

import (
	"context"
	"errors"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// maxFenceRounds bounds the fencing attempts of one probe when invalidations
// keep raising maxSeen under it; the next probe carries on.
const maxFenceRounds = 3

// record notes that Invalidate was asked for seq, and reports the state it
// was noted in. A seq noted while degraded is covered by the next fencing:
// noting and reading the state happen under one lock, so fencing either saw
// this seq or notices that maxSeen moved (see fence).
func (t *Tier) record(seq uint64) (degraded, closed bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.mu.maxSeen = max(t.mu.maxSeen, seq)
	if t.mu.degraded {
		t.mu.undelivered = max(t.mu.undelivered, seq)
	}
	return t.mu.degraded, t.mu.closed
}

// failed counts a failed call and degrades the tier if the failure says
// Redis is unreachable or slow. Errors Redis replied with (OOM, WRONGTYPE) do
// not degrade: Redis is there, and the call's caller copes. A caller that
// gave up (its ctx done) says nothing about Redis.
func (t *Tier) failed(parent context.Context, op string, err error) {
	t.counters.errorsOf(op).Add(1)
	if parent.Err() != nil {
		return
	}
	var reply goredis.Error
	if !errors.As(err, &reply) {
		t.degrade(op, 0, err)
	}
}

// degrade puts an open tier in degraded mode, noting seq as undelivered. It
// logs only the transition.
func (t *Tier) degrade(op string, seq uint64, cause error) {
	t.mu.Lock()
	if t.mu.closed {
		t.mu.Unlock()
		return
	}
	t.mu.undelivered = max(t.mu.undelivered, seq)
	first := !t.mu.degraded
	if first {
		t.mu.degraded = true
		t.mu.since = time.Now()
		t.up.Store(false)
	}
	t.mu.Unlock()
	if first {
		t.counters.outages.Add(1)
		t.log.Warn("redis tier degraded: reads miss and fills are dropped until Redis answers and is fenced",
			"op", op, "err", cause)
	}
}

// probeLoop runs the prober until Close: fence while degraded, advance the
// global floor while healthy.
func (t *Tier) probeLoop() {
	defer close(t.done)
	tick := time.NewTicker(t.opts.ProbeInterval)
	defer tick.Stop()
	for {
		select {
		case <-t.ctx.Done():
			return
		case now := <-tick.C:
			if t.Healthy() {
				t.advance(now)
			} else {
				t.fence()
			}
		}
	}
}

// fence raises the global floor to maxSeen, creating it if missing, and
// makes the tier healthy if no invalidation was noted meanwhile. It reports
// whether the tier is healthy. Runs on the prober (or in New, before it).
func (t *Tier) fence() bool {
	for range maxFenceRounds {
		t.mu.Lock()
		target, closed := t.mu.maxSeen, t.mu.closed
		t.mu.Unlock()
		if closed {
			return false
		}
		// One round trip: load the scripts (a restarted Redis has none, and
		// the first calls would each pay a NOSCRIPT round trip), then raise.
		ctx, cancel := context.WithTimeout(t.ctx, t.opts.CallTimeout)
		pipe := t.rdb.Pipeline()
		for _, src := range []string{setLua, raiseFloorsLua, raiseGlobalLua} {
			pipe.ScriptLoad(ctx, src) // not Script.Load: it would take the unexecuted reply for the hash
		}
		raiseGlobalScript.EvalSha(ctx, pipe, []string{t.globalKey}, strconv.FormatUint(target, 10), "1")
		_, err := pipe.Exec(ctx)
		cancel()
		if err != nil {
			t.counters.errorsOf(opProbe).Add(1)
			return false
		}

		t.mu.Lock()
		healed := t.mu.degraded && !t.mu.closed && t.mu.maxSeen == target
		var outage time.Duration
		var undelivered uint64
		if healed {
			t.mu.degraded = false
			t.up.Store(true)
			outage, undelivered = time.Since(t.mu.since), t.mu.undelivered
			t.mu.undelivered = 0
		}
		t.mu.Unlock()
		if healed {
			t.advanced = max(t.advanced, target)
			t.log.Info("redis tier healthy: global floor fenced", "global_floor", target,
				"undelivered_seq", undelivered, "after", outage.Round(time.Millisecond))
			return true
		}
	}
	return false
}

// advance raises the global floor to the highest seq invalidated at least
// horizon ago (see Tier, "Floor lifetime"), requiring the floor to exist:
// it doubles as the healthy tier's check, every ProbeInterval, that Redis
// is there and still holds its data. Runs on the prober.
func (t *Tier) advance(now time.Time) {
	t.mu.Lock()
	seen := t.mu.maxSeen
	t.mu.Unlock()
	if n := len(t.samples); n == 0 || t.samples[n-1].seq < seen {
		t.samples = append(t.samples, sample{at: now, seq: seen})
	}
	cut := now.Add(-t.opts.horizon())
	i := 0
	for i+1 < len(t.samples) && !t.samples[i+1].at.After(cut) {
		i++ // samples[i] is superseded by a later sample also older than cut
	}
	t.samples = t.samples[i:]
	target := t.advanced
	if !t.samples[0].at.After(cut) {
		target = max(target, t.samples[0].seq)
	}

	ctx, cancel := context.WithTimeout(t.ctx, t.opts.CallTimeout)
	res, err := raiseGlobalScript.Run(ctx, t.rdb, []string{t.globalKey}, strconv.FormatUint(target, 10), "0").Int64()
	cancel()
	switch {
	case err != nil:
		// Any failure, not only the network's: like a failed Invalidate,
		// a global floor that cannot advance may leave floors to expire
		// uncovered.
		t.counters.errorsOf(opProbe).Add(1)
		t.degrade(opProbe, 0, err)
	case res == scriptUnfenced:
		t.degrade(opProbe, 0, errUnfenced)
	default:
		t.advanced = target
	}
}

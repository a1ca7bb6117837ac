package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
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
	t.reloadSlots()
	if first {
		t.counters.outages.Add(1)
		t.log.Warn("redis tier degraded: reads miss and fills are dropped until Redis answers and is fenced",
			"op", op, "err", cause)
	}
}

// reloadSlots asks a cluster client to reload the slot map in the
// background (go-redis coalesces the requests): after a master died, its
// client keeps dialing the dead address until the map names the promoted
// replica, which it learns only from a MOVED, or from a reload. A no-op on
// a single server.
func (t *Tier) reloadSlots() {
	if cc, ok := t.rdb.(*goredis.ClusterClient); ok {
		cc.ReloadState(t.ctx)
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

// fence makes a degraded tier healthy again if Redis answers and can be
// trusted. The writer's tier raises the global floor and the marker to
// maxSeen, creating them if missing, and heals if no invalidation was noted
// meanwhile. A follower writes nothing: it heals once the writer's tier has
// fenced, when both keys exist and the marker is at least this node's
// published seq; until then it waits, silently (the outage was logged when
// it began). It reports whether the tier is healthy. Runs on the prober (or
// in New, before it).
func (t *Tier) fence() bool {
	for range maxFenceRounds {
		t.mu.Lock()
		target, closed := t.mu.maxSeen, t.mu.closed
		t.mu.Unlock()
		if closed {
			return false
		}
		need := t.need()
		// One round trip: load the scripts (a restarted Redis has none, and
		// the first calls would each pay a NOSCRIPT round trip), read the
		// run_id, then fence or, on a follower, read the keys.
		ctx, cancel := context.WithTimeout(t.ctx, t.opts.CallTimeout)
		pipe := t.rdb.Pipeline()
		cmds := make([]goredis.Cmder, 0, 4+len(t.buckets))
		var info *goredis.StringCmd
		if !t.cluster {
			// A pipeline on a cluster goes by key: a script load and INFO
			// would reach one node. There the first calls on each node pay
			// a NOSCRIPT round trip, and no run_id is tracked (see Tier,
			// "Cluster").
			for _, src := range []string{setLua, raiseFloorsLua, fenceLua, advanceLua} {
				cmds = append(cmds, pipe.ScriptLoad(ctx, src)) // not Script.Load: it would take the unexecuted reply for the hash
			}
			info = pipe.Info(ctx, "server")
		}
		keys := make([]*goredis.SliceCmd, 0, len(t.buckets))
		fenced := make([]*goredis.Cmd, 0, len(t.buckets))
		for i := range t.buckets {
			b := &t.buckets[i]
			if t.opts.Follower {
				keys = append(keys, pipe.MGet(ctx, b.global, b.marker))
				cmds = append(cmds, keys[i])
			} else {
				fenced = append(fenced, fenceScript.Eval(ctx, pipe, []string{b.global, b.marker}, strconv.FormatUint(target, 10)))
				cmds = append(cmds, fenced[i])
			}
		}
		_, _ = pipe.Exec(ctx) // each command's error is looked at below
		cancel()
		if err := firstErr(cmds); err != nil {
			t.counters.errorsOf(opProbe).Add(1)
			t.reloadSlots()
			return false
		}
		restarted := t.sawRunID(info)
		var marker uint64
		if t.opts.Follower {
			m, ok := t.followerMarker(keys)
			if !ok || m < need {
				return false // the writer has not fenced this Redis yet
			}
			marker = m
		} else {
			// Raised before healing: Gets from now on need at least target.
			t.raiseMarker(target)
			marker = target
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
			if t.opts.Follower {
				t.log.Info("redis tier healthy: the writer's marker covers this node", "marker", marker,
					"published_seq", need, "redis_restarted", restarted, "after", outage.Round(time.Millisecond))
			} else {
				t.log.Info("redis tier healthy: global floor fenced", "global_floor", target,
					"undelivered_seq", undelivered, "redis_restarted", restarted, "after", outage.Round(time.Millisecond))
			}
			return true
		}
	}
	return false
}

// advance raises the global floor to the highest seq invalidated at least
// horizon ago (see Tier, "Floor lifetime"), requiring the floor and the
// marker to exist and the marker to be at least what this node needs: it
// doubles as the healthy tier's check, every ProbeInterval, that Redis is
// there, still holds its data and has not gone back in time, and that it is
// the same server (its run_id). A follower only checks. Runs on the prober.
func (t *Tier) advance(now time.Time) {
	need := t.need()
	target := t.advanced
	if !t.opts.Follower {
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
		if !t.samples[0].at.After(cut) {
			target = max(target, t.samples[0].seq)
		}
	}

	ctx, cancel := context.WithTimeout(t.ctx, t.opts.CallTimeout)
	pipe := t.rdb.Pipeline()
	var info *goredis.StringCmd
	if !t.cluster {
		info = pipe.Info(ctx, "server")
	}
	keys := make([]*goredis.SliceCmd, 0, len(t.buckets))
	raised := make([]*goredis.Cmd, 0, len(t.buckets))
	for i := range t.buckets {
		b := &t.buckets[i]
		if t.opts.Follower {
			keys = append(keys, pipe.MGet(ctx, b.global, b.marker))
		} else {
			// The script's text, not its hash: once a second, it costs
			// little, and a flushed script cache (SCRIPT FLUSH) must not
			// look like an outage.
			raised = append(raised, advanceScript.Eval(ctx, pipe, []string{b.global, b.marker},
				strconv.FormatUint(target, 10), strconv.FormatUint(need, 10)))
		}
	}
	_, _ = pipe.Exec(ctx)
	cancel()
	var err error
	for i := range t.buckets {
		if t.opts.Follower {
			err = keys[i].Err()
		} else {
			err = raised[i].Err()
		}
		if err != nil {
			break
		}
	}
	if err != nil {
		// Any failure, not only the network's: like a failed Invalidate,
		// a global floor that cannot advance may leave floors to expire
		// uncovered.
		t.counters.errorsOf(opProbe).Add(1)
		t.degrade(opProbe, 0, err)
		return
	}
	// The keys first: a restart that lost data is logged as what it lost.
	if t.opts.Follower {
		switch m, ok := t.followerMarker(keys); {
		case !ok:
			t.degrade(opProbe, 0, errUnfenced)
		case m < need:
			t.behind(opProbe, fmt.Errorf("%w: marker %d, this node at %d", errBehind, m, need))
		}
	} else {
		res := int64(0)
		for _, r := range raised {
			switch n, _ := r.Int64(); n {
			case scriptUnfenced:
				res = scriptUnfenced
			case scriptBehind:
				if res != scriptUnfenced {
					res = scriptBehind
				}
			}
		}
		switch res {
		case scriptUnfenced:
			t.degrade(opProbe, 0, errUnfenced)
		case scriptBehind:
			t.behind(opProbe, fmt.Errorf("%w: marker below %d", errBehind, need))
		default:
			t.advanced = target
		}
	}
	if old := t.runID; t.sawRunID(info) {
		t.degrade(opProbe, 0, fmt.Errorf("%w: run_id %s, was %s", errRestarted, t.runID, old))
	}
}

// sawRunID notes the run_id of an INFO server reply and reports whether it
// differs from the one seen before (a restarted or replaced Redis), counting
// it. A refused INFO (a proxy) or a reply without run_id says nothing.
// Prober only.
func (t *Tier) sawRunID(info *goredis.StringCmd) bool {
	if info == nil || info.Err() != nil {
		return false
	}
	id := runIDOf(info.Val())
	if id == "" {
		return false
	}
	old := t.runID
	t.runID = id
	if old == "" || old == id {
		return false
	}
	t.counters.restarts.Add(1)
	return true
}

// runIDOf finds the run_id field of an INFO reply.
func runIDOf(info string) string {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(line, "run_id:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// followerMarker reads the MGETs of (global floor, marker) of every
// bucket: the lowest marker, and whether every key exists and parses.
func (t *Tier) followerMarker(replies []*goredis.SliceCmd) (uint64, bool) {
	lowest := uint64(0)
	for i, r := range replies {
		vals := r.Val()
		if len(vals) != 2 || vals[0] == nil || vals[1] == nil {
			return 0, false
		}
		if _, err := parseSeq(vals[0]); err != nil {
			return 0, false
		}
		m, err := parseSeq(vals[1])
		if err != nil {
			return 0, false
		}
		if i == 0 || m < lowest {
			lowest = m
		}
	}
	return lowest, len(replies) > 0
}

// firstErr returns the first error among cmds.
func firstErr(cmds []goredis.Cmder) error {
	for _, c := range cmds {
		if err := c.Err(); err != nil {
			return err
		}
	}
	return nil
}

package loadtest

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Schedule is the open-loop timetable: request i (from 0) is due at
// Start + i/Rate, computed from i alone so that no error accumulates over a
// long run (a ticker drifts, and one that fell behind drops ticks).
type Schedule struct {
	Start time.Time
	Rate  float64 // requests per second, > 0
}

// At returns the intended send time of request i.
func (s Schedule) At(i int64) time.Time {
	return s.Start.Add(time.Duration(math.Round(float64(i) * 1e9 / s.Rate)))
}

// DueBefore returns how many requests are due strictly before t: the
// number a phase ending at t sends.
func (s Schedule) DueBefore(t time.Time) int64 {
	d := t.Sub(s.Start)
	if d <= 0 {
		return 0
	}
	n := int64(math.Ceil(d.Seconds() * s.Rate))
	// Correct the float estimate against At, which is the definition.
	for n > 0 && !s.At(n-1).Before(t) {
		n--
	}
	for s.At(n).Before(t) {
		n++
	}
	return n
}

// clock is the time source of the drivers; tests replace it.
type clock interface {
	Now() time.Time
	// SleepUntil returns at t or when ctx is done, reporting whether t was
	// reached.
	SleepUntil(ctx context.Context, t time.Time) bool
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) SleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// shot is one request slot handed to a driver's do function.
type shot struct {
	worker   int       // which worker sends it, 0..workers-1
	seq      int64     // request number in the phase, from 0
	intended time.Time // when it should have been sent: latency is measured from here
}

// openLoop sends request i at sched.At(i) from a pool of workers until the
// limit of requests or the end time, whichever comes first.
//
// Each worker takes the next request number, sleeps until it is due and
// sends it. A worker that is busy does not take a number, so when every
// worker is busy the due requests wait, and a worker that frees up sends the
// oldest one at once: its latency, measured from the intended time, includes
// that wait (no coordinated omission). The pool bounds the requests in
// flight; Lag reports how late requests were sent, which is the harness (or
// the pool size) failing to keep the schedule rather than the service.
type openLoop struct {
	sched   Schedule
	end     time.Time // requests due at or after end are not sent
	limit   int64     // at most this many requests; <= 0: no limit
	workers int
	clk     clock
}

// run drives do until the schedule is exhausted or ctx is done, and returns
// how many requests were sent.
func (o *openLoop) run(ctx context.Context, do func(ctx context.Context, s shot)) int64 {
	n := o.sched.DueBefore(o.end)
	if o.limit > 0 && o.limit < n {
		n = o.limit
	}
	var next, sent atomic.Int64
	var wg sync.WaitGroup
	for w := range o.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= n {
					return
				}
				due := o.sched.At(i)
				if !o.clk.SleepUntil(ctx, due) {
					return
				}
				sent.Add(1)
				do(ctx, shot{worker: w, seq: i, intended: due})
			}
		}()
	}
	wg.Wait()
	return sent.Load()
}

// closedLoop keeps workers requests in flight with no pacing: each worker
// sends its next request as soon as the previous one is answered, until the
// limit or the end time. Latency is measured from the actual send, which in
// a closed loop is the intended one.
type closedLoop struct {
	end     time.Time
	limit   int64 // <= 0: no limit
	workers int
	clk     clock
}

func (c *closedLoop) run(ctx context.Context, do func(ctx context.Context, s shot)) int64 {
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range c.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				now := c.clk.Now()
				if !now.Before(c.end) {
					return
				}
				i := next.Add(1) - 1
				if c.limit > 0 && i >= c.limit {
					return
				}
				do(ctx, shot{worker: w, seq: i, intended: now})
			}
		}()
	}
	wg.Wait()
	n := next.Load()
	if c.limit > 0 && n > c.limit {
		n = c.limit
	}
	return n
}

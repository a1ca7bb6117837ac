package loadtest

import (
	"context"
	"sort"
	"sync"
	"testing"
	"time"
)

// fakeClock is a virtual clock: SleepUntil jumps forward instead of
// sleeping, and do functions advance it to model service time. Nothing in
// these tests sleeps, so their assertions hold on a loaded machine.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) SleepUntil(ctx context.Context, t time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.now) {
		c.now = t
	}
	return ctx.Err() == nil
}

func (c *fakeClock) advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}

var epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func TestScheduleAt(t *testing.T) {
	for _, tc := range []struct {
		rate float64
		i    int64
		want time.Duration
	}{
		{1000, 0, 0},
		{1000, 1, time.Millisecond},
		{1000, 1000, time.Second},
		{3, 1, 333_333_333 * time.Nanosecond},
		{3, 2, 666_666_667 * time.Nanosecond},
		{3, 3, time.Second}, // no drift: computed from i, not summed
		{3, 3_000_000, 1_000_000 * time.Second},
		{0.5, 1, 2 * time.Second},
		{7345.5, 7345_5, 10 * time.Second},
	} {
		s := Schedule{Start: epoch, Rate: tc.rate}
		if got := s.At(tc.i).Sub(epoch); got != tc.want {
			t.Errorf("rate %v: At(%d) = start+%v, want start+%v", tc.rate, tc.i, got, tc.want)
		}
	}
}

func TestScheduleDueBefore(t *testing.T) {
	for _, tc := range []struct {
		rate float64
		d    time.Duration
		want int64
	}{
		{1000, 0, 0},
		{1000, -time.Second, 0},
		{1000, time.Nanosecond, 1},         // request 0 is due at the start
		{1000, time.Millisecond, 1},        // request 1 is due exactly at the end: not before
		{1000, time.Millisecond + 1, 2},    // …and now it is
		{1000, time.Second, 1000},          // 0..999
		{3, time.Second, 3},                // 0, 1/3, 2/3
		{3, time.Second + 1, 4},            // and 1 s itself
		{0.5, 10 * time.Second, 5},         // 0, 2, 4, 6, 8
		{10, 8*time.Second + 50e6, 81},     // 0 .. 8.0
		{7, 1234567 * time.Microsecond, 9}, // ceil(1.234567*7) = 9
	} {
		s := Schedule{Start: epoch, Rate: tc.rate}
		got := s.DueBefore(epoch.Add(tc.d))
		if got != tc.want {
			t.Errorf("rate %v: DueBefore(start+%v) = %d, want %d", tc.rate, tc.d, got, tc.want)
		}
		// The definition: every counted request is due before the end, the
		// next one is not.
		if got > 0 && !s.At(got-1).Before(epoch.Add(tc.d)) {
			t.Errorf("rate %v, %v: request %d is not due before the end", tc.rate, tc.d, got-1)
		}
		if s.At(got).Before(epoch.Add(tc.d)) {
			t.Errorf("rate %v, %v: request %d is due before the end but not counted", tc.rate, tc.d, got)
		}
	}
}

// TestOpenLoopFastService: a service faster than the interval gets every
// request at exactly its intended time, in order.
func TestOpenLoopFastService(t *testing.T) {
	clk := &fakeClock{now: epoch}
	sched := Schedule{Start: epoch, Rate: 100}
	ol := &openLoop{sched: sched, end: epoch.Add(2 * time.Second), workers: 1, clk: clk}
	var shots []shot
	var sentAt []time.Time
	n := ol.run(context.Background(), func(_ context.Context, s shot) {
		sentAt = append(sentAt, clk.Now())
		shots = append(shots, s)
		clk.advance(time.Millisecond) // a 1 ms answer, well inside the 10 ms interval
	})
	if n != 200 || len(shots) != 200 {
		t.Fatalf("sent %d (%d shots), want 200", n, len(shots))
	}
	for i, s := range shots {
		if s.seq != int64(i) || !s.intended.Equal(sched.At(int64(i))) || !sentAt[i].Equal(s.intended) {
			t.Fatalf("shot %d: seq %d intended %v sent %v, want intended = sent = %v",
				i, s.seq, s.intended.Sub(epoch), sentAt[i].Sub(epoch), sched.At(int64(i)).Sub(epoch))
		}
	}
}

// TestOpenLoopNoCoordinatedOmission: a service slower than the interval
// does not slow the schedule down: requests keep their intended times, are
// sent late, and their latency (completion - intended) grows with the
// queue, as a user would see it.
func TestOpenLoopNoCoordinatedOmission(t *testing.T) {
	clk := &fakeClock{now: epoch}
	sched := Schedule{Start: epoch, Rate: 100} // every 10 ms
	const service = 30 * time.Millisecond
	ol := &openLoop{sched: sched, end: epoch.Add(time.Second), workers: 1, clk: clk}
	var latencies []time.Duration
	n := ol.run(context.Background(), func(_ context.Context, s shot) {
		if !s.intended.Equal(sched.At(s.seq)) {
			t.Errorf("shot %d intended at %v, want %v", s.seq, s.intended.Sub(epoch), sched.At(s.seq).Sub(epoch))
		}
		done := clk.advance(service)
		latencies = append(latencies, done.Sub(s.intended))
	})
	if n != 100 {
		t.Fatalf("sent %d, want all 100 due requests", n)
	}
	// Request i is sent at i*30ms (the single worker is busy until then) and
	// answered 30 ms later: latency = i*30 + 30 - i*10 = 20i + 30 ms.
	for i, l := range latencies {
		want := time.Duration(20*i+30) * time.Millisecond
		if l != want {
			t.Fatalf("request %d: latency %v, want %v (measured from the intended time)", i, l, want)
		}
	}
}

func TestOpenLoopWorkersAndLimit(t *testing.T) {
	clk := &fakeClock{now: epoch}
	sched := Schedule{Start: epoch, Rate: 1000}
	ol := &openLoop{sched: sched, end: epoch.Add(time.Second), limit: 700, workers: 8, clk: clk}
	var mu sync.Mutex
	seen := map[int64]int{}
	workers := map[int]bool{}
	n := ol.run(context.Background(), func(_ context.Context, s shot) {
		if !s.intended.Equal(sched.At(s.seq)) {
			t.Errorf("shot %d intended at %v", s.seq, s.intended.Sub(epoch))
		}
		mu.Lock()
		seen[s.seq]++
		workers[s.worker] = true
		mu.Unlock()
		clk.advance(50 * time.Microsecond)
	})
	if n != 700 || len(seen) != 700 {
		t.Fatalf("sent %d, distinct %d: want the limit, 700", n, len(seen))
	}
	var seqs []int64
	for s, c := range seen {
		if c != 1 {
			t.Errorf("request %d sent %d times", s, c)
		}
		seqs = append(seqs, s)
	}
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	if seqs[0] != 0 || seqs[len(seqs)-1] != 699 {
		t.Errorf("requests %d..%d, want 0..699", seqs[0], seqs[len(seqs)-1])
	}
	for w := range workers {
		if w < 0 || w >= 8 {
			t.Errorf("worker id %d outside the pool", w)
		}
	}
}

func TestOpenLoopStopsOnCancel(t *testing.T) {
	const workers = 2
	clk := &fakeClock{now: epoch}
	ctx, cancel := context.WithCancel(context.Background())
	ol := &openLoop{sched: Schedule{Start: epoch, Rate: 10}, end: epoch.Add(time.Hour), workers: workers, clk: clk}
	var mu sync.Mutex
	sent := map[int64]bool{}
	late := 0 // requests whose send began after the cancel
	n := ol.run(ctx, func(ctx context.Context, s shot) {
		mu.Lock()
		sent[s.seq] = true
		if ctx.Err() != nil {
			late++
		}
		mu.Unlock()
		if s.seq == 5 {
			cancel()
		}
	})
	// Workers claim requests in order but pass their due times in any
	// order, and the other worker runs on while request 5 is cancelling.
	// What run promises: request 5 is sent; once cancelled, a worker sends
	// at most the one request it was already past its check with; a worker
	// drops at most the one request it had claimed, so at most workers-1
	// requests before 5 go unsent; and run returns.
	if int(n) != len(sent) || !sent[5] {
		t.Fatalf("run reported %d sent, distinct %d, request 5 sent: %v", n, len(sent), sent[5])
	}
	if late > workers {
		t.Errorf("%d requests sent after the cancel, want at most one per worker (%d)", late, workers)
	}
	missing := 0
	for s := range int64(5) {
		if !sent[s] {
			missing++
		}
	}
	if missing > workers-1 {
		t.Errorf("%d requests before the cancel were dropped, want at most %d", missing, workers-1)
	}
}

func TestClosedLoop(t *testing.T) {
	clk := &fakeClock{now: epoch}
	cl := &closedLoop{end: epoch.Add(time.Second), workers: 1, clk: clk}
	var intended []time.Time
	n := cl.run(context.Background(), func(_ context.Context, s shot) {
		intended = append(intended, s.intended)
		clk.advance(10 * time.Millisecond)
	})
	if n != 100 || len(intended) != 100 {
		t.Fatalf("sent %d, want 100 back-to-back 10 ms requests in 1 s", n)
	}
	for i, at := range intended {
		if want := epoch.Add(time.Duration(i) * 10 * time.Millisecond); !at.Equal(want) {
			t.Fatalf("request %d started at %v, want %v", i, at.Sub(epoch), want.Sub(epoch))
		}
	}
	cl = &closedLoop{end: epoch.Add(time.Hour), limit: 37, workers: 4, clk: &fakeClock{now: epoch}}
	var mu sync.Mutex
	count := 0
	n = cl.run(context.Background(), func(context.Context, shot) { mu.Lock(); count++; mu.Unlock() })
	if n != 37 || count != 37 {
		t.Fatalf("limit 37: sent %d, did %d", n, count)
	}
}

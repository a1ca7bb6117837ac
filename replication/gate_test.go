package replication

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// gateClock is a test's clock for an ApplyGate: the bounds it was asked for,
// each fired only when the test says so.
type gateClock struct {
	mu     sync.Mutex
	bounds []func()
}

func (c *gateClock) afterFunc(_ time.Duration, f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.bounds = append(c.bounds, f)
}

// expire runs the i-th bound's function, as its timer would.
func (c *gateClock) expire(t *testing.T, i int) {
	t.Helper()
	c.mu.Lock()
	if i >= len(c.bounds) {
		c.mu.Unlock()
		t.Fatalf("bound %d was never set (%d set)", i, len(c.bounds))
	}
	f := c.bounds[i]
	c.mu.Unlock()
	f()
}

func newTestGate(wait time.Duration) (*ApplyGate, *gateClock, *prometheus.Registry) {
	reg := prometheus.NewRegistry()
	g := NewApplyGate(wait, NewTailMetrics(reg))
	c := &gateClock{}
	g.afterFunc = c.afterFunc
	return g, c, reg
}

// metric is the value of a counter, or the sample count of a histogram,
// that reg holds (0 when absent).
func metric(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		m := mf.GetMetric()[0]
		if h := m.GetHistogram(); h != nil {
			return float64(h.GetSampleCount())
		}
		return m.GetCounter().GetValue()
	}
	return 0
}

const (
	metricGateWait    = "utxo_cache_replica_apply_priority_wait_seconds"
	metricGateExpired = "utxo_cache_replica_apply_priority_expired_total"
)

// startRead parks a read in g.Wait, returning once it waits; the channel is
// closed when the read goes on.
func startRead(t *testing.T, g *ApplyGate, ctx context.Context) <-chan struct{} {
	t.Helper()
	before := g.Waiting()
	done := make(chan struct{})
	go func() {
		defer close(done)
		g.Wait(ctx)
	}()
	for g.Waiting() == before {
		select {
		case <-done:
			t.Fatal("the read went on while a hold was raised")
		case <-time.After(time.Millisecond):
		}
	}
	return done
}

func wantGone(t *testing.T, done <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: the read still waits after 10s", what)
	}
}

func wantWaiting(t *testing.T, done <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-done:
		t.Fatalf("%s: the read went on", what)
	default:
	}
}

// TestApplyGateRelease: reads arriving while a hold is raised wait until it
// is released (the change published), then all go on; the next read passes
// at once.
func TestApplyGateRelease(t *testing.T) {
	g, clock, reg := newTestGate(time.Hour)
	g.Wait(context.Background()) // nothing held: returns
	g.Hold()
	if !g.Holding() {
		t.Fatal("no hold after Hold")
	}
	r1 := startRead(t, g, context.Background())
	r2 := startRead(t, g, context.Background())
	g.Hold() // already raised: the same hold, the same bound
	wantWaiting(t, r1, "a second Hold")
	g.AfterPublish(nil)
	wantGone(t, r1, "after the publish")
	wantGone(t, r2, "after the publish")
	if g.Holding() || g.Waiting() != 0 {
		t.Fatalf("after the publish: holding %v, %d waiting", g.Holding(), g.Waiting())
	}
	g.Wait(context.Background())
	if n := metric(t, reg, metricGateWait); n != 2 {
		t.Fatalf("%s counts %v reads, want the 2 held", metricGateWait, n)
	}
	// The bound of the released hold fires late: nothing happens, and it
	// does not open a later hold.
	g.Hold()
	clock.expire(t, 0)
	if !g.Holding() {
		t.Fatal("the bound of an earlier hold opened the current one")
	}
	if got := metric(t, reg, metricGateExpired); got != 0 {
		t.Fatalf("expired %v after a hold released before its bound", got)
	}
	g.Release()
}

// TestApplyGateBound: a hold opens when its bound passes, though the change
// is still being applied; the reads go on, and it is counted.
func TestApplyGateBound(t *testing.T) {
	g, clock, reg := newTestGate(30 * time.Millisecond)
	g.Hold()
	r := startRead(t, g, context.Background())
	clock.expire(t, 0)
	wantGone(t, r, "after the bound")
	if g.Holding() {
		t.Fatal("holding after the bound")
	}
	if got := metric(t, reg, metricGateExpired); got != 1 {
		t.Fatalf("expired %v, want 1", got)
	}
	g.Wait(context.Background()) // the change goes on; new reads do not wait
	g.AfterPublish(nil)          // its publish: nothing left to open
	g.Release()
	if got := metric(t, reg, metricGateExpired); got != 1 {
		t.Fatalf("expired %v after the publish, want 1", got)
	}
}

// TestApplyGateRealBound: with the real clock, a read waits no longer than
// the bound for a change that is never published.
func TestApplyGateRealBound(t *testing.T) {
	g := NewApplyGate(20*time.Millisecond, nil)
	start := time.Now()
	g.Hold()
	g.Wait(context.Background())
	if d := time.Since(start); d < 20*time.Millisecond {
		t.Fatalf("went on after %s, before the bound of 20ms with the hold raised", d)
	}
	if g.Holding() {
		t.Fatal("holding after the bound")
	}
}

// TestApplyGateContext: a read whose request ends stops waiting.
func TestApplyGateContext(t *testing.T) {
	g, _, _ := newTestGate(time.Hour)
	g.Hold()
	defer g.Release()
	ctx, cancel := context.WithCancel(context.Background())
	r := startRead(t, g, ctx)
	cancel()
	wantGone(t, r, "after the request ended")
}

// TestApplyGateOff: a bound of zero, or no gate at all, holds nothing.
func TestApplyGateOff(t *testing.T) {
	g, clock, _ := newTestGate(0)
	g.Hold()
	if g.Holding() || len(clock.bounds) != 0 {
		t.Fatalf("a gate with no bound raised a hold (%d bounds)", len(clock.bounds))
	}
	g.Wait(context.Background())
	g.Release()
	var none *ApplyGate
	none.Hold()
	none.Wait(context.Background())
	none.Release()
	if none.Holding() || none.Waiting() != 0 {
		t.Fatal("a nil gate holds")
	}
}

// BenchmarkApplyGateWaitOpen is the cost a read pays with no change
// pending.
func BenchmarkApplyGateWaitOpen(b *testing.B) {
	g := NewApplyGate(DefaultApplyPriorityWait, nil)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		g.Wait(ctx)
	}
}

package memory

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/utxo-cache/utxo-cache/cache"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var ctx = context.Background()

func newTier(t testing.TB, opts Options) *Tier {
	t.Helper()
	tr, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.Close)
	return tr
}

func entry(seq uint64, body string) cache.Entry {
	return cache.Entry{Seq: seq, Status: 200, ETag: `W/"e"`, Body: []byte(body)}
}

// distinctGuards returns n guards in n distinct floor slots of tr, so that
// tests about one guard's floor are not disturbed by slot sharing.
func distinctGuards(tr *Tier, n int) []string {
	var gs []string
	used := map[uint64]bool{}
	for i := 0; len(gs) < n; i++ {
		g := "addr" + strings.Repeat("x", i%3) + string(rune('a'+i%26)) + string(rune('a'+i/26%26))
		s := tr.floors.hash(g) & tr.floors.mask
		if !used[s] {
			used[s] = true
			gs = append(gs, g)
		}
	}
	return gs
}

func mustGet(t *testing.T, tr *Tier, key, guard string) cache.Entry {
	t.Helper()
	e, ok := tr.Get(ctx, key, guard)
	if !ok {
		t.Fatalf("Get(%q, %q): miss, want hit", key, guard)
	}
	return e
}

func mustMiss(t *testing.T, tr *Tier, key, guard string) {
	t.Helper()
	if e, ok := tr.Get(ctx, key, guard); ok {
		t.Fatalf("Get(%q, %q) = seq %d %q, want miss", key, guard, e.Seq, e.Body)
	}
}

func TestSetWaitGet(t *testing.T) {
	tr := newTier(t, Options{MaxBytes: 1 << 20})
	if tr.Name() != "memory" {
		t.Fatalf("Name = %q", tr.Name())
	}
	want := entry(3, `"balance":1}`)
	mustMiss(t, tr, "a/bal", "a")
	tr.Set(ctx, "a/bal", "a", want)
	tr.Wait()
	got := mustGet(t, tr, "a/bal", "a")
	if got.Seq != want.Seq || got.Status != want.Status || got.ETag != want.ETag || string(got.Body) != string(want.Body) {
		t.Fatalf("Get = %+v, want %+v", got, want)
	}
	// The same key under another guard is not this entry.
	mustMiss(t, tr, "a/bal", "b")
	if s := tr.Stats(); s.Hits != 1 || s.Misses != 2 || s.Fills != 1 {
		t.Fatalf("stats = %+v", s)
	}
}

func TestGetDiscardsBelowFloor(t *testing.T) {
	tr := newTier(t, Options{MaxBytes: 1 << 20})
	gs := distinctGuards(tr, 2)
	g, other := gs[0], gs[1]
	tr.Set(ctx, "k1", g, entry(5, "old"))
	tr.Set(ctx, "k2", g, entry(6, "at floor"))
	tr.Set(ctx, "k3", other, entry(5, "other"))
	tr.Wait()
	mustGet(t, tr, "k1", g)

	if err := tr.Invalidate(ctx, 6, []string{g}); err != nil {
		t.Fatal(err)
	}
	mustMiss(t, tr, "k1", g)    // 5 < 6: discarded
	mustGet(t, tr, "k2", g)     // 6 is not below the floor 6
	mustGet(t, tr, "k3", other) // another guard keeps its floor
	if s := tr.Stats(); s.StaleDiscards != 1 || s.Invalidations != 1 {
		t.Fatalf("stats = %+v", s)
	}
	tr.Wait()
	mustMiss(t, tr, "k1", g)
	if s := tr.Stats(); s.StaleDiscards != 1 {
		t.Fatalf("discarded entry still stored: stats = %+v", s)
	}
}

func TestSetRefusedBelowFloor(t *testing.T) {
	tr := newTier(t, Options{MaxBytes: 1 << 20})
	g := distinctGuards(tr, 1)[0]
	if err := tr.Invalidate(ctx, 10, []string{g}); err != nil {
		t.Fatal(err)
	}
	tr.Set(ctx, "k", g, entry(9, "read before the change"))
	tr.Wait()
	mustMiss(t, tr, "k", g)
	if s := tr.Stats(); s.FillsRefusedStale != 1 || s.Fills != 0 {
		t.Fatalf("stats = %+v", s)
	}
	tr.Set(ctx, "k", g, entry(10, "read after"))
	tr.Wait()
	if e := mustGet(t, tr, "k", g); string(e.Body) != "read after" {
		t.Fatalf("Get = %q", e.Body)
	}
}

func TestInvalidateMonotonic(t *testing.T) {
	tr := newTier(t, Options{MaxBytes: 1 << 20})
	g := distinctGuards(tr, 1)[0]
	for _, seq := range []uint64{10, 5, 0, 10, 9} {
		if err := tr.Invalidate(ctx, seq, []string{g}); err != nil {
			t.Fatal(err)
		}
	}
	if f := tr.floors.slot(tr.floors.hash(g)).Load(); f != 10 {
		t.Fatalf("floor = %d, want 10", f)
	}
	tr.Set(ctx, "k", g, entry(7, "between the two invalidations"))
	tr.Wait()
	mustMiss(t, tr, "k", g)
	if s := tr.Stats(); s.FillsRefusedStale != 1 || s.Invalidations != 5 {
		t.Fatalf("stats = %+v", s)
	}
}

func TestLargeEntriesNotCached(t *testing.T) {
	const maxBytes = 1 << 20
	tr := newTier(t, Options{MaxBytes: maxBytes}) // MaxEntryBytes defaults to maxBytes/64
	const limit = maxBytes / 64
	const guard = "g"
	etag := entry(0, "").ETag
	fits := 0 // the largest body that fits: its cost steps with size classes
	for costOf(fits+1, len(etag), len(guard)) <= limit {
		fits++
	}
	for _, tc := range []struct {
		body   int
		cached bool
	}{
		{0, true},
		{fits, true},
		{fits + 1, false},
		{maxBytes, false},
	} {
		key := "k" + string(rune('0'+tc.body%10)) + strings.Repeat("x", tc.body%7)
		e := cache.Entry{Seq: 1, ETag: etag, Body: make([]byte, tc.body)}
		if got := entryCost(guard, &e) <= limit; got != tc.cached {
			t.Fatalf("body %d: cost %d, limit %d", tc.body, entryCost(guard, &e), limit)
		}
		before := tr.Stats().FillsTooLarge
		tr.Set(ctx, key, guard, e)
		tr.Wait()
		_, ok := tr.Get(ctx, key, guard)
		if ok != tc.cached {
			t.Errorf("body %d bytes: cached = %v, want %v", tc.body, ok, tc.cached)
		}
		if refused := tr.Stats().FillsTooLarge - before; refused != map[bool]uint64{true: 0, false: 1}[tc.cached] {
			t.Errorf("body %d bytes: too-large count +%d", tc.body, refused)
		}
	}
}

func TestOlderFillDoesNotReplaceNewer(t *testing.T) {
	tr := newTier(t, Options{MaxBytes: 1 << 20})
	tr.Set(ctx, "k", "g", entry(5, "five"))
	tr.Wait()
	tr.Set(ctx, "k", "g", entry(3, "three"))
	tr.Wait()
	if e := mustGet(t, tr, "k", "g"); e.Seq != 5 {
		t.Fatalf("Get seq = %d, want 5", e.Seq)
	}
	tr.Set(ctx, "k", "g", entry(7, "seven"))
	tr.Wait()
	if e := mustGet(t, tr, "k", "g"); e.Seq != 7 {
		t.Fatalf("Get seq = %d, want 7", e.Seq)
	}
	// A key reused for another guard is replaced whatever the seqs.
	tr.Set(ctx, "k", "h", entry(1, "one"))
	tr.Wait()
	mustMiss(t, tr, "k", "g")
	if e := mustGet(t, tr, "k", "h"); e.Seq != 1 {
		t.Fatalf("Get seq = %d, want 1", e.Seq)
	}
}

func TestOptions(t *testing.T) {
	d := Options{}.EnsureDefaults()
	if d.MaxBytes != 256<<20 || d.MaxEntryBytes != 4<<20 || d.FloorSlots != 1<<20 {
		t.Fatalf("defaults = %+v", d)
	}
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, o := range []Options{
		{MaxBytes: -1},
		{MaxBytes: 1 << 20, MaxEntryBytes: 2 << 20},
		{MaxBytes: 1 << 20, MaxEntryBytes: -1},
		{FloorSlots: 3},
		{FloorSlots: -4},
	} {
		if _, err := New(o); err == nil {
			t.Errorf("New(%+v) succeeded", o)
		}
	}
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	tr := newTier(t, Options{MaxBytes: 1 << 20, Metrics: reg})
	tr.Set(ctx, "k", "g", entry(1, "x"))
	tr.Wait()
	mustGet(t, tr, "k", "g")
	mustMiss(t, tr, "j", "g")
	if err := tr.Invalidate(ctx, 2, []string{"g", "h"}); err != nil {
		t.Fatal(err)
	}
	mustMiss(t, tr, "k", "g")

	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		m := mf.GetMetric()[0]
		if c := m.GetCounter(); c != nil {
			got[mf.GetName()] = c.GetValue()
		} else {
			got[mf.GetName()] = m.GetGauge().GetValue()
		}
	}
	for name, want := range map[string]float64{
		"utxo_cache_memory_hits_total":           1,
		"utxo_cache_memory_misses_total":         2,
		"utxo_cache_memory_fills_total":          1,
		"utxo_cache_memory_stale_discards_total": 1,
		"utxo_cache_memory_invalidations_total":  2,
		"utxo_cache_memory_evictions_total":      0,
	} {
		if got[name] != want {
			t.Errorf("%s = %v, want %v", name, got[name], want)
		}
	}
	if len(got) != 10 {
		t.Errorf("gathered %d metrics: %v", len(got), got)
	}

	// A second tier on the same registry fails cleanly (and leaks no
	// goroutine: see TestMain).
	if _, err := New(Options{MaxBytes: 1 << 20, Metrics: reg}); err == nil {
		t.Fatal("second registration succeeded")
	} else if are := (prometheus.AlreadyRegisteredError{}); !errors.As(err, &are) {
		t.Fatalf("err = %v", err)
	}
}

func TestUseAfterClose(t *testing.T) {
	tr, err := New(Options{MaxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	tr.Set(ctx, "k", "g", entry(1, "x"))
	tr.Wait()
	tr.Close()
	tr.Close()
	tr.Set(ctx, "k", "g", entry(1, "x"))
	tr.Wait()
	mustMiss(t, tr, "k", "g")
	if s := tr.Stats(); s.Evictions != 0 {
		t.Fatalf("Close counted as evictions: %+v", s)
	}
}

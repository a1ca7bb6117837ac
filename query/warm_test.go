package query

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/utxo-cache/utxo-cache/cache"
	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/changeset"
	"github.com/utxo-cache/utxo-cache/internal/model"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
	"github.com/utxo-cache/utxo-cache/writer"
)

// recordTier is an owned tier that keeps every entry it is given (mapTier,
// with the guard floors of the cache.Tier contract, never replacing an entry by an
// older one), and records each entry stored with a Seq the store has not
// published yet: an answer visible too early.
type recordTier struct {
	*mapTier
	store Store
	early []string // guarded by mapTier.mu
}

func newRecordTier(store Store) *recordTier {
	return &recordTier{mapTier: newMapTier(), store: store}
}

func (*recordTier) Name() string { return "memory" }

func (r *recordTier) Set(_ context.Context, key, guard string, e cache.Entry) {
	published := r.store.Published().Seq
	r.mu.Lock()
	defer r.mu.Unlock()
	if e.Seq > published {
		r.early = append(r.early, fmt.Sprintf("%s at seq %d, published %d", key, e.Seq, published))
	}
	if cur, ok := r.entries[key]; (ok && cur.Seq > e.Seq) || e.Seq < r.floors[guard] {
		return
	}
	r.entries[key] = e
}

// Peek makes recordTier a Peeker, as the memory tier is: the server keeps
// the entries a change leaves as they are (keep.go).
func (r *recordTier) Peek(key, guard string) (cache.Entry, bool) {
	return r.Get(context.Background(), key, guard)
}

func (r *recordTier) tooEarly() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.early...)
}

// published is a writer listener subscribed after the server: it calls fn
// with every change set once the server has handled its publication, on the
// writer goroutine (so the published state is cs's while fn runs).
type published struct {
	fn func(cs *changeset.Set)
}

func (*published) Changed(*changeset.Set)           {}
func (p *published) AfterPublish(cs *changeset.Set) { p.fn(cs) }

// feedRun drives a writer with random blocks (one by one, and in catch-up
// windows) and rollbacks, keeping a model of the chain for the generator.
type feedRun struct {
	t     *testing.T
	store *disk.Store
	w     *writer.Writer
	g     *model.Gen
	m     *model.Model
}

func newFeedRun(t *testing.T, seed uint64) *feedRun {
	t.Helper()
	opts := disk.Options{PruneDepth: 4, RollbackWindow: 6}
	store, err := disk.Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	w := writer.New(store, writer.Options{LiveMargin: 1})
	t.Cleanup(func() { w.Close() })
	o := opts.EnsureDefaults()
	return &feedRun{
		t: t, store: store, w: w,
		g: model.NewGen(seed, model.GenOptions{Addresses: 12, MaxTxs: 6}),
		m: model.New(o.PruneDepth, o.RollbackWindow),
	}
}

// step makes one random change (a rollback, a block, or a run of blocks
// that goes partly in a catch-up window).
func (r *feedRun) step(ctx context.Context) {
	r.t.Helper()
	rng := r.g.Rand()
	tip := r.m.Tip()
	switch k := rng.IntN(10); {
	case k == 0 && !tip.Empty && tip.Height > r.m.RollbackFloor()+1:
		lo := max(r.m.RollbackFloor(), tip.Height-min(tip.Height, r.m.RollbackWindow()))
		target := lo + rng.Uint64N(tip.Height-lo)
		res, err := r.w.Rollback(ctx, target)
		if err != nil {
			r.t.Fatalf("rollback to %d: %v", target, err)
		}
		if err := r.m.Rollback(target); err != nil {
			r.t.Fatal(err)
		}
		if res.Seq != r.store.Published().Seq {
			r.t.Fatalf("rollback acknowledged at seq %d, published %d", res.Seq, r.store.Published().Seq)
		}
	case k <= 2:
		n := 4 + rng.IntN(4)
		blocks := make([]*chain.Block, n)
		for i := range blocks {
			blocks[i] = r.g.Block(r.m)
			if _, err := r.m.Apply(blocks[i], false); err != nil {
				r.t.Fatal(err)
			}
		}
		res, err := r.w.ApplyBlocks(ctx, blocks, blocks[n-1].Height)
		if err != nil || res.Done != n {
			r.t.Fatalf("apply %d blocks: done %d, %v", n, res.Done, err)
		}
		if res.Windows == 0 {
			r.t.Fatalf("%d blocks applied with no catch-up window", n)
		}
	default:
		b := r.g.Block(r.m)
		res, err := r.w.Apply(ctx, b)
		if err != nil {
			r.t.Fatalf("apply block %d: %v", b.Height, err)
		}
		if _, err := r.m.Apply(b, false); err != nil {
			r.t.Fatal(err)
		}
		if !res.Applied {
			r.t.Fatalf("block %d not applied", b.Height)
		}
	}
}

// TestBalancesFromChangesExact: after random blocks, catch-up windows and
// rollbacks, the balance answer the server caches from each change set, with
// no disk read, is byte for byte the answer a disk read at the change's seq
// gives (body, ETag, tip and seq), it is cached for every hot address the
// change gives the balance of, which is every one it touched but those
// left holding assets whose sums it does not all read (of more than 64
// assets, or any in a catch-up window), and no entry is stored before its
// change is published.
func TestBalancesFromChangesExact(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			ctx := context.Background()
			r := newFeedRun(t, seed)
			tier := newRecordTier(r.store)
			srv := New(r.store, Options{Tiers: []cache.Tier{tier}, HotAddresses: 64})
			defer srv.Close()
			ref := New(r.store, Options{HotAddresses: -1}) // no tiers: every answer from the disk
			defer ref.Close()
			for _, a := range r.g.Addresses() {
				for range hotThreshold {
					srv.hot.touch(a)
				}
			}
			var failures []string
			windows, rollbacks, given, missing := 0, 0, 0, 0
			check := func(cs *changeset.Set) {
				if cs.Rollback {
					rollbacks++
				} else if cs.NewTip.Height > cs.OldTip.Height+1 {
					windows++
				}
				for _, a := range cs.Addresses {
					if _, ok := cs.Balances[a]; !ok {
						// Only an address left holding assets, whose sums
						// the change did not all read, may be missing: in a
						// catch-up window any such, else one of more than
						// 64 assets (a block reads the others whole).
						want, err := ref.Balance(ctx, a)
						if err != nil {
							failures = append(failures, err.Error())
							continue
						}
						window := !cs.Rollback && cs.NewTip.Height > cs.OldTip.Height+1
						if n := bytes.Count(want.Body, []byte(`{"policy":`)); n == 0 || !window && n <= 64 {
							failures = append(failures, fmt.Sprintf("seq %d: change set without the balance of %q, which holds %d assets", cs.Seq, a, n))
						}
						want.Release()
						missing++
						continue
					}
					given++
					got, ok := tier.Get(ctx, "b|"+a, addressGuard(a))
					if !ok || got.Seq != cs.Seq {
						failures = append(failures, fmt.Sprintf("seq %d: balance of %q not cached from the change (%v, seq %d)", cs.Seq, a, ok, got.Seq))
						continue
					}
					want, err := ref.Balance(ctx, a)
					if err != nil {
						failures = append(failures, err.Error())
						continue
					}
					if !sameAnswer(got, want) {
						failures = append(failures, fmt.Sprintf("seq %d, %q: cached %d %s %s %q, disk %d %s %s %q", cs.Seq, a,
							got.Seq, got.Tip, got.ETag, got.Body, want.Seq, want.Tip, want.ETag, want.Body))
					}
					want.Release()
				}
			}
			r.w.Subscribe(srv)
			r.w.Subscribe(&published{fn: check})
			for range 150 {
				r.step(ctx)
				if len(failures) > 0 {
					t.Fatal(failures[0])
				}
			}
			if windows == 0 || rollbacks == 0 || given == 0 {
				t.Fatalf("%d windows, %d rollbacks and %d balances given by changes: the run missed a path", windows, rollbacks, given)
			}
			t.Logf("%d balances given by the changes, %d of addresses holding assets left to the warmer", given, missing)
			if early := tier.tooEarly(); len(early) > 0 {
				t.Fatalf("entries stored before their change was published: %v", early)
			}
		})
	}
}

// TestWarmedReadsUnderFeed: readers read the balances and first pages of hot
// addresses (warmed from change sets and by the warmer) while a writer
// applies random blocks, windows and rollbacks. Every answer is the disk's
// answer at the state it names, and that state is no older than the one
// acknowledged before the read began.
func TestWarmedReadsUnderFeed(t *testing.T) {
	ctx := context.Background()
	r := newFeedRun(t, 7)
	tier := newRecordTier(r.store)
	srv := New(r.store, Options{Tiers: []cache.Tier{tier}, HotAddresses: 64})
	defer srv.Close()
	ref := New(r.store, Options{HotAddresses: -1})
	defer ref.Close()
	addrs := r.g.Addresses()
	for _, a := range addrs {
		for range hotThreshold {
			srv.hot.touchPage(a, pageShape{limit: 5})
			srv.hot.touchPage(a, pageShape{desc: true, limit: 5})
		}
	}
	// want[seq] holds every answer at seq, read from the disk right after
	// the change is published (on the writer goroutine: nothing moves
	// meanwhile).
	type read struct {
		kind, addr string
	}
	var mu sync.Mutex
	want := map[uint64]map[read]string{}
	var failed atomic.Pointer[string]
	record := func(seq uint64) {
		m := map[read]string{}
		for _, a := range addrs {
			for _, k := range []string{"balance", "asc", "desc"} {
				ans, err := answer(ctx, ref, k, a)
				if err == nil && ans.Seq != seq {
					err = fmt.Errorf("reference read at seq %d, want %d", ans.Seq, seq)
				}
				if err != nil {
					msg := err.Error()
					failed.Store(&msg)
					return
				}
				m[read{k, a}] = string(ans.AppendBody(nil)) + ans.ETag
				ans.Release()
			}
		}
		mu.Lock()
		want[seq] = m
		mu.Unlock()
	}
	r.w.Subscribe(srv)
	r.w.Subscribe(&published{fn: func(cs *changeset.Set) { record(cs.Seq) }})
	r.step(ctx)
	var acked atomic.Uint64
	acked.Store(r.store.Published().Seq)

	type got struct {
		read
		floor, seq uint64
		body       string
	}
	results := make(chan []got, 4)
	stop := make(chan struct{})
	for i := range 4 {
		go func() {
			var out []got
			defer func() { results <- out }()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				rd := read{[]string{"balance", "asc", "desc"}[n%3], addrs[(n/3+i)%len(addrs)]}
				floor := acked.Load()
				ans, err := answer(ctx, srv, rd.kind, rd.addr)
				if err != nil {
					out = append(out, got{read: rd, body: "error: " + err.Error()})
					return
				}
				out = append(out, got{rd, floor, ans.Seq, string(ans.AppendBody(nil)) + ans.ETag})
				ans.Release()
			}
		}()
	}
	for range 120 {
		r.step(ctx)
		acked.Store(r.store.Published().Seq)
	}
	close(stop)
	if msg := failed.Load(); msg != nil {
		t.Fatal(*msg)
	}
	var all []got
	for range 4 {
		all = append(all, <-results...)
	}
	hits := 0
	for _, g := range all {
		if g.seq < g.floor {
			t.Fatalf("%s of %q at seq %d, but %d was acknowledged before the read", g.kind, g.addr, g.seq, g.floor)
		}
		w, ok := want[g.seq][g.read]
		if !ok || w != g.body {
			t.Fatalf("%s of %q at seq %d:\n got %s\nwant %s", g.kind, g.addr, g.seq, g.body, w)
		}
		hits++
	}
	if hits == 0 {
		t.Fatal("no reads checked")
	}
	if early := tier.tooEarly(); len(early) > 0 {
		t.Fatalf("entries stored before their change was published: %v", early)
	}
}

// answer reads kind ("balance", "asc", "desc": a first page of 5) of a.
func answer(ctx context.Context, s *Server, kind, a string) (Answer, error) {
	switch kind {
	case "balance":
		return s.Balance(ctx, a)
	default:
		return s.AddressUtxos(ctx, a, kind == "desc", 5, "")
	}
}

// TestKeptEntriesExact: after every change of a random feed (blocks, catch-up
// windows, rollbacks), each first page and balance the server stored again
// at the change's seq without a disk read (keep.go: kept as it was, or a
// complete page patched with the change's outputs) is byte for byte the
// disk's answer at that seq, and the run went through every path. Readers
// fill the tier between changes with first pages at limits small enough
// that most addresses have more outputs than a page, and at 50, which holds
// every output of most.
func TestKeptEntriesExact(t *testing.T) {
	shapes := []pageShape{{limit: 2}, {desc: true, limit: 2}, {limit: 50}, {desc: true, limit: 50}}
	keptAsc, keptDesc, keptBalances, completes := 0, 0, 0, 0
	var kept, patched float64 // the server's own counts
	for seed := uint64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			ctx := context.Background()
			r := newFeedRun(t, seed)
			tier := newRecordTier(r.store)
			// Every address hot, so complete pages are patched too; the
			// warmer's entries, also at the change's seq, are disk reads.
			m := NewMetrics(prometheus.NewRegistry())
			srv := New(r.store, Options{Tiers: []cache.Tier{tier}, HotAddresses: 64, Metrics: m})
			defer srv.Close()
			for _, a := range r.g.Addresses() {
				for range hotThreshold {
					srv.hot.touch(a)
				}
			}
			defer func() {
				kept += counterValue(m.kept)
				patched += counterValue(m.patched)
			}()
			ref := New(r.store, Options{HotAddresses: -1})
			defer ref.Close()
			srv.shapes.counts = map[pageShape]uint32{}
			for _, p := range shapes {
				srv.shapes.counts[p] = 1
			}
			var failures []string
			check := func(cs *changeset.Set) {
				for _, a := range r.g.Addresses() {
					for _, p := range shapes {
						key := pageKey(a, p.desc, int(p.limit), "")
						got, ok := tier.Get(ctx, key, addressGuard(a))
						if !ok || got.Seq != cs.Seq {
							continue
						}
						switch {
						case bytes.HasSuffix(got.Body, []byte(nullTail)):
							completes++
						case p.desc:
							keptDesc++
						default:
							keptAsc++
						}
						want, err := ref.AddressUtxos(ctx, a, p.desc, int(p.limit), "")
						if err != nil {
							failures = append(failures, err.Error())
							continue
						}
						if !sameAnswer(got, want) {
							failures = append(failures, fmt.Sprintf("seq %d (rollback %v), %s: kept %s %q, disk at seq %d %s %q",
								cs.Seq, cs.Rollback, key, got.ETag, got.Body, want.Seq, want.ETag, want.Body))
						}
						want.Release()
					}
					got, ok := tier.Get(ctx, "b|"+a, addressGuard(a))
					if !ok || got.Seq != cs.Seq {
						continue
					}
					keptBalances++
					want, err := ref.Balance(ctx, a)
					if err != nil {
						failures = append(failures, err.Error())
						continue
					}
					if !sameAnswer(got, want) {
						failures = append(failures, fmt.Sprintf("seq %d, balance of %q: kept %q, disk %q", cs.Seq, a, got.Body, want.Body))
					}
					want.Release()
				}
			}
			r.w.Subscribe(srv)
			r.w.Subscribe(&published{fn: check})
			for range 120 {
				r.step(ctx)
				if len(failures) > 0 {
					t.Fatal(failures[0])
				}
				for _, a := range r.g.Addresses() {
					for _, p := range shapes {
						ans, err := srv.AddressUtxos(ctx, a, p.desc, int(p.limit), "")
						if err != nil {
							t.Fatal(err)
						}
						ans.Release()
					}
					ans, err := srv.Balance(ctx, a)
					if err != nil {
						t.Fatal(err)
					}
					ans.Release()
				}
			}
			if early := tier.tooEarly(); len(early) > 0 {
				t.Fatalf("entries stored before their change was published: %v", early)
			}
		})
	}
	t.Logf("checked %d ascending and %d descending first pages with a next_cursor, %d complete pages and %d balances at their change's seq; the server kept %.0f pages and patched %.0f",
		keptAsc, keptDesc, completes, keptBalances, kept, patched)
	if keptAsc == 0 || keptDesc == 0 || completes == 0 || keptBalances == 0 || kept == 0 || patched == 0 {
		t.Fatal("the run missed a path")
	}
}

// sameAnswer reports whether a cached entry is the answer want: the same
// state, status, ETag and body.
func sameAnswer(got cache.Entry, want Answer) bool {
	return got.Seq == want.Seq && got.Tip == want.Tip && got.Status == want.Status &&
		got.ETag == want.ETag && bytes.Equal(got.Body, want.Body)
}

// TestChangeSetSpans: for every change of a random feed (blocks, catch-up
// windows, single-block rollbacks), changeset.Set.Spans[i] is exactly the lowest
// and highest index position whose presence in Addresses[i]'s listing the
// change flipped (the symmetric difference of the listings before and
// after), Spans is nil only for a merged rollback, and every address whose
// listing changed is in Addresses.
func TestChangeSetSpans(t *testing.T) {
	ctx := context.Background()
	r := newFeedRun(t, 11)
	listing := func() map[string]map[chain.Position]bool {
		v, err := r.store.PublishedView()
		if err != nil {
			t.Fatal(err)
		}
		defer v.Close()
		out := map[string]map[chain.Position]bool{}
		for _, a := range r.g.Addresses() {
			m := map[chain.Position]bool{}
			if _, _, err := v.ListFunc(disk.ListQuery{Dim: disk.DimAddress, Value: []byte(a), Limit: 1 << 20},
				func(u *disk.UtxoRef) error {
					m[chain.Position{Height: u.Height, TxPos: u.TxPos, Index: u.OutPoint.Index}] = true
					return nil
				}); err != nil {
				t.Fatal(err)
			}
			out[a] = m
		}
		return out
	}
	before := listing()
	checked, nilSpans := 0, 0
	var failures []string
	r.w.Subscribe(&published{fn: func(cs *changeset.Set) {
		after := listing()
		defer func() { before = after }()
		if cs.Spans == nil {
			nilSpans++
			if !cs.Rollback {
				failures = append(failures, fmt.Sprintf("seq %d: no spans on an apply", cs.Seq))
			}
			return
		}
		if len(cs.Spans) != len(cs.Addresses) {
			failures = append(failures, fmt.Sprintf("seq %d: %d spans for %d addresses", cs.Seq, len(cs.Spans), len(cs.Addresses)))
			return
		}
		index := map[string]int{}
		for i, a := range cs.Addresses {
			index[a] = i
		}
		for a := range after {
			var flipped []chain.Position
			for p := range before[a] {
				if !after[a][p] {
					flipped = append(flipped, p)
				}
			}
			for p := range after[a] {
				if !before[a][p] {
					flipped = append(flipped, p)
				}
			}
			i, listed := index[a]
			if len(flipped) == 0 {
				continue // an address listed with no flip (e.g. an output replaced in place) is allowed
			}
			if !listed {
				failures = append(failures, fmt.Sprintf("seq %d: %q changed but is not in Addresses", cs.Seq, a))
				continue
			}
			lo, hi := flipped[0], flipped[0]
			for _, p := range flipped[1:] {
				if chain.ComparePositions(p, lo) < 0 {
					lo = p
				}
				if chain.ComparePositions(p, hi) > 0 {
					hi = p
				}
			}
			if cs.Spans[i] != (changeset.PositionSpan{Lo: lo, Hi: hi}) {
				failures = append(failures, fmt.Sprintf("seq %d (rollback %v): %q span %+v, flipped %+v..%+v", cs.Seq, cs.Rollback, a, cs.Spans[i], lo, hi))
			}
			checked++
		}
	}})
	for range 200 {
		r.step(ctx)
		if len(failures) > 0 {
			t.Fatal(failures[0])
		}
	}
	if checked == 0 || nilSpans == 0 {
		t.Fatalf("%d spans checked, %d merged rollbacks: the run missed a path", checked, nilSpans)
	}
}

// counterValue reads a counter's value.
func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}

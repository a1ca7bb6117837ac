package query

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/utxo-cache/utxo-cache/cache"
	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

// Lookup answers a batch of outpoints at one published state, in request
// order. Each outpoint's result is what GET /v1/utxos/{tx}/{i} answers for
// it ("utxo" and "spent", or null and null where that answers 404), so the
// tiers' entries of single outpoints answer batches too:
//
//   - The published state P is loaded first. Each tier in turn is asked for
//     the outpoints no tier before it had; an entry at or below P.Seq is the
//     outpoint's answer at P (the guard invariant: see Server). An entry
//     newer than P is a miss here: a batch reflects one state.
//   - The outpoints no tier had are read from one published View. When it
//     is P's they complete the batch. When a commit was published in
//     between, the entries found may be older than the View's state, and
//     the whole batch is read from the View instead.
//   - Outpoints read from the store fill the tiers as single reads do
//     (remote tiers by Admission's batch rule: admit.go), and an entry
//     found in a tier fills the tiers before it.
//
// The answer is P's (or the View's), never older than the state published
// when the read began.
func (s *Server) Lookup(ctx context.Context, ops []chain.OutPoint) (Answer, error) {
	if len(s.tiers) == 0 || len(ops) < 1 || len(ops) > MaxLookup {
		return s.lookup(ops, nil, func(body []byte, _ *disk.View, r *disk.UtxoRef) ([]byte, error) {
			return appendUtxo(body, r), nil
		})
	}
	b := getBatchScratch(len(ops))
	defer putBatchScratch(b)
	pub := s.store.Published()
	seq, tip := pub.Seq, pub.Tip
	b.req = ops
	for i := range ops {
		b.todo = append(b.todo, i)
	}
	from := "disk"
	for ti := range s.tiers {
		if len(b.todo) == 0 {
			break
		}
		if s.askTier(ctx, ti, pub.Seq, b) {
			from = s.tiers[ti].Name()
		}
	}
	if len(b.todo) > 0 {
		from = "disk"
		v, err := s.store.PublishedView()
		if err != nil {
			return Answer{}, err
		}
		defer v.Close()
		if st := v.State(); st.Seq != pub.Seq {
			// Published since P: what the tiers answered may be older
			// than v. Read every outpoint from v.
			b.todo = b.todo[:0]
			for i := range ops {
				b.todo = append(b.todo, i)
				b.found[i] = cache.Entry{}
			}
		}
		seq, tip = v.State().Seq, v.Tip()
		if err := s.computeItems(ctx, v, ops, b); err != nil {
			return Answer{}, err
		}
	}
	buf := getAnswerBuf()
	body := append(*buf, `"results":[`...)
	for i, op := range ops {
		if i > 0 {
			body = append(body, ',')
		}
		body = appendOutPointHead(body, op)
		body = append(body, ',')
		if e := &b.found[i]; e.Status == 200 {
			body = append(body, e.Body...)
		} else {
			body = append(body, `"utxo":null,"spent":null}`...)
		}
	}
	body = append(body, "]}"...)
	*buf = body
	return Answer{Status: 200, Tip: tip, Seq: seq, Body: body, Tier: from, buf: buf}, nil
}

// batchTier is a tier that answers many keys in one call: the Redis tier,
// in one round trip.
type batchTier interface {
	GetMany(ctx context.Context, keys, guards []string, out []cache.Entry, hit []bool)
}

// askTier asks tier ti for the outpoints of b.todo (if its admission
// allows), moves those it has at or below seq to b.found, fills the tiers
// before it with them, and reports whether it had any.
func (s *Server) askTier(ctx context.Context, ti int, seq uint64, b *batchScratch) bool {
	t, ad, c := s.tiers[ti], s.admit[ti], s.tierCounters[ti]
	if ad != nil {
		// Not worth it even if every outpoint were marked: no need to
		// look at the marks (a table of 2 MiB, a cache miss each).
		if !ad.askBatch(len(b.todo), len(b.todo)) {
			ad.batchSkipped()
			c.skippedN(len(b.todo))
			return false
		}
		marked := 0
		for _, i := range b.todo {
			if ti < 64 && ad.markedItem(b.req[i]) {
				b.marked[i] |= 1 << ti
				marked++
			}
		}
		if !ad.askBatch(len(b.todo), marked) {
			ad.batchSkipped()
			c.skippedN(len(b.todo))
			return false
		}
	}
	asked := b.todo
	keys := b.keys[:0]
	for _, i := range asked {
		keys = append(keys, b.guard(i))
	}
	b.keys = keys
	out, hit := b.out[:len(keys)], b.hit[:len(keys)]
	var began time.Time
	if ad != nil {
		began = time.Now()
	}
	if bt, ok := t.(batchTier); ok {
		bt.GetMany(ctx, keys, keys, out, hit)
	} else {
		for j, k := range keys {
			out[j], hit[j] = t.Get(ctx, k, k)
		}
	}
	if ad != nil {
		ad.batchAsked(len(keys), time.Since(began))
	}
	hits := 0
	for j, i := range asked {
		if !hit[j] || out[j].Seq > seq {
			if ti < 64 {
				b.missed[i] |= 1 << ti
			}
			continue // a miss, or an answer from after P
		}
		hits++
		b.found[i] = out[j]
		for _, up := range s.tiers[:ti] {
			fill(ctx, up, keys[j], keys[j], out[j])
		}
	}
	c.countN(hits, len(asked)-hits)
	if hits > 0 {
		todo := b.todo[:0]
		for _, i := range b.todo {
			if b.found[i].Status == 0 {
				todo = append(todo, i)
			}
		}
		b.todo = todo
	}
	clear(out)
	return hits > 0
}

// computeItems reads the outpoints of b.todo from v into b.found, and fills
// the tiers with them.
func (s *Server) computeItems(ctx context.Context, v *disk.View, ops []chain.OutPoint, b *batchScratch) error {
	s.m.diskRead()
	want := b.ops[:0]
	for _, i := range b.todo {
		want = append(want, ops[i])
	}
	b.ops = want
	var began time.Time
	if s.timed {
		began = time.Now()
	}
	// The answers are appended to one buffer; entries get their own copy
	// only when a tier keeps them.
	items := b.items[:0]
	err := v.UtxosFunc(want, func(j int, r *disk.UtxoRef) error {
		start := len(items)
		var status int
		items, status = appendUtxoAnswer(items, want[j], r)
		b.spans[j] = itemSpan{start: start, end: len(items), status: status}
		return nil
	})
	b.items = items
	if err != nil {
		return err
	}
	var cost time.Duration
	if s.timed {
		cost = time.Since(began)
	}
	st, tip := v.State(), v.Tip()
	for j, i := range b.todo {
		sp := b.spans[j]
		b.found[i] = cache.Entry{Seq: st.Seq, Tip: tip, Status: sp.status, Body: items[sp.start:sp.end]}
	}
	shared := s.fillShared == nil || s.fillShared()
	for ti, t := range s.tiers {
		if ti >= s.owned && !shared {
			continue
		}
		ad := s.admit[ti]
		if ad != nil && !ad.batchComputed(len(want), cost) {
			continue // not worth the remote tier's round trip (admit.go)
		}
		for j, i := range b.todo {
			// A remote tier is filled from an outpoint's second sight on
			// (admit.go), with what it was asked for and did not have: an
			// outpoint of a batch that did not ask is likely there already.
			if ad != nil && ti < 64 {
				if b.marked[i]&(1<<ti) == 0 {
					ad.markOp(b.req[i])
					continue
				}
				if b.missed[i]&(1<<ti) == 0 {
					continue
				}
			}
			key := b.guard(i)
			e := &b.found[i]
			if e.ETag == "" {
				// The tier keeps the entry: it owns its bytes.
				e.Body = bytes.Clone(items[b.spans[j].start:b.spans[j].end])
				e.ETag = etagOf(e.Body)
			}
			fill(ctx, t, key, key, *e)
		}
	}
	return nil
}

// batchScratch is a batch lookup's working memory, pooled: per outpoint its
// guard and its answer, and the outpoints no tier had yet.
type batchScratch struct {
	req    []chain.OutPoint // the batch
	guards []string         // of req, "" until needed (guard)
	found  []cache.Entry    // Status 0 until answered
	// marked and missed have bit ti set for an outpoint that remote tier
	// ti's admission had marked (askTier), and that tier ti was asked for
	// and did not have.
	marked, missed []uint64
	todo           []int // indexes of the outpoints not answered yet
	keys           []string
	out            []cache.Entry
	hit            []bool
	ops            []chain.OutPoint
	spans          []itemSpan
	items          []byte
}

// guard returns the guard (and key) of the batch's outpoint i.
func (b *batchScratch) guard(i int) string {
	if b.guards[i] == "" {
		b.guards[i] = outPointGuard(b.req[i])
	}
	return b.guards[i]
}

// itemSpan is where computeItems appended an outpoint's answer.
type itemSpan struct {
	start, end, status int
}

var batchScratches = sync.Pool{New: func() any { return new(batchScratch) }}

func getBatchScratch(n int) *batchScratch {
	b := batchScratches.Get().(*batchScratch)
	if cap(b.guards) < n {
		b.guards = make([]string, n)
		b.found = make([]cache.Entry, n)
		b.marked = make([]uint64, n)
		b.missed = make([]uint64, n)
		b.out = make([]cache.Entry, n)
		b.hit = make([]bool, n)
		b.spans = make([]itemSpan, n)
	}
	b.guards, b.found, b.marked, b.missed = b.guards[:n], b.found[:n], b.marked[:n], b.missed[:n]
	b.out, b.hit, b.spans = b.out[:n], b.hit[:n], b.spans[:n]
	b.todo, b.keys, b.ops, b.items = b.todo[:0], b.keys[:0], b.ops[:0], b.items[:0]
	return b
}

// putBatchScratch returns b to the pool, dropping what it refers to.
func putBatchScratch(b *batchScratch) {
	b.req = nil
	clear(b.guards)
	clear(b.found)
	clear(b.marked)
	clear(b.missed)
	clear(b.out)
	if cap(b.items) > maxPooledAnswer {
		b.items = nil
	}
	batchScratches.Put(b)
}

// lookup answers a batch of outpoints from one snapshot: each result names
// its outpoint, then its Utxo object (appended by utxo) and its spent
// record, or null and null for an output the store does not hold or that
// absent (when set) says to answer as absent.
func (s *Server) lookup(ops []chain.OutPoint, absent func(v *disk.View, op chain.OutPoint, r *disk.UtxoRef) (bool, error),
	utxo func(body []byte, v *disk.View, r *disk.UtxoRef) ([]byte, error)) (Answer, error) {
	if len(ops) < 1 || len(ops) > MaxLookup {
		return Answer{}, fmt.Errorf("%d outpoints outside 1..%d: %w", len(ops), MaxLookup, chain.ErrInvalidArgument)
	}
	v, err := s.store.PublishedView()
	if err != nil {
		return Answer{}, err
	}
	defer v.Close()
	s.m.diskRead()
	buf := getAnswerBuf()
	body := append(*buf, `"results":[`...)
	err = v.UtxosFunc(ops, func(i int, r *disk.UtxoRef) error {
		if i > 0 {
			body = append(body, ',')
		}
		body = appendOutPointHead(body, ops[i])
		if r != nil && absent != nil {
			skip, err := absent(v, ops[i], r)
			if err != nil {
				return err
			}
			if skip {
				r = nil
			}
		}
		if r == nil {
			body = append(body, `,"utxo":null,"spent":null}`...)
			return nil
		}
		body = append(body, `,"utxo":`...)
		var err error
		if body, err = utxo(body, v, r); err != nil {
			return err
		}
		body = append(body, `,"spent":`...)
		body = appendSpent(body, r)
		body = append(body, '}')
		return nil
	})
	*buf = body
	if err != nil {
		putAnswerBuf(buf)
		return Answer{}, err
	}
	body = append(body, "]}"...)
	return Answer{Status: 200, Tip: v.Tip(), Seq: v.State().Seq, Body: body, Tier: "disk", buf: buf}, nil
}

package query

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/utxo-cache/utxo-cache/cache"
	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/changeset"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

// Store is what the server reads: views of the disk tier's published state
// (never of a commit that is not published yet).
type Store interface {
	PublishedView() (*disk.View, error)
	Published() disk.State
	Secret() []byte
	// Indexes reports whether the store keeps index dimension d.
	Indexes(d disk.Dimension) bool
}

// ErrBehind is returned by WaitFor when the published state did not reach
// the requested seq or height in time.
var ErrBehind = errors.New("query: behind the requested state")

// Limits of the read API (docs/api.md).
const (
	DefaultPageLimit = 100
	MaxPageLimit     = 1000
	MaxLookup        = 1000
	MaxAddressLen    = chain.MaxAddressLen // the block format's bound: an address no output can have is refused
)

// Options configure a Server.
type Options struct {
	// Tiers are the caches in read order (memory, then Redis). May be empty.
	Tiers []cache.Tier
	// Shared are tiers read and filled after Tiers but never invalidated by
	// this server: on a replica, the Redis tier its writer invalidates.
	// Entries from a state above this node's published one are not served
	// from them (an answer from the node's future).
	Shared []cache.Tier
	// FillShared reports whether answers computed from this node's store may
	// be filled into Shared: on a replica, only once its state has been
	// compared with the writer's record of it (a store changed behind the
	// replica's back must not spread to every node sharing the tier). Nil:
	// always. Entries read from Shared are copied to Tiers either way.
	FillShared func() bool
	// Admission decides which answers the remote tiers among Tiers and
	// Shared (Redis) are asked for and filled with (admit.go). Default: by
	// cost.
	Admission Admission
	// HotAddresses is how many frequently read addresses are re-warmed after
	// a change touches them (their balance from the change itself, their
	// first pages from the disk). Default 1024; negative disables warming.
	HotAddresses int
	// Metrics receives the read path's figures. Default: none.
	Metrics *Metrics
	// Logger. Default: discard.
	Logger *slog.Logger
	// Now is the node's clock, against which reads with leased=… compare
	// lease expiries (lease.go). Default time.Now.
	Now func() time.Time
}

// EnsureDefaults returns o with every unset field set to its default.
func (o Options) EnsureDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.HotAddresses == 0 {
		o.HotAddresses = 1024
	}
	return o
}

// Published is the state the server answers from: the latest change whose
// invalidation has completed in every tier (the store's published state).
type Published struct {
	Seq       uint64
	Tip       chain.Tip
	UtxoCount uint64
	Digest    chain.Digest
}

// Answer is a response body ready to write.
type Answer struct {
	Status int
	// Tip is the tip the answer reflects (also for error answers).
	Tip chain.Tip
	// Seq is the commit sequence of the state the answer reflects.
	Seq uint64
	// ETag is the weak entity tag of the content (empty when not cacheable).
	ETag string
	// Body lacks the opening `{"tip":…,` which AppendBody adds.
	Body []byte
	// Tier is where the answer came from: "memory", "redis" or "disk".
	Tier string
	// Whole says Body is the whole body, with no tip member to prepend: a
	// front end's answer (FrontRead, FrontView), whose shape is another API's.
	Whole bool

	// buf, when set, is the pooled buffer Body was encoded into
	// (answerbuf.go; *buf is that array as the encoding left it), owned by
	// this answer alone: Release returns it.
	buf *[]byte
}

// Release gives the answer's buffer back for reuse. Call it once, when done
// with Body (the API does after writing the answer); neither the Answer nor
// its Body may be used after. An answer that holds no pooled buffer (a cache
// hit, one shared between concurrent readers) ignores it, so releasing any
// answer is safe. Not releasing one is safe too: its buffer is collected.
func (a *Answer) Release() {
	if a.buf == nil {
		return
	}
	putAnswerBuf(a.buf)
	a.buf, a.Body = nil, nil
}

// AppendBody appends the complete JSON body of a.
func (a *Answer) AppendBody(dst []byte) []byte {
	if a.Whole {
		return append(dst, a.Body...)
	}
	dst = append(dst, renderedTip(a.Tip)...)
	return append(dst, a.Body...)
}

// lastTipPrefix caches `{"tip":…,` of the last tip rendered: consecutive
// answers almost always share a tip. The bytes are never modified.
var lastTipPrefix atomic.Pointer[tipPrefix]

type tipPrefix struct {
	tip chain.Tip
	b   []byte
}

func renderedTip(t chain.Tip) []byte {
	if p := lastTipPrefix.Load(); p != nil && p.tip == t {
		return p.b
	}
	b := append([]byte(`{"tip":`), AppendTip(nil, t)...)
	b = append(b, ',')
	lastTipPrefix.Store(&tipPrefix{tip: t, b: b})
	return b
}

// Server answers reads through the tiers. Safe for concurrent use.
//
// # Why a stale or unpublished answer is never served
//
// Every answer is computed from one published disk View (Store.PublishedView)
// and tagged with its Seq, so no entry is ever newer than the published
// state. After each commit, Changed raises, in every tier, the floor of each
// affected guard (address or outpoint) to the change's Seq; only then does
// the writer publish the change (Store.Publish), tell Published, and
// acknowledge it. A reader loads the published state P first, then asks the
// tiers, which never return an entry below its guard's floor (the cache.Tier
// invariant). So a hit e with e.Seq <= P.Seq is the answer at P: no change in
// (e.Seq, P.Seq] touched its guard, or its floor would be above e.Seq; it is
// served with P's tip and seq. A hit with e.Seq > P.Seq is served with its own
// tip and seq when this node has published e.Seq by now (it was published
// after the reader loaded P), and is a miss otherwise: on a replica, an entry
// of the shared Redis tier computed by a node ahead of this one (Shared).
// A reader whose disk read started before a commit and that fills after the
// invalidation fills an entry below the floor, which no Get returns.
//
// Answers are monotonic per node: every answer reflects a published state no
// older than the one published when the read began, and published states
// only move forward in the commit sequence.
type Server struct {
	store Store
	clock func() time.Time // Options.Now
	tiers []cache.Tier     // read order: the owned tiers, then the shared ones
	owned int              // tiers[:owned] are invalidated by Changed
	// fillShared gates disk answers into tiers[owned:] (Options.FillShared).
	fillShared func() bool
	cursors    *cursorCodec
	flights    singleflight.Group
	// published is closed and replaced on every publish: WaitFor's wake-up.
	published atomic.Pointer[chan struct{}]
	hot       *hotSet
	// tierCounters[i] are the hit and miss counters of tiers[i], resolved
	// once (a label lookup per read shows in profiles).
	tierCounters []tierCounters
	// admit[i] applies Options.Admission to tiers[i] when it is remote
	// (nil for a tier in process).
	admit []*admitter
	// timed says some admitter applies the cost rule: computations are
	// timed only then.
	timed bool
	warmQ chan string // addresses to re-warm; never blocks the writer
	// queued holds the addresses in warmQ, each with whether its balance
	// needs a disk read: an address is queued once however many changes
	// touch it before the warmer gets to it (the warmer reads the latest
	// published state anyway), which bounds the warmer's work by the hot
	// set, not by the block rate.
	queued struct {
		sync.Mutex
		m map[string]bool
	}
	// peek is the first owned tier that is a Peeker, nil when none is: see
	// keep.go.
	peek   peekTier
	kept   kept // writer goroutine only
	shapes shapeStats
	paged  addressMarks  // addresses whose first pages were read lately
	stop   chan struct{} // closed by Close
	done   chan struct{} // closed when the warmer has exited
	m      *Metrics
	log    *slog.Logger
}

// New returns a server over store, publishing its current state.
func New(store Store, opts Options) *Server {
	opts = opts.EnsureDefaults()
	s := &Server{
		store:      store,
		tiers:      append(append([]cache.Tier(nil), opts.Tiers...), opts.Shared...),
		owned:      len(opts.Tiers),
		fillShared: opts.FillShared,
		cursors:    newCursorCodec(store.Secret()),
		m:          opts.Metrics,
		log:        opts.Logger,
		clock:      opts.Now,
	}
	for _, t := range s.tiers {
		var ad *admitter
		if r, ok := t.(remoteTier); ok && r.Remote() {
			ad = newAdmitter(opts.Admission)
		}
		s.admit = append(s.admit, ad)
		s.timed = s.timed || (ad != nil && !ad.all)
		s.tierCounters = append(s.tierCounters, s.m.forTier(t.Name(), ad != nil))
		if ad != nil {
			s.tierCounters[len(s.tierCounters)-1].setThreshold(ad.threshold())
		}
	}
	for _, t := range s.tiers[:s.owned] {
		if p, ok := t.(peekTier); ok {
			s.peek = p
			s.paged = newAddressMarks(pagedMarks)
			break
		}
	}
	s.stop, s.done = make(chan struct{}), make(chan struct{})
	ch := make(chan struct{})
	s.published.Store(&ch)
	if opts.HotAddresses > 0 {
		s.hot = newHotSet(opts.HotAddresses)
		s.warmQ = make(chan string, 4096)
		s.queued.m = make(map[string]bool)
		go s.warmer()
	} else {
		close(s.done)
	}
	s.m.tip(store.Published().Tip)
	return s
}

// Close stops the background warmer. Reads keep working.
func (s *Server) Close() {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
}

// Published returns the state reads are answered from now.
func (s *Server) Published() Published {
	st := s.store.Published()
	return Published{Seq: st.Seq, Tip: st.Tip, UtxoCount: st.UtxoCount, Digest: st.Digest}
}

// WaitFor waits until the published state has a seq >= minSeq and a tip
// height >= minHeight (read-your-writes, docs/consistency.md), at most maxWait, and
// returns it. It fails with ErrBehind (and the state it has) when none came
// in time, or with ctx's error.
func (s *Server) WaitFor(ctx context.Context, minSeq, minHeight uint64, maxWait time.Duration) (Published, error) {
	var timer *time.Timer
	for {
		ch := *s.published.Load()
		p := s.Published()
		if Satisfies(p, minSeq, minHeight) {
			if timer != nil {
				timer.Stop()
			}
			return p, nil
		}
		if timer == nil {
			if maxWait <= 0 {
				return p, ErrBehind
			}
			timer = time.NewTimer(maxWait)
			defer timer.Stop()
		}
		select {
		case <-ch:
		case <-timer.C:
			return s.Published(), ErrBehind
		case <-ctx.Done():
			return p, ctx.Err()
		}
	}
}

// Satisfies reports whether p meets a read's min_seq and min_height.
func Satisfies(p Published, minSeq, minHeight uint64) bool {
	if p.Seq < minSeq {
		return false
	}
	return minHeight == 0 || (!p.Tip.Empty && p.Tip.Height >= minHeight)
}

// Changed invalidates what cs changed in every tier. It is the writer's
// listener: it runs on the writer goroutine after the commit and before the
// change is published.
func (s *Server) Changed(cs *changeset.Set) {
	guards := make([]string, 0, len(cs.Addresses)+len(cs.OutPoints)+len(cs.IndexKeys))
	for _, a := range cs.Addresses {
		guards = append(guards, addressGuard(a))
	}
	s.collectKept(cs, guards) // before the invalidation: see keep.go
	for _, op := range cs.OutPoints {
		guards = append(guards, outPointGuard(op))
	}
	guards = indexGuards(guards, cs) // index.go
	ctx := context.Background()
	for _, t := range s.tiers[:s.owned] {
		// A tier that fails to invalidate must stop serving what it held
		// (the cache.Tier contract): the error is for logs and metrics only.
		if err := t.Invalidate(ctx, cs.Seq, guards); err != nil {
			s.log.Warn("cache invalidation failed", "tier", t.Name(), "seq", cs.Seq, "err", err)
		}
	}
	s.m.invalidated(len(guards))
}

// AfterPublish is told that cs is published: it wakes WaitFor's waiters and
// re-warms the hot addresses cs touched. Writer goroutine, before the change
// is acknowledged.
//
// The balance of a hot address is put into the owned tiers at once from the
// change set (cs.Balances: the row the change wrote, so byte for byte what a
// disk read at cs.Seq answers), with no disk read, so readers of the new
// state find it (unless a tier declines the fill). The entry carries cs.Seq and cs.NewTip, as a disk
// read of the published state would, and is stored only now that cs is
// published. The first pages readers ask of the address are queued for the
// warmer, which reads them from the disk.
func (s *Server) AfterPublish(cs *changeset.Set) {
	s.m.tip(cs.NewTip)
	next := make(chan struct{})
	close(*s.published.Swap(&next))
	s.restoreKept(cs)
	if s.hot == nil {
		return
	}
	for _, a := range cs.Addresses {
		if !s.hot.contains(a) {
			continue
		}
		b, known := cs.Balances[a]
		if known {
			s.putBalance(a, &b, cs)
		}
		s.queueWarm(a, !known)
	}
}

// queueWarm queues a for the warmer unless it is queued already (see
// Server.queued); balance asks for its balance too.
func (s *Server) queueWarm(a string, balance bool) {
	s.queued.Lock()
	defer s.queued.Unlock()
	if need, ok := s.queued.m[a]; ok {
		s.queued.m[a] = need || balance
		return
	}
	select {
	case s.warmQ <- a:
		s.queued.m[a] = balance
	default: // the warmer is behind: readers will fill instead
	}
}

// dequeued returns whether a, just taken from warmQ, needs its balance
// warmed, and lets later changes queue it again.
func (s *Server) dequeued(a string) (balance bool) {
	s.queued.Lock()
	defer s.queued.Unlock()
	balance = s.queued.m[a]
	delete(s.queued.m, a)
	return balance
}

// putBalance stores the balance answer of a at cs in the owned tiers (see
// AfterPublish). Shared tiers are not filled: their entries are another
// node's to invalidate.
func (s *Server) putBalance(a string, b *chain.Balance, cs *changeset.Set) {
	if s.owned == 0 {
		return
	}
	body := appendBalanceBody(nil, a, b)
	e := cache.Entry{Seq: cs.Seq, Tip: cs.NewTip, Status: 200, Body: body, ETag: etagOf(body)}
	ctx := context.Background()
	key, guard := "b|"+a, addressGuard(a)
	for i, t := range s.tiers[:s.owned] {
		if ad := s.admit[i]; ad != nil && !ad.ask(key) {
			continue // not worth the remote tier's round trip
		}
		fill(ctx, t, key, guard, e)
	}
	s.m.warmedFromChange()
}

// warmer recomputes, after a change, the first pages readers asked of hot
// addresses since their last warming (and their balance when the change did
// not carry it), so the next reader hits. Its reads start after the change
// is published, so their entries carry a Seq at or above the new floors.
func (s *Server) warmer() {
	defer close(s.done)
	ctx := context.Background()
	var shapes []pageShape
	for {
		select {
		case <-s.stop:
			return
		case a := <-s.warmQ:
			if s.dequeued(a) {
				ans, _ := s.balance(ctx, a)
				ans.Release()
			}
			shapes = s.hot.takePages(shapes[:0], a)
			for _, p := range shapes {
				ans, _ := s.addressUtxos(ctx, a, p.desc, int(p.limit), "")
				ans.Release()
			}
			s.m.warmed()
		}
	}
}

func addressGuard(a string) string { return "a|" + a }

// outPointGuard is "o|" + op.String(), in one allocation.
func outPointGuard(op chain.OutPoint) string {
	var b [2 + 2*chain.HashSize + 1 + 10]byte
	k := append(b[:0], "o|"...)
	k = hex.AppendEncode(k, op.TxHash[:])
	k = append(k, ':')
	return string(strconv.AppendUint(k, uint64(op.Index), 10))
}

// Tip answers GET /v1/tip from the published state.
func (s *Server) Tip() Answer {
	p := s.Published()
	body := append([]byte(nil), `"utxo_count":`...)
	body = strconv.AppendUint(body, p.UtxoCount, 10)
	body = append(body, `,"utxo_digest":"`...)
	body = append(body, p.Digest.String()...)
	body = append(body, `"}`...)
	return Answer{Status: 200, Tip: p.Tip, Seq: p.Seq, Body: body, Tier: "memory"}
}

// AddressUtxos answers a page of an address's live outputs. An invalid
// cursor, limit or address is an error matching chain.ErrInvalidArgument.
func (s *Server) AddressUtxos(ctx context.Context, address string, desc bool, limit int, cursor string) (Answer, error) {
	if (s.hot != nil || s.peek != nil) && sampled() && checkAddress(address) == nil {
		first := cursor == "" && limit >= 1 && limit <= MaxPageLimit
		shape := pageShape{desc: desc, limit: uint16(limit)}
		if first && s.peek != nil {
			s.shapes.add(shape)
		}
		switch {
		case s.hot == nil:
		case first:
			s.hot.touchPage(address, shape)
		default:
			s.hot.touch(address)
		}
	}
	if cursor == "" && s.peek != nil {
		s.paged.mark(address)
	}
	return s.addressUtxos(ctx, address, desc, limit, cursor)
}

func (s *Server) addressUtxos(ctx context.Context, address string, desc bool, limit int, cursor string) (Answer, error) {
	if err := checkAddress(address); err != nil {
		return Answer{}, err
	}
	if limit < 1 || limit > MaxPageLimit {
		return Answer{}, fmt.Errorf("limit %d outside 1..%d: %w", limit, MaxPageLimit, chain.ErrInvalidArgument)
	}
	var after *chain.Position
	if cursor != "" {
		p, err := s.cursors.decode(cursor, address, desc)
		if err != nil {
			return Answer{}, err
		}
		after = &p
	}
	return s.read(ctx, pageKey(address, desc, limit, cursor), addressGuard(address), func(v *disk.View, body []byte) ([]byte, error) {
		return s.appendPage(v, body, address, disk.ListQuery{Dim: disk.DimAddress, Value: []byte(address), After: after, Desc: desc, Limit: limit}, plainItem)
	})
}

// appendPage appends the page answer of q, a listing of address, read from
// v, each output as item appends it.
func (s *Server) appendPage(v *disk.View, body []byte, address string, q disk.ListQuery, item itemFunc) ([]byte, error) {
	body = append(body, `"address":`...)
	body = appendString(body, address)
	body = append(body, `,"utxos":[`...)
	n := 0
	next, more, err := v.ListFunc(q, func(r *disk.UtxoRef) error {
		if n > 0 {
			body = append(body, ',')
		}
		var err error
		body, err = item(body, r)
		n++
		return err
	})
	if err != nil {
		return body, err
	}
	body = append(body, `],"next_cursor":`...)
	if !more {
		body = append(body, "null"...)
	} else {
		body = append(body, '"')
		body = s.cursors.append(body, address, q.Desc, next)
		body = append(body, '"')
	}
	return append(body, '}'), nil
}

// pageKey is the cache key of a page (see addressUtxos).
func pageKey(address string, desc bool, limit int, cursor string) string {
	order := "a"
	if desc {
		order = "d"
	}
	return "p|" + order + "|" + strconv.Itoa(limit) + "|" + cursor + "|" + address
}

// Balance answers an address's balance.
func (s *Server) Balance(ctx context.Context, address string) (Answer, error) {
	if s.hot != nil && sampled() && checkAddress(address) == nil {
		s.hot.touch(address)
	}
	return s.balance(ctx, address)
}

func (s *Server) balance(ctx context.Context, address string) (Answer, error) {
	if err := checkAddress(address); err != nil {
		return Answer{}, err
	}
	return s.read(ctx, "b|"+address, addressGuard(address), func(v *disk.View, body []byte) ([]byte, error) {
		b, err := v.Balance(disk.DimAddress, []byte(address))
		if err != nil {
			return body, err
		}
		return appendBalanceBody(body, address, &b), nil
	})
}

// Utxo answers one outpoint: 200 with its spent state, or 404 not_found.
func (s *Server) Utxo(ctx context.Context, op chain.OutPoint) (Answer, error) {
	guard := outPointGuard(op)
	return s.read(ctx, guard, guard, func(v *disk.View, body []byte) ([]byte, error) {
		err := v.UtxoFunc(op, func(r *disk.UtxoRef) error {
			body, _ = appendUtxoAnswer(body, op, r)
			return nil
		})
		if errors.Is(err, chain.ErrNotFound) {
			body, _ = appendUtxoAnswer(body, op, nil)
			return body, errNotFoundAnswer
		}
		return body, err
	})
}

// appendUtxoAnswer appends the body of Utxo's answer for op, whose record
// is r (nil where the store answers chain.ErrNotFound), and returns its
// status: the entry a tier holds under op's guard, which batch lookups
// read too (lookup.go).
func appendUtxoAnswer(body []byte, op chain.OutPoint, r *disk.UtxoRef) ([]byte, int) {
	if r == nil {
		return appendErrorBody(body, "not_found", "outpoint "+op.String()+" is not known at this tip"), 404
	}
	body = append(body, `"utxo":`...)
	body = appendUtxo(body, r)
	body = append(body, `,"spent":`...)
	body = appendSpent(body, r)
	return append(body, '}'), 200
}

// errNotFoundAnswer, from a read's compute, marks its body as the 404 answer.
var errNotFoundAnswer = errors.New("query: the answer is a 404")

// compute appends the body of an answer, read from v, to body. An error
// fails the read, except errNotFoundAnswer and a Status (a front end's,
// frontend.go): the body is then the answer, with status 404 or that
// status.
type compute func(v *disk.View, body []byte) ([]byte, error)

// read answers key through the tiers, computing it from a View on a miss.
func (s *Server) read(ctx context.Context, key, guard string, fn compute) (Answer, error) {
	pub := s.store.Published()
	for i, t := range s.tiers {
		ad := s.admit[i]
		if ad != nil && !ad.ask(key) {
			s.tierCounters[i].skipped()
			continue
		}
		var asked time.Time
		if ad != nil {
			asked = time.Now()
		}
		e, ok := t.Get(ctx, key, guard)
		if ad != nil {
			ad.roundTrip(time.Since(asked))
			s.tierCounters[i].setThreshold(ad.threshold())
		}
		ahead := ok && e.Seq > pub.Seq
		if ahead && e.Seq > s.store.Published().Seq {
			// Computed by a node ahead of this one (a shared tier on a
			// replica): an answer from this node's future is a miss.
			ok = false
		}
		s.tierCounters[i].count(ok)
		if !ok {
			continue
		}
		for _, up := range s.tiers[:i] {
			fill(ctx, up, key, guard, e)
		}
		if ahead {
			// Published after this read began: the entry is the answer at
			// its own state, a published one, newer than pub.
			return answerOf(e, e.Tip, e.Seq, t.Name()), nil
		}
		return answerOf(e, pub.Tip, pub.Seq, t.Name()), nil
	}
	// Readers that loaded the same published state share one disk read; one
	// that started after a newer publish never joins an older flight, so its
	// answer reflects at least the tip acknowledged before it started.
	var fb [20 + 1 + 64]byte
	flight := string(append(append(strconv.AppendUint(fb[:0], pub.Seq, 10), '|'), key...))
	v, err, shared := s.flights.Do(flight, func() (any, error) {
		return s.compute(ctx, key, guard, fn)
	})
	if err != nil {
		return Answer{}, err
	}
	r := v.(*computed)
	ans := answerOf(r.e, r.e.Tip, r.e.Seq, "disk")
	if !shared {
		// This reader alone holds the answer: its buffer is its to release.
		ans.buf = r.buf
	}
	return ans, nil
}

// computed is a disk read's answer. buf, when set, is the pooled buffer of
// e.Body: no tier keeps the entry, so the buffer can be reused once the
// answer is written.
type computed struct {
	e   cache.Entry
	buf *[]byte
}

// compute reads key from a published View into a pooled buffer and fills
// the tiers. Entries that tiers keep own their bytes: the body is copied out
// of the pooled buffer, which goes back at once.
func (s *Server) compute(ctx context.Context, key, guard string, fn compute) (*computed, error) {
	view, err := s.store.PublishedView()
	if err != nil {
		return nil, err
	}
	defer view.Close()
	s.m.diskRead()
	buf := getAnswerBuf()
	var began time.Time
	if s.timed {
		began = time.Now()
	}
	body, err := fn(view, *buf)
	var cost time.Duration
	if s.timed {
		cost = time.Since(began)
	}
	*buf = body
	status := 200
	var st Status
	switch {
	case errors.Is(err, errNotFoundAnswer):
		status, err = 404, nil
	case errors.As(err, &st):
		status, err = int(st), nil
	}
	if err != nil {
		putAnswerBuf(buf)
		return nil, err
	}
	e := cache.Entry{Seq: view.State().Seq, Tip: view.Tip(), Status: status, Body: body, ETag: etagOf(body)}
	var to [4]cache.Tier
	fillTo := to[:0]
	shared := s.fillShared == nil || s.fillShared()
	for i, t := range s.tiers {
		if ad := s.admit[i]; ad != nil {
			admitted := ad.computed(key, cost)
			s.tierCounters[i].setThreshold(ad.threshold())
			if !admitted {
				continue // not worth the remote tier's round trip (admit.go)
			}
		}
		if i < s.owned || shared {
			fillTo = append(fillTo, t)
		}
	}
	if len(fillTo) == 0 {
		return &computed{e: e, buf: buf}, nil
	}
	e.Body = bytes.Clone(body)
	putAnswerBuf(buf)
	for _, t := range fillTo {
		fill(ctx, t, key, guard, e)
	}
	return &computed{e: e}, nil
}

// remoteTier is a tier whose every Get is a network round trip (the Redis
// tier): Options.Admission applies to it.
type remoteTier interface{ Remote() bool }

// fill stores e in t, off the read path when t can (cache.AsyncSetter).
func fill(ctx context.Context, t cache.Tier, key, guard string, e cache.Entry) {
	if a, ok := t.(cache.AsyncSetter); ok {
		a.SetAsync(key, guard, e)
		return
	}
	t.Set(ctx, key, guard, e)
}

func answerOf(e cache.Entry, tip chain.Tip, seq uint64, tier string) Answer {
	return Answer{Status: e.Status, Tip: tip, Seq: seq, ETag: e.ETag, Body: e.Body, Tier: tier}
}

package query

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"

	"golang.org/x/sync/singleflight"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

// Store is what the server reads: consistent views of the disk tier.
type Store interface {
	NewView() (*disk.View, error)
	State() disk.State
	Secret() []byte
}

// Limits of the read API (CONTRACT §3).
const (
	DefaultPageLimit = 100
	MaxPageLimit     = 1000
	MaxLookup        = 1000
	MaxAddressLen    = 1024
)

// Options configure a Server.
type Options struct {
	// Tiers are the caches in read order (memory, then Redis). May be empty.
	Tiers []Tier
	// HotAddresses is how many frequently read addresses are re-warmed after
	// a change touches them. Default 1024; negative disables warming.
	HotAddresses int
	// Metrics receives the read path's figures. Default: none.
	Metrics *Metrics
	// Logger. Default: discard.
	Logger *slog.Logger
}

// Published is the state the server answers from: the latest change whose
// invalidation has completed in every tier.
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
	// ETag is the weak entity tag of the content (empty when not cacheable).
	ETag string
	// Body lacks the opening `{"tip":…,` which AppendBody adds.
	Body []byte
	// Tier is where the answer came from: "memory", "redis" or "disk".
	Tier string
}

// AppendBody appends the complete JSON body of a.
func (a *Answer) AppendBody(dst []byte) []byte {
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
// # Why a stale answer is never served
//
// Every answer is computed from one disk View and tagged with the View's Seq.
// After each acknowledged change, Changed raises, in every tier, the floor of
// each affected guard (address or outpoint) to the change's Seq, and only
// then publishes the new state; the writer acknowledges the change after
// Changed returns. A reader loads the published state first, then asks the
// tiers, which never return an entry below its guard's floor (the Tier
// invariant). So a hit's content is the answer at the published Seq: no
// change since the entry's Seq touched its guard. It is served with the
// published tip, or with its own tip when it is newer than the published state
// (filled after a commit whose invalidation is still running). A reader whose
// disk read started before a commit and that fills after the invalidation
// fills an entry below the floor, which no Get returns.
type Server struct {
	store   Store
	tiers   []Tier
	cursors cursorCodec
	pub     atomic.Pointer[Published]
	flights singleflight.Group
	hot     *hotSet
	// tierCounters[i] are the hit and miss counters of tiers[i], resolved
	// once (a label lookup per read shows in profiles).
	tierCounters []tierCounters
	warmQ        chan string   // addresses to re-warm; never blocks the writer
	stop         chan struct{} // closed by Close
	done         chan struct{} // closed when the warmer has exited
	m            *Metrics
	log          *slog.Logger
}

// New returns a server over store, publishing its current state.
func New(store Store, opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.HotAddresses == 0 {
		opts.HotAddresses = 1024
	}
	s := &Server{
		store:   store,
		tiers:   opts.Tiers,
		cursors: cursorCodec{secret: store.Secret()},
		m:       opts.Metrics,
		log:     opts.Logger,
	}
	for _, t := range s.tiers {
		s.tierCounters = append(s.tierCounters, s.m.forTier(t.Name()))
	}
	s.stop, s.done = make(chan struct{}), make(chan struct{})
	if opts.HotAddresses > 0 {
		s.hot = newHotSet(opts.HotAddresses)
		s.warmQ = make(chan string, 4096)
		go s.warmer()
	} else {
		close(s.done)
	}
	s.publish(store.State())
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

func (s *Server) publish(st disk.State) {
	s.pub.Store(&Published{Seq: st.Seq, Tip: st.Tip, UtxoCount: st.UtxoCount, Digest: st.Digest})
	s.m.tip(st.Tip)
}

// Published returns the state reads are answered from.
func (s *Server) Published() Published { return *s.pub.Load() }

// Changed invalidates what cs changed in every tier, then publishes the new
// state. It is the writer's listener: it runs on the writer goroutine before
// the change is acknowledged.
func (s *Server) Changed(cs *disk.ChangeSet) {
	guards := make([]string, 0, len(cs.Addresses)+len(cs.OutPoints))
	for _, a := range cs.Addresses {
		guards = append(guards, addressGuard(a))
	}
	for _, op := range cs.OutPoints {
		guards = append(guards, outPointGuard(op))
	}
	ctx := context.Background()
	for _, t := range s.tiers {
		// A tier that fails to invalidate must stop serving what it held
		// (the Tier contract): the error is for logs and metrics only.
		if err := t.Invalidate(ctx, cs.Seq, guards); err != nil {
			s.log.Warn("cache invalidation failed", "tier", t.Name(), "seq", cs.Seq, "err", err)
		}
	}
	s.m.invalidated(len(guards))
	s.publish(s.store.State())
	if s.hot != nil {
		for _, a := range cs.Addresses {
			if s.hot.contains(a) {
				select {
				case s.warmQ <- a:
				default: // the warmer is behind: readers will fill instead
				}
			}
		}
	}
}

// warmer recomputes the balance and first page of hot addresses after a
// change, so the next reader hits. Its reads start after the invalidation, so
// their entries carry a Seq at or above the new floors.
func (s *Server) warmer() {
	defer close(s.done)
	ctx := context.Background()
	for {
		select {
		case <-s.stop:
			return
		case a := <-s.warmQ:
			_, _ = s.balance(ctx, a)
			_, _ = s.addressUtxos(ctx, a, false, DefaultPageLimit, "")
			s.m.warmed()
		}
	}
}

func addressGuard(a string) string           { return "a|" + a }
func outPointGuard(op chain.OutPoint) string { return "o|" + op.String() }

// Tip answers GET /v1/tip from the published state.
func (s *Server) Tip() Answer {
	p := s.pub.Load()
	body := append([]byte(nil), `"utxo_count":`...)
	body = strconv.AppendUint(body, p.UtxoCount, 10)
	body = append(body, `,"utxo_digest":"`...)
	body = append(body, p.Digest.String()...)
	body = append(body, `"}`...)
	return Answer{Status: 200, Tip: p.Tip, Body: body, Tier: "memory"}
}

// AddressUtxos answers a page of an address's live outputs. An invalid
// cursor, limit or address is an error matching chain.ErrInvalidArgument.
func (s *Server) AddressUtxos(ctx context.Context, address string, desc bool, limit int, cursor string) (Answer, error) {
	if s.hot != nil && s.hot.sampled() && checkAddress(address) == nil {
		s.hot.touch(address)
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
	var after *disk.Position
	if cursor != "" {
		p, err := s.cursors.decode(cursor, address, desc)
		if err != nil {
			return Answer{}, err
		}
		after = &p
	}
	order := "a"
	if desc {
		order = "d"
	}
	key := "p|" + order + "|" + strconv.Itoa(limit) + "|" + cursor + "|" + address
	return s.read(ctx, key, addressGuard(address), func(v *disk.View) (Entry, error) {
		items, next, err := v.List(disk.ListQuery{Dim: disk.DimAddress, Value: []byte(address), After: after, Desc: desc, Limit: limit})
		if err != nil {
			return Entry{}, err
		}
		body := make([]byte, 0, 64+len(items)*192)
		body = append(body, `"address":`...)
		body = appendString(body, address)
		body = append(body, `,"utxos":[`...)
		for i := range items {
			if i > 0 {
				body = append(body, ',')
			}
			body = appendUtxo(body, &items[i])
		}
		body = append(body, `],"next_cursor":`...)
		if next == nil {
			body = append(body, "null"...)
		} else {
			body = append(body, '"')
			body = append(body, s.cursors.encode(address, desc, *next)...)
			body = append(body, '"')
		}
		body = append(body, '}')
		return okEntry(v, body), nil
	})
}

// Balance answers an address's balance.
func (s *Server) Balance(ctx context.Context, address string) (Answer, error) {
	if s.hot != nil && s.hot.sampled() && checkAddress(address) == nil {
		s.hot.touch(address)
	}
	return s.balance(ctx, address)
}

func (s *Server) balance(ctx context.Context, address string) (Answer, error) {
	if err := checkAddress(address); err != nil {
		return Answer{}, err
	}
	return s.read(ctx, "b|"+address, addressGuard(address), func(v *disk.View) (Entry, error) {
		b, err := v.Balance(disk.DimAddress, []byte(address))
		if err != nil {
			return Entry{}, err
		}
		return okEntry(v, appendBalanceBody(nil, address, &b)), nil
	})
}

// Utxo answers one outpoint: 200 with its spent state, or 404 not_found.
func (s *Server) Utxo(ctx context.Context, op chain.OutPoint) (Answer, error) {
	guard := outPointGuard(op)
	return s.read(ctx, "o|"+guard[2:], guard, func(v *disk.View) (Entry, error) {
		u, spent, err := v.Utxo(op)
		if errors.Is(err, chain.ErrNotFound) {
			body := appendErrorBody(nil, "not_found", "outpoint "+op.String()+" is not known at this tip")
			return Entry{Seq: v.State().Seq, Tip: v.Tip(), Status: 404, Body: body}, nil
		}
		if err != nil {
			return Entry{}, err
		}
		body := append([]byte(nil), `"utxo":`...)
		body = appendUtxo(body, &u)
		body = append(body, `,"spent":`...)
		body = appendSpent(body, spent)
		body = append(body, '}')
		return okEntry(v, body), nil
	})
}

// Lookup answers a batch of outpoints from one snapshot, in request order.
// It bypasses the caches: the whole answer must reflect one tip.
func (s *Server) Lookup(ctx context.Context, ops []chain.OutPoint) (Answer, error) {
	if len(ops) < 1 || len(ops) > MaxLookup {
		return Answer{}, fmt.Errorf("%d outpoints outside 1..%d: %w", len(ops), MaxLookup, chain.ErrInvalidArgument)
	}
	v, err := s.store.NewView()
	if err != nil {
		return Answer{}, err
	}
	defer v.Close()
	s.m.diskRead()
	body := make([]byte, 0, 32+len(ops)*256)
	body = append(body, `"results":[`...)
	for i, op := range ops {
		if i > 0 {
			body = append(body, ',')
		}
		body = append(body, `{"tx_hash":`...)
		body = appendHexString(body, op.TxHash[:])
		body = append(body, `,"index":`...)
		body = strconv.AppendUint(body, uint64(op.Index), 10)
		u, spent, err := v.Utxo(op)
		switch {
		case errors.Is(err, chain.ErrNotFound):
			body = append(body, `,"utxo":null,"spent":null}`...)
			continue
		case err != nil:
			return Answer{}, err
		}
		body = append(body, `,"utxo":`...)
		body = appendUtxo(body, &u)
		body = append(body, `,"spent":`...)
		body = appendSpent(body, spent)
		body = append(body, '}')
	}
	body = append(body, "]}"...)
	return Answer{Status: 200, Tip: v.Tip(), Body: body, Tier: "disk"}, nil
}

// read answers key through the tiers, computing it from a View on a miss.
func (s *Server) read(ctx context.Context, key, guard string, compute func(*disk.View) (Entry, error)) (Answer, error) {
	pub := s.pub.Load()
	for i, t := range s.tiers {
		e, ok := t.Get(ctx, key, guard)
		s.tierCounters[i].count(ok)
		if !ok {
			continue
		}
		for _, up := range s.tiers[:i] {
			fill(ctx, up, key, guard, e)
		}
		tip := pub.Tip
		if e.Seq > pub.Seq {
			tip = e.Tip
		}
		return answerOf(e, tip, t.Name()), nil
	}
	// Readers that loaded the same published state share one disk read; one
	// that started after a newer publish never joins an older flight, so its
	// answer reflects at least the tip acknowledged before it started.
	flight := strconv.FormatUint(pub.Seq, 10) + "|" + key
	v, err, _ := s.flights.Do(flight, func() (any, error) {
		view, err := s.store.NewView()
		if err != nil {
			return nil, err
		}
		defer view.Close()
		s.m.diskRead()
		e, err := compute(view)
		if err != nil {
			return nil, err
		}
		e.ETag = etagOf(e.Body)
		for _, t := range s.tiers {
			fill(ctx, t, key, guard, e)
		}
		return e, nil
	})
	if err != nil {
		return Answer{}, err
	}
	e := v.(Entry)
	return answerOf(e, e.Tip, "disk"), nil
}

// fill stores e in t, off the read path when t can (AsyncSetter).
func fill(ctx context.Context, t Tier, key, guard string, e Entry) {
	if a, ok := t.(AsyncSetter); ok {
		a.SetAsync(key, guard, e)
		return
	}
	t.Set(ctx, key, guard, e)
}

func okEntry(v *disk.View, body []byte) Entry {
	return Entry{Seq: v.State().Seq, Tip: v.Tip(), Status: 200, Body: body}
}

func answerOf(e Entry, tip chain.Tip, tier string) Answer {
	return Answer{Status: e.Status, Tip: tip, ETag: e.ETag, Body: e.Body, Tier: tier}
}

// etagOf is a weak validator of the content: the tip is not part of it, so
// a polling wallet revalidates with 304 for as long as its answer is
// unchanged, across blocks that do not touch it.
func etagOf(body []byte) string {
	sum := sha256.Sum256(body)
	return `W/"` + hex.EncodeToString(sum[:12]) + `"`
}

package events

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/query"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

// Errors a subscription answers before its stream starts.
var (
	// ErrTooManyStreams: the node serves Options.MaxStreams streams already.
	ErrTooManyStreams = errors.New("events: too many event streams")
	// ErrTooManyKeys: more keys than Options.MaxKeys, or none.
	ErrTooManyKeys = errors.New("events: key count out of bounds")
	// ErrClosed: the hub is closed.
	ErrClosed = errors.New("events: closed")
)

// Source is the node's published state: the hub reads the change log of
// published views only, so an event for seq S goes out once S is published.
type Source interface {
	PublishedView() (*disk.View, error)
	WaitFor(ctx context.Context, minSeq, minHeight uint64, maxWait time.Duration) (query.Published, error)
	Published() query.Published
}

// Options configure a Hub.
type Options struct {
	// MaxStreams bounds the open streams; one more is refused with
	// ErrTooManyStreams. Default 1000.
	MaxStreams int
	// MaxKeys bounds the keys of one stream. Default 10000.
	MaxKeys int
	// Queue bounds the events waiting to be written to one live stream's
	// client: the stream that would need one more is ended with an overflow
	// event. Default 256.
	Queue int
	// Heartbeat is the longest a stream stays silent: it then sends a
	// comment line. Default 15s.
	Heartbeat time.Duration
	// Dimensions are the index dimensions a stream may watch besides the
	// address, with the functions of their values (disk.ValuesOf): exactly
	// the ones the store keeps.
	Dimensions map[disk.Dimension]disk.ValuesFunc
	// BlockLimits bound the decoding of the log's blocks. Zero: defaults.
	BlockLimits chain.Limits
	// Metrics. Nil: none.
	Metrics *Metrics
	// Logger. Default: discard.
	Logger *slog.Logger
}

// EnsureDefaults returns o with every unset field set to its default.
func (o Options) EnsureDefaults() Options {
	if o.MaxStreams == 0 {
		o.MaxStreams = 1000
	}
	if o.MaxKeys == 0 {
		o.MaxKeys = 10000
	}
	if o.Queue == 0 {
		o.Queue = 256
	}
	if o.Heartbeat == 0 {
		o.Heartbeat = 15 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Validate reports options that cannot work.
func (o Options) Validate() error {
	switch {
	case o.MaxStreams < 0 || o.MaxKeys < 1 || o.Queue < 1:
		return fmt.Errorf("events: max streams %d, max keys %d and queue %d must be positive", o.MaxStreams, o.MaxKeys, o.Queue)
	case o.Heartbeat <= 0 || o.Heartbeat > 15*time.Second:
		return fmt.Errorf("events: heartbeat %s outside (0, 15s]", o.Heartbeat)
	}
	return nil
}

// Key is one watched value: its dimension, its value as the store indexes
// it, and its JSON echo as the client named it (e.g. {"address":"…"}).
type Key struct {
	Dim   disk.Dimension
	Value []byte
	json  []byte
}

// NewKey returns the key of value in dimension d, echoed in events as
// {field: label}.
func NewKey(d disk.Dimension, value []byte, field, label string) *Key {
	j := append([]byte{'{'}, query.AppendJSONString(nil, field)...)
	j = append(j, ':')
	j = append(query.AppendJSONString(j, label), '}')
	return &Key{Dim: d, Value: value, json: j}
}

// Hub serves the event streams of one node: one dispatcher goroutine reads
// each published change from the change log once, and hands its events to
// the live streams whose keys it touched; a stream that resumes from an
// earlier seq first reads the log itself, then joins. While no stream is
// live the dispatcher reads nothing and only moves past the published
// changes (passIdle).
type Hub struct {
	src  Source
	opts Options
	g    digester

	open atomic.Int64 // streams open
	pub  publishRing  // when recent seqs were published (MarkPublished)

	mu     sync.Mutex
	next   uint64               // the seq the dispatcher hands out next
	byKey  map[string][]*Stream // live streams by key
	failed error                // the dispatcher stopped: every stream ends
	gen    chan struct{}        // closed when next moves or failed is set

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

// New starts a hub over src, from its published seq.
func New(src Source, opts Options) (*Hub, error) {
	opts = opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	h := &Hub{src: src, opts: opts, byKey: map[string][]*Stream{}, gen: make(chan struct{}), done: make(chan struct{})}
	h.g = digester{dims: []disk.Dimension{disk.DimAddress}, funcs: []disk.ValuesFunc{disk.ValuesOf(disk.DimAddress, nil)}, lim: opts.BlockLimits}
	for d, f := range opts.Dimensions {
		if d == disk.DimAddress || f == nil {
			continue
		}
		h.g.dims = append(h.g.dims, d)
		h.g.funcs = append(h.g.funcs, f)
	}
	h.next = src.Published().Seq + 1
	h.ctx, h.cancel = context.WithCancel(context.Background())
	go h.run()
	return h, nil
}

// Close stops the dispatcher and ends every stream.
func (h *Hub) Close() {
	h.cancel()
	<-h.done
}

// MarkPublished records that seq was published at at: the node calls it
// as it publishes each change, and a live event's delivery time
// (Metrics) is measured from it.
func (h *Hub) MarkPublished(seq uint64, at time.Time) { h.pub.mark(seq, at) }

// Open reports the streams open now.
func (h *Hub) Open() int { return int(h.open.Load()) }

// Watches reports whether the hub serves keys of dimension d.
func (h *Hub) Watches(d disk.Dimension) bool { return slices.Contains(h.g.dims, d) }

// run is the dispatcher: it waits for each published seq and delivers it.
func (h *Hub) run() {
	defer close(h.done)
	defer h.fail(ErrClosed)
	for h.ctx.Err() == nil {
		h.mu.Lock()
		next := h.next
		h.mu.Unlock()
		p, err := h.src.WaitFor(h.ctx, next, 0, time.Minute)
		if err != nil {
			continue // ErrBehind: wait again; ctx: the loop ends
		}
		if h.passIdle(p.Seq) {
			continue
		}
		if err := h.dispatch(next); err != nil {
			if errors.Is(err, ErrLogTruncated) && h.skip(next, err) {
				continue
			}
			h.opts.Logger.Error("event dispatcher stopped", "seq", next, "err", err)
			h.fail(err)
			return
		}
	}
}

// passIdle moves the dispatcher past every change up to seq, unread, when
// no stream is live, and reports whether it did: with no stream to hand
// them to, reading and decoding each block of the log is work for nobody
// (a few milliseconds of a block of 300 transactions, on the CPU the reads
// share). It is safe because a stream joins only when its own position
// has reached the dispatcher's (Stream.catchUp, under h.mu): one that
// joins after the move has read the log itself up to seq, and one that
// joined before it makes the hub not idle.
func (h *Hub) passIdle(seq uint64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.byKey) > 0 || h.failed != nil {
		return false
	}
	if seq >= h.next {
		h.next = seq + 1
		close(h.gen)
		h.gen = make(chan struct{})
	}
	return true
}

// skip moves the dispatcher past changes the log no longer holds: a
// node whose log retention is shorter than a burst of changes it applies
// (a replica catching up) may prune change next before the dispatcher
// reads it. Every live stream has had every change before next, and can
// have none of those pruned: each ends with a log_truncated event at
// next-1, which tells its client to re-read the state; the dispatcher
// resumes at the log's first kept change, for the streams opened since.
// It reports false when the log still holds next (the failure is
// elsewhere) or cannot be read.
func (h *Hub) skip(next uint64, cause error) bool {
	v, err := h.src.PublishedView()
	if err != nil {
		return false
	}
	first, err := v.FirstKept()
	seq := v.State().Seq
	_ = v.Close()
	if err != nil {
		return false
	}
	if first == 0 {
		first = seq + 1 // the log keeps nothing: go on with the next change
	}
	if first <= next {
		return false
	}
	end := &truncatedEnd{after: next - 1, cause: cause}
	h.mu.Lock()
	ended := map[*Stream]bool{}
	for _, subs := range h.byKey {
		for _, s := range subs {
			s.end(end)
			ended[s] = true
		}
	}
	clear(h.byKey)
	h.next = first
	close(h.gen)
	h.gen = make(chan struct{})
	h.mu.Unlock()
	h.opts.Logger.Warn("the change log no longer holds changes the event streams had not been given: live streams end with log_truncated, and their clients re-read the state",
		"from", next, "to", first-1, "streams", len(ended), "err", cause)
	return true
}

// truncatedEnd ends a live stream whose next changes the log no longer
// holds (Hub.skip): its last event is log_truncated at after.
type truncatedEnd struct {
	after uint64
	cause error
}

func (e *truncatedEnd) Error() string {
	return fmt.Sprintf("events: the changes after %d are no longer in the log: %v", e.after, e.cause)
}

func (e *truncatedEnd) Unwrap() error { return ErrLogTruncated }

// fail ends every live stream with err and refuses new ones.
func (h *Hub) fail(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.failed != nil {
		return
	}
	h.failed = err
	for _, subs := range h.byKey {
		for _, s := range subs {
			s.end(err)
		}
	}
	h.byKey = nil
	close(h.gen)
}

// dispatch delivers every published change from seq next on.
func (h *Hub) dispatch(next uint64) error {
	v, err := h.src.PublishedView()
	if err != nil {
		return err
	}
	defer v.Close()
	cur, err := v.ChangeCursor(next - 1)
	if errors.Is(err, disk.ErrLogTruncated) {
		return fmt.Errorf("events: change log after %d: %w: %w", next-1, err, ErrLogTruncated)
	}
	if err != nil {
		return fmt.Errorf("events: change log after %d: %w", next-1, err)
	}
	defer cur.Close()
	for seq := next; ; seq++ {
		rec, err := cur.Next()
		if err != nil || rec == nil {
			return err
		}
		c, err := h.g.decode(rec, seq)
		if err != nil {
			return err
		}
		d, err := h.g.digest(c, v)
		if err != nil {
			return err
		}
		h.deliver(d)
	}
}

// deliver hands d to the live streams it touches and moves next past it.
// Streams that watch the same touched keys (under the same names) share
// one encoded event. Each stream's queue has its own lock, so a stream
// draining its queue never waits for the dispatcher's pass over the others.
func (h *Hub) deliver(d *digest) {
	h.mu.Lock()
	var hits map[*Stream]*hit
	get := func(s *Stream) *hit {
		if hits == nil {
			hits = map[*Stream]*hit{}
		}
		x := hits[s]
		if x == nil {
			x = &hit{}
			hits[s] = x
		}
		return x
	}
	for id, e := range d.touched {
		for _, s := range h.byKey[id] {
			if s.pos >= d.seq {
				continue // it read d from the log itself
			}
			x := get(s)
			x.keys = append(x.keys, s.index[id])
			x.effs = append(x.effs, e)
		}
	}
	for id, e := range d.ptouched {
		for _, s := range h.byKey[id] {
			if s.pos >= d.seq || !s.pending {
				continue
			}
			x := get(s)
			x.pkeys = append(x.pkeys, s.index[id])
			x.peffs = append(x.peffs, e)
		}
	}
	var shared map[string][]byte // encoded events by the keys they list
	var name []byte
	at := h.pub.at(d.seq)
	for s, x := range hits {
		name = x.name(s, name[:0])
		ev, ok := shared[string(name)]
		if !ok {
			ev = x.encode(s, d)
			if shared == nil {
				shared = map[string][]byte{}
			}
			shared[string(name)] = ev
		}
		s.pos = d.seq
		if !s.push(queued{ev, at}, d.seq, h.opts.Queue) {
			h.opts.Metrics.overflowed()
			h.unregister(s)
		}
		// At once: the stream's goroutine takes only its own lock, so it
		// writes while the dispatcher goes on with the others.
		s.signal()
	}
	h.next = d.seq + 1
	close(h.gen)
	h.gen = make(chan struct{})
	h.mu.Unlock()
}

// register adds s to the live streams; h.mu held.
func (h *Hub) register(s *Stream) {
	for id := range s.index {
		h.byKey[id] = append(h.byKey[id], s)
	}
}

// unregister removes s from the live streams; h.mu held.
func (h *Hub) unregister(s *Stream) {
	for id := range s.index {
		subs := h.byKey[id]
		if i := slices.Index(subs, s); i >= 0 {
			subs = slices.Delete(subs, i, i+1)
		}
		if len(subs) == 0 {
			delete(h.byKey, id)
		} else {
			h.byKey[id] = subs
		}
	}
}

// Subscribe opens a stream of the events of keys after seq after (the
// published seq when resume is false). It fails with ErrLogTruncated when
// the log no longer holds the change after after, ErrTooManyStreams,
// ErrTooManyKeys, or ErrClosed. The caller runs the stream (Stream.Run) and
// closes it. A resume point above the published seq is taken as is: the
// stream sends nothing until the node has published beyond it.
func (h *Hub) Subscribe(keys []*Key, after uint64, resume bool) (*Stream, error) {
	return h.subscribe(keys, after, resume, false)
}

// SubscribePending is Subscribe for a stream that reports pending
// transactions too (docs/events.md#pending-transactions): the changes of
// its keys' pending views, as `event: pending` for a wallet change and a
// "pending" member of an apply or rollback event.
func (h *Hub) SubscribePending(keys []*Key, after uint64, resume bool) (*Stream, error) {
	return h.subscribe(keys, after, resume, true)
}

func (h *Hub) subscribe(keys []*Key, after uint64, resume, pending bool) (*Stream, error) {
	if len(keys) == 0 || len(keys) > h.opts.MaxKeys {
		return nil, fmt.Errorf("%d keys, a stream takes 1..%d: %w", len(keys), h.opts.MaxKeys, ErrTooManyKeys)
	}
	h.mu.Lock()
	failed := h.failed
	h.mu.Unlock()
	if failed != nil {
		return nil, fmt.Errorf("%w (%v)", ErrClosed, failed)
	}
	if n := h.open.Add(1); n > int64(h.opts.MaxStreams) {
		h.open.Add(-1)
		return nil, fmt.Errorf("%d streams are open, the limit: %w", h.opts.MaxStreams, ErrTooManyStreams)
	}
	h.opts.Metrics.opened(1)
	ok := false
	defer func() {
		if !ok {
			h.opts.Metrics.opened(-1)
		}
	}()
	s := &Stream{h: h, index: make(map[string]int, len(keys)), pending: pending, wake: make(chan struct{}, 1), joined: make(chan struct{})}
	for _, k := range keys {
		if !h.Watches(k.Dim) {
			h.open.Add(-1)
			return nil, fmt.Errorf("events: dimension %s is not kept: %w", k.Dim, query.ErrNotIndexed)
		}
		id := keyID(k.Dim, k.Value)
		if _, dup := s.index[id]; dup {
			continue
		}
		s.index[id] = len(s.keys)
		s.keys = append(s.keys, k)
	}
	if !resume {
		after = h.src.Published().Seq
	}
	s.pos = after
	// A resume point the log does not hold is refused now, before the
	// stream starts: the change after it must be kept.
	if err := h.check(after); err != nil {
		h.open.Add(-1)
		return nil, err
	}
	ok = true
	return s, nil
}

// check fails with ErrLogTruncated when change after+1 is published but not
// kept.
func (h *Hub) check(after uint64) error {
	v, err := h.src.PublishedView()
	if err != nil {
		return err
	}
	defer v.Close()
	if after >= v.State().Seq {
		return nil
	}
	c, err := v.ChangeCursor(after)
	if errors.Is(err, disk.ErrLogTruncated) {
		return fmt.Errorf("%w: %w", err, ErrLogTruncated)
	}
	if err != nil {
		return err
	}
	return c.Close()
}

// Stream is one client's stream. Its goroutine (Run) writes; the dispatcher
// queues events for it under the hub's lock and the stream's own.
type Stream struct {
	h       *Hub
	keys    []*Key
	index   map[string]int // keyID → position in keys
	pending bool           // it reports pending transactions too

	// Guarded by h.mu.
	pos    uint64 // the last seq whose events are written or queued
	closed bool
	joined chan struct{} // closed once the stream is live (tests wait on it)

	// Guarded by mu (taken after h.mu when both are held): what the stream's
	// goroutine drains.
	mu       sync.Mutex
	queue    []queued // events waiting to be written, in seq order
	last     uint64   // the seq of the last event queued
	ended    error    // set once: the stream ends after its queue
	overflow bool     // ended for falling behind: after last
	wake     chan struct{}
}

// hit is what one change did to one stream's keys: the positions of the
// keys its confirmed part touched with their effects, and of those its
// pending part touched (streams that asked for pending transactions only).
type hit struct {
	keys  []int
	effs  []*effects
	pkeys []int
	peffs []*pendEffects
}

// name appends what identifies the event of x among streams: the touched
// keys as the stream names them (and, for a stream with pending, a mark and
// the keys of the pending part).
func (x *hit) name(s *Stream, dst []byte) []byte {
	keys, _ := ordered(s, x.keys, x.effs)
	for _, k := range keys {
		dst = append(dst, k.json...)
	}
	if s.pending {
		dst = append(dst, 0)
		pkeys, _ := ordered(s, x.pkeys, x.peffs)
		for _, k := range pkeys {
			dst = append(dst, k.json...)
		}
	}
	return dst
}

// encode returns the event of d for s.
func (x *hit) encode(s *Stream, d *digest) []byte {
	keys, effs := ordered(s, x.keys, x.effs)
	if !s.pending {
		return appendEvent(nil, d, keys, effs)
	}
	pkeys, peffs := ordered(s, x.pkeys, x.peffs)
	return appendPendingEvent(nil, d, keys, effs, pkeys, peffs)
}

// ordered returns the keys and effects of positions idx in the stream's key
// order.
func ordered[E any](s *Stream, idx []int, effs []E) ([]*Key, []E) {
	order := make([]int, len(idx))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return idx[a] - idx[b] })
	keys := make([]*Key, len(idx))
	out := make([]E, len(idx))
	for i, j := range order {
		keys[i], out[i] = s.keys[idx[j]], effs[j]
	}
	return keys, out
}

// push queues ev (the event of seq) unless the queue is full: then the
// stream is ended with an overflow after its last queued seq, and push
// reports false. The caller signals the stream. h.mu held.
func (s *Stream) push(ev queued, seq uint64, limit int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended != nil {
		return false
	}
	if len(s.queue) >= limit {
		s.ended, s.overflow = errOverflow, true
		return false
	}
	s.queue = append(s.queue, ev)
	s.last = seq
	return true
}

// queued is one event waiting to be written: its bytes, and when its change
// was published (zero: not known).
type queued struct {
	ev []byte
	at time.Time
}

var errOverflow = errors.New("events: stream overflow")

// end ends the stream with err after its queue. h.mu held.
func (s *Stream) end(err error) {
	s.mu.Lock()
	if s.ended == nil {
		s.ended = err
	}
	s.mu.Unlock()
	s.signal()
}

func (s *Stream) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Close releases the stream's slot. Safe to call more than once.
func (s *Stream) Close() {
	h := s.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	if h.byKey != nil {
		h.unregister(s)
	}
	h.open.Add(-1)
	h.opts.Metrics.opened(-1)
}

// Run writes the stream to w, calling flush after each write, until ctx
// ends, the writes fail, or the stream ends (an overflow or a truncated
// log: its last event says which). It first sends the events of the log
// after the resume point, then joins the live streams. It returns nil when
// the stream ended with its last event, else why it stopped.
func (s *Stream) Run(ctx context.Context, w io.Writer, flush func() error) error {
	write := func(b []byte) error {
		if _, err := w.Write(b); err != nil {
			return err
		}
		return flush()
	}
	if err := write(heartbeat); err != nil { // the headers, at once
		return err
	}
	if err := s.catchUp(ctx, write); err != nil {
		if errors.Is(err, ErrLogTruncated) {
			return write(appendTruncated(nil, s.pos))
		}
		return err
	}
	timer := time.NewTimer(s.h.opts.Heartbeat)
	defer timer.Stop()
	for {
		s.mu.Lock()
		q, ended, over, last := s.queue, s.ended, s.overflow, s.last
		s.queue = nil
		s.mu.Unlock()
		// Every queued event in one write, then one flush.
		switch len(q) {
		case 0:
		case 1:
			if _, err := w.Write(q[0].ev); err != nil {
				return err
			}
		default:
			var batch []byte
			for _, e := range q {
				batch = append(batch, e.ev...)
			}
			if _, err := w.Write(batch); err != nil {
				return err
			}
		}
		if ended != nil {
			var te *truncatedEnd
			switch {
			case over:
				return write(appendOverflow(nil, last))
			case errors.As(ended, &te):
				return write(appendTruncated(nil, te.after))
			}
			return ended
		}
		if len(q) > 0 {
			if err := flush(); err != nil {
				return err
			}
			now := time.Now()
			for _, e := range q {
				if !e.at.IsZero() {
					s.h.opts.Metrics.delivered(now.Sub(e.at))
				}
			}
		}
		if len(q) > 0 {
			timer.Reset(s.h.opts.Heartbeat) // go1.23 timers: no stale tick survives Reset
		}
		select {
		case <-s.wake:
		case <-timer.C:
			if err := write(heartbeat); err != nil {
				return err
			}
			timer.Reset(s.h.opts.Heartbeat)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// catchUp writes the events of the log from s.pos on until the stream can
// join the dispatcher's live streams (its pos at or past the dispatcher's),
// and joins.
func (s *Stream) catchUp(ctx context.Context, write func([]byte) error) error {
	h := s.h
	for {
		h.mu.Lock()
		gen, pos := h.gen, s.pos
		switch {
		case h.failed != nil:
			h.mu.Unlock()
			return h.failed
		case pos+1 >= h.next:
			h.register(s)
			close(s.joined)
			h.mu.Unlock()
			return nil
		}
		h.mu.Unlock()
		if err := s.readLog(write); err != nil {
			return err
		}
		h.mu.Lock()
		moved := s.pos != pos
		h.mu.Unlock()
		if !moved {
			// The log holds nothing new yet: wait for the dispatcher.
			select {
			case <-gen:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
}

// readLog writes the events of a batch of the published log after s.pos
// (at most 1024 changes: a view is not held long).
func (s *Stream) readLog(write func([]byte) error) error {
	h := s.h
	v, err := h.src.PublishedView()
	if err != nil {
		return err
	}
	defer v.Close()
	cur, err := v.ChangeCursor(s.pos)
	if errors.Is(err, disk.ErrLogTruncated) {
		return fmt.Errorf("%w: %w", err, ErrLogTruncated)
	}
	if err != nil {
		return err
	}
	defer cur.Close()
	for n := 0; n < 1024; n++ {
		rec, err := cur.Next()
		if err != nil || rec == nil {
			return err
		}
		seq := s.pos + 1
		c, err := h.g.decode(rec, seq)
		if err != nil {
			return err
		}
		d, err := h.g.digest(c, v)
		if err != nil {
			return err
		}
		var x hit
		if len(s.index) < len(d.touched) {
			for id, i := range s.index {
				if e := d.touched[id]; e != nil {
					x.keys, x.effs = append(x.keys, i), append(x.effs, e)
				}
			}
		} else {
			for id, e := range d.touched {
				if i, ok := s.index[id]; ok {
					x.keys, x.effs = append(x.keys, i), append(x.effs, e)
				}
			}
		}
		if s.pending {
			for id, e := range d.ptouched {
				if i, ok := s.index[id]; ok {
					x.pkeys, x.peffs = append(x.pkeys, i), append(x.peffs, e)
				}
			}
		}
		if len(x.keys) > 0 || len(x.pkeys) > 0 {
			if err := write(x.encode(s, d)); err != nil {
				return err
			}
		}
		h.mu.Lock()
		s.pos = seq
		h.mu.Unlock()
	}
	return nil
}

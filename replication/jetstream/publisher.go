package jetstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/changeset"
	"github.com/utxo-cache/utxo-cache/replication"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

// errMisplaced is a change the stream stored under another sequence than
// its seq.
var errMisplaced = errors.New("jetstream: change stored out of place")

// Store is what a Publisher reads of the writer's store.
type Store interface {
	Published() disk.State
	PublishedView() (*disk.View, error)
}

// Checkpointer takes a consistent checkpoint of the store between two
// changes (*writer.Writer).
type Checkpointer interface {
	Checkpoint(ctx context.Context, dir string) (disk.State, error)
}

// Window bounds of the Publisher: at most this many changes, and this many
// bytes of them (at least one change), are sent before their acks are
// awaited.
const (
	maxWindow      = 256
	MaxWindowBytes = 8 << 20
	ackTimeout     = 10 * time.Second
	maxBackoff     = 5 * time.Second
	statusEvery    = time.Second
	keptCheckpoint = 2
)

// PublisherMetrics are the writer's figures of its JetStream publishing
// (utxo_cache_jetstream_*).
type PublisherMetrics struct {
	streamSeq, behind, checkpointSeq    prometheus.Gauge
	errors, checkpoints, checkpointErrs prometheus.Counter
	published                           prometheus.Counter
}

// NewPublisherMetrics registers the figures with reg (may be nil).
func NewPublisherMetrics(reg prometheus.Registerer) *PublisherMetrics {
	m := &PublisherMetrics{
		streamSeq:      prometheus.NewGauge(prometheus.GaugeOpts{Name: "utxo_cache_jetstream_stream_seq", Help: "The last change the JetStream stream has acknowledged."}),
		behind:         prometheus.NewGauge(prometheus.GaugeOpts{Name: "utxo_cache_jetstream_behind_changes", Help: "Changes the writer has published that the JetStream stream does not have yet."}),
		checkpointSeq:  prometheus.NewGauge(prometheus.GaugeOpts{Name: "utxo_cache_jetstream_checkpoint_seq", Help: "The seq of the newest checkpoint in the JetStream object store."}),
		errors:         prometheus.NewCounter(prometheus.CounterOpts{Name: "utxo_cache_jetstream_publish_errors_total", Help: "Failed attempts to publish changes to the JetStream stream (each retried)."}),
		checkpoints:    prometheus.NewCounter(prometheus.CounterOpts{Name: "utxo_cache_jetstream_checkpoints_total", Help: "Checkpoints put in the JetStream object store."}),
		checkpointErrs: prometheus.NewCounter(prometheus.CounterOpts{Name: "utxo_cache_jetstream_checkpoint_errors_total", Help: "Checkpoints that failed to reach the JetStream object store (each retried)."}),
		published:      prometheus.NewCounter(prometheus.CounterOpts{Name: "utxo_cache_jetstream_published_changes_total", Help: "Changes the JetStream stream acknowledged."}),
	}
	if reg != nil {
		reg.MustRegister(m.streamSeq, m.behind, m.checkpointSeq, m.errors, m.checkpoints, m.checkpointErrs, m.published)
	}
	return m
}

// Publisher copies a writer's published changes to a JetStream stream and
// checkpoints of its store to an object store (see the package doc). It is
// a writer.PublishListener: subscribe it to the writer. Start it with
// NewPublisher, stop it with Close; Status is safe from any goroutine.
type Publisher struct {
	opts    Options
	store   Store
	cp      Checkpointer
	staging string
	limits  chain.Limits
	m       *PublisherMetrics
	nc      *nats.Conn
	js      jetstream.JetStream

	sub     *nats.Subscription // the checkpoint requests
	notify  chan struct{}      // capacity 1: the writer published a change
	request chan uint64        // a replica asks for a checkpoint above a seq
	stop    context.CancelFunc
	wg      sync.WaitGroup
	closed  sync.Once

	// The change objects (runStream's goroutine only): the bucket, and
	// the seqs of the objects it holds, in order, as far as this Publisher
	// knows (those it put, and once listed holds them, those an earlier
	// writer left). The bucket is listed once, in the background (listBodies
	// sends the seqs it found on found): publishing never waits for a list,
	// which a stream without a leader can hold for as long as it lasts.
	bodies  jetstream.ObjectStore
	objects []uint64
	listing bool          // listBodies was started
	found   chan []uint64 // capacity 1: what listBodies found

	streamSeq atomic.Uint64 // last change the stream acknowledged
	// streamFirst is the first change of the stream as the publisher last
	// started it (0: it did not): a checkpoint older than the change before
	// it is of no use to a replica, which finds a gap after it.
	streamFirst atomic.Uint64
	mu          struct {
		sync.Mutex
		behindSince time.Time // first failure since the stream last had all; zero: not behind
		lastErr     error
	}
}

// NewPublisher connects to opts.URLs and starts publishing store's
// published changes (and checkpoints taken by cp, staged under staging).
// Block limits lim are announced with every change. It returns at once: a
// NATS server that is down is retried in the background. metrics may be
// nil.
func NewPublisher(store Store, cp Checkpointer, staging string, lim chain.Limits, opts Options, metrics *PublisherMetrics) (*Publisher, error) {
	opts = opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.Retention == 0 {
		return nil, fmt.Errorf("no retention: %w", ErrOptions)
	}
	if metrics == nil {
		metrics = NewPublisherMetrics(nil)
	}
	nc, err := opts.connect("writer")
	if err != nil {
		return nil, fmt.Errorf("jetstream: connect: %w", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Publisher{opts: opts, store: store, cp: cp, staging: staging, limits: lim.EnsureDefaults(), m: metrics,
		nc: nc, js: js, notify: make(chan struct{}, 1), request: make(chan uint64, 1), found: make(chan []uint64, 1), stop: cancel}
	sub, err := nc.Subscribe(opts.requestSubject(), func(msg *nats.Msg) {
		if seq, err := strconv.ParseUint(msg.Header.Get(headerMinSeq), 10, 64); err == nil {
			select {
			case p.request <- seq:
			default:
			}
		}
	})
	if err != nil {
		cancel()
		nc.Close()
		return nil, fmt.Errorf("jetstream: subscribe: %w", err)
	}
	p.sub = sub
	p.wg.Add(3)
	go func() { defer p.wg.Done(); p.runStream(ctx) }()
	go func() { defer p.wg.Done(); p.runStatus(ctx) }()
	go func() { defer p.wg.Done(); p.runCheckpoints(ctx) }()
	return p, nil
}

// Changed implements writer.Listener: nothing before the publish.
func (p *Publisher) Changed(*changeset.Set) {}

// AfterPublish implements writer.PublishListener, on the writer goroutine:
// it only signals the Publisher's goroutine, and never blocks.
func (p *Publisher) AfterPublish(*changeset.Set) {
	select {
	case p.notify <- struct{}{}:
	default:
	}
}

// Close stops publishing and closes the connection; it may be called more
// than once. What the stream does not have yet is sent by the next
// Publisher, from the change log.
func (p *Publisher) Close() {
	p.closed.Do(func() {
		_ = p.sub.Unsubscribe()
		p.stop()
		p.wg.Wait()
		p.nc.Close()
	})
}

// PublisherStatus is how far the stream is behind the writer.
type PublisherStatus struct {
	// StreamSeq is the last change the stream acknowledged.
	StreamSeq uint64
	// Behind is how long the stream has been missing a change the writer
	// published, since it last had them all (0: it has them all, or
	// publishing is in progress without a failure); Err is the last
	// failure then.
	Behind time.Duration
	Err    error
}

// Status reports the stream's state as the Publisher knows it.
func (p *Publisher) Status() PublisherStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := PublisherStatus{StreamSeq: p.streamSeq.Load(), Err: p.mu.lastErr}
	if !p.mu.behindSince.IsZero() {
		s.Behind = time.Since(p.mu.behindSince)
	}
	return s
}

func (p *Publisher) failed(err error) {
	p.m.errors.Inc()
	p.mu.Lock()
	if p.mu.behindSince.IsZero() {
		p.mu.behindSince = time.Now()
	}
	p.mu.lastErr = err
	p.mu.Unlock()
}

func (p *Publisher) acked(seq uint64) {
	p.streamSeq.Store(seq)
	p.m.streamSeq.Set(float64(seq))
	w := p.store.Published().Seq
	p.m.behind.Set(float64(w - min(w, seq)))
	if seq >= w {
		p.mu.Lock()
		p.mu.behindSince, p.mu.lastErr = time.Time{}, nil
		p.mu.Unlock()
	}
}

// sleep waits d with jitter, or until ctx ends (false).
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d + rand.N(d/2+1))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// runStream publishes until ctx ends, resynchronising from the stream
// after every failure.
func (p *Publisher) runStream(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := p.session(ctx, func() { backoff = 100 * time.Millisecond })
		if ctx.Err() != nil {
			return
		}
		p.failed(err)
		if errors.Is(err, errMisplaced) {
			// Something else wrote to the stream: start a new one.
			if derr := p.js.DeleteStream(ctx, p.opts.stream()); derr != nil {
				err = fmt.Errorf("%w; delete the stream: %v", err, derr)
			}
		}
		p.opts.Logger.Warn("publishing to JetStream failed: the stream is behind the writer, retrying", "err", err,
			"stream_seq", p.streamSeq.Load(), "writer_seq", p.store.Published().Seq, "retry_in", backoff)
		if !sleep(ctx, backoff) {
			return
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// session brings the stream in line with the store, then publishes each
// change as it is published, until an error or ctx ends. ok is called
// after each acknowledged window.
func (p *Publisher) session(ctx context.Context, ok func()) error {
	last, err := p.prepare(ctx)
	if err != nil {
		return err
	}
	p.acked(last)
	confirmed := false
	for {
		for last < p.store.Published().Seq {
			if last, err = p.window(ctx, last, confirmed); err != nil {
				return err
			}
			confirmed = true
			p.acked(last)
			p.takeListed()
			p.dropObjects(ctx, last)
			ok()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-p.notify:
		case seqs := <-p.found:
			p.merge(seqs)
			p.dropObjects(ctx, last)
		}
	}
}

// prepare creates or updates the stream and the bucket of change objects,
// and returns the last change the stream holds (see prepareStream).
func (p *Publisher) prepare(ctx context.Context) (uint64, error) {
	last, first, err := p.prepareStream(ctx)
	if err != nil {
		return 0, err
	}
	if err := p.openBodies(ctx, first); err != nil {
		return 0, err
	}
	return last, nil
}

// prepareStream creates or updates the stream, and returns the last change
// it holds and its first (last+1 when it is empty), after moving the stream when it cannot continue from there: a
// stream beyond the writer (restored) is replaced, and a new stream, or one
// behind the change log's first kept change, starts at that change.
func (p *Publisher) prepareStream(ctx context.Context) (last, first uint64, err error) {
	cfg := jetstream.StreamConfig{
		Name: p.opts.stream(), Subjects: []string{p.opts.changesSubject()},
		Description: "utxo-cache change log: message seq = commit seq",
		Retention:   jetstream.LimitsPolicy, MaxMsgs: int64(p.opts.Retention), Discard: jetstream.DiscardOld,
		Storage: jetstream.FileStorage, Replicas: p.opts.Replicas, Duplicates: 2 * time.Minute,
		MaxMsgSize: int32(min(p.limits.MaxBlockBytes*2+64<<10, 1<<30)),
	}
	s, err := p.js.CreateOrUpdateStream(ctx, cfg)
	if err != nil {
		return 0, 0, fmt.Errorf("stream %s: %w", cfg.Name, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("stream %s: %w", cfg.Name, err)
	}
	v, err := p.store.PublishedView()
	if err != nil {
		return 0, 0, err
	}
	seq := v.State().Seq
	first, err = v.FirstKept()
	_ = v.Close()
	if err != nil {
		return 0, 0, err
	}
	if first == 0 {
		first = seq + 1 // the log keeps nothing: start with the next change
	}
	st := info.State
	if st.LastSeq > seq {
		p.opts.Logger.Warn("the JetStream stream holds changes beyond the writer's state (a writer restored from a backup?): replacing it",
			"stream_seq", st.LastSeq, "writer_seq", seq)
		if err := p.js.DeleteStream(ctx, cfg.Name); err != nil {
			return 0, 0, fmt.Errorf("delete stream %s: %w", cfg.Name, err)
		}
		if s, err = p.js.CreateOrUpdateStream(ctx, cfg); err != nil {
			return 0, 0, fmt.Errorf("stream %s: %w", cfg.Name, err)
		}
		if info, err = s.Info(ctx); err != nil {
			return 0, 0, fmt.Errorf("stream %s: %w", cfg.Name, err)
		}
		st = info.State
	}
	if st.Msgs > 0 && st.LastSeq+1 >= first {
		return st.LastSeq, st.FirstSeq, nil // the log has what follows the stream
	}
	if st.Msgs == 0 && st.LastSeq+1 == first {
		return st.LastSeq, first, nil
	}
	// Empty, or behind the log: the stream starts at the log's first kept
	// change (replicas that need older ones bootstrap). A stream that holds
	// messages is replaced first: it is moved only while empty.
	if st.Msgs > 0 {
		p.opts.Logger.Warn("the JetStream stream is further behind than the writer's change log keeps: it restarts at the log's first change",
			"stream_seq", st.LastSeq, "log_first", first)
		if err := p.js.DeleteStream(ctx, cfg.Name); err != nil {
			return 0, 0, fmt.Errorf("delete stream %s: %w", cfg.Name, err)
		}
		if s, err = p.js.CreateOrUpdateStream(ctx, cfg); err != nil {
			return 0, 0, fmt.Errorf("stream %s: %w", cfg.Name, err)
		}
	}
	if err := s.Purge(ctx, jetstream.WithPurgeSequence(first)); err != nil {
		return 0, 0, fmt.Errorf("start stream %s at %d: %w", cfg.Name, first, err)
	}
	if info, err = s.Info(ctx); err != nil {
		return 0, 0, fmt.Errorf("stream %s: %w", cfg.Name, err)
	}
	if info.State.LastSeq+1 != first || info.State.Msgs != 0 {
		return 0, 0, fmt.Errorf("stream %s: asked to start at %d, it is at first %d last %d: this NATS server cannot start a stream at a sequence",
			cfg.Name, first, info.State.FirstSeq, info.State.LastSeq)
	}
	p.streamFirst.Store(first)
	return first - 1, first, nil
}

// openBodies opens (or creates) the bucket of change objects, the first
// time it is called, and starts listing it in the background; then it
// deletes the objects it knows of changes before first, the stream's first
// message: no replica reads them any more. Objects beyond the stream's last
// message (put before a crash, or of a replaced stream) are left: each is
// put again before its pointer is published.
func (p *Publisher) openBodies(ctx context.Context, first uint64) error {
	if p.bodies == nil {
		obs, err := p.js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: p.opts.changesBucket(),
			Description: "utxo-cache changes too large for one message", Storage: jetstream.FileStorage, Replicas: p.opts.Replicas})
		if err != nil {
			return fmt.Errorf("object store %s: %w", p.opts.changesBucket(), err)
		}
		p.bodies = obs
	}
	if !p.listing {
		p.listing = true
		p.wg.Add(1)
		go func() { defer p.wg.Done(); p.listBodies(ctx, p.bodies) }()
	}
	p.takeListed()
	p.deleteObjects(ctx, first)
	return nil
}

// listBodies lists the change objects of obs until a list succeeds (or ctx
// ends), and sends their seqs on p.found.
func (p *Publisher) listBodies(ctx context.Context, obs jetstream.ObjectStore) {
	backoff := time.Second
	for {
		infos, err := listObjects(ctx, obs)
		if err == nil || errors.Is(err, jetstream.ErrNoObjectsFound) {
			var seqs []uint64
			for _, in := range infos {
				if seq, err := strconv.ParseUint(in.Name, 10, 64); err == nil && !in.Deleted && in.Name == changeObject(seq) {
					seqs = append(seqs, seq)
				}
			}
			p.found <- seqs // capacity 1, sent once
			return
		}
		if ctx.Err() != nil {
			return
		}
		p.opts.Logger.Warn("could not list the change objects an earlier writer left (deleted once listed); retrying",
			"bucket", p.opts.changesBucket(), "err", err, "retry_in", backoff)
		if !sleep(ctx, backoff) {
			return
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// takeListed merges what listBodies found, if it is done.
func (p *Publisher) takeListed() {
	select {
	case seqs := <-p.found:
		p.merge(seqs)
	default:
	}
}

// merge adds seqs to the objects known.
func (p *Publisher) merge(seqs []uint64) {
	p.objects = append(p.objects, seqs...)
	sort.Slice(p.objects, func(i, j int) bool { return p.objects[i] < p.objects[j] })
	p.objects = slices.Compact(p.objects)
}

// dropObjects deletes the objects of changes the stream no longer holds,
// now that it has last: it asks the stream where it starts only when an
// object may be before it.
func (p *Publisher) dropObjects(ctx context.Context, last uint64) {
	if len(p.objects) == 0 || p.objects[0]+p.opts.Retention > last {
		return
	}
	s, err := p.js.Stream(ctx, p.opts.stream())
	if err != nil {
		p.opts.Logger.Warn("could not read the stream's first change to delete older change objects", "err", err)
		return
	}
	st := s.CachedInfo().State
	first := st.FirstSeq
	if st.Msgs == 0 {
		first = st.LastSeq + 1
	}
	p.deleteObjects(ctx, first)
}

// deleteObjects deletes the objects of changes before first.
func (p *Publisher) deleteObjects(ctx context.Context, first uint64) {
	for len(p.objects) > 0 && p.objects[0] < first {
		name := changeObject(p.objects[0])
		if err := p.bodies.Delete(ctx, name); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
			p.opts.Logger.Warn("could not delete a change object the stream no longer needs: retried later", "object", name, "err", err)
			return
		}
		p.objects = p.objects[1:]
	}
}

// putBody puts rec, change seq, in the bucket of change objects, replacing
// any object of that name (put before a crash, or of a replaced stream).
func (p *Publisher) putBody(ctx context.Context, seq uint64, rec []byte) error {
	meta := jetstream.ObjectMeta{Name: changeObject(seq), Description: "change " + strconv.FormatUint(seq, 10),
		Opts: &jetstream.ObjectMetaOptions{ChunkSize: chunkSize(p.nc.MaxPayload())}}
	ctx, cancel := context.WithTimeout(ctx, 3*ackTimeout)
	defer cancel()
	if _, err := p.bodies.Put(ctx, meta, bytes.NewReader(rec)); err != nil {
		return fmt.Errorf("put change %d (%d bytes) in %s: %w", seq, len(rec), p.opts.changesBucket(), err)
	}
	if n := len(p.objects); n == 0 || p.objects[n-1] < seq {
		p.objects = append(p.objects, seq)
	}
	return nil
}

// window sends the changes after last, at most maxWindow and MaxWindowBytes
// of them, and waits for their acks; it returns the last change acked.
//
// The ack of each change must name its seq as its stream sequence (or, for a
// copy the duplicate window dropped, the sequence of the first copy), or the
// stream is replaced (errMisplaced). The first change of a session
// (confirmed false) goes alone, with its message id only; every later one
// with the expectation that the stream's last message id is the seq before
// it, so that when one change fails (a leader lost while it was in flight),
// none sent after it is stored in its place: they fail too, and the next
// session resumes from the stream's last message.
func (p *Publisher) window(ctx context.Context, last uint64, confirmed bool) (uint64, error) {
	v, err := p.store.PublishedView()
	if err != nil {
		return last, err
	}
	cur, err := v.ChangeCursor(last)
	if err != nil {
		_ = v.Close()
		return last, fmt.Errorf("change log after %d: %w", last, err)
	}
	var futures []jetstream.PubAckFuture
	size := 0
	limit := maxWindow
	if !confirmed {
		limit = 1
	}
	for len(futures) < limit && (size == 0 || size < MaxWindowBytes) {
		rec, err := cur.Next()
		if err != nil || rec == nil {
			if err != nil && len(futures) == 0 {
				_ = cur.Close()
				_ = v.Close()
				return last, fmt.Errorf("change log after %d: %w", last, err)
			}
			break
		}
		seq := last + 1 + uint64(len(futures))
		msg := nats.NewMsg(p.opts.changesSubject())
		replication.WriterLimitsHeaders(msg.Header, p.limits)
		if limit := p.nc.MaxPayload(); limit > 0 && int64(len(rec))+headerRoom > limit {
			// Too large for a message: the record goes to the object store
			// first, then a pointer to it takes its place in the stream.
			if len(futures) > 0 {
				break // what was sent is awaited first
			}
			body := bytes.Clone(rec)
			if err := p.putBody(ctx, seq, body); err != nil {
				_ = cur.Close()
				_ = v.Close()
				return last, err
			}
			if p.opts.afterPut != nil {
				if err := p.opts.afterPut(seq); err != nil {
					_ = cur.Close()
					_ = v.Close()
					return last, err
				}
			}
			setPointer(msg.Header, seq, body)
		} else {
			msg.Data = bytes.Clone(rec) // Pebble's bytes are the cursor's until Next
		}
		opts := []jetstream.PublishOpt{jetstream.WithMsgID(strconv.FormatUint(seq, 10))}
		if confirmed {
			opts = append(opts, jetstream.WithExpectLastMsgID(strconv.FormatUint(seq-1, 10)))
		}
		f, err := p.js.PublishMsgAsync(msg, opts...)
		if err != nil {
			break // what was sent is awaited below
		}
		futures = append(futures, f)
		size += len(rec)
	}
	_ = cur.Close()
	_ = v.Close()
	if len(futures) == 0 {
		return last, errors.New("could not send the next change")
	}
	timeout := time.NewTimer(ackTimeout)
	defer timeout.Stop()
	for i, f := range futures {
		want := last + 1
		select {
		case ack := <-f.Ok():
			if ack.Sequence != want {
				return last, fmt.Errorf("change %d stored as stream message %d: %w", want, ack.Sequence, errMisplaced)
			}
			last = want
			p.m.published.Inc()
		case err := <-f.Err():
			return last, fmt.Errorf("change %d (%d of %d sent): %w", want, i+1, len(futures), err)
		case <-timeout.C:
			return last, fmt.Errorf("change %d: no ack in %s", want, ackTimeout)
		case <-ctx.Done():
			return last, ctx.Err()
		}
	}
	return last, nil
}

// runStatus announces the writer's state on the status subject every
// second, whatever the stream's state: replicas learn how far behind they
// are even when the stream is.
func (p *Publisher) runStatus(ctx context.Context) {
	t := time.NewTicker(statusEvery)
	defer t.Stop()
	for {
		st := p.store.Published()
		msg := nats.NewMsg(p.opts.statusSubject())
		msg.Header.Set(headerSeq, strconv.FormatUint(st.Seq, 10))
		if !st.Tip.Empty {
			msg.Header.Set(headerHeight, strconv.FormatUint(st.Tip.Height, 10))
		}
		streamSeq := p.streamSeq.Load()
		msg.Header.Set(headerStreamSeq, strconv.FormatUint(streamSeq, 10))
		p.m.behind.Set(float64(st.Seq - min(st.Seq, streamSeq)))
		_ = p.nc.PublishMsg(msg) // buffered while disconnected; lost beyond
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// runCheckpoints puts checkpoints in the bucket when they are due.
func (p *Publisher) runCheckpoints(ctx context.Context) {
	backoff := time.Second
	var obs jetstream.ObjectStore
	newest, taken := uint64(0), time.Time{}
	have := false
	var wanted uint64
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for ctx.Err() == nil {
		err := func() error {
			if obs == nil {
				o, err := p.js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: p.opts.bucket(),
					Description: "utxo-cache checkpoints", Storage: jetstream.FileStorage, Replicas: p.opts.Replicas})
				if err != nil {
					return fmt.Errorf("object store %s: %w", p.opts.bucket(), err)
				}
				names, err := checkpoints(ctx, o)
				if err != nil {
					return err
				}
				obs, have = o, len(names) > 0
				if have {
					newest = names[len(names)-1].seq
					taken = names[len(names)-1].mod
					p.m.checkpointSeq.Set(float64(newest))
				}
			}
			seq := p.store.Published().Seq
			due := !have || newest+1 < p.streamFirst.Load() ||
				(seq > newest && (time.Since(taken) >= p.opts.CheckpointInterval || seq-newest >= max(p.opts.Retention/2, 1))) ||
				(wanted > newest && seq > newest && time.Since(taken) >= p.opts.CheckpointInterval/10)
			if !due {
				return nil
			}
			m, err := p.put(ctx, obs)
			if err != nil {
				return err
			}
			newest, taken, have = m.Seq, time.Now(), true
			return nil
		}()
		if err != nil && ctx.Err() == nil {
			p.m.checkpointErrs.Inc()
			obs = nil
			p.opts.Logger.Warn("putting a checkpoint in the JetStream object store failed: retrying", "err", err, "retry_in", backoff)
			if !sleep(ctx, backoff) {
				return
			}
			backoff = min(2*backoff, 10*time.Second)
			continue
		}
		backoff = time.Second
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case s := <-p.request:
			wanted = max(wanted, s)
		}
	}
}

// put stages a checkpoint, streams it into the bucket, and removes the
// checkpoints older than the keptCheckpoint newest.
func (p *Publisher) put(ctx context.Context, obs jetstream.ObjectStore) (replication.Manifest, error) {
	c, err := replication.Take(ctx, p.cp, p.staging)
	if err != nil {
		return replication.Manifest{}, fmt.Errorf("take a checkpoint: %w", err)
	}
	defer c.Close()
	meta := jetstream.ObjectMeta{Name: checkpointObject(c.Manifest.Seq), Headers: nats.Header{},
		Description: c.Manifest.String(), Opts: &jetstream.ObjectMetaOptions{ChunkSize: chunkSize(p.nc.MaxPayload())}}
	replication.ManifestHeaders(c.Manifest, meta.Headers.Set)
	meta.Headers.Set(headerBytes, strconv.FormatInt(c.Manifest.StoreBytes(), 10))
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(c.Stream(pw)) }()
	start := time.Now()
	info, err := obs.Put(ctx, meta, pr)
	_ = pr.CloseWithError(errors.New("jetstream: put ended"))
	if err != nil {
		return replication.Manifest{}, fmt.Errorf("put %s: %w", meta.Name, err)
	}
	p.m.checkpoints.Inc()
	p.m.checkpointSeq.Set(float64(c.Manifest.Seq))
	p.opts.Logger.Info("checkpoint put in the JetStream object store", "object", meta.Name, "state", c.Manifest.String(),
		"bytes", info.Size, "seconds", time.Since(start).Seconds())
	names, err := checkpoints(ctx, obs)
	if err == nil && len(names) > keptCheckpoint {
		for _, n := range names[:len(names)-keptCheckpoint] {
			if err := obs.Delete(ctx, n.name); err != nil {
				p.opts.Logger.Warn("could not delete an old checkpoint", "object", n.name, "err", err)
			}
		}
	}
	return c.Manifest, nil
}

type storedCheckpoint struct {
	name string
	seq  uint64
	mod  time.Time
}

// listObjects lists the objects of obs, giving up after two ack timeouts:
// unlike the other JetStream calls, a list has no timeout of its own, and
// one whose stream lost its leader (a server cut off from its cluster)
// would otherwise wait for ever, and the caller with it.
func listObjects(ctx context.Context, obs jetstream.ObjectStore) ([]*jetstream.ObjectInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*ackTimeout)
	defer cancel()
	return obs.List(ctx)
}

// checkpoints lists the bucket's checkpoints, oldest first.
func checkpoints(ctx context.Context, obs jetstream.ObjectStore) ([]storedCheckpoint, error) {
	infos, err := listObjects(ctx, obs)
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list checkpoints: %w", err)
	}
	var out []storedCheckpoint
	for _, in := range infos {
		rest, ok := strings.CutPrefix(in.Name, "checkpoint-")
		if !ok || in.Deleted {
			continue
		}
		seq, err := strconv.ParseUint(rest, 10, 64)
		if err != nil {
			continue
		}
		out = append(out, storedCheckpoint{name: in.Name, seq: seq, mod: in.ModTime})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].seq < out[j].seq })
	return out, nil
}

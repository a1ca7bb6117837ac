package writer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/changeset"
	"github.com/utxo-cache/utxo-cache/internal/threadprio"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

// ErrClosed is returned for requests made after Close, or still queued when
// the writer stopped.
var ErrClosed = errors.New("writer: closed")

// ErrFailed matches every error of a writer whose store failed a write (an
// I/O error, a full disk): it takes no more writes until restarted, and its
// readers keep the last published state.
var ErrFailed = disk.ErrFailed

// Listener is told of every change, in commit order, on the writer
// goroutine, after the change is committed and before it is published: it
// invalidates what the change made stale (the cache tiers). It must not block
// for long and must not call the writer.
type Listener interface {
	Changed(cs *changeset.Set)
}

// PublishListener is a Listener that is also told, on the writer goroutine,
// once a change is published (readers see it), before the change is
// acknowledged.
type PublishListener interface {
	Listener
	AfterPublish(cs *changeset.Set)
}

// queueLength is how many requests may wait for the writer goroutine
// before a caller blocks in its submit.
const queueLength = 64

// Options configure a Writer.
type Options struct {
	// SkipUnknownInputs skips, and counts, inputs that are not live unspent
	// outpoints instead of rejecting the block: for stores that start
	// mid-chain. Default false (reject with chain.ErrUnknownInput).
	SkipUnknownInputs bool
	// Metrics receives the writer's figures. Default: none.
	Metrics *Metrics
	// Logger. Default: discard.
	Logger *slog.Logger
	// Verify, when set, checks each committed change before it is published
	// (a replica compares the figures with its writer's). An error stops the
	// writer for good, like a storage failure: the change stays unpublished,
	// so no reader ever sees it, and a restart or a new store must follow.
	Verify func(st disk.State) error
	// WindowBytes bounds the memory of one catch-up window of ApplyBlocks
	// (catchup.go), estimated from the blocks' inputs and outputs. Default
	// DefaultWindowBytes; negative turns windows off: ApplyBlocks applies
	// every block alone.
	WindowBytes int64
	// WindowBlocks bounds the blocks of one window. Default
	// DefaultWindowBlocks.
	WindowBlocks int
	// LiveMargin is how close to ApplyBlocks' target a block is applied
	// alone, as a live block. Default DefaultLiveMargin.
	LiveMargin uint64
	// Space, when set, turns on the free-space guard (guard.go): a write
	// that could need more room than the store's file system has left
	// fails with ErrInsufficientStorage, changing nothing. Default: none
	// (no guard).
	Space DiskSpace
	// Reserve is the free space, in bytes, the guard keeps beyond each
	// write's own estimate. Zero: DefaultReserve of the store's memtable
	// size (192 MiB with the default 64 MiB memtable).
	Reserve uint64
	// Now is the writer's clock, which decides lease expiries (lease.go).
	// Default time.Now.
	Now func() time.Time
	// LeaseSweep is how often the writer ends the leases its clock has
	// expired. Default DefaultLeaseSweep; negative: never (a replica,
	// which applies its writer's sweeps instead).
	LeaseSweep time.Duration
	// Nice, from 1 to threadprio.MaxNice, runs the writer goroutine on an
	// OS thread of its own whose niceness is the process's plus Nice, so
	// that the kernel lets readers' threads preempt a block's CPU burst
	// (package threadprio; the process needs threadprio.ExtraP). 0: the
	// writer runs like any other goroutine. Where the system refuses, the
	// writer logs it and runs unlowered.
	Nice int
}

// EnsureDefaults returns o with every unset field set to its default, but
// Reserve: its default depends on the store, so New fills it in.
func (o Options) EnsureDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.WindowBytes == 0 {
		o.WindowBytes = DefaultWindowBytes
	}
	if o.WindowBlocks <= 0 {
		o.WindowBlocks = DefaultWindowBlocks
	}
	if o.LiveMargin == 0 {
		o.LiveMargin = DefaultLiveMargin
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.LeaseSweep == 0 {
		o.LeaseSweep = DefaultLeaseSweep
	}
	return o
}

// Result answers an Apply.
type Result struct {
	// Applied is false when the block was already applied at its height
	// (an idempotent re-post).
	Applied bool
	Tip     chain.Tip
	// Seq is the commit sequence of the state the request left (the current
	// one when it changed nothing).
	Seq     uint64
	Changes *changeset.Set // nil when nothing was applied
}

// Writer is the single writer. Its methods are safe for concurrent use;
// the work itself happens on one goroutine.
//
// # Commit, invalidate, publish, acknowledge
//
// Each change goes through four steps on the writer goroutine, in this
// order: the store commits it (one synced batch, or one per block of a
// rollback); the listeners invalidate what it changed (Changed); the store
// publishes it (Store.Publish: readers now see it, and only now); the
// publish listeners hear of it (AfterPublish); the request is answered. So a
// reader never sees a change whose invalidation is running, every read that
// starts after an acknowledgement sees the change or a later one, and
// published states follow the commit sequence, never going back.
//
// With Options.Space set, a write that could need more room than the
// store's file system has left is refused before anything is written
// (ErrInsufficientStorage; guard.go), and taken again once room returns.
//
// A storage failure (disk.ErrFailed) stops the writer for good: the store
// refuses further writes, every later request is answered with the failure,
// and readers keep the last published state. A restart recovers.
type Writer struct {
	store *disk.Store
	opts  Options
	reqs  chan request
	// wallet queues wallet requests, taken many at a time (lease.go).
	wallet chan walletRequest
	stop   chan struct{} // closed by Close: no new requests
	done   chan struct{} // closed when the goroutine has exited

	// failed is the error of a failed Verify: the writer takes no more
	// requests.
	failed atomic.Pointer[error]

	// Writer goroutine only (guard.go): whether the last guarded write was
	// refused, and the running mean of applied blocks' estimated sizes.
	refusing      bool
	appliedBlocks int
	meanBlock     float64
	spaceErrOnce  sync.Once
	// refusedNeed is the own estimate of the last write the guard refused,
	// 0 once one goes through: WritesRefused reads it from any goroutine.
	refusedNeed atomic.Uint64

	closeOnce sync.Once
	// mu guards listeners; the writer goroutine copies the slice under it
	// and calls them without it.
	mu        sync.Mutex
	listeners []Listener
}

type request struct {
	ctx   context.Context
	block *chain.Block // apply when set
	// blocks, when set, is an ApplyBlocks batch heading to height target.
	blocks []*chain.Block
	target uint64 // rollback target height otherwise
	// targetHash, when set, names the rollback target by block hash.
	targetHash *chain.Hash
	rollback   bool
	// freeze, when set, freezes (or, with unfreeze, unfreezes) outputs.
	freeze   *chain.Freeze
	unfreeze bool
	// wallet, when set, applies a replica's wallet change.
	wallet     []chain.WalletOp
	prepare    bool   // build the store's write-side state; nobody waits
	checkpoint string // write a checkpoint into this directory
	reply      chan reply
}

type reply struct {
	res   Result
	batch BatchResult // of an ApplyBlocks
	state disk.State  // of a checkpoint
	err   error
}

// New starts the writer goroutine over store. The writer does not own the
// store: Close the writer, then the store.
func New(store *disk.Store, opts Options) *Writer {
	opts = opts.EnsureDefaults()
	if opts.Reserve == 0 {
		opts.Reserve = DefaultReserve(store.Options().MemTableBytes)
	}
	w := &Writer{
		store:  store,
		opts:   opts,
		reqs:   make(chan request, queueLength),
		wallet: make(chan walletRequest, walletQueueLength),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	if opts.Metrics != nil {
		opts.Metrics.observeStore(store)
		if opts.Space != nil {
			opts.Metrics.observeSpace(w.checkSpace, opts.Reserve)
		}
	}
	go w.run()
	// Build the store's write-side state on the writer goroutine, first in
	// its queue, so the first block does not pay for it.
	w.reqs <- request{ctx: context.Background(), prepare: true, reply: make(chan reply, 1)}
	return w
}

// Subscribe registers l for every change acknowledged from now on.
func (w *Writer) Subscribe(l Listener) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.listeners = append(w.listeners, l)
}

// Tip returns the latest published tip.
func (w *Writer) Tip() chain.Tip { return w.store.Published().Tip }

// Failed returns the storage failure or failed verification that stopped
// the writer, nil while it takes writes.
func (w *Writer) Failed() error {
	if p := w.failed.Load(); p != nil {
		return *p
	}
	return w.store.Failed()
}

// Apply applies b, or confirms it is already applied (Result.Applied false).
// Errors match chain.ErrNotNextBlock, chain.ErrUnknownInput,
// chain.ErrDoubleSpend, chain.ErrDuplicateOutpoint (nothing changed), or
// wrap a storage failure.
func (w *Writer) Apply(ctx context.Context, b *chain.Block) (Result, error) {
	return w.submit(ctx, request{block: b})
}

// Rollback reverts the chain to height target. Errors match
// chain.ErrInvalidArgument (above the tip) or chain.ErrRollbackTooDeep
// (nothing changed).
func (w *Writer) Rollback(ctx context.Context, target uint64) (Result, error) {
	return w.submit(ctx, request{target: target, rollback: true})
}

// RollbackToHash reverts the chain to the block with hash h, which must be on
// the current chain (chain.ErrInvalidArgument otherwise).
//
// The hash is resolved on the writer goroutine, so no change can run between
// finding the block's height and rolling back to it.
func (w *Writer) RollbackToHash(ctx context.Context, h chain.Hash) (Result, error) {
	return w.submit(ctx, request{rollback: true, targetHash: &h})
}

// Checkpoint writes a consistent copy of the store into dir (which must not
// exist) between two changes, so the copy is exactly the published state it
// returns. It runs on the writer goroutine: a queued block waits for it (a
// checkpoint is mostly hard links: milliseconds).
func (w *Writer) Checkpoint(ctx context.Context, dir string) (disk.State, error) {
	rep, err := w.submitReply(ctx, request{checkpoint: dir})
	return rep.state, err
}

func (w *Writer) submit(ctx context.Context, r request) (Result, error) {
	rep, err := w.submitReply(ctx, r)
	return rep.res, err
}

func (w *Writer) submitReply(ctx context.Context, r request) (reply, error) {
	r.ctx = ctx
	r.reply = make(chan reply, 1)
	select {
	case <-w.stop:
		return reply{}, ErrClosed
	default:
	}
	select {
	case w.reqs <- r:
	case <-w.stop:
		return reply{}, ErrClosed
	case <-ctx.Done():
		return reply{}, ctx.Err()
	}
	// Once queued, the request runs to completion or is refused with
	// ErrClosed: waiting for the reply (not ctx) tells the caller the truth
	// about whether the block was committed.
	rep := <-r.reply
	return rep, rep.err
}

// Close stops taking requests, finishes the one in flight, refuses the
// queued ones with ErrClosed and waits for the goroutine to exit.
func (w *Writer) Close() error {
	w.closeOnce.Do(func() { close(w.stop) })
	<-w.done
	return nil
}

func (w *Writer) run() {
	defer close(w.done)
	if n := w.opts.Nice; n != 0 {
		if nice, err := threadprio.Lower(n); err != nil {
			w.opts.Logger.Warn("the writer runs at the readers' priority", "err", err)
		} else {
			w.opts.Logger.Info("writer thread lowered", "niceness", nice)
		}
	}
	var sweep <-chan time.Time
	if w.opts.LeaseSweep > 0 {
		t := time.NewTicker(w.opts.LeaseSweep)
		defer t.Stop()
		sweep = t.C
	}
	for {
		select {
		case <-w.stop:
			w.drain()
			return
		case r := <-w.reqs:
			w.handle(r)
		case r := <-w.wallet:
			w.handleWallet(r)
		case <-sweep:
			w.sweepLeases()
		}
	}
}

// drain refuses what is still queued.
func (w *Writer) drain() {
	for {
		select {
		case r := <-w.reqs:
			r.reply <- reply{err: ErrClosed}
		case r := <-w.wallet:
			r.reply <- walletReply{err: ErrClosed}
		default:
			return
		}
	}
}

func (w *Writer) handle(r request) {
	if err := r.ctx.Err(); err != nil {
		r.reply <- reply{err: err}
		return
	}
	if r.prepare {
		start := time.Now()
		closing := func() bool {
			select {
			case <-w.stop:
				return true
			default:
				return false
			}
		}
		if err := w.store.PrepareWritesUntil(closing); errors.Is(err, disk.ErrStopped) {
			w.opts.Logger.Info("writer preparation abandoned: closing")
		} else if err != nil {
			// NewBlock retries, and reports the error with the first block.
			w.opts.Logger.Error("preparing the writer failed", "err", err)
		} else {
			w.opts.Logger.Info("writer ready", "prepare", time.Since(start).Round(time.Millisecond).String())
		}
		return
	}
	if r.checkpoint != "" {
		if err := w.guard(0); err != nil {
			r.reply <- reply{state: w.store.Published(), err: fmt.Errorf("checkpoint: %w", err)}
			return
		}
		st, err := w.store.Checkpoint(r.checkpoint)
		r.reply <- reply{state: st, err: err}
		return
	}
	if err := w.Failed(); err != nil {
		st := w.store.Published()
		r.reply <- reply{res: Result{Tip: st.Tip, Seq: st.Seq}, err: err}
		return
	}
	if r.blocks != nil {
		res, err := w.applyBatch(r.blocks, r.target)
		r.reply <- reply{batch: res, err: err}
		return
	}
	if r.wallet != nil {
		res, err := w.finish(w.applyWallet(r.wallet))
		r.reply <- reply{res: res, err: err}
		return
	}
	if r.freeze != nil {
		res, err := w.finish(w.setFrozen(r.freeze, r.unfreeze))
		r.reply <- reply{res: res, err: err}
		return
	}
	var res Result
	var err error
	if r.rollback {
		start := time.Now()
		res, err = w.rollbackRequest(r)
		w.opts.Metrics.rollbackDone(time.Since(start), res.Changes, err)
		res, err = w.finish(res, err)
	} else {
		res, err = w.applyOne(r.block)
	}
	r.reply <- reply{res: res, err: err}
}

// applyOne applies b alone: commit, verify, invalidate, publish. Writer
// goroutine only.
func (w *Writer) applyOne(b *chain.Block) (Result, error) {
	start := time.Now()
	res, err := w.apply(b)
	w.opts.Metrics.applyDone(time.Since(start), res.Changes, err)
	return w.finish(res, err)
}

// finish verifies and publishes the change res committed, if any.
func (w *Writer) finish(res Result, err error) (Result, error) {
	if err != nil {
		w.opts.Logger.Debug("writer request refused", "err", err)
	}
	if res.Changes != nil && w.opts.Verify != nil {
		if verr := w.opts.Verify(w.store.State()); verr != nil {
			verr = fmt.Errorf("writer: change %d failed verification, not published: %w", res.Changes.Seq, verr)
			w.failed.CompareAndSwap(nil, &verr)
			w.opts.Logger.Error("change failed verification: the writer takes no more requests", "err", verr)
			st := w.store.Published()
			return Result{Tip: st.Tip, Seq: st.Seq}, verr
		}
	}
	if res.Changes != nil {
		w.publish(res.Changes)
	}
	return res, err
}

// publish runs the invalidate and publish steps of a committed change (see
// the type comment). Writer goroutine only.
func (w *Writer) publish(cs *changeset.Set) {
	w.mu.Lock()
	ls := append([]Listener(nil), w.listeners...)
	w.mu.Unlock()
	for _, l := range ls {
		l.Changed(cs)
	}
	w.store.Publish()
	for _, l := range ls {
		if p, ok := l.(PublishListener); ok {
			p.AfterPublish(cs)
		}
	}
}

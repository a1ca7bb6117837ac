package replication

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
	"github.com/utxo-cache/utxo-cache/writer"
)

// ErrDiverged is returned by Tail.Run when the replica's store no
// longer follows the writer: a change did not apply, or left other figures
// than the writer's. The store must be replaced by a fresh checkpoint.
var ErrDiverged = errors.New("replication: replica diverged from its writer")

// ErrNeedBootstrap is returned by Tail.Run when the writer no longer
// keeps the changes the replica needs (410 log_truncated) or has none of its
// state (409 ahead): the store must be replaced by a fresh checkpoint.
var ErrNeedBootstrap = errors.New("replication: replica must bootstrap again")

// ErrNotWritersState is returned by Tail.Run, with ErrDiverged, when the
// replica's published state itself is not the writer's state at its seq (a
// store tampered with, or restored from another writer's): unlike a change
// that failed verification, which was never published, that state must not
// be served any more.
var ErrNotWritersState = errors.New("replication: the replica's state is not its writer's")

// Applier is the replica's writer: the same code that applies blocks and
// rollbacks on the writer (*writer.Writer). ApplyBlocks takes a replica far
// behind its writer through catch-up windows; its Options.Verify must be
// the Tail's Verify.
type Applier interface {
	Apply(ctx context.Context, b *chain.Block) (writer.Result, error)
	Rollback(ctx context.Context, target uint64) (writer.Result, error)
	ApplyBlocks(ctx context.Context, blocks []*chain.Block, target uint64) (writer.BatchResult, error)
	Freeze(ctx context.Context, f chain.Freeze) (writer.Result, error)
	Unfreeze(ctx context.Context, f chain.Freeze) (writer.Result, error)
	ApplyWallet(ctx context.Context, ops []chain.WalletOp) (writer.Result, error)
}

// Published gives the replica store's published state.
type Published interface {
	Published() disk.State
}

// TailOptions configure a Tail.
type TailOptions struct {
	// Source is where the writer's changes and checkpoints are read.
	// Default: the writer's HTTP endpoints at URL, with Token and Client.
	Source ChangeSource
	// URL is the writer's base URL (http://host:port), when Source is nil.
	URL string
	// Token is the writer's replication token.
	Token string
	// Client makes the requests. Default: a client with no overall timeout
	// (long polls), a 10s dial timeout, and a 45s timeout for the response
	// headers (above the 10s long-poll wait).
	Client *http.Client
	// BlockLimits bound the blocks of the changes. Zero: chain defaults.
	// A writer that announces larger limits (WriterLimitsHeaders) is
	// followed with those: a replica applies every block its writer
	// accepted, or it could never follow it past that block.
	BlockLimits chain.Limits
	// Metrics receives the replica's figures. Default: unexported ones.
	Metrics *TailMetrics
	// Gate, when set, holds the replica's new reads while a change is
	// pending (ApplyGate); the follower raises and releases its holds, and
	// the caller subscribes it to the replica's writer so that a hold opens
	// at the publish. Default: none, reads are never held.
	Gate *ApplyGate
	// Logger. Default: discard.
	Logger *slog.Logger
	// LiveMargin is the replica writer's writer.Options.LiveMargin: blocks
	// within it of the writer's tip are applied one change at a time, as
	// live changes; those below it go to ApplyBlocks (catch-up windows).
	// Default writer.DefaultLiveMargin.
	LiveMargin uint64

	// The checkpoint download of Bootstrap:

	// CheckpointIdleTimeout aborts a checkpoint download that receives no
	// byte for this long. Default DefaultCheckpointIdleTimeout.
	CheckpointIdleTimeout time.Duration
	// CheckpointProgressInterval is how often a checkpoint download logs
	// its progress. Default 15s.
	CheckpointProgressInterval time.Duration
	// Space gives the free space of the file system the checkpoint is
	// installed on, and KeepFree the bytes the install leaves free on it
	// (see Install). Default: the file system of the store's directory,
	// and KeepFree's rule for it.
	Space    DiskSpace
	KeepFree uint64
}

// DefaultCheckpointIdleTimeout is the default of
// TailOptions.CheckpointIdleTimeout: a writer streams a checkpoint from
// files it has staged, so a pause this long means a broken connection or
// peer.
const DefaultCheckpointIdleTimeout = 30 * time.Second

// pollWait is the long-poll wait a follower asks of the writer, and
// maxBackoff bounds its wait between failed contacts.
const (
	pollWait   = 10 * time.Second
	maxBackoff = 5 * time.Second
)

// EnsureDefaults returns o with its zero fields filled.
func (o TailOptions) EnsureDefaults() TailOptions {
	if o.Client == nil {
		o.Client = &http.Client{Transport: &http.Transport{
			Proxy:                 nil,
			DialContext:           (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
			ResponseHeaderTimeout: 45 * time.Second,
			MaxIdleConnsPerHost:   2,
		}}
	}
	o.BlockLimits = o.BlockLimits.EnsureDefaults()
	if o.Metrics == nil {
		o.Metrics = NewTailMetrics(nil)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.LiveMargin == 0 {
		o.LiveMargin = writer.DefaultLiveMargin
	}
	if o.CheckpointIdleTimeout <= 0 {
		o.CheckpointIdleTimeout = DefaultCheckpointIdleTimeout
	}
	if o.CheckpointProgressInterval <= 0 {
		o.CheckpointProgressInterval = 15 * time.Second
	}
	return o
}

// Tail tails a writer's change log into a replica's store. Run applies;
// Status is safe from any goroutine.
//
// # Exactly the writer's sequence
//
// The replica's store is at some seq S of the writer's sequence (a verified
// checkpoint, then only the writer's changes). Run asks for the changes after
// S, and applies change S+1 through the replica's writer (Apply or Rollback:
// the code the writer ran), then checks that the store is at seq S+1 with
// the tip, count and digest the writer recorded after S+1. Any difference
// stops it (ErrDiverged): the store is not the writer's any more, and only a
// new checkpoint can fix it. Since each change is applied and published
// before the next is read, the replica's published states are the writer's
// states S, S+1, … in order: reads on the replica are monotonic.
//
// # Catching up
//
// A replica far behind (after a restart or downtime) hands each run of
// consecutive block changes of one answer that lie more than LiveMargin
// below the writer's tip (X-Tip-Height) to the writer's ApplyBlocks, which
// applies them in catch-up windows. Each block of a window keeps its own
// seq and is verified, in memory, against the writer's figures for it
// (Verify looks the change up by seq among the run) before the window is
// committed and published; a block that fails drops the window unwritten,
// and its blocks are then applied one by one until the one that diverges.
// So every change is still verified before it is published, and the
// published states are still writer's states in order (a window publishes
// the state after its last block; readers skip the ones inside it). Blocks
// within LiveMargin of the writer's tip, and rollbacks, go one at a time.
type Tail struct {
	opts  TailOptions
	src   ChangeSource
	store Published
	w     Applier
	m     *TailMetrics
	// expect is the changes being applied, consecutive in seq, for Verify
	// (set by the follower before it hands them to the writer, read on the
	// writer goroutine).
	expect atomic.Pointer[[]*chain.Change]
	// checked is whether the store's own state was compared with the
	// writer's record of it since Run started.
	checked bool
	// verified is whether the store's state has been found to be the
	// writer's since Run started: its own state matched the writer's record,
	// or a change applied on it matched the writer's figures (Verified).
	verified atomic.Bool

	mu struct {
		sync.Mutex
		writerSeq    uint64
		writerHeight uint64
		contact      time.Time // last answer from the writer; zero: none
		caughtUp     time.Time // last time the replica was at the writer's seq
		failed       error     // why Run stopped (divergence, truncation)
	}
}

// NewTail follows opts.Source (default: the writer at opts.URL) into store
// through w.
func NewTail(store Published, w Applier, opts TailOptions) (*Tail, error) {
	opts = opts.EnsureDefaults()
	src, err := opts.source()
	if err != nil {
		return nil, err
	}
	return &Tail{opts: opts, src: src, store: store, w: w, m: opts.Metrics}, nil
}

// source is opts.Source, or the writer's HTTP endpoints at opts.URL.
func (o TailOptions) source() (ChangeSource, error) {
	if o.Source != nil {
		return o.Source, nil
	}
	return newHTTPSource(o)
}

// Status is the replica's view of replication.
type Status struct {
	Seq, WriterSeq uint64
	LagBlocks      uint64
	// LastContact is the time since the writer last answered; negative when
	// it never did.
	LastContact time.Duration
	// LagSeconds is how long the replica has been behind the writer's seq
	// as last heard (0 when it is not behind).
	LagSeconds float64
	// Failed is why following stopped (nil while it goes on).
	Failed error
}

// Verified reports whether the store has been found to hold the writer's
// state since Run started (false from a restart until the first answer of
// the writer confirms it). Until then the node's answers are its own store's,
// which nothing has yet checked: a caller keeps them out of tiers other
// nodes read (query.Options.FillShared). Safe for concurrent use.
func (f *Tail) Verified() bool { return f.verified.Load() }

// Status returns the replica's current replication figures.
func (f *Tail) Status() Status {
	st := f.store.Published()
	f.mu.Lock()
	defer f.mu.Unlock()
	s := Status{Seq: st.Seq, WriterSeq: max(f.mu.writerSeq, st.Seq), LastContact: -1, Failed: f.mu.failed}
	if !f.mu.contact.IsZero() {
		s.LastContact = time.Since(f.mu.contact)
	}
	if st.Seq < f.mu.writerSeq && !f.mu.caughtUp.IsZero() {
		s.LagSeconds = time.Since(f.mu.caughtUp).Seconds()
	}
	if !st.Tip.Empty && f.mu.writerHeight > st.Tip.Height {
		s.LagBlocks = f.mu.writerHeight - st.Tip.Height
	} else if st.Tip.Empty {
		s.LagBlocks = f.mu.writerHeight
	}
	return s
}

// Run follows the writer until ctx ends (nil), or the replica must be
// bootstrapped again (an error matching ErrDiverged or ErrNeedBootstrap).
// While the writer is unreachable it retries with jittered backoff, and the
// store keeps serving its last state.
func (f *Tail) Run(ctx context.Context) error {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := f.poll(ctx)
		switch {
		case err == nil:
			backoff = 100 * time.Millisecond
			continue
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, ErrDiverged), errors.Is(err, ErrNeedBootstrap):
			f.mu.Lock()
			f.mu.failed = err
			f.mu.Unlock()
			if errors.Is(err, ErrDiverged) {
				f.m.divergences.Inc()
				f.opts.Logger.Error("replica diverged from its writer: stopped applying, bootstrapping again", "err", err)
			} else {
				f.opts.Logger.Warn("replica must bootstrap again", "err", err)
			}
			return err
		}
		f.m.contactErrors.Inc()
		switch {
		case errors.Is(err, ErrBusy):
			f.opts.Logger.Warn("writer busy (it serves its most change streams, --max-change-streams): serving the last state, retrying", "err", err, "retry_in", backoff)
		case errors.Is(err, ErrRelayFailed):
			f.opts.Logger.Warn("change relay failed: serving the last state, retrying", "err", err, "retry_in", backoff)
		default:
			f.opts.Logger.Warn("writer unreachable: serving the last state, retrying", "err", err, "retry_in", backoff)
		}
		t := time.NewTimer(backoff + rand.N(backoff/2+1))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		backoff = min(2*backoff, maxBackoff)
	}
	return nil
}

// poll fetches and applies one batch of changes. The first poll of a Run
// starts one change early, to compare the replica's own state with the
// writer's record of it (a store tampered with, or restored from elsewhere,
// is found before it applies anything).
func (f *Tail) poll(ctx context.Context) error {
	after := f.store.Published().Seq
	if !f.checked {
		if after == 0 {
			f.checked = true // the empty store: the writer's state at seq 0
			f.verified.Store(true)
		} else {
			after--
		}
	}
	ans, err := f.fetchChanges(ctx, after)
	if err != nil || ans == nil {
		return err
	}
	// Whatever happens to the answer, no hold outlives it.
	defer f.opts.Gate.Release()
	return f.applyChanges(ctx, ans)
}

// fetchChanges asks the source for the changes after seq after (the
// transport half of poll) and records the contact. When the source
// announces a change, it raises the gate's hold (Options.Gate): the caller
// releases it once done with the answer, and fetchChanges itself when it
// returns an error or no answer (nil, nil: the source no longer has the
// record of the first poll's state, so there is nothing to compare).
func (f *Tail) fetchChanges(ctx context.Context, after uint64) (ans *ChangeBatch, err error) {
	// Until the writer has answered once, ask without waiting: a long poll
	// on an idle writer would leave the replica without contact (not
	// ready, its lag unknown) for a whole wait.
	wait := pollWait
	f.mu.Lock()
	if f.mu.contact.IsZero() {
		wait = 0
	}
	f.mu.Unlock()
	req := ChangesRequest{After: after, Wait: wait, Limits: f.opts.BlockLimits, Published: f.store.Published().Seq,
		// A change is on its way: from here to its publish, it goes before
		// new reads (reading it may block as well).
		Coming: func() { f.opts.Gate.Hold() }}
	defer func() {
		if ans == nil {
			f.opts.Gate.Release()
		}
	}()
	ans, err = f.src.Changes(ctx, req)
	if err != nil {
		if !f.checked && errors.Is(err, ErrLogTruncated) {
			// The record of our own state is gone: nothing to compare.
			f.checked = true
			return nil, nil
		}
		return nil, err
	}
	f.m.bytes.Add(float64(ans.Bytes))
	f.mu.Lock()
	if f.mu.caughtUp.IsZero() || f.store.Published().Seq >= f.mu.writerSeq {
		// Behind from now on, if the writer moved: lag counts from the last
		// time the replica had all the writer had.
		f.mu.caughtUp = time.Now()
	}
	contact := time.Now()
	if ans.Relayed {
		contact = ans.Heard
	}
	f.mu.writerSeq, f.mu.writerHeight = ans.WriterSeq, ans.WriterHeight
	if contact.After(f.mu.contact) {
		f.mu.contact = contact
	}
	f.mu.Unlock()
	f.m.writerSeq.Set(float64(ans.WriterSeq))
	return ans, nil
}

// applyChanges applies the changes of ans (the apply half of poll): those
// far below the writer's tip in catch-up runs, the others one at a time. A
// change that did not decode stops it after the ones before it, as a
// divergence.
func (f *Tail) applyChanges(ctx context.Context, ans *ChangeBatch) error {
	changes := ans.Changes
	for len(changes) > 0 {
		n := f.catchUpLen(changes, ans.WriterHeight)
		if n == 0 {
			if err := f.apply(ctx, changes[0]); err != nil {
				return err
			}
			changes = changes[1:]
			continue
		}
		if err := f.applyRun(ctx, changes[:n], ans.WriterHeight); err != nil {
			return err
		}
		changes = changes[n:]
	}
	if ans.DecodeErr != nil {
		return fmt.Errorf("change after %d: %v: %w", f.store.Published().Seq, ans.DecodeErr, ErrDiverged)
	}
	f.mu.Lock()
	if f.store.Published().Seq >= f.mu.writerSeq {
		f.mu.caughtUp = time.Now()
	}
	f.mu.Unlock()
	f.m.observe(f.Status())
	return nil
}

// maxChangesResponse is what a changes answer may hold beyond its one
// largest change (the writer bounds its answers at 4 MiB).
const maxChangesResponse = 8 << 20

// Verify is the replica writer's writer.Options.Verify: it checks a
// committed change against the writer's figures for it before the change is
// published, so a replica never publishes a state its writer did not have.
//
// The follower hands the writer consecutive changes (one, or a run for
// ApplyBlocks); Verify checks st against the one of them at st.Seq.
func (f *Tail) Verify(st disk.State) error {
	p := f.expect.Load()
	if p == nil || len(*p) == 0 || st.Seq < (*p)[0].Seq || st.Seq-(*p)[0].Seq >= uint64(len(*p)) {
		return fmt.Errorf("a change nobody asked for (seq %d): %w", st.Seq, ErrDiverged)
	}
	return matchAfter((*p)[st.Seq-(*p)[0].Seq], st)
}

func matchAfter(c *chain.Change, st disk.State) error {
	if st.Seq != c.Seq || st.Tip != c.After.Tip || st.UtxoCount != c.After.UtxoCount || st.Digest != c.After.Digest {
		return fmt.Errorf("after change %d (%s) the replica is at seq %d, tip %s, %d UTXOs, digest %s; the writer was at tip %s, %d UTXOs, digest %s: %w",
			c.Seq, c.Kind, st.Seq, st.Tip, st.UtxoCount, st.Digest, c.After.Tip, c.After.UtxoCount, c.After.Digest, ErrDiverged)
	}
	return nil
}

// apply applies change c and checks the figures after it.
func (f *Tail) apply(ctx context.Context, c *chain.Change) error {
	before := f.store.Published()
	if c.Seq == before.Seq && !f.checked {
		// The record of the replica's own state (asked for at start): it
		// must be the state the replica has.
		f.checked = true
		if err := matchAfter(c, before); err != nil {
			return fmt.Errorf("%w: %w", ErrNotWritersState, err)
		}
		f.verified.Store(true)
		return nil
	}
	if c.Seq != before.Seq+1 {
		return fmt.Errorf("change %d follows seq %d: %w", c.Seq, before.Seq, ErrDiverged)
	}
	start := time.Now()
	f.opts.Gate.Hold() // opened by the publish (AfterPublish), or by poll
	f.expect.Store(&[]*chain.Change{c})
	defer f.expect.Store(nil)
	var res writer.Result
	var err error
	switch c.Kind {
	case chain.ChangeApply:
		res, err = f.w.Apply(ctx, c.Block)
	case chain.ChangeRollback:
		res, err = f.w.Rollback(ctx, c.Target.Height)
	case chain.ChangeFreeze:
		res, err = f.w.Freeze(ctx, *c.Freeze)
	case chain.ChangeUnfreeze:
		res, err = f.w.Unfreeze(ctx, *c.Freeze)
	case chain.ChangeWallet:
		res, err = f.w.ApplyWallet(ctx, c.Wallet)
	default:
		return fmt.Errorf("change %d of kind %s: this replica cannot apply it: %w", c.Seq, c.Kind, ErrDiverged)
	}
	if err != nil {
		if errors.Is(err, writer.ErrClosed) || ctx.Err() != nil {
			return err
		}
		return fmt.Errorf("change %d (%s): %v: %w", c.Seq, c.Kind, err, ErrDiverged)
	}
	st := f.store.Published()
	if !res.Applied {
		return fmt.Errorf("change %d (%s) changed nothing on the replica: %w", c.Seq, c.Kind, ErrDiverged)
	}
	if err := matchAfter(c, st); err != nil {
		return err
	}
	f.verified.Store(true)
	f.m.applied.Set(float64(st.Seq))
	f.m.applySeconds.Observe(time.Since(start).Seconds())
	return nil
}

// catchUpLen returns how many of changes, from the first, go to ApplyBlocks
// as one run (0: the first goes alone, through apply): block changes whose
// seqs follow the published state's, more than LiveMargin below the
// writer's tip height; a run of fewer than two goes alone.
func (f *Tail) catchUpLen(changes []*chain.Change, writerHeight uint64) int {
	if !f.checked {
		return 0 // the record of the replica's own state comes first
	}
	next := f.store.Published().Seq + 1
	n := 0
	for _, c := range changes {
		if c.Kind != chain.ChangeApply || c.Seq != next+uint64(n) || c.Block == nil ||
			c.Block.Height+f.opts.LiveMargin > writerHeight {
			break
		}
		n++
	}
	if n < 2 {
		return 0
	}
	return n
}

// applyRun applies run, consecutive block changes from catchUpLen, through
// the writer's ApplyBlocks (catch-up windows) towards the writer's tip
// height target, and checks the figures after them: each was verified
// before it was published (Verify), the last is checked again here, as
// apply does. The apply priority holds new reads from the call to the first
// publish.
func (f *Tail) applyRun(ctx context.Context, run []*chain.Change, target uint64) error {
	start := time.Now()
	blocks := make([]*chain.Block, len(run))
	for i, c := range run {
		blocks[i] = c.Block
	}
	f.opts.Gate.Hold() // opened by the first publish (AfterPublish), or by poll
	f.expect.Store(&run)
	res, err := f.w.ApplyBlocks(ctx, blocks, target)
	f.expect.Store(nil)
	st := f.store.Published()
	if res.Done > 0 && st.Seq >= run[0].Seq {
		// Changes up to st.Seq were verified and published.
		f.verified.Store(true)
		f.m.applied.Set(float64(st.Seq))
	}
	if err != nil {
		if errors.Is(err, writer.ErrClosed) || ctx.Err() != nil {
			return err
		}
		c := run[min(res.Done, len(run)-1)]
		return fmt.Errorf("change %d (%s): %v: %w", c.Seq, c.Kind, err, ErrDiverged)
	}
	if res.Done != len(run) || res.Skipped > 0 {
		return fmt.Errorf("changes %d..%d: the replica applied %d of %d blocks: %w", run[0].Seq, run[len(run)-1].Seq, res.Applied, len(run), ErrDiverged)
	}
	if err := matchAfter(run[len(run)-1], st); err != nil {
		return err
	}
	// One observation per change: the count is the changes applied, the
	// sum the time they took.
	per := time.Since(start).Seconds() / float64(len(run))
	for range run {
		f.m.applySeconds.Observe(per)
	}
	if res.Windows > 0 {
		f.m.catchUpWindows.Add(float64(res.Windows))
		f.m.catchUpBlocks.Add(float64(res.WindowBlocks))
	}
	return nil
}

// Bootstrap downloads a checkpoint of the writer's published state and
// installs it at dir (see Install: verified before it is renamed into
// place, bounded by maxBytes, the manifest's file list and the free space).
// It also refuses, before writing anything, an announced size
// (X-Checkpoint-Bytes) the file system has no room for, and aborts a
// download that receives nothing for opts.CheckpointIdleTimeout
// (ErrStalled). A failure is counted in opts.Metrics by its reason, and
// leaves nothing behind. It returns the installed state's manifest.
func Bootstrap(ctx context.Context, opts TailOptions, dir string, maxBytes int64, storeOpts disk.Options) (Manifest, error) {
	opts = opts.EnsureDefaults()
	m, err := bootstrap(ctx, opts, dir, maxBytes, storeOpts)
	if err != nil && ctx.Err() == nil {
		opts.Metrics.bootstrapFailures.WithLabelValues(failureReason(err)).Inc()
	}
	return m, err
}

// ErrStalled marks a checkpoint download that received nothing for
// TailOptions.CheckpointIdleTimeout.
var ErrStalled = errors.New("replication: checkpoint download stalled")

func bootstrap(ctx context.Context, opts TailOptions, dir string, maxBytes int64, storeOpts disk.Options) (Manifest, error) {
	src, err := opts.source()
	if err != nil {
		return Manifest{}, err
	}
	reqCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	dl, err := src.Checkpoint(reqCtx)
	if err != nil {
		return Manifest{}, err
	}
	defer dl.Body.Close()
	want := dl.Want
	body := newDownload(dl.Body, opts, dl.Bytes, func() { cancel(ErrStalled) })
	defer body.stop()
	stop := func() bool { return ctx.Err() != nil }
	return install(body, dir, installOptions{want: &want, maxBytes: maxBytes, announced: dl.Bytes, store: storeOpts, stop: stop,
		space: opts.Space, keepFree: opts.KeepFree, extracted: body.stop})
}

// failureReason is the metric label of a failed bootstrap.
func failureReason(err error) string {
	switch {
	case errors.Is(err, ErrStalled):
		return "stalled"
	case errors.Is(err, ErrNoRoom):
		return "insufficient_storage"
	case errors.Is(err, ErrMismatch):
		return "mismatch"
	case errors.Is(err, ErrBadArchive):
		return "bad_archive"
	}
	return "error"
}

// download is a checkpoint's response body being read: it aborts the
// request when no byte arrives for the idle timeout, and logs progress.
// Read is called from one goroutine.
type download struct {
	r         io.Reader
	idle      time.Duration
	timer     *time.Timer // fires abort; reset by every byte
	stalled   atomic.Bool
	log       *slog.Logger
	every     time.Duration
	announced int64
	n         int64 // bytes read
	start     time.Time
	lastLog   time.Time
	lastN     int64
}

func newDownload(r io.Reader, opts TailOptions, announced int64, abort func()) *download {
	now := time.Now()
	d := &download{r: r, idle: opts.CheckpointIdleTimeout, log: opts.Logger, every: opts.CheckpointProgressInterval,
		announced: announced, start: now, lastLog: now}
	d.timer = time.AfterFunc(d.idle, func() {
		d.stalled.Store(true)
		abort()
	})
	return d
}

func (d *download) Read(p []byte) (int, error) {
	n, err := d.r.Read(p)
	if n > 0 && !d.stalled.Load() {
		d.timer.Reset(d.idle)
		d.n += int64(n)
		if now := time.Now(); now.Sub(d.lastLog) >= d.every {
			rate := float64(d.n-d.lastN) / now.Sub(d.lastLog).Seconds() / (1 << 20)
			args := []any{"received_bytes", d.n, "mib_per_second", fmt.Sprintf("%.1f", rate), "elapsed", now.Sub(d.start).Round(time.Second)}
			if d.announced >= 0 {
				args = append(args, "store_bytes", d.announced)
			}
			d.log.Info("downloading the writer's checkpoint", args...)
			d.lastLog, d.lastN = now, d.n
		}
	}
	if err != nil && !errors.Is(err, io.EOF) && d.stalled.Load() {
		err = fmt.Errorf("no byte from the writer for %s, after %d bytes: %w", d.idle, d.n, ErrStalled)
	}
	return n, err
}

// stop ends the idle timer: what follows the download (the store's
// verification, which may take minutes) has no byte to wait for.
func (d *download) stop() { d.timer.Stop() }

func manifestFromHeaders(h interface{ Get(string) string }) (Manifest, error) {
	var m Manifest
	var err error
	bad := func(name string) (Manifest, error) {
		return Manifest{}, fmt.Errorf("checkpoint header %s %q: %w", name, h.Get(name), ErrBadArchive)
	}
	if m.Seq, err = strconv.ParseUint(h.Get("X-Commit-Seq"), 10, 64); err != nil {
		return bad("X-Commit-Seq")
	}
	if m.UtxoCount, err = strconv.ParseUint(h.Get("X-Utxo-Count"), 10, 64); err != nil {
		return bad("X-Utxo-Count")
	}
	if m.Digest, err = chain.ParseDigest(h.Get("X-Utxo-Digest")); err != nil {
		return bad("X-Utxo-Digest")
	}
	if hs := h.Get("X-Tip-Hash"); hs != "" {
		height, err := strconv.ParseUint(h.Get("X-Tip-Height"), 10, 64)
		if err != nil {
			return bad("X-Tip-Height")
		}
		if _, err := chain.ParseHash(hs); err != nil {
			return bad("X-Tip-Hash")
		}
		m.Tip = &tipJSON{Height: height, Hash: hs}
	}
	return m, nil
}

// Headers of a changes answer that announce the writer's block limits
// (chain.Limits.MaxBlockBytes and its block memory limit, in bytes).
const (
	HeaderMaxBlockBytes  = "X-Max-Block-Bytes"
	HeaderMaxBlockMemory = "X-Max-Block-Memory"
)

// WriterLimitsHeaders sets, on a changes answer, the headers that announce
// the writer's block limits lim to its replicas.
func WriterLimitsHeaders(h interface{ Set(name, value string) }, lim chain.Limits) {
	lim = lim.EnsureDefaults()
	h.Set(HeaderMaxBlockBytes, strconv.Itoa(lim.MaxBlockBytes))
	h.Set(HeaderMaxBlockMemory, strconv.Itoa(lim.BlockMemoryLimit()))
}

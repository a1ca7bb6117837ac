package follow

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/utxo-cache/utxo-cache/bitcoin"
	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/writer"
)

// Errors of this package; match them with errors.Is.
var (
	// ErrForkTooDeep: the node's chain forks from the store's deeper than
	// the follower may (or the store can) roll back.
	ErrForkTooDeep = errors.New("follow: fork deeper than the rollback window")
	// ErrWrongNetwork: the node serves another network than Options.Network.
	ErrWrongNetwork = errors.New("follow: node is on another network")
	// ErrRunning: Run was called while another Run of the same Follower is
	// in progress.
	ErrRunning = errors.New("follow: already running")
)

// Writer is what the follower needs of the single writer; *writer.Writer
// has it.
type Writer interface {
	Apply(ctx context.Context, b *chain.Block) (writer.Result, error)
	// ApplyBlocks applies consecutive blocks on the way to height target,
	// far ones in catch-up windows (writer.Writer.ApplyBlocks).
	ApplyBlocks(ctx context.Context, blocks []*chain.Block, target uint64) (writer.BatchResult, error)
	Rollback(ctx context.Context, height uint64) (writer.Result, error)
	Tip() chain.Tip
}

// Hashes answers the hash of the store's block at a height on its current
// chain (found false when it has none); *disk.Store has it.
type Hashes interface {
	HashAt(height uint64) (h chain.Hash, found bool, err error)
}

// Catch-up batch defaults (Options.BatchBlocks, Options.BatchBytes).
const (
	DefaultBatchBlocks       = 1000
	DefaultBatchBytes  int64 = 32 << 20
)

// Options configure a Follower. Zero durations take their defaults.
type Options struct {
	// URL is the base of the node's REST interface, such as
	// http://127.0.0.1:8332 (the node runs with -rest). Required.
	URL string
	// Network is the node's network; a node that reports another one is
	// refused (KindConfig). Default bitcoin.Mainnet.
	Network bitcoin.Network
	// StartHeight is the height of the first block to apply when the store
	// is empty. Default 0 (the genesis block). A later start needs a writer
	// that skips unknown inputs.
	StartHeight uint64
	// MaxReorgDepth bounds how far back the follower looks for a fork
	// point, in blocks: set it to the store's rollback window. Default 4320
	// (the contract's default window).
	MaxReorgDepth uint64
	// PollInterval is the pause between polls once caught up. Default 2s.
	PollInterval time.Duration
	// BackoffMin and BackoffMax bound the pause after a failed poll: it
	// starts at BackoffMin and doubles up to BackoffMax. Defaults 500ms, 30s.
	BackoffMin, BackoffMax time.Duration
	// HTTPTimeout bounds one request to the node, body included. Default 30s.
	HTTPTimeout time.Duration
	// BatchBlocks and BatchBytes bound the blocks the follower fetches
	// before it hands them to the writer in one ApplyBlocks, which applies
	// those far below the node's tip in catch-up windows: how many blocks,
	// and how many bytes of them as the node serves them (the fetch stops
	// once they reach BatchBytes, so a batch exceeds it by at most its last
	// block). Defaults 1000 and 32 MiB; BatchBlocks 1 applies block by
	// block.
	BatchBlocks int
	BatchBytes  int64
	// Writer applies blocks and rollbacks. Required.
	Writer Writer
	// Hashes gives the store's block hashes by height. Required.
	Hashes Hashes
	// Mempool, when set, mirrors the node's mempool into the store's
	// pending set after each poll that leaves the store at the node's best
	// block (see mirror in mempool.go). Nil: confirmed state only.
	Mempool Pending
	// Metrics receives the follower's figures. Default: none.
	Metrics prometheus.Registerer
	// Logger. Default: discard.
	Logger *slog.Logger
}

// EnsureDefaults returns o with every unset field set to its default.
func (o Options) EnsureDefaults() Options {
	if o.Network == "" {
		o.Network = bitcoin.Mainnet
	}
	if o.MaxReorgDepth == 0 {
		o.MaxReorgDepth = 4320
	}
	if o.PollInterval <= 0 {
		o.PollInterval = 2 * time.Second
	}
	if o.BackoffMin <= 0 {
		o.BackoffMin = 500 * time.Millisecond
	}
	if o.BackoffMax <= 0 {
		o.BackoffMax = 30 * time.Second
	}
	if o.HTTPTimeout <= 0 {
		o.HTTPTimeout = 30 * time.Second
	}
	if o.BatchBlocks <= 0 {
		o.BatchBlocks = DefaultBatchBlocks
	}
	if o.BatchBytes <= 0 {
		o.BatchBytes = DefaultBatchBytes
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Validate reports a setting the follower cannot work with.
func (o Options) Validate() error {
	u, err := url.Parse(o.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("follow: node URL %q: want http://host:port", o.URL)
	}
	if _, err := bitcoin.ParseNetwork(o.Network.String()); err != nil {
		return fmt.Errorf("follow: %w", err)
	}
	if o.Writer == nil || o.Hashes == nil {
		return errors.New("follow: Options.Writer and Options.Hashes are required")
	}
	if o.BackoffMax < o.BackoffMin {
		return fmt.Errorf("follow: backoff max %s below min %s", o.BackoffMax, o.BackoffMin)
	}
	return nil
}

// Follower keeps a store in step with one node (see the package doc). Run
// it once at a time; its other methods are safe for concurrent use.
//
// Its only position is the store's tip, read from Writer.Tip before every
// step: the follower caches nothing about the store, so another producer
// (an operator's rollback, a POST /v1/blocks) moving the tip meanwhile
// costs at most one refused Apply and a retry.
type Follower struct {
	opts      Options
	node      *node
	transport *http.Transport
	adapter   *bitcoin.Adapter
	m         *metrics
	mirror    *mirror // with Options.Mempool
	running   atomic.Bool
	setupErr  error // from New, reported by Run
}

// New returns a follower for opts; Run starts it. Invalid options are
// reported by Run.
func New(opts Options) *Follower {
	opts = opts.EnsureDefaults()
	f := &Follower{opts: opts, m: newMetrics(opts.Metrics)}
	if err := opts.Validate(); err != nil {
		f.setupErr = err
		return f
	}
	adapter, err := bitcoin.NewAdapter(bitcoin.Options{Network: opts.Network})
	if err != nil {
		f.setupErr = fmt.Errorf("follow: %w", err)
		return f
	}
	f.adapter = adapter
	// A transport of its own, so that Run can close its idle connections
	// when it returns and leave no goroutine behind.
	f.transport = http.DefaultTransport.(*http.Transport).Clone()
	f.node = &node{
		base:   strings.TrimRight(opts.URL, "/"),
		client: &http.Client{Transport: f.transport, Timeout: opts.HTTPTimeout},
	}
	if opts.Mempool != nil {
		f.mirror = newMirror(f.node, f.adapter, opts.Mempool, opts.Logger, f.m)
	}
	return f
}

// Run follows the node until ctx is cancelled, then returns nil; it returns
// an error only for invalid options or a concurrent Run. A poll in progress
// when ctx is cancelled ends at once; a block the writer has already taken
// is committed or refused in full (the writer answers every request it
// took).
func (f *Follower) Run(ctx context.Context) error {
	if f.setupErr != nil {
		return f.setupErr
	}
	if !f.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer f.running.Store(false)
	defer f.transport.CloseIdleConnections()

	log := f.opts.Logger
	log.Info("following a Bitcoin node", "url", f.opts.URL, "network", f.opts.Network, "tip", f.opts.Writer.Tip())
	backoff := f.opts.BackoffMin
	failing := false
	for {
		err := f.poll(ctx)
		if ctx.Err() != nil {
			log.Info("follower stopped", "tip", f.opts.Writer.Tip())
			return nil
		}
		wait := f.opts.PollInterval
		if err != nil {
			kind := errorKind(err)
			f.m.errors.WithLabelValues(kind).Inc()
			level := slog.LevelWarn
			if kind == KindRejected || kind == KindForkTooDeep || kind == KindConfig {
				level = slog.LevelError // needs an operator
			}
			log.Log(ctx, level, "follow poll failed; retrying", "kind", kind, "err", err, "retry_in", backoff, "tip", f.opts.Writer.Tip())
			wait = jitter(backoff)
			backoff = min(2*backoff, f.opts.BackoffMax)
			failing = true
		} else {
			if failing {
				log.Info("follow recovered", "tip", f.opts.Writer.Tip())
			}
			backoff, failing = f.opts.BackoffMin, false
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			log.Info("follower stopped", "tip", f.opts.Writer.Tip())
			return nil
		case <-t.C:
		}
	}
}

// jitter spreads d by ±20%, so that followers of one node do not retry in
// lockstep.
func jitter(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}

// poll brings the store to the node's best block, or fails. It applies at
// most the blocks up to the height the node reported at its start; the next
// poll picks up the rest.
func (f *Follower) poll(ctx context.Context) error {
	info, best, err := f.node.chainInfo(ctx)
	if err != nil {
		return err
	}
	if n, err := bitcoin.ParseNetwork(info.Chain); err != nil || n != f.opts.Network {
		return &kindError{kind: KindConfig, err: fmt.Errorf("%w: it serves chain %q, the follower wants %s", ErrWrongNetwork, info.Chain, f.opts.Network)}
	}
	f.m.nodeHeight.Set(float64(info.Blocks))
	applied := 0
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		tip := f.opts.Writer.Tip()
		f.observeTip(tip, info.Blocks)
		var next uint64
		switch {
		case tip.Empty:
			next = f.opts.StartHeight
			if next > info.Blocks {
				return f.caughtUp(tip, applied)
			}
		case tip.Height >= info.Blocks:
			// Caught up, unless our block at the node's height is not the
			// node's: then the node reorganised (or we are ahead of it on
			// another branch).
			at := info.Blocks
			ours, err := f.storeHash(at, tip)
			if err != nil {
				return err
			}
			theirs := best
			if ours != theirs {
				// bestblockhash may be stale by now: ask for the height.
				if theirs, err = f.node.hashAt(ctx, at); err != nil {
					return err
				}
			}
			if ours == theirs {
				if f.mirror != nil && at == tip.Height {
					if err := f.mirror.sync(ctx, tip.Hash); err != nil {
						return err
					}
				}
				return f.caughtUp(tip, applied)
			}
			if err := f.reorg(ctx, tip, at); err != nil {
				return err
			}
			continue
		default:
			next = tip.Height + 1
		}

		b, size, err := f.fetch(ctx, next)
		if err != nil {
			return err
		}
		if !tip.Empty && b.PrevHash != tip.Hash {
			if err := f.reorg(ctx, tip, tip.Height); err != nil {
				return err
			}
			continue
		}
		n, err := f.applyBatch(ctx, f.fetchBatch(ctx, b, size, info.Blocks), info.Blocks)
		applied += n
		if err != nil {
			return err
		}
		// Publish the new tip and lag now: a cancellation before the next
		// iteration must not leave the metrics one block behind the store.
		f.observeTip(f.opts.Writer.Tip(), info.Blocks)
	}
}

func (f *Follower) observeTip(tip chain.Tip, nodeHeight uint64) {
	var h uint64
	if !tip.Empty {
		h = tip.Height
	}
	f.m.tipHeight.Set(float64(h))
	lag := uint64(0)
	switch {
	case tip.Empty && nodeHeight+1 > f.opts.StartHeight:
		lag = nodeHeight + 1 - f.opts.StartHeight
	case !tip.Empty && nodeHeight > h:
		lag = nodeHeight - h
	}
	f.m.lag.Set(float64(lag))
}

func (f *Follower) caughtUp(tip chain.Tip, applied int) error {
	f.m.lastSuccess.SetToCurrentTime()
	if applied > 0 {
		f.opts.Logger.Info("caught up with the node", "tip", tip, "applied", applied)
	}
	return nil
}

// fetch downloads and converts the node's block at height, and returns its
// size as the node served it.
func (f *Follower) fetch(ctx context.Context, height uint64) (*chain.Block, int, error) {
	h, err := f.node.hashAt(ctx, height)
	if err != nil {
		return nil, 0, err
	}
	raw, err := f.node.block(ctx, h)
	if err != nil {
		return nil, 0, err
	}
	blk, err := bitcoin.DecodeBlock(raw)
	if err != nil {
		return nil, 0, &kindError{kind: KindDecode, err: fmt.Errorf("block %s at height %d: %w", h, height, err)}
	}
	b, err := f.adapter.Convert(blk, height)
	if err != nil {
		return nil, 0, &kindError{kind: KindDecode, err: err}
	}
	if b.Hash != h {
		return nil, 0, &kindError{kind: KindDecode, err: fmt.Errorf("asked for block %s at height %d, got %s", h, height, b.Hash)}
	}
	return b, len(raw), nil
}

// fetchBatch returns first (of size bytes) followed by the node's next
// blocks, up to its best height nodeHeight and within BatchBlocks and
// BatchBytes. It stops early, without an error, at a block whose parent is
// not the one before it (the node switched chains while we fetched: the
// next step finds the fork from the store's tip) and when ctx is done.
// A fetch failure after the first block also ends the batch early: what was
// fetched is applied and the next step fetches the block again.
func (f *Follower) fetchBatch(ctx context.Context, first *chain.Block, size int, nodeHeight uint64) []*chain.Block {
	batch := []*chain.Block{first}
	bytes := int64(size)
	for len(batch) < f.opts.BatchBlocks && bytes < f.opts.BatchBytes && ctx.Err() == nil {
		prev := batch[len(batch)-1]
		if prev.Height >= nodeHeight {
			break
		}
		b, size, err := f.fetch(ctx, prev.Height+1)
		if err != nil || b.PrevHash != prev.Hash {
			break
		}
		batch = append(batch, b)
		bytes += int64(size)
	}
	return batch
}

// applyBatch hands blocks to the writer in one ApplyBlocks heading to the
// node's height, and returns how many it applied. A batch of one block goes
// through Apply.
func (f *Follower) applyBatch(ctx context.Context, blocks []*chain.Block, nodeHeight uint64) (int, error) {
	if len(blocks) == 1 {
		applied, err := f.apply(ctx, blocks[0])
		if applied {
			return 1, err
		}
		return 0, err
	}
	res, err := f.opts.Writer.ApplyBlocks(ctx, blocks, nodeHeight)
	if res.Applied > 0 {
		f.m.applied.Add(float64(res.Applied))
		f.m.lastSuccess.SetToCurrentTime()
	}
	if res.Windows > 0 {
		f.m.windows.Add(float64(res.Windows))
	}
	if res.Windows > 0 { // progress of a long catch-up; blocks near the tip log at Debug in the writer
		f.opts.Logger.Info("catch-up: applied blocks", "blocks", res.Done, "in_windows", res.WindowBlocks,
			"windows", res.Windows, "tip", res.Tip, "node_height", nodeHeight)
	}
	if err != nil {
		return res.Applied, applyError(blocks[min(res.Done, len(blocks)-1)], err)
	}
	return res.Applied, nil
}

// apply hands b to the writer and reports whether it applied it (false:
// the store already had it).
func (f *Follower) apply(ctx context.Context, b *chain.Block) (bool, error) {
	res, err := f.opts.Writer.Apply(ctx, b)
	if err != nil {
		return false, applyError(b, err)
	}
	if res.Applied {
		f.m.applied.Inc()
		f.m.lastSuccess.SetToCurrentTime()
		f.opts.Logger.Debug("applied block", "height", b.Height, "hash", b.Hash, "txs", len(b.Txs))
	}
	return res.Applied, nil
}

// applyError classifies the writer's refusal of b.
func applyError(b *chain.Block, err error) error {
	switch {
	case errors.Is(err, chain.ErrUnknownInput), errors.Is(err, chain.ErrDoubleSpend),
		errors.Is(err, chain.ErrDuplicateOutpoint), errors.Is(err, chain.ErrInvalidBlock):
		return &kindError{kind: KindRejected, err: fmt.Errorf("block %s at height %d rejected: %w", b.Hash, b.Height, err)}
	default:
		// ErrNotNextBlock too: someone else moved the tip; the next poll
		// starts from wherever it is now.
		return &kindError{kind: KindWriter, err: fmt.Errorf("apply block %s at height %d: %w", b.Hash, b.Height, err)}
	}
}

// storeHash returns the store's hash at height, tip.Hash at the tip.
func (f *Follower) storeHash(height uint64, tip chain.Tip) (chain.Hash, error) {
	if height == tip.Height {
		return tip.Hash, nil
	}
	h, found, err := f.opts.Hashes.HashAt(height)
	if err != nil {
		return chain.Hash{}, &kindError{kind: KindWriter, err: fmt.Errorf("read the store's hash at %d: %w", height, err)}
	}
	if !found {
		return chain.Hash{}, &kindError{kind: KindForkTooDeep, err: fmt.Errorf("%w: the store has no block at height %d", ErrForkTooDeep, height)}
	}
	return h, nil
}

// reorg finds the highest height at or below from where the store and the
// node have the same block, and rolls the store back to it.
func (f *Follower) reorg(ctx context.Context, tip chain.Tip, from uint64) error {
	floor := uint64(0)
	if tip.Height > f.opts.MaxReorgDepth {
		floor = tip.Height - f.opts.MaxReorgDepth
	}
	fork := from
	for {
		ours, err := f.storeHash(fork, tip)
		if err != nil {
			return err
		}
		theirs, err := f.node.hashAt(ctx, fork)
		if err != nil {
			return err
		}
		if ours == theirs {
			break
		}
		if fork == floor {
			return &kindError{kind: KindForkTooDeep, err: fmt.Errorf(
				"%w: the store's tip %s and the node differ at every height down to %d (max reorg depth %d)",
				ErrForkTooDeep, tip, floor, f.opts.MaxReorgDepth)}
		}
		fork--
	}
	if fork == from {
		// The node disagreed with us at from a moment ago and agrees now:
		// it changed its chain between two answers (or contradicts
		// itself). Retry later rather than act on either answer.
		return &kindError{kind: KindDecode, err: fmt.Errorf(
			"the node's answers changed: it now has our block at height %d", from)}
	}
	f.opts.Logger.Warn("chain reorganisation: rolling back to the fork point",
		"tip", tip, "fork_height", fork, "depth", tip.Height-fork)
	_, err := f.opts.Writer.Rollback(ctx, fork)
	if err != nil {
		if errors.Is(err, chain.ErrRollbackTooDeep) {
			return &kindError{kind: KindForkTooDeep, err: fmt.Errorf("%w: roll back to %d: %w", ErrForkTooDeep, fork, err)}
		}
		return &kindError{kind: KindWriter, err: fmt.Errorf("roll back to fork point %d: %w", fork, err)}
	}
	f.m.reorgs.Inc()
	f.m.rolledBack.Add(float64(tip.Height - fork))
	return nil
}

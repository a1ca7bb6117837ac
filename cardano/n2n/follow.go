package n2n

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"slices"
	"sync/atomic"
	"time"

	ouroboros "github.com/blinklabs-io/gouroboros"
	"github.com/blinklabs-io/gouroboros/ledger"
	"github.com/blinklabs-io/gouroboros/muxer"
	"github.com/blinklabs-io/gouroboros/protocol"
	"github.com/blinklabs-io/gouroboros/protocol/blockfetch"
	"github.com/blinklabs-io/gouroboros/protocol/chainsync"
	pcommon "github.com/blinklabs-io/gouroboros/protocol/common"

	"github.com/utxo-cache/utxo-cache/cardano"
	"github.com/utxo-cache/utxo-cache/chain"
)

// Errors of this package; match them with errors.Is.
var (
	// ErrRollbackTooDeep: the node's chain leaves the store's further back
	// than the store can roll back exactly (its rollback window, or below
	// its first block). The follower applies nothing until it is resolved.
	ErrRollbackTooDeep = errors.New("n2n: node's chain leaves the store's deeper than its rollback window")
	// ErrRunning: Run was called while another Run of the same Follower is
	// in progress.
	ErrRunning = errors.New("n2n: already running")
)

// reasonError is an error with its errors_total reason.
type reasonError struct {
	reason string
	err    error
}

func (e *reasonError) Error() string { return e.err.Error() }
func (e *reasonError) Unwrap() error { return e.err }

func withReason(reason string, format string, args ...any) error {
	return &reasonError{reason: reason, err: fmt.Errorf(format, args...)}
}

// reasonOf returns the errors_total reason of a session's error.
func reasonOf(err error) string {
	var re *reasonError
	if errors.As(err, &re) {
		return re.reason
	}
	var closed *muxer.ConnectionClosedError
	var ne net.Error
	if errors.As(err, &closed) || errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
		return ReasonNetwork
	}
	return ReasonProtocol
}

// Follower keeps a store in step with one Cardano node (see the package
// doc). Run it once at a time; Ready is safe for concurrent use.
type Follower struct {
	opts     Options
	adapter  *cardano.Adapter
	m        *metrics
	running  atomic.Bool
	sessions atomic.Uint64
	halt     atomic.Pointer[error] // why the follower applies nothing; nil: it does
	setupErr error
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
	a, err := cardano.NewAdapter(cardano.Options{})
	if err != nil {
		f.setupErr = fmt.Errorf("n2n: %w", err)
		return f
	}
	f.adapter = a
	return f
}

// Ready reports nil while the follower can follow the node, and why not
// while it is halted: the node's chain left the store's deeper than the
// store can roll back (ErrRollbackTooDeep). A node that cannot be reached
// is not a halt: the store still serves its last state, and the follower
// reconnects.
func (f *Follower) Ready() error {
	if p := f.halt.Load(); p != nil {
		return *p
	}
	return nil
}

// Run follows the node until ctx is cancelled, then returns nil; it returns
// an error only for invalid options or a concurrent Run.
func (f *Follower) Run(ctx context.Context) error {
	if f.setupErr != nil {
		return f.setupErr
	}
	if !f.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer f.running.Store(false)
	log := f.opts.Logger
	log.Info("following a Cardano node", "address", f.opts.Address, "magic", f.opts.Magic, "tip", f.opts.Writer.Tip())
	backoff := f.opts.BackoffMin
	for {
		if f.sessions.Add(1) > 1 {
			f.m.reconnects.Inc()
		}
		progress, err := f.session(ctx)
		if ctx.Err() != nil {
			log.Info("cardano follower stopped", "tip", f.opts.Writer.Tip())
			return nil
		}
		if progress {
			backoff = f.opts.BackoffMin
		}
		reason := reasonOf(err)
		f.m.errors.WithLabelValues(reason).Inc()
		wait := jitter(backoff)
		backoff = min(2*backoff, f.opts.BackoffMax)
		if reason == ReasonRollbackTooDeep {
			f.halt.Store(&err)
			f.m.halted.Set(1)
			wait = jitter(f.opts.BackoffMax)
			log.Error("cardano follower halted: the node's chain cannot be followed exactly; applying nothing until an operator intervenes or the node returns to the store's chain",
				"err", err, "tip", f.opts.Writer.Tip(), "retry_in", wait)
		} else {
			level := slog.LevelWarn
			if reason == ReasonRejected || reason == ReasonNotLinked {
				level = slog.LevelError
			}
			log.Log(ctx, level, "cardano follower: session ended; reconnecting", "reason", reason, "err", err, "retry_in", wait, "tip", f.opts.Writer.Tip())
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			log.Info("cardano follower stopped", "tip", f.opts.Writer.Tip())
			return nil
		case <-t.C:
		}
	}
}

// jitter spreads d by ±20%.
func jitter(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}

// resume clears a halt once the node is followed again.
func (f *Follower) resume() {
	if f.halt.Swap(nil) != nil {
		f.m.halted.Set(0)
		f.opts.Logger.Info("cardano follower resumed", "tip", f.opts.Writer.Tip())
	}
}

// event is what the chain-sync callbacks hand the session's loop: a header
// announced (roll forward) or a roll backward to point.
type event struct {
	back   bool
	era    cardano.Era
	point  Point
	height uint64 // roll forward: the header's block number
	tip    pcommon.Tip
}

type fetched struct {
	era uint
	raw []byte
}

// session is one connection to the node. Its callbacks run on the
// library's goroutines and only hand events to the loop (session.run),
// which alone touches the store.
type session struct {
	f        *Follower
	conn     *ouroboros.Connection
	errc     chan error
	events   chan event
	blocks   chan fetched
	batchEnd chan struct{}
	done     chan struct{} // closed when the session ends: callbacks return
	linker   *cardano.Linker
	nodeTip  pcommon.Tip
	progress bool
	// boundaries are the Byron boundary blocks this session linked through
	// (a few, the newest): they are never stored, so a roll backward to one
	// is a roll backward to its parent, with the boundary block linked again.
	boundaries map[chain.Hash]*cardano.Block
}

// maxBoundaries bounds session.boundaries (one boundary block per Byron
// epoch: a roll backward never reaches past the last few).
const maxBoundaries = 4

// noteBoundary remembers a boundary block the session linked through.
func (s *session) noteBoundary(b *cardano.Block) {
	if s.boundaries == nil || len(s.boundaries) >= maxBoundaries {
		s.boundaries = map[chain.Hash]*cardano.Block{}
	}
	s.boundaries[b.Chain.Hash] = b
}

var errSessionOver = errors.New("n2n: session over")

func (s *session) rollForward(_ chainsync.CallbackContext, blockType uint, header []byte, tip chainsync.Tip) error {
	ev, err := decodeHeader(blockType, header)
	if err != nil {
		return err
	}
	ev.tip = tip
	select {
	case s.events <- ev:
		return nil
	case <-s.done:
		return errSessionOver
	}
}

func (s *session) rollBackward(_ chainsync.CallbackContext, p pcommon.Point, tip chainsync.Tip) error {
	ev := event{back: true, point: Point{Slot: p.Slot}, tip: tip}
	if len(p.Hash) != 0 && len(p.Hash) != chain.HashSize {
		return fmt.Errorf("n2n: roll backward to a point with a %d-byte hash", len(p.Hash))
	}
	copy(ev.point.Hash[:], p.Hash)
	select {
	case s.events <- ev:
		return nil
	case <-s.done:
		return errSessionOver
	}
}

func (s *session) block(_ blockfetch.CallbackContext, era uint, raw []byte) error {
	select {
	case s.blocks <- fetched{era: era, raw: slices.Clone(raw)}:
		return nil
	case <-s.done:
		return errSessionOver
	}
}

func (s *session) batchDone(blockfetch.CallbackContext) error {
	select {
	case s.batchEnd <- struct{}{}:
		return nil
	case <-s.done:
		return errSessionOver
	}
}

// decodeHeader reads the point and block number of an announced header.
// Bad bytes give an error, never a panic.
func decodeHeader(blockType uint, header []byte) (ev event, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("n2n: header of block type %d: decoder panicked: %v", blockType, r)
		}
	}()
	if blockType > uint(cardano.EraConway) {
		return ev, fmt.Errorf("n2n: header of unknown block type %d", blockType)
	}
	h, err := ledger.NewBlockHeaderFromCbor(blockType, header)
	if err != nil {
		return ev, fmt.Errorf("n2n: header of block type %d: %w", blockType, err)
	}
	return event{era: cardano.Era(blockType), point: Point{Slot: h.SlotNumber(), Hash: chain.Hash(h.Hash())}, height: h.BlockNumber()}, nil
}

// session connects, intersects, and follows until the connection fails or
// ctx ends; it reports whether it changed the store.
func (f *Follower) session(ctx context.Context) (bool, error) {
	s := &session{
		f:        f,
		errc:     make(chan error, 10),
		events:   make(chan event),
		blocks:   make(chan fetched),
		batchEnd: make(chan struct{}),
		done:     make(chan struct{}),
	}
	dctx, cancel := context.WithTimeout(ctx, f.opts.DialTimeout)
	raw, err := f.opts.Dialer.DialContext(dctx, "tcp", f.opts.Address)
	cancel()
	if err != nil {
		return false, &reasonError{reason: ReasonNetwork, err: fmt.Errorf("n2n: connect to %s: %w", f.opts.Address, err)}
	}
	// Cancelling ctx closes the socket: every wait below then ends.
	stop := context.AfterFunc(ctx, func() { _ = raw.Close() })
	defer stop()
	_ = raw.SetDeadline(time.Now().Add(f.opts.DialTimeout)) // the handshake
	bf, err := blockfetch.NewConfig(blockfetch.WithBlockRawFunc(s.block), blockfetch.WithBatchDoneFunc(s.batchDone),
		blockfetch.WithBlockTimeout(f.opts.FetchTimeout), blockfetch.WithBatchStartTimeout(f.opts.FetchTimeout))
	if err != nil {
		_ = raw.Close()
		return false, fmt.Errorf("n2n: block-fetch config: %w", err)
	}
	cs := chainsync.NewConfig(chainsync.WithRollForwardRawFunc(s.rollForward), chainsync.WithRollBackwardFunc(s.rollBackward))
	conn, err := ouroboros.NewConnection(
		ouroboros.WithConnection(raw),
		ouroboros.WithNetworkMagic(f.opts.Magic),
		ouroboros.WithNodeToNode(true),
		ouroboros.WithKeepAlive(true),
		ouroboros.WithErrorChan(s.errc),
		ouroboros.WithChainSyncConfig(cs),
		ouroboros.WithBlockFetchConfig(bf),
	)
	if err != nil {
		_ = raw.Close()
		select {
		case cause, ok := <-s.errc: // what closed the connection says more
			if ok && cause != nil {
				err = fmt.Errorf("%w (%w)", cause, err)
			}
		default:
		}
		return false, fmt.Errorf("n2n: handshake with %s: %w", f.opts.Address, err)
	}
	_ = raw.SetDeadline(time.Time{})
	s.conn = conn
	defer func() {
		close(s.done)
		_ = conn.Close()
	}()
	err = s.run(ctx)
	return s.progress, err
}

// run intersects and then handles the node's events.
func (s *session) run(ctx context.Context) error {
	f := s.f
	points, err := f.intersectPoints()
	if err != nil {
		return err
	}
	tip := f.opts.Writer.Tip()
	s.linker = cardano.NewLinker(tip)
	syncDone := make(chan error, 1)
	go func() { syncDone <- s.conn.ChainSync().Client.Sync(points) }()

	var pending []event
	var flush *time.Timer
	var flushC <-chan time.Time
	defer func() {
		if flush != nil {
			flush.Stop()
		}
	}()
	doFlush := func() error {
		if flush != nil {
			flush.Stop()
			flush, flushC = nil, nil
		}
		batch := pending
		pending = nil
		return s.apply(ctx, batch)
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err, ok := <-s.errc:
			if !ok {
				return withReason(ReasonNetwork, "n2n: connection to %s closed", f.opts.Address)
			}
			return fmt.Errorf("n2n: connection to %s: %w", f.opts.Address, err)
		case err := <-syncDone:
			syncDone = nil
			if errors.Is(err, chainsync.ErrIntersectNotFound) {
				if f.opts.Writer.Tip().Empty {
					return withReason(ReasonProtocol, "n2n: the node does not have the start point %s", f.startName())
				}
				return withReason(ReasonRollbackTooDeep, "%w: the node has none of the store's recent points (tip %s)", ErrRollbackTooDeep, f.opts.Writer.Tip())
			}
			if err != nil {
				return fmt.Errorf("n2n: find intersection: %w", err)
			}
		case <-flushC:
			if err := doFlush(); err != nil {
				return err
			}
		case ev := <-s.events:
			s.observeNode(ev.tip)
			if ev.back {
				if len(pending) > 0 {
					if err := doFlush(); err != nil {
						return err
					}
				}
				if err := s.rollBack(ctx, ev.point); err != nil {
					return err
				}
				continue
			}
			pending = append(pending, ev)
			if len(pending) >= f.opts.BatchBlocks || ev.height >= ev.tip.BlockNumber {
				if err := doFlush(); err != nil {
					return err
				}
			} else if flush == nil {
				flush = time.NewTimer(f.opts.FlushAfter)
				flushC = flush.C
			}
		}
	}
}

func (f *Follower) startName() string {
	if f.opts.Start == nil {
		return "origin"
	}
	return f.opts.Start.String()
}

// intersectPoints are the store's recent points, newest first; for an empty
// store, the start point (or the origin).
func (f *Follower) intersectPoints() ([]pcommon.Point, error) {
	pts, err := f.opts.Points.RecentPoints()
	if err != nil {
		return nil, withReason(ReasonWriter, "n2n: read the store's recent points: %w", err)
	}
	if len(pts) > 0 {
		f.m.tipHeight.Set(float64(pts[0].Height))
		f.m.tipSlot.Set(float64(pts[0].Slot))
		out := make([]pcommon.Point, len(pts), len(pts)+1)
		for i, p := range pts {
			out[i] = pcommon.NewPoint(p.Slot, slices.Clone(p.Hash[:]))
		}
		if pts[len(pts)-1].Height == 0 {
			// The store's first block is within reach: it may be the
			// genesis block (cardano.GenesisBlock), which stands for the
			// origin and which no node knows. Offered last, the origin is
			// chosen only when the node shares none of the store's points.
			out = append(out, pcommon.NewPointOrigin())
		}
		return out, nil
	}
	if f.opts.Start != nil {
		return []pcommon.Point{pcommon.NewPoint(f.opts.Start.Slot, slices.Clone(f.opts.Start.Hash[:]))}, nil
	}
	return []pcommon.Point{pcommon.NewPointOrigin()}, nil
}

func (s *session) observeNode(tip pcommon.Tip) {
	s.nodeTip = tip
	s.f.m.nodeHeight.Set(float64(tip.BlockNumber))
	s.f.m.nodeSlot.Set(float64(tip.Point.Slot))
}

// rollBack follows the node's roll backward to p: an exact rollback of the
// store to the block at p, or ErrRollbackTooDeep. The first event after an
// intersection is a roll backward to the intersection itself.
func (s *session) rollBack(ctx context.Context, p Point) error {
	f := s.f
	tip := f.opts.Writer.Tip()
	switch {
	case tip.Empty:
		// Nothing applied yet: the node confirms the start (or the origin),
		// or goes back to a boundary block before the first block.
		s.linker = cardano.NewLinker(tip)
		if ebb, ok := s.boundaries[p.Hash]; ok {
			_, _, _ = s.linker.Next(ebb) // after an empty tip anything links
		}
		return nil
	case p.Hash == tip.Hash:
		f.resume()
		return nil
	case p.Hash == chain.Hash{} && p.Slot == 0:
		return s.rollBackToOrigin(ctx, tip)
	}
	if ebb, ok := s.boundaries[p.Hash]; ok {
		// Back to a boundary block: to its parent in the store, and the
		// boundary block is linked again for the block after it.
		if err := s.rollBackTo(ctx, tip, Point{Slot: p.Slot, Hash: ebb.Chain.PrevHash}, p); err != nil {
			return err
		}
		if _, _, err := s.linker.Next(ebb); err != nil {
			return withReason(ReasonNotLinked, "n2n: roll backward to boundary block %s: %w", p, err)
		}
		return nil
	}
	return s.rollBackTo(ctx, tip, p, p)
}

// rollBackToOrigin follows a roll backward to the chain's origin, which
// the node names after the follower offered it (intersectPoints: the
// store's first block, at height 0, is within reach). The store's block at
// height 0 stands for the origin: the genesis block (cardano.GenesisBlock),
// whose hash the chain's first main block names as its parent. The store
// goes back to it (nothing to do when it is the tip: a resume), and the
// linker then requires the node's next block to link to it, so a store
// whose first block is anything else applies nothing (ErrNotLinked). A
// store whose first block is beyond the rollback window cannot go back to
// it: ErrRollbackTooDeep.
func (s *session) rollBackToOrigin(ctx context.Context, tip chain.Tip) error {
	f := s.f
	if tip.Height == 0 {
		s.linker = cardano.NewLinker(tip)
		f.resume()
		return nil
	}
	pts, err := f.opts.Points.RecentPoints()
	if err != nil {
		return withReason(ReasonWriter, "n2n: read the store's recent points: %w", err)
	}
	if len(pts) == 0 || pts[len(pts)-1].Height != 0 {
		return withReason(ReasonRollbackTooDeep, "%w: the node rolled back to the origin, below the store's reach (tip %s)", ErrRollbackTooDeep, tip)
	}
	first := pts[len(pts)-1]
	return s.rollBackTo(ctx, tip, Point{Slot: first.Slot, Hash: first.Hash}, Point{Slot: first.Slot, Hash: first.Hash})
}

// rollBackTo rolls the store back to its block with hash at.Hash (the node
// named the point named).
func (s *session) rollBackTo(ctx context.Context, tip chain.Tip, at, named Point) error {
	f := s.f
	p := named
	if at.Hash == tip.Hash {
		s.linker = cardano.NewLinker(tip)
		f.resume()
		return nil
	}
	h, found, err := f.opts.Points.HeightOfHash(at.Hash)
	if err != nil {
		return withReason(ReasonWriter, "n2n: look up the roll-back point %s: %w", p, err)
	}
	if !found {
		return withReason(ReasonRollbackTooDeep, "%w: the node rolled back to %s, which the store (tip %s) does not hold", ErrRollbackTooDeep, p, tip)
	}
	f.opts.Logger.Warn("cardano node rolled back: rolling the store back", "point", p, "height", h, "tip", tip, "depth", tip.Height-h)
	if _, err := f.opts.Writer.Rollback(ctx, h); err != nil {
		if errors.Is(err, chain.ErrRollbackTooDeep) {
			return withReason(ReasonRollbackTooDeep, "%w: roll back to %s at height %d: %w", ErrRollbackTooDeep, p, h, err)
		}
		return withReason(ReasonWriter, "n2n: roll back to %s at height %d: %w", p, h, err)
	}
	f.m.rollbacks.Inc()
	f.m.rolledBack.Add(float64(tip.Height - h))
	f.m.tipHeight.Set(float64(h))
	if at == named {
		f.m.tipSlot.Set(float64(p.Slot)) // else: the boundary block's parent, whose slot the point does not give
	}
	f.m.lastSuccess.SetToCurrentTime()
	s.linker = cardano.NewLinker(f.opts.Writer.Tip())
	s.progress = true
	f.resume()
	return nil
}

// apply fetches the blocks of the announced headers in one range, checks
// that each is the block announced and that they link to the store's tip,
// and only then hands them to the writer.
func (s *session) apply(ctx context.Context, headers []event) error {
	f := s.f
	blocks, err := s.fetch(ctx, headers)
	if err != nil {
		return err
	}
	tip := f.opts.Writer.Tip()
	if s.linker.Tip() != tip {
		s.linker = cardano.NewLinker(tip) // someone else moved the tip
	}
	linker := *s.linker // linked on a copy: nothing changes unless all link
	var out []*chain.Block
	var boundaries []*cardano.Block
	for i, b := range blocks {
		cb, ok, err := linker.Next(b)
		if err != nil {
			return withReason(ReasonNotLinked, "n2n: block %s from the node: %w", headers[i].point, err)
		}
		if !ok {
			boundaries = append(boundaries, b)
			continue
		}
		if tip.Empty && len(out) == 0 && f.opts.Start != nil && cb.PrevHash != f.opts.Start.Hash {
			return withReason(ReasonNotLinked, "n2n: block %s from the node: %w: its parent %s is not the start point %s",
				headers[i].point, cardano.ErrNotLinked, cb.PrevHash, f.opts.Start)
		}
		out = append(out, &cb)
	}
	*s.linker = linker
	for _, b := range boundaries {
		s.noteBoundary(b)
	}
	if len(out) == 0 {
		return nil
	}
	if tip.Empty && f.opts.Genesis != nil {
		g, err := s.genesisBlock(out[0])
		if err != nil {
			return err
		}
		out = append([]*chain.Block{g}, out...)
	}
	target := max(s.nodeTip.BlockNumber, out[len(out)-1].Height)
	var applied int
	if len(out) == 1 {
		res, err := f.opts.Writer.Apply(ctx, out[0])
		if err != nil {
			s.linker = cardano.NewLinker(f.opts.Writer.Tip())
			return applyError(out[0], err)
		}
		if res.Applied {
			applied = 1
		}
	} else {
		res, err := f.opts.Writer.ApplyBlocks(ctx, out, target)
		applied = res.Applied
		f.m.windows.Add(float64(res.Windows))
		if res.Windows > 0 {
			f.opts.Logger.Info("catch-up: applied blocks", "blocks", res.Done, "in_windows", res.WindowBlocks,
				"windows", res.Windows, "tip", res.Tip, "node_height", s.nodeTip.BlockNumber)
		}
		if err != nil {
			f.m.applied.Add(float64(applied))
			s.linker = cardano.NewLinker(f.opts.Writer.Tip())
			return applyError(out[min(res.Done, len(out)-1)], err)
		}
	}
	last := out[len(out)-1]
	f.m.applied.Add(float64(applied))
	f.m.tipHeight.Set(float64(last.Height))
	f.m.tipSlot.Set(float64(last.Slot))
	if applied > 0 {
		f.m.lastSuccess.SetToCurrentTime()
		s.progress = true
		f.resume()
	}
	f.opts.Logger.Debug("applied blocks", "count", applied, "tip", f.opts.Writer.Tip(), "node_height", s.nodeTip.BlockNumber)
	return nil
}

// genesisBlock is the block of the genesis outputs that goes before first,
// the chain's first main block, into an empty store.
func (s *session) genesisBlock(first *chain.Block) (*chain.Block, error) {
	if first.Height != 1 {
		return nil, withReason(ReasonNotLinked, "n2n: the genesis outputs go before the chain's first main block (block number 1), but the node's first block %d/%s has number %d",
			first.Slot, first.Hash, first.Height)
	}
	g, err := cardano.GenesisBlock(first.PrevHash, s.f.opts.Genesis)
	if err != nil {
		return nil, withReason(ReasonRejected, "n2n: genesis block: %w", err)
	}
	return g, nil
}

// applyError classifies the writer's refusal of b.
func applyError(b *chain.Block, err error) error {
	switch {
	case errors.Is(err, chain.ErrUnknownInput), errors.Is(err, chain.ErrDoubleSpend),
		errors.Is(err, chain.ErrDuplicateOutpoint), errors.Is(err, chain.ErrInvalidBlock):
		return withReason(ReasonRejected, "n2n: block %d/%s at height %d rejected: %w", b.Slot, b.Hash, b.Height, err)
	default:
		return withReason(ReasonWriter, "n2n: apply block %d/%s at height %d: %w", b.Slot, b.Hash, b.Height, err)
	}
}

// fetch downloads the blocks of headers in one block-fetch range and
// converts them; each must be the block its header announced.
func (s *session) fetch(ctx context.Context, headers []event) ([]*cardano.Block, error) {
	f := s.f
	first, last := headers[0].point, headers[len(headers)-1].point
	client := s.conn.BlockFetch().Client
	if err := client.GetBlockRange(pcommon.NewPoint(first.Slot, slices.Clone(first.Hash[:])), pcommon.NewPoint(last.Slot, slices.Clone(last.Hash[:]))); err != nil {
		reason := ReasonProtocol
		if errors.Is(err, protocol.ErrProtocolShuttingDown) {
			reason = ReasonNetwork // the connection went down
		}
		return nil, withReason(reason, "n2n: fetch blocks %s..%s: %w", first, last, err)
	}
	timeout := time.NewTimer(f.opts.FetchTimeout)
	defer timeout.Stop()
	out := make([]*cardano.Block, 0, len(headers))
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case err, ok := <-s.errc:
			if !ok {
				return nil, withReason(ReasonNetwork, "n2n: connection closed while fetching blocks %s..%s", first, last)
			}
			return nil, fmt.Errorf("n2n: fetch blocks %s..%s: %w", first, last, err)
		case <-timeout.C:
			return nil, withReason(ReasonProtocol, "n2n: fetch blocks %s..%s: no answer within %s", first, last, f.opts.FetchTimeout)
		case <-s.batchEnd:
			if len(out) != len(headers) {
				return nil, withReason(ReasonProtocol, "n2n: fetch blocks %s..%s: the node sent %d blocks, %d were announced", first, last, len(out), len(headers))
			}
			return out, nil
		case fb := <-s.blocks:
			i := len(out)
			if i >= len(headers) {
				return nil, withReason(ReasonProtocol, "n2n: fetch blocks %s..%s: the node sent more blocks than announced", first, last)
			}
			b, err := f.adapter.ConvertEra(cardano.Era(fb.era), fb.raw)
			if err != nil {
				return nil, withReason(ReasonProtocol, "n2n: block %s from the node: %w", headers[i].point, err)
			}
			if want := headers[i].point; b.Slot != want.Slot || b.Chain.Hash != want.Hash {
				return nil, withReason(ReasonProtocol, "n2n: the node announced block %s and sent %s", want, b.Name())
			}
			out = append(out, b)
		}
	}
}

package writer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/changeset"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

// Catch-up defaults (Options).
const (
	// DefaultWindowBytes bounds a catch-up window's memory: 256 MiB, about
	// 190,000 inputs and outputs at disk.WindowChangeBytes each, less for
	// outputs with large datums, scripts or assets and on a store with
	// indexes beyond the address (disk.Store.WindowBlockBytes): some 100
	// blocks of 300 bitcoin transactions.
	DefaultWindowBytes int64 = 256 << 20
	// DefaultWindowBlocks bounds a window's blocks.
	DefaultWindowBlocks = 10_000
	// DefaultLiveMargin: the last blocks before the target go alone.
	DefaultLiveMargin uint64 = 6
)

// errWindowVerify marks a window one of whose blocks failed Options.Verify:
// it is dropped unwritten, and its blocks go alone (the diverging one then
// fails the writer).
var errWindowVerify = errors.New("failed verification")

// BatchResult answers an ApplyBlocks.
type BatchResult struct {
	// Done counts the blocks handled (applied, or already applied); on an
	// error, blocks[Done] is the block refused and those before it stay
	// applied.
	Done             int
	Applied, Skipped int
	Created, Spent   int // outputs the applied blocks created and spent
	// Windows counts the catch-up windows committed, WindowBlocks the
	// blocks they applied; the rest went alone.
	Windows, WindowBlocks int
	Tip                   chain.Tip
	Seq                   uint64
}

// ApplyBlocks applies blocks, consecutive in chain order, on the way to
// height target (the producer's goal: the node's tip, the last block of its
// files; blocks above it go alone). It answers as applying them
// one by one with Apply would, stopping at the first refused block
// (BatchResult.Done), but a run of blocks that extend the tip and lie more
// than LiveMargin below target goes in catch-up windows
// (tiers/disk/window.go): each window is one synced batch of up to
// WindowBlocks blocks and WindowBytes of memory, its blocks keep one seq and
// one change-log record each, and it is published once, with the union of
// their changes. A window with a refused block is dropped and its blocks
// applied one by one, so the blocks before the refused one are applied and
// the error is the one Apply gives.
//
// With Options.Verify set (a replica), each block of a window is verified
// with the window's state right after it (seq, tip, count, digest, exactly
// those of a one-by-one commit) before the window is committed: a failure
// drops the window with nothing written, and its blocks then go alone, each
// verified after its commit, so the writer fails at the block that diverges
// (and the blocks before it are applied and published) as with Apply.
// Nothing unverified is ever published.
func (w *Writer) ApplyBlocks(ctx context.Context, blocks []*chain.Block, target uint64) (BatchResult, error) {
	if len(blocks) == 0 {
		st := w.store.Published()
		return BatchResult{Tip: st.Tip, Seq: st.Seq}, nil
	}
	rep, err := w.submitReply(ctx, request{blocks: blocks, target: target})
	return rep.batch, err
}

// applyBatch runs an ApplyBlocks request. Writer goroutine only.
func (w *Writer) applyBatch(blocks []*chain.Block, target uint64) (res BatchResult, err error) {
	defer func() {
		st := w.store.Published()
		res.Tip, res.Seq = st.Tip, st.Seq
	}()
	for res.Done < len(blocks) {
		if err := w.Failed(); err != nil {
			return res, err
		}
		rest := blocks[res.Done:]
		if n := w.windowLen(rest, target); n >= 2 {
			start := time.Now()
			cs, err := w.applyWindow(rest[:n])
			if err == nil {
				w.opts.Metrics.windowDone(time.Since(start), n, cs)
				w.publish(cs)
				res.Done += n
				res.Applied += n
				res.Windows++
				res.WindowBlocks += n
				res.Created += cs.Created
				res.Spent += cs.Spent
				continue
			}
			if errors.Is(err, ErrFailed) {
				return res, err
			}
			switch {
			case errors.Is(err, errWindowVerify):
				w.opts.Logger.Warn("catch-up window failed verification; applying its blocks one by one", "err", err)
			case errors.Is(err, disk.ErrBatchTooLarge):
				w.opts.Logger.Warn("catch-up window too large for one batch; applying its blocks one by one (a lower catch-up memory bound makes smaller windows)", "err", err)
			default:
				w.opts.Logger.Debug("catch-up window refused; applying its blocks one by one", "err", err)
			}
			for range n {
				if err := w.batchOne(&res, blocks[res.Done]); err != nil {
					return res, err
				}
			}
			continue
		}
		if err := w.batchOne(&res, rest[0]); err != nil {
			return res, err
		}
	}
	return res, nil
}

// batchOne applies b alone for applyBatch and counts it in res.
func (w *Writer) batchOne(res *BatchResult, b *chain.Block) error {
	r, err := w.applyOne(b)
	if err != nil {
		return err
	}
	res.Done++
	if cs := r.Changes; cs != nil {
		res.Applied++
		res.Created += cs.Created
		res.Spent += cs.Spent
	} else {
		res.Skipped++
	}
	return nil
}

// windowLen returns how many of blocks, from the first, one catch-up window
// may take: consecutive heights from the one above the tip, more than
// LiveMargin below target, within WindowBlocks and WindowBytes.
func (w *Writer) windowLen(blocks []*chain.Block, target uint64) int {
	if w.opts.WindowBytes < 0 {
		return 0
	}
	tip := w.store.State().Tip
	if !tip.Empty && blocks[0].Height != tip.Height+1 {
		return 0 // a re-post, or not the next block: alone, as Apply
	}
	var bytes int64
	n := 0
	for i, b := range blocks {
		if n == w.opts.WindowBlocks || b.Height != blocks[0].Height+uint64(i) || b.Height+w.opts.LiveMargin > target {
			break
		}
		bytes += w.store.WindowBlockBytes(b)
		if n > 0 && bytes > w.opts.WindowBytes {
			break
		}
		n++
	}
	return n
}

// applyWindow validates blocks in one catch-up window and commits it.
// Writer goroutine only.
//
// The window's own last block is the target it keeps undo deltas, spent
// records and change-log records for (disk.NewWindow), not the producer's
// target: a producer's target is only a promise of blocks not yet checked,
// and a later block that is refused would leave the store short of it, with
// records missing that a store at this window's end must hold. So every
// window end is a state the blocks applied one by one would have left.
//
// With Options.Verify set, each block is verified with the window's state
// right after it (BlockTxn.WindowState), before the next block begins: a
// failure returns errWindowVerify with nothing written.
//
// The free-space guard checks the window as a whole once its blocks are
// known valid: a window that does not fit is refused, and applyBatch then
// applies its blocks one by one, each through the guard again.
func (w *Writer) applyWindow(blocks []*chain.Block) (*changeset.Set, error) {
	txn, err := w.store.NewWindow(blocks[len(blocks)-1].Height)
	if err != nil {
		return nil, err
	}
	estimates := make([]uint64, len(blocks))
	var estimate uint64
	for i, b := range blocks {
		if err := chain.CheckLinkage(txn.Tip(), b); err != nil {
			return nil, err
		}
		if err := txn.Begin(b); err != nil {
			return nil, err
		}
		if err := w.fill(txn, b); err != nil {
			return nil, err
		}
		if err := txn.End(); err != nil {
			return nil, err
		}
		if w.opts.Verify != nil {
			if err := w.opts.Verify(txn.WindowState()); err != nil {
				return nil, fmt.Errorf("catch-up window: block %d: %w: %w", b.Height, errWindowVerify, err)
			}
		}
		estimates[i] = estimateBlock(b)
		estimate += estimates[i]
	}
	if err := w.guard(estimate); err != nil {
		return nil, fmt.Errorf("catch-up window of blocks %d..%d: %w", blocks[0].Height, blocks[len(blocks)-1].Height, err)
	}
	cs, err := txn.Commit()
	if err != nil {
		return nil, err
	}
	for _, e := range estimates {
		w.noteApplied(e)
	}
	return cs, nil
}

package writer

import (
	"errors"
	"fmt"

	"github.com/utxo-cache/utxo-cache/chain"
)

// ErrInsufficientStorage is returned, with nothing changed, for a write the
// free-space guard refuses: the store's file system has less room than the
// write could need. Writes resume by themselves once room returns.
var ErrInsufficientStorage = errors.New("writer: insufficient storage")

// DiskSpace reports the bytes available on the file system that holds the
// store (statfs; diskspace.Dir). Safe for concurrent use: the writer asks
// before each write, /readyz and the metrics at any time.
type DiskSpace interface {
	AvailableBytes() (uint64, error)
}

// writeFactor is how many bytes of disk one byte of a block may take before
// the next flush: the batch written to the WAL holds the block's outputs as
// rows, their address-index entries and balance rows, the undo delta, and
// the change-log record, a copy of the block (so about 3× the block), and a
// little more for keys. The memtable's own flush to an sstable is the
// reserve's share (DefaultReserve).
const writeFactor = 4

// DefaultReserve is the free space the guard keeps beyond each write's own
// estimate, for a store whose memtable holds memTableBytes: two memtables
// (a full one being flushed to an sstable while its WAL is still on disk,
// and the one filling, which Pebble may queue behind it) plus 64 MiB for the
// manifest, compaction outputs that exist next to their inputs until they
// are installed, and the change log's pruning.
func DefaultReserve(memTableBytes uint64) uint64 {
	return 2*memTableBytes + 64<<20
}

// # The free-space guard
//
// Pebble cannot survive every write that hits a full disk (disk.ErrFailed:
// a failed WAL rotation ends the process; a failed flush is retried for
// ever, stalling commits), so the writer refuses a write before Pebble can
// hit ENOSPC: with Options.Space set, each apply and rollback that would
// change the store first checks
//
//	available >= Reserve + writeFactor × estimate
//
// where estimate is the block's encoded size (estimateBlock) for an apply,
// and depth × the mean size of the blocks applied since start for a
// rollback (it writes back roughly what those blocks replaced). Below it,
// the request fails with ErrInsufficientStorage before anything is written;
// the published state and its readers are untouched. Requests that would
// change nothing (an idempotent re-post, a rollback to the tip) and
// rejections (a block that does not extend the tip) answer as always. A
// checkpoint (which copies the WAL: at most a memtable) needs the reserve
// alone.

// spaceStatus is the guard's view at one moment.
type spaceStatus struct {
	available, required uint64
	known               bool // false: Space is unset or could not tell
}

// checkSpace returns nil when the store's file system has room for a write
// whose own estimate is need bytes, else an error matching
// ErrInsufficientStorage with the figures. A Space that cannot tell (an
// unsupported platform, a failed statfs) lets the write through: the guard
// is a precaution, and a commit that does hit a full disk still fails the
// store cleanly (disk.ErrFailed). Safe from any goroutine.
func (w *Writer) checkSpace(need uint64) (spaceStatus, error) {
	if w.opts.Space == nil {
		return spaceStatus{}, nil
	}
	avail, err := w.opts.Space.AvailableBytes()
	if err != nil {
		w.spaceErrOnce.Do(func() {
			w.opts.Logger.Warn("free space unknown: the free-space guard lets writes through", "err", err)
		})
		return spaceStatus{}, nil
	}
	st := spaceStatus{available: avail, required: w.opts.Reserve + need, known: true}
	if avail < st.required {
		return st, fmt.Errorf("%w: %d bytes available on the data directory's file system, a write needs %d "+
			"(reserve %d + %d for this change); free space or remove the ballast (docs/disk-full.md): writes resume by themselves",
			ErrInsufficientStorage, avail, st.required, w.opts.Reserve, need)
	}
	return st, nil
}

// WritesRefused reports why the free-space guard refuses writes now (an
// error matching ErrInsufficientStorage), or nil when it would take them:
// refused while the room left is below the reserve, or below what the last
// refused write needed (until a write goes through or room grows enough for
// it). For /readyz: reads are served either way. Safe from any goroutine.
func (w *Writer) WritesRefused() error {
	_, err := w.checkSpace(w.refusedNeed.Load())
	return err
}

// guard checks room for a change estimated at estimate bytes of block data,
// records a refusal, and logs the transitions between refusing and taking
// writes. Writer goroutine only.
func (w *Writer) guard(estimate uint64) error {
	need := writeFactor * estimate
	_, err := w.checkSpace(need)
	switch {
	case err != nil:
		w.refusedNeed.Store(need)
	case need >= w.refusedNeed.Load():
		// Only a write at least as large as the refused one proves room
		// for it: a smaller one (a checkpoint, an empty block) passing
		// leaves the refusal standing for /readyz and the log.
		w.refusedNeed.Store(0)
	}
	switch {
	case err != nil:
		w.opts.Metrics.refused("insufficient_storage")
		if !w.refusing {
			w.refusing = true
			w.opts.Logger.Error("writes refused: the disk is nearly full; reads go on", "err", err)
		}
	case w.refusing && w.refusedNeed.Load() == 0:
		w.refusing = false
		w.opts.Logger.Info("writes resumed: free space is back above the reserve")
	}
	return err
}

// noteApplied folds an applied block's estimate into the running mean that
// sizes rollbacks. Writer goroutine only.
func (w *Writer) noteApplied(estimate uint64) {
	w.appliedBlocks++
	w.meanBlock += (float64(estimate) - w.meanBlock) / float64(min(w.appliedBlocks, 1000))
}

// rollbackEstimate is the guard's estimate for rolling depth blocks back.
func (w *Writer) rollbackEstimate(depth uint64) uint64 {
	return uint64(w.meanBlock * float64(depth))
}

// estimateBlock returns about how many bytes b takes encoded: its hashes,
// outpoints and outputs with their addresses, assets, datums and scripts.
func estimateBlock(b *chain.Block) uint64 {
	const (
		hash     = 32
		outPoint = hash + 4
		output   = 8 + 8 + 16 // value, height and position, flags and lengths
	)
	n := uint64(3 * hash)
	for i := range b.Txs {
		tx := &b.Txs[i]
		n += hash + 8
		n += uint64(len(tx.Inputs)+len(tx.CollateralInputs)) * outPoint
		add := func(o *chain.Output) {
			n += output + uint64(len(o.Address)+len(o.Datum)+len(o.ScriptRef))
			if o.DatumHash != nil {
				n += hash
			}
			for _, a := range o.Assets {
				n += 8 + uint64(len(a.Policy)+len(a.Name))
			}
		}
		for j := range tx.Outputs {
			add(&tx.Outputs[j])
		}
		if tx.CollateralReturn != nil {
			add(tx.CollateralReturn)
		}
	}
	return n
}

package disk

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/changeset"
)

// # Catch-up windows
//
// A producer far behind its target height (an import of block files, a
// follower catching up with its node, a backlog of ingest) applies blocks in
// windows: one BlockTxn from NewWindow takes several consecutive blocks
// (Begin, the block's Lookups, Spends and Creates, End, for each) over one
// in-memory overlay of outpoint rows, and Commit writes them all in one
// synced batch. The store moves from the block boundary before the window to
// the one after it; a crash leaves it at one or the other.
//
// The commit sequence is unchanged: every block of a window is one change,
// one seq, one change-log record whose after figures (tip, count, digest) are
// the state right after that block, computed in memory as the block is
// applied (the digest is a sum of per-output terms, so each block's figure is
// exact). A window of K blocks from seq S writes the records S+1 .. S+K and
// is published once, at S+K: replicas apply and verify every record as
// before. What a window saves is what no state at or after its last block
// can show:
//
//   - an output created and spent inside the window has no outpoint row, no
//     index row and no balance change, unless the spend's spent record must
//     be kept (below); its digest term is hashed once;
//   - each touched balance row is read and written once per window;
//   - a block gets an undo delta only if it is within RollbackWindow of the
//     target (height >= target - RollbackWindow + 1): a deeper block can
//     never be rolled back once the target is reached;
//   - a block's change-log record is written only if the log will still
//     hold it at the target (height >= target - LogRetention + 1); the log
//     then restarts above the blocks without one (a reader asking for
//     their changes gets ErrLogTruncated, as for any change no longer kept);
//   - a spend keeps its spent record (and its entry in the spent-at list)
//     only if its height is >= target - PruneDepth - RollbackWindow: the
//     records a one-by-one store would still hold at the target. An older
//     spend deletes the row, or writes nothing for an output the window
//     created.
//
// So at the target, and at any state reached one by one after it, every
// answer (tip, count, digest, lookups, listings, balances, rollbacks) is the
// one the blocks applied one by one give. At a window boundary W below the
// target, tip, count, digest and listings are exact too, but a spend older
// than target - PruneDepth - RollbackWindow shows no spent record although
// W - spend <= PruneDepth, a rollback reaching below target -
// RollbackWindow + 1 is refused (ErrRollbackTooDeep), and the change log
// holds no record of a block below target - LogRetention + 1: a target
// equal to the window's last block makes every window boundary exact, and
// is what writer.ApplyBlocks passes (a producer's own target is a promise of
// blocks not yet checked, which a refused block can break).

// WindowChangeBytes is what one input or output of a window's blocks costs
// the window's memory at most, at its peak: once the whole batch is built,
// before Pebble commits it, apart from the output's variable bytes
// (WindowOutputCopies). It counts the overlay entry and record, the
// block's share of its change-log record, undo delta and spent list, the
// window's writes as collected and sorted, and Pebble's copy of them.
// TestWindowMemoryEstimate measures it: 1,070 to 1,280 bytes on windows of
// 20 to 400 blocks of 300 transactions of the bitcoin profile.
const WindowChangeBytes = 1400

// WindowOutputCopies is how many times a window holds an output's variable
// bytes (address, datum, script reference, assets: outputBytes) at its
// peak: in the block's change-log record, the outpoint row and the index
// row as collected and as Pebble's copy, and the batch's spare room. Measured
// (TestWindowMemoryEstimate): about 6.6 on outputs of 4 KiB datums. Without
// it a window of such outputs held 4.6 times its estimate, and one of 64 KiB
// datums and script references (the format's limits) would hold a hundred
// times --catch-up-bytes.
const WindowOutputCopies = 8

// WindowIndexRowBytes is what one more index row of an output costs a
// window at its peak, apart from the output's variable bytes
// (WindowIndexCopies): a store with indexes beyond the address writes an
// output again under each value it is indexed by (a payment and a stake
// credential, each policy and asset it carries), each row holding the whole
// output, and a spend deletes each of them. It counts the row as collected
// and as Pebble's copy, the value's balance delta and its place in the
// change log's index keys. TestWindowMemoryEstimate measures it.
const WindowIndexRowBytes = 300

// WindowIndexCopies is how many times a window holds an output's variable
// bytes for each more index row of it: the row as collected and Pebble's
// copy, and the batch's spare room.
const WindowIndexCopies = 2

// WindowAssetRowBytes is what one asset of an output costs a window at its
// peak in each balance it counts in (its address's and credentials', its
// policy's and its own): the asset's delta, and the asset row it writes
// (balanceasset.go) as collected and as Pebble's copy.
// TestWindowMemoryEstimate measures it.
const WindowAssetRowBytes = 300

// WindowBlockBytes is what block b costs a catch-up window of s's memory at
// most, at its peak: WindowChangeBytes per input and output (and one per
// transaction), WindowOutputCopies times the variable bytes of its outputs,
// and for each index row of an output beyond its address's (as the store's
// dimensions list it) WindowIndexRowBytes and WindowIndexCopies times the
// output's variable bytes, and WindowAssetRowBytes for each asset of it in
// each balance it counts in. A spent output's rows are not known before the
// window reads it: each input is counted with the mean index and asset rows
// of the block's outputs. The writer bounds a window with it
// (writer.Options.WindowBytes). Safe for concurrent use.
func (s *Store) WindowBlockBytes(b *chain.Block) int64 {
	var changes, inputs, outputs, variable, rows, rowBytes, assetRows int64
	indexed := len(s.dims) > 1
	var keys []DimKey
	var filters []assetFilter
	each := func(o *chain.Output) {
		n := outputBytes(o)
		variable += n
		outputs++
		if !indexed && len(o.Assets) == 0 {
			return
		}
		u := chain.Utxo{Output: *o}
		keys, filters = appendDimKeys(keys[:0], filters[:0], s.dims, s.dimFuncs, &u)
		extra := int64(len(keys) - 1)
		rows += extra
		rowBytes += extra * n
		for i := range filters {
			for j := range o.Assets {
				if filters[i].keep(&o.Assets[j]) {
					assetRows++
				}
			}
		}
	}
	for i := range b.Txs {
		tx := &b.Txs[i]
		in := int64(len(tx.Spends()))
		inputs += in
		changes += in + int64(len(tx.Outputs)) + 1
		for j := range tx.Outputs {
			each(&tx.Outputs[j])
		}
		if tx.CollateralReturn != nil {
			each(tx.CollateralReturn)
		}
	}
	if outputs > 0 { // the inputs', as many as the mean output's, rounded up
		rows += (rows*inputs + outputs - 1) / outputs
		assetRows += (assetRows*inputs + outputs - 1) / outputs
	}
	return changes*WindowChangeBytes + variable*WindowOutputCopies + rows*WindowIndexRowBytes + rowBytes*WindowIndexCopies +
		assetRows*WindowAssetRowBytes
}

// outputBytes is the bytes of o whose size the producer chooses: its
// address, datum, script reference and assets.
func outputBytes(o *chain.Output) int64 {
	n := len(o.Address) + len(o.Datum) + len(o.ScriptRef)
	for i := range o.Assets {
		n += len(o.Assets[i].Policy) + len(o.Assets[i].Name) + 8
	}
	return int64(n)
}

// window is the per-window state of a BlockTxn made by NewWindow.
type window struct {
	target   uint64
	keepFrom uint64 // a spend at a height >= keepFrom keeps its spent record
	undoFrom uint64 // a block at a height >= undoFrom gets an undo delta
	start    State  // before the window
	st       State  // after the last ended block
	open     bool   // a block is begun and not yet ended

	// The open block's: inputs skipped, before-images of the rows it
	// changes (only when it gets an undo delta), kept spends (packed).
	skipped    uint64
	images     map[chain.OutPoint]*blockImage
	imageOrder []chain.OutPoint
	spentHere  []byte
	// spentLive lists the outputs the open block spent that were live
	// before it (its change-log record's chain.Change.Spent), with the log on.
	spentLive []chain.Utxo
	logSpent  bool // the store keeps a change log

	blocks []windowBlock
	// created and spent count each block's outputs as a block alone does
	// (changeset.Set.Created, Spent): one created and spent in the same block
	// is in neither.
	created, spent int
}

// blockImage is a row as one block of a window found it.
type blockImage struct {
	before  *Record // nil: no row
	created bool    // the block created an output there
}

// windowBlock is what one ended block of a window writes.
type windowBlock struct {
	height uint64
	hash   chain.Hash
	slot   uint64
	time   int64
	seq    uint64
	// counters is the block's counter delta, and counterUndo whether it
	// keeps it as a row (it keeps an undo delta): counters.go.
	counters    []counterDelta
	counterUndo bool
	spentAt     []byte           // packed outpoints of its kept spends: the 0x05 row
	undo        []byte           // its undo delta; nil: none (too deep to roll back)
	record      []byte           // its change-log record; nil with the log off
	ptxs        []pendingBlockTx // what its pending effects need (pending.go)
	change      *chain.Change    // its record's change, with ptxs (to add its pending moves)
}

// NewWindow starts a catch-up window towards height target (the height the
// producer is heading to: at least every block the window will take). See
// the section comment above. Writer goroutine only.
func (s *Store) NewWindow(target uint64) (*BlockTxn, error) {
	if err := s.canWrite(); err != nil {
		return nil, err
	}
	st := s.State()
	if st.RollingBack {
		return nil, fmt.Errorf("disk: a rollback is in progress: %w", ErrFailed)
	}
	if err := s.PrepareWrites(); err != nil {
		return nil, err
	}
	w := &window{target: target, start: st, st: st, logSpent: s.opts.LogRetention > 0}
	if keep := s.opts.PruneDepth + s.opts.RollbackWindow; target > keep {
		w.keepFrom = target - keep
	}
	if target >= s.opts.RollbackWindow {
		w.undoFrom = target - s.opts.RollbackWindow + 1
	}
	return &BlockTxn{s: s, entries: make(map[chain.OutPoint]*txnEntry, 1024), win: w}, nil
}

// Tip returns the tip the txn has reached: for a window, its last ended
// block (the tip before the window while none has ended); for one block,
// the committed tip.
func (t *BlockTxn) Tip() chain.Tip {
	if t.win != nil {
		return t.win.st.Tip
	}
	return t.s.State().Tip
}

// WindowState returns the state the window has reached after its last ended
// block (the state before the window while none has ended): Seq, Tip,
// UtxoCount and Digest are exactly those the store would be at had the
// window's blocks been committed one by one, so a replica can verify each
// block against its writer's figures before the window is committed. Only
// for a txn from NewWindow.
func (t *BlockTxn) WindowState() State {
	if t.win == nil {
		return t.s.State()
	}
	return t.win.st
}

// Blocks returns how many blocks the window has ended.
func (t *BlockTxn) Blocks() int {
	if t.win == nil {
		return 1
	}
	return len(t.win.blocks)
}

// Begin starts block b of a window. The caller has checked that b extends
// Tip. Then it reports b's spends and creations as for a single block, and
// calls End.
func (t *BlockTxn) Begin(b *chain.Block) error {
	w := t.win
	switch {
	case w == nil:
		return errors.New("disk: Begin on a single-block txn")
	case t.done:
		return errors.New("disk: window already committed")
	case w.open:
		return fmt.Errorf("disk: block %d begun before block %d ended", b.Height, t.block.Height)
	case b.Height > w.target:
		return fmt.Errorf("disk: block %d is above the window's target %d", b.Height, w.target)
	}
	t.block = b
	w.open = true
	w.skipped = 0
	w.spentHere = nil
	if b.Height >= w.undoFrom {
		w.images = make(map[chain.OutPoint]*blockImage, 4*len(b.Txs))
		w.imageOrder = w.imageOrder[:0]
	}
	return nil
}

// image records op's row as the open block found it, on its first change.
func (w *window) image(op chain.OutPoint, e *txnEntry) *blockImage {
	if w.images == nil {
		return nil
	}
	im := w.images[op]
	if im == nil {
		im = &blockImage{before: e.after}
		w.images[op] = im
		w.imageOrder = append(w.imageOrder, op)
	}
	return im
}

// spend accounts for the spend at height h of e's live output.
func (w *window) spend(op chain.OutPoint, e *txnEntry, h uint64) {
	w.image(op, e)
	if !e.hasTerm {
		e.term, e.hasTerm = chain.UtxoTerm(&e.after.Utxo), true
	}
	w.st.UtxoCount--
	w.st.Digest.SubTerm(e.term)
	if e.created && e.after.Utxo.Height == h {
		w.created-- // created and spent in one block: neither, as one by one
	} else {
		w.spent++
		if w.logSpent {
			w.spentLive = append(w.spentLive, e.after.Utxo)
		}
	}
	if h >= w.keepFrom {
		w.spentHere = append(w.spentHere, op.TxHash[:]...)
		w.spentHere = binary.BigEndian.AppendUint32(w.spentHere, op.Index)
	}
}

// create accounts for the creation of u at e.
func (w *window) create(u *chain.Utxo, e *txnEntry) {
	if im := w.image(u.OutPoint, e); im != nil {
		im.created = true
	}
	e.term, e.hasTerm = chain.UtxoTerm(u), true
	w.st.UtxoCount++
	w.st.Digest.AddTerm(e.term)
	w.created++
}

// End ends the open block: its state (tip, count, digest, seq) is fixed,
// with its undo delta and change-log record.
func (t *BlockTxn) End() error {
	w := t.win
	if w == nil || !w.open {
		return errors.New("disk: End without a begun block")
	}
	b := t.block
	prev := w.st.Tip
	st := &w.st
	st.Tip = chain.Tip{Height: b.Height, Hash: b.Hash}
	st.MaxHeight = max(st.MaxHeight, b.Height)
	st.SkippedInputs += w.skipped
	st.Seq++
	wb := windowBlock{height: b.Height, hash: b.Hash, slot: b.Slot, time: b.Time, seq: st.Seq, spentAt: w.spentHere,
		counters: t.endCounters(), counterUndo: w.images != nil}
	if !t.s.pending.empty() {
		wb.ptxs = pendingBlockTxs(b)
	}
	if w.images != nil {
		undo := undoDelta{prev: prev, skipped: w.skipped, entries: make([]undoEntry, 0, len(w.imageOrder))}
		for _, op := range w.imageOrder {
			im := w.images[op]
			undo.entries = append(undo.entries, t.s.undoEntryOf(op, im.before, im.created))
		}
		wb.undo = appendUndo(nil, &undo)
	}
	if r := t.s.opts.LogRetention; r > 0 && b.Height+r > w.target {
		c := &chain.Change{
			Seq: st.Seq, Kind: chain.ChangeApply, Block: b, SpentKnown: true, Spent: sortedSpent(w.spentLive),
			After: chain.Summary{Tip: st.Tip, UtxoCount: st.UtxoCount, Digest: st.Digest},
		}
		rec, err := chain.AppendChangeCBOR(nil, c)
		if err != nil {
			return fmt.Errorf("disk: change record %d: %w", st.Seq, err)
		}
		wb.record = rec
		if wb.ptxs != nil {
			// Kept to encode the record again with the block's pending
			// moves, once the window's commit makes them.
			c.Spent = slices.Clone(c.Spent)
			wb.change = c
		}
	}
	w.blocks = append(w.blocks, wb)
	w.open, w.images, w.spentHere, w.spentLive = false, nil, nil, w.spentLive[:0]
	return nil
}

// sortedSpent sorts spent in outpoint order and returns it.
func sortedSpent(spent []chain.Utxo) []chain.Utxo {
	slices.SortFunc(spent, func(a, b chain.Utxo) int { return compareOutPoints(a.OutPoint, b.OutPoint) })
	return spent
}

// windowRowBytes is about what one outpoint row of a window costs its batch
// at most: the outpoint row (key, record with a spent record), the index row
// (key, tx hash and record) and a balance row, with the batch's headers.
const windowRowBytes = 360

// batchSize estimates the bytes of the window's batch, rows outpoint rows
// touched: the per-block rows it holds already, plus rows at windowRowBytes.
func (w *window) batchSize(rows int) int {
	n := rows*windowRowBytes + 4096
	for i := range w.blocks {
		wb := &w.blocks[i]
		n += len(wb.record) + len(wb.undo) + len(wb.spentAt) + 256
	}
	return n
}

// batchOps estimates the writes of the window's batch, rows outpoint rows
// touched: each with an index row and a balance row at most, and the rows
// of each block.
func (w *window) batchOps(rows int) int { return 3*rows + 8*len(w.blocks) + 16 }

// commitWindow writes the window's ended blocks in one synced batch (see
// Commit).
func (t *BlockTxn) commitWindow() (*changeset.Set, error) {
	s, w := t.s, t.win
	if w.open {
		return nil, fmt.Errorf("disk: window committed with block %d not ended", t.block.Height)
	}
	if len(w.blocks) == 0 {
		return nil, errors.New("disk: window of no blocks")
	}
	st := w.st
	last := st.Tip.Height

	b := s.sizedBatch(w.batchSize(len(t.order)), w.batchOps(len(t.order)))
	defer b.close()
	ch := newChanges(w.start.Tip, len(t.order))
	ch.cs.Skipped = int(t.skipped)
	scratch := st
	d := newDerived(s.dims, s.dimFuncs, b, &scratch, ch, len(t.order))
	d.noFigures = true // st carries them, block by block

	var key, val []byte
	s.dropLapses()
	for _, de := range t.order {
		op, e := de.op, de.e
		if e.before != nil && e.before.Spent == nil {
			d.remove(&e.before.Utxo)
		}
		if e.before != nil && e.before.Spent == nil {
			s.lapseLease(b, op) // spent: its lease lapses (lease.go)
		}
		if e.before != nil && e.before.Frozen {
			// A window spends only: the spender is in its record, or, for
			// an output spent and then created again, in the window.
			h, why := last, "a block of the window"
			if e.after.Spent != nil {
				h, why = e.after.Spent.Height, "spent by "+e.after.Spent.TxHash.String()
			}
			s.lapseFreeze(b, op, h, why)
		}
		key = appendOutPointKey(key[:0], op)
		switch {
		case e.after.Spent == nil:
			d.add(&e.after.Utxo)
			_ = b.Set(key, appendRecord(val[:0], e.after), nil)
		case e.after.Spent.Height >= w.keepFrom:
			_ = b.Set(key, appendRecord(val[:0], e.after), nil)
		case e.before != nil:
			_ = b.Delete(key, nil) // spent too deep for its record to matter
		default:
			continue // created and spent deep inside the window: never stored
		}
		ch.outPoint(op)
	}
	if s.count.on {
		deltas := make([][]counterDelta, len(w.blocks))
		undo := make([]bool, len(w.blocks))
		heights := make([]uint64, len(w.blocks))
		for i := range w.blocks {
			deltas[i], undo[i], heights[i] = w.blocks[i].counters, w.blocks[i].counterUndo, w.blocks[i].height
		}
		s.commitCounters(b, d, heights[0], deltas, undo, heights)
	}
	if err := d.flushBalances(s.db, s.balances, s.opts.PrefetchWorkers); err != nil {
		return nil, fmt.Errorf("disk: apply window to block %d: %w", last, err)
	}
	floor := s.logFloor
	if s.opts.LogRetention > 0 {
		// Records of blocks the log will not hold at the target were not
		// made: the log restarts above them, without a gap.
		var dropped uint64
		for i := range w.blocks {
			if w.blocks[i].record == nil {
				dropped = w.blocks[i].seq
			}
		}
		if dropped > 0 {
			if floor != 0 {
				_ = b.DeleteRange(changeLogKey(floor), changeLogKey(dropped+1), nil)
			}
			floor = 0
		}
	}
	for i := range w.blocks {
		wb := &w.blocks[i]
		if len(wb.spentAt) > 0 {
			_ = b.Set(heightKey(prefixSpentAt, wb.height), wb.spentAt, nil)
		}
		if wb.undo != nil {
			_ = b.Set(heightKey(prefixUndo, wb.height), wb.undo, nil)
		}
		_ = b.Set(heightKey(prefixBlockHash, wb.height), appendBlockHashRow(nil, wb.hash, wb.slot), nil)
		_ = b.Set(heightKey(prefixBlockTime, wb.height), appendBlockTimeRow(nil, wb.time), nil)
		_ = b.Set(hashBlockKey(wb.hash), binary.BigEndian.AppendUint64(nil, wb.height), nil)
		if err := s.visibilityEdge(wb.height, ch); err != nil {
			return nil, fmt.Errorf("disk: apply block %d: %w", wb.height, err)
		}
		if wb.ptxs != nil {
			// The block's pending effects, before its record: the record
			// carries the pending moves they make (chain.Change.Pending).
			mark := len(s.touched.entries)
			bst := st
			bst.MaxHeight = max(w.start.MaxHeight, wb.height)
			s.pendingBlock(b, wb.height, wb.time, wb.ptxs, &bst)
			if moves := s.pendingMoves(mark); len(moves) > 0 && wb.change != nil {
				c := wb.change
				c.Pending = moves
				var err error
				if wb.record, err = chain.AppendChangeCBOR(nil, c); err != nil {
					return nil, fmt.Errorf("disk: change record %d: %w", wb.seq, err)
				}
			}
		}
		if wb.record != nil {
			floor = s.logRecord(b, wb.seq, wb.record, floor)
		}
	}
	var pruned pruneWork
	if err := s.prune(b, &st, t.entries, &pruned, len(w.blocks)); err != nil {
		return nil, fmt.Errorf("disk: prune at block %d: %w", last, err)
	}
	if err := s.prunePending(b, &st, len(w.blocks)*s.opts.PruneBudget); err != nil {
		return nil, fmt.Errorf("disk: prune pending at block %d: %w", last, err)
	}
	_ = b.Set(keyState, appendState(nil, &st), nil)
	raised := s.raiseSchema(b)
	if err := s.commitKeys(b); err != nil {
		return nil, fmt.Errorf("disk: commit window to block %d: %w", last, err)
	}
	if raised {
		s.schemaVersion = SchemaVersion
	}
	s.counted(w.blocks[0].height)
	s.reportLapses()
	t.committed(d, &st, pruned, floor)
	s.addPendingTouched(ch, false)
	ch.setBalances(d)
	ch.cs.NewTip, ch.cs.Seq = st.Tip, st.Seq
	ch.cs.Created, ch.cs.Spent = w.created, w.spent
	return &ch.cs, nil
}

package disk

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/changeset"
)

// BlockTxn collects the changes of one block and commits them as one batch.
// The writer validates the block against Lookup's answers and reports each
// spend and creation; BlockTxn turns them into rows, index entries, balances,
// the digest, the undo delta and pruning work.
//
// Only the writer goroutine may use a BlockTxn, and only one at a time: the
// in-block overlay assumes nothing else changes the store meanwhile.
type BlockTxn struct {
	s       *Store
	block   *chain.Block
	entries map[chain.OutPoint]*txnEntry
	// order holds the dirty entries in first-change order, each with its
	// outpoint: the commit walks it without a map lookup per entry (a
	// window's map holds hundreds of thousands, each lookup a cache miss).
	// An entry in order stays the one entries holds for its outpoint.
	order   []dirtyEntry
	skipped uint64
	done    bool
	// win is the catch-up window this txn applies (window.go); nil: one
	// block, committed as today.
	win *window
	// counters is the open block's counter delta (counters.go).
	counters blockCounters
}

// dirtyEntry is an entry of BlockTxn.order.
type dirtyEntry struct {
	op chain.OutPoint
	e  *txnEntry
}

// txnEntry is one outpoint row as the block sees it: before the block and now.
type txnEntry struct {
	before  *Record // nil: no row before the block (the window)
	after   *Record // nil: no row (only possible while clean)
	dirty   bool
	created bool // the block (the window) created an output at this outpoint
	// term is the digest term of after's UTXO once hasTerm (window only):
	// an output created and spent inside a window is hashed once.
	term    [32]byte
	hasTerm bool
	// own holds the row read for the entry (before points at it): one
	// allocation for both. It is never written after: Spend and Create
	// point after at a new Record, so before stays the row before.
	own Record
}

// PrepareWrites builds the writer's in-memory state (the tx-hash filter: a
// scan of the outpoint keyspace, about a second per million transactions).
// The writer calls it when it starts; NewBlock calls it if nobody did.
// Writer goroutine only.
func (s *Store) PrepareWrites() error { return s.PrepareWritesUntil(nil) }

// PrepareWritesUntil is PrepareWrites that gives up with ErrStopped once
// stop (polled during the scan; nil: never) reports true, leaving the store
// unprepared, so a writer that is closing need not finish the scan.
func (s *Store) PrepareWritesUntil(stop func() bool) error {
	if s.txf != nil {
		return nil
	}
	f, err := buildTxFilter(s.db, stop)
	if err != nil {
		return err
	}
	s.txf = f
	return nil
}

// NewBlock starts collecting block b's changes. The caller has checked that b
// extends the tip.
func (s *Store) NewBlock(b *chain.Block) (*BlockTxn, error) {
	if err := s.canWrite(); err != nil {
		return nil, err
	}
	if s.State().RollingBack {
		return nil, fmt.Errorf("disk: a rollback is in progress: %w", ErrFailed)
	}
	if err := s.PrepareWrites(); err != nil {
		return nil, err
	}
	n := blockRows(b)
	return &BlockTxn{s: s, block: b, entries: make(map[chain.OutPoint]*txnEntry, n), order: make([]dirtyEntry, 0, n)}, nil
}

// blockRows is the number of outpoint rows b can touch: its inputs and
// outputs (a size hint).
func blockRows(b *chain.Block) int {
	n := 0
	for i := range b.Txs {
		tx := &b.Txs[i]
		n += len(tx.Spends()) + len(tx.Outputs)
		if tx.CollateralReturn != nil {
			n++
		}
	}
	return n
}

// Lookup returns the row of op as the block has left it so far: found is
// false when there is none; rec.Spent is non-nil for a spent record.
func (t *BlockTxn) Lookup(op chain.OutPoint) (rec Record, found bool, err error) {
	e, err := t.entry(op)
	if err != nil || e.after == nil {
		return Record{}, false, err
	}
	return *e.after, true, nil
}

func (t *BlockTxn) entry(op chain.OutPoint) (*txnEntry, error) {
	if e := t.entries[op]; e != nil {
		return e, nil
	}
	e := &txnEntry{}
	if u, ok := t.s.recent.get(op); ok {
		t.s.metrics.recentHits.Add(1)
		e.own = Record{Utxo: u}
		e.before, e.after = &e.own, &e.own
	} else if !t.s.txf.mayContain(&op.TxHash) {
		t.s.metrics.filterSkips.Add(1) // no row of this tx on disk: absent
	} else {
		t.s.metrics.recentMisses.Add(1)
		r, found, err := t.s.readRecord(op)
		if err != nil {
			return nil, err
		}
		if found {
			e.own = r
			e.before, e.after = &e.own, &e.own
		}
	}
	t.entries[op] = e
	return e, nil
}

// compareOutPoints orders outpoints as their keys.
func compareOutPoints(a, b chain.OutPoint) int {
	if c := bytes.Compare(a.TxHash[:], b.TxHash[:]); c != 0 {
		return c
	}
	return cmp.Compare(a.Index, b.Index)
}

// readRecord reads op's committed row. Safe from any goroutine.
func (s *Store) readRecord(op chain.OutPoint) (Record, bool, error) {
	var kb [outPointKeyLen]byte
	v, closer, err := s.db.Get(appendOutPointKey(kb[:0], op))
	switch {
	case errors.Is(err, pebble.ErrNotFound):
		return Record{}, false, nil
	case err != nil:
		return Record{}, false, fmt.Errorf("disk: read %s: %w", op, err)
	}
	defer closer.Close()
	r, err := decodeRecord(op, v)
	return r, err == nil, err
}

// Prefetch loads the committed rows of ops that the young-output view does
// not hold and the tx-hash filter does not rule out, reading them from
// Pebble on several goroutines at once (Options.PrefetchWorkers); later
// Lookups of them cost a map access. Call it before any Spend or Create of
// the block: it records rows as they were before the block, which is what a
// first Lookup would read. ops already looked up, and duplicates, are
// skipped.
func (t *BlockTxn) Prefetch(ops []chain.OutPoint) error {
	s := t.s
	var todo []chain.OutPoint
	for _, op := range ops {
		if _, seen := t.entries[op]; seen {
			continue
		}
		if _, ok := s.recent.get(op); ok || !s.txf.mayContain(&op.TxHash) {
			continue // entry answers these from memory
		}
		t.entries[op] = nil // claims op: a duplicate is skipped
		todo = append(todo, op)
	}
	// In key order, the reads' searches of the memtable and of the tables'
	// indexes follow one another down the same paths (see keyBatch).
	slices.SortFunc(todo, compareOutPoints)
	recs := make([]Record, len(todo))
	found := make([]bool, len(todo))
	err := readSorted(s.db, len(todo), s.opts.PrefetchWorkers,
		func(i int, dst []byte) []byte { return appendOutPointKey(dst, todo[i]) },
		func(i int, v []byte) (err error) {
			recs[i], err = decodeRecord(todo[i], v)
			found[i] = err == nil
			return err
		})
	if err != nil {
		err = fmt.Errorf("disk: read inputs: %w", err)
	}
	for i, op := range todo {
		if err != nil {
			delete(t.entries, op) // a later Lookup reads it again and reports
			continue
		}
		s.metrics.recentMisses.Add(1)
		e := &txnEntry{}
		if found[i] {
			e.before, e.after = &recs[i], &recs[i]
		}
		t.entries[op] = e
	}
	return err
}

func (t *BlockTxn) markDirty(op chain.OutPoint, e *txnEntry) {
	if !e.dirty {
		e.dirty = true
		t.order = append(t.order, dirtyEntry{op, e})
	}
}

// Spend marks the live output at op spent by input vin of tx spender in
// this block. The caller has seen it live through Lookup.
func (t *BlockTxn) Spend(op chain.OutPoint, spender chain.Hash, vin uint32) error {
	e, err := t.entry(op)
	if err != nil {
		return err
	}
	if e.after == nil || e.after.Spent != nil {
		return fmt.Errorf("disk: spend of %s which is not live", op)
	}
	if t.win != nil {
		t.win.spend(op, e, t.block.Height)
	}
	t.markDirty(op, e)
	t.count(&e.after.Utxo, spender, true)
	sr := &spentRecord{spent: chain.Spent{TxHash: spender, Height: t.block.Height}}
	sr.rec = Record{Utxo: e.after.Utxo, Spent: &sr.spent, SpentVin: vin, SpentVinKnown: true}
	e.after = &sr.rec
	return nil
}

// spentRecord is a spent Record and its Spent in one allocation.
type spentRecord struct {
	rec   Record
	spent chain.Spent
}

// Create adds the live output u. The caller has checked through Lookup that
// no live output has its outpoint; a spent record there is replaced.
func (t *BlockTxn) Create(u *chain.Utxo) error {
	e, err := t.entry(u.OutPoint)
	if err != nil {
		return err
	}
	if e.after != nil && e.after.Spent == nil {
		return fmt.Errorf("disk: create of %s which is live", u.OutPoint)
	}
	if t.win != nil {
		t.win.create(u, e)
	}
	t.markDirty(u.OutPoint, e)
	t.count(u, u.TxHash, false)
	e.created = true
	e.after = &Record{Utxo: *u}
	return nil
}

// SkipInput counts an unknown input the writer chose to skip.
func (t *BlockTxn) SkipInput() {
	t.skipped++
	if t.win != nil {
		t.win.skipped++
	}
}

// Commit writes the block in one synced batch and makes it the committed
// state (readers see it once the writer calls Publish). On error the
// committed state is unchanged; an error of the commit itself fails the
// store (ErrFailed). The BlockTxn is spent either way.
func (t *BlockTxn) Commit() (*changeset.Set, error) {
	if t.done {
		return nil, errors.New("disk: block already committed")
	}
	t.done = true
	if t.win != nil {
		return t.commitWindow()
	}
	s := t.s
	defer s.releaseScratch()
	prev := s.State()
	st := prev
	h := t.block.Height
	st.Tip = chain.Tip{Height: h, Hash: t.block.Hash}
	st.MaxHeight = max(st.MaxHeight, h)
	st.SkippedInputs += t.skipped
	st.Seq++

	b := s.writeBatch()
	s.dropLapses()
	ch := s.blockChanges(prev.Tip, len(t.order))
	ch.cs.Skipped = int(t.skipped)
	d := newDerived(s.dims, s.dimFuncs, b, &st, ch, len(t.order))

	undo := undoDelta{prev: prev.Tip, skipped: t.skipped, entries: make([]undoEntry, 0, len(t.order))}
	var spentHere []byte // packed outpoints spent at h: the 0x05 row
	var key, val []byte
	for _, de := range t.order {
		op, e := de.op, de.e
		if e.before != nil && e.before.Spent == nil {
			d.remove(&e.before.Utxo)
		}
		if e.after.Spent == nil {
			d.add(&e.after.Utxo)
		} else {
			spentHere = append(spentHere, op.TxHash[:]...)
			spentHere = binary.BigEndian.AppendUint32(spentHere, op.Index)
		}
		if e.before != nil && e.before.Spent == nil {
			s.lapseLease(b, op) // spent: its lease lapses (lease.go)
		}
		if e.before != nil && e.before.Frozen {
			// Spent, or spent and created again by a later tx of the block.
			why := "a transaction of the block"
			if e.after.Spent != nil {
				why = "spent by " + e.after.Spent.TxHash.String()
			}
			s.lapseFreeze(b, op, h, why)
		}
		ch.outPoint(op)
		key = appendOutPointKey(key[:0], op)
		val = appendRecord(val[:0], e.after)
		_ = b.Set(key, val, nil)
		undo.entries = append(undo.entries, t.undoEntry(op, e))
	}
	s.commitCounters(b, d, h, [][]counterDelta{t.endCounters()}, []bool{true}, []uint64{h})
	if err := d.flushBalances(s.db, s.balances, s.opts.PrefetchWorkers); err != nil {
		return nil, fmt.Errorf("disk: apply block %d: %w", h, err)
	}
	if len(spentHere) > 0 {
		_ = b.Set(heightKey(prefixSpentAt, h), spentHere, nil)
	}
	s.undoBuf = appendUndo(s.undoBuf[:0], &undo) // the batch copies it
	_ = b.Set(heightKey(prefixUndo, h), s.undoBuf, nil)
	_ = b.Set(heightKey(prefixBlockHash, h), appendBlockHashRow(nil, t.block.Hash, t.block.Slot), nil)
	_ = b.Set(heightKey(prefixBlockTime, h), appendBlockTimeRow(nil, t.block.Time), nil)
	_ = b.Set(hashBlockKey(t.block.Hash), binary.BigEndian.AppendUint64(nil, h), nil)
	if err := s.visibilityEdge(h, ch); err != nil {
		return nil, fmt.Errorf("disk: apply block %d: %w", h, err)
	}
	var pruned pruneWork
	if err := s.prune(b, &st, t.entries, &pruned, 1); err != nil {
		return nil, fmt.Errorf("disk: prune at block %d: %w", h, err)
	}
	if !s.pending.empty() {
		s.pendingBlock(b, h, t.block.Time, pendingBlockTxs(t.block), &st)
	}
	if err := s.prunePending(b, &st, s.opts.PruneBudget); err != nil {
		return nil, fmt.Errorf("disk: prune pending at block %d: %w", h, err)
	}
	logFloor, err := s.logChange(b, &st, &chain.Change{Kind: chain.ChangeApply, Block: t.block, SpentKnown: true, Spent: t.spentBefore(), Pending: s.pendingMoves(0)})
	if err != nil {
		return nil, err
	}
	_ = b.Set(keyState, appendState(nil, &st), nil)
	raised := s.raiseSchema(b)
	if err := s.commitKeys(b); err != nil {
		return nil, fmt.Errorf("disk: commit block %d: %w", h, err)
	}
	if raised {
		s.schemaVersion = SchemaVersion
	}
	s.counted(h)
	s.afterCommit(b)
	s.reportLapses()
	t.committed(d, &st, pruned, logFloor)
	s.addPendingTouched(ch, true)
	ch.setBalances(d)
	ch.cs.NewTip, ch.cs.Seq = st.Tip, st.Seq
	cs := ch.cs // ch is the store's, reused by the next block
	return &cs, nil
}

// spentBefore lists the outputs the block spent that were live before it,
// in outpoint order: what its change-log record carries (chain.Change.Spent).
func (t *BlockTxn) spentBefore() []chain.Utxo {
	if t.s.opts.LogRetention == 0 {
		return nil
	}
	var spent []chain.Utxo
	for _, de := range t.order {
		e := de.e
		if e.before != nil && e.before.Spent == nil && (e.after.Spent != nil || e.created) {
			spent = append(spent, e.before.Utxo)
		}
	}
	slices.SortFunc(spent, func(a, b chain.Utxo) int { return compareOutPoints(a.OutPoint, b.OutPoint) })
	return spent
}

// committed brings the store's in-memory companions up to a batch that is
// now durable (a block's or a window's): the change log's floor, the
// young-output view, the tx filter, the balance cache, the prune metrics and
// the committed state. Writer goroutine only.
func (t *BlockTxn) committed(d *derived, st *State, pruned pruneWork, logFloor uint64) {
	s := t.s
	s.logFloor = logFloor
	var lastTx chain.Hash // a tx's outputs are consecutive in t.order: add its hash once
	for i, de := range t.order {
		op, e := de.op, de.e
		if e.after.Spent == nil {
			s.recent.add(&e.after.Utxo)
		} else {
			s.recent.remove(op)
		}
		if e.created && (i == 0 || op.TxHash != lastTx) {
			s.txFilterAdded(&op.TxHash)
			lastTx = op.TxHash
		}
	}
	d.commitBalances(s.balances)
	s.metrics.prunedRecords.Add(pruned.records)
	s.metrics.prunedUndo.Add(pruned.undo)
	s.state.Store(st)
	s.maintainTxFilter()
}

// undoEntry returns the before-image of op's row for the undo delta.
func (t *BlockTxn) undoEntry(op chain.OutPoint, e *txnEntry) undoEntry {
	return t.s.undoEntryOf(op, e.before, e.created)
}

// undoEntryOf returns the undo entry of op for a block that found the row
// before (nil: none) and created an output there or not.
func (s *Store) undoEntryOf(op chain.OutPoint, before *Record, created bool) undoEntry {
	switch {
	case before == nil:
		return undoEntry{op: op, kind: undoAbsent}
	case s.opts.UndoMode == UndoCompact && before.Spent == nil && !created:
		// The row now is exactly the before-image plus this block's spender.
		return undoEntry{op: op, kind: undoSpentHere}
	default:
		return undoEntry{op: op, kind: undoFullRecord, before: appendRecord(nil, before)}
	}
}

// visibilityEdge adds to ch the outpoints whose spent record becomes
// invisible at tip h, or visible again when the tip goes back below h: those
// spent at h - PruneDepth - 1 (reads show a spent record while
// tip - spent height <= PruneDepth).
func (s *Store) visibilityEdge(h uint64, ch *changes) error {
	p := s.opts.PruneDepth
	if h < p+1 {
		return nil
	}
	v, err := s.get(heightKey(prefixSpentAt, h-p-1))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read spent list: %w", err)
	}
	return forEachPackedOutPoint(v, func(op chain.OutPoint) { ch.outPoint(op) })
}

const packedOutPointLen = chain.HashSize + 4

func forEachPackedOutPoint(v []byte, fn func(chain.OutPoint)) error {
	if len(v)%packedOutPointLen != 0 {
		return fmt.Errorf("spent list of %d bytes: %w", len(v), ErrCorrupt)
	}
	for ; len(v) > 0; v = v[packedOutPointLen:] {
		var op chain.OutPoint
		copy(op.TxHash[:], v)
		op.Index = binary.BigEndian.Uint32(v[chain.HashSize:])
		fn(op)
	}
	return nil
}

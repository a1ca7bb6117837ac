package disk

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/internal/extsort"
)

// # Bulk load
//
// An import from genesis into an empty store spends most of its time on
// work no reader ever sees: the rows of outputs created and spent long
// before the tip, rewritten by Pebble's compactions level after level, and
// lookups of inputs and balance rows that miss the block cache. A bulk load
// builds the store of a chain directly, in key order:
//
//  1. Add streams the blocks once. Each creation and each spend becomes a
//     record of an external sort (internal/extsort) keyed by the outpoint,
//     then by its place in the chain (height, transaction, spends before
//     creations, input or output index); the creation carries the
//     output's row as the store writes it. Each block's hash, slot and
//     time go to a second sort, by height.
//  2. Finish(below) merges the first sort: each outpoint's events, in chain
//     order, replayed as the writer applies them (an input that is not a
//     live output is refused, or skipped with SkipUnknownInputs; an input
//     spent twice in one block and an output created while live are
//     refused), give the outputs live after block below-1 in outpoint
//     order: their rows go straight into tables, and the count and digest
//     are summed. Each live output's index rows, balance and asset
//     contributions, the blocks' hash, time and hash-to-height rows, and
//     what the blocks at the tip keep (bulktail.go: undo deltas, spent
//     records and lists, change-log records), go to more sorts, whose
//     merge sums the contributions into balance and asset rows and writes
//     everything into more tables.
//  3. One Pebble ingestion adds every table, with the state row, to the
//     store's bottom level: all of it or nothing.
//
// The loaded store holds what catch-up windows whose target is the last
// block leave, byte for byte, the state row with its prune cursors
// included (as long as pruning keeps up: Options.PruneBudget); blocks
// applied one by one leave the same but for the order of the outpoints
// in a spent-at list (a block alone lists them in the order it first
// changed each). TestBulkLoadEqualsWindows checks it row by row.
// A store with address counters, pending transactions or leases is
// refused (ErrBulkRefused), as is any store that has taken a block.
//
// An error (a refused block, a failed write, a cancelled context) leaves
// the store as it was: empty. Close removes the sorts' run files and the
// tables not ingested.

// ErrBulkNoSpace is a bulk load's answer when what it would write next
// leaves less than BulkOptions.Reserve free: it stops, with nothing loaded.
var ErrBulkNoSpace = errors.New("disk: bulk load: not enough free space")

// BulkSpace reports the bytes available on a file system (statfs: the
// writer's DiskSpace). Safe for concurrent use.
type BulkSpace interface {
	AvailableBytes() (uint64, error)
}

// checkSpace fails with ErrBulkNoSpace unless need more bytes leave
// Reserve free. Safe for concurrent use (the sorts' and the tables'
// goroutines).
func (l *BulkLoad) checkSpace(need int64) error {
	sp := l.opts.Space
	if sp == nil {
		return nil
	}
	free, err := sp.AvailableBytes()
	if err != nil {
		return fmt.Errorf("disk: bulk load: free space: %w", err)
	}
	if free < l.opts.Reserve+uint64(max(need, 0)) {
		return fmt.Errorf("%w: %d bytes free, %d more to write and %d to keep free", ErrBulkNoSpace, free, need, l.opts.Reserve)
	}
	return nil
}

// sortOptions are the options of a sort of the load with mem bytes of
// buffer.
func (l *BulkLoad) sortOptions(mem int) extsort.Options {
	return extsort.Options{Dir: l.dir, MemBytes: mem, BeforeWrite: l.checkSpace}
}

// ErrBulkRefused is returned by NewBulkLoad for a store a bulk load cannot
// fill: one that is not empty, or keeps what a bulk load does not build.
var ErrBulkRefused = errors.New("disk: bulk load refused")

// BulkOptions configure a bulk load.
type BulkOptions struct {
	// TempDir holds the sorts' run files and the tables until they are
	// ingested: about twice the finished store at the peak. It should be
	// on the store's file system, so that ingestion links the tables
	// rather than copying them (default: the store's directory).
	TempDir string
	// MemBytes bounds the sorts' buffers: each of the two large sorts
	// holds at most this much, the block sort an eighth (default 256 MiB).
	MemBytes int
	// SkipUnknownInputs skips (and counts in State.SkippedInputs) an
	// input that is not a live output instead of refusing its block, as
	// writer.Options.SkipUnknownInputs.
	SkipUnknownInputs bool
	// Progress, when set, is called on Finish's goroutine during its long
	// phases, about every million records.
	Progress func(BulkProgress)
	// Space, when set, reports the free bytes of TempDir's file system:
	// before it writes a sorted run or begins a table, the load checks
	// that Reserve bytes stay free beyond what it writes, and fails with
	// ErrBulkNoSpace (nothing loaded) if not. The load holds up to about
	// twice the finished store there at its peak.
	Space   BulkSpace
	Reserve uint64
	// Reread reads again, in order, the blocks added from height from on,
	// calling fn with each, and stops at fn's first error, which it
	// returns (fn stops it after the last block loaded): the change-log
	// records of the last LogRetention blocks
	// hold them whole, and a load does not keep them. Needed when the
	// store keeps a change log.
	Reread func(from uint64, fn func(*chain.Block) error) error
}

// BulkProgress is how far Finish is: Done of Total records of Phase.
type BulkProgress struct {
	Phase       string // "outputs" (merging the outputs' events), "rows" (writing index and balance rows)
	Done, Total uint64
}

// BulkLoad is a bulk load in progress (see the section comment). Writer
// goroutine only, with no writer running on the store; Close it in every
// case.
type BulkLoad struct {
	s        *Store
	opts     BulkOptions
	dir      string // the load's own directory under opts.TempDir
	events   *extsort.Sorter
	blocks   *extsort.Sorter
	tip      chain.Tip
	first    uint64 // height of the first block added
	added    uint64 // blocks added
	keyBuf   []byte
	valBuf   []byte
	failed   error // sticky: the first Add error
	finished bool
	// created and spent count the loaded blocks' changes as the writer
	// counts each block's (changeset.Set.Created, Spent): an output
	// created and spent in one block is in neither, a skipped input in
	// neither.
	created, spent uint64
}

// Changes returns the outputs the loaded blocks created and spent, each
// block counted as the writer counts a block alone (an output created and
// spent in one block in neither). Valid after Finish.
func (l *BulkLoad) Changes() (created, spent uint64) { return l.created, l.spent }

// bulkFillable reports why s cannot take a bulk load now (nil: it can):
// checked when the load starts and again right before its ingestion.
func (s *Store) bulkFillable() error {
	if err := s.canWrite(); err != nil {
		return err
	}
	st := s.State()
	switch {
	case !st.Tip.Empty || st.Seq != 0:
		return fmt.Errorf("%w: the store is at %s (seq %d): a bulk load fills an empty store", ErrBulkRefused, st.Tip, st.Seq)
	case s.count.on:
		return fmt.Errorf("%w: the store keeps address counters, which a bulk load does not build", ErrBulkRefused)
	case !s.pending.empty():
		return fmt.Errorf("%w: the store holds pending transactions", ErrBulkRefused)
	case len(s.leases.held) > 0:
		return fmt.Errorf("%w: the store holds leases", ErrBulkRefused)
	case s.txfRebuild != nil:
		return fmt.Errorf("%w: a tx filter rebuild is running", ErrBulkRefused)
	}
	return nil
}

// bulkDirPattern names a bulk load's directory of temporary files.
const bulkDirPattern = "bulk-load-*"

// NewBulkLoad starts a bulk load of s, which must be empty. With
// BulkOptions.TempDir unset, it first removes what a load killed before
// its Close left in the store's directory.
func (s *Store) NewBulkLoad(opts BulkOptions) (*BulkLoad, error) {
	if err := s.bulkFillable(); err != nil {
		return nil, err
	}
	if s.opts.LogRetention > 0 && opts.Reread == nil {
		return nil, errors.New("disk: bulk load: the store keeps a change log, whose records need their blocks read again (BulkOptions.Reread)")
	}
	if opts.TempDir == "" {
		opts.TempDir = s.dir
		// A load killed before its Close left its directory here; the
		// store's lock says no other load is running on it.
		stale, _ := filepath.Glob(filepath.Join(s.dir, bulkDirPattern))
		for _, d := range stale {
			if err := os.RemoveAll(d); err != nil {
				return nil, fmt.Errorf("disk: bulk load: remove a killed load's files: %w", err)
			}
		}
	}
	if opts.MemBytes <= 0 {
		opts.MemBytes = 256 << 20
	}
	dir, err := os.MkdirTemp(opts.TempDir, bulkDirPattern)
	if err != nil {
		return nil, fmt.Errorf("disk: bulk load: %w", err)
	}
	l := &BulkLoad{s: s, opts: opts, dir: dir, tip: chain.Tip{Empty: true}}
	if l.events, err = extsort.New(l.sortOptions(opts.MemBytes)); err == nil {
		l.blocks, err = extsort.New(l.sortOptions(max(opts.MemBytes/8, 1<<20)))
	}
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("disk: bulk load: %w", err)
	}
	return l, nil
}

// Tip returns the last block added (empty before the first).
func (l *BulkLoad) Tip() chain.Tip { return l.tip }

// First returns the height of the first block added.
func (l *BulkLoad) First() uint64 { return l.first }

// Add adds block b, which must extend the last one added (the first block
// may have any height, and no prev_hash). An error is sticky: the load can
// only be closed after it.
func (l *BulkLoad) Add(b *chain.Block) error {
	if l.failed != nil {
		return l.failed
	}
	if l.finished {
		return errors.New("disk: bulk load: Add after Finish")
	}
	if err := l.add(b); err != nil {
		l.failed = err
		return err
	}
	return nil
}

func (l *BulkLoad) add(b *chain.Block) error {
	if err := chain.CheckLinkage(l.tip, b); err != nil {
		return err
	}
	if l.tip.Empty {
		l.first = b.Height
	}
	for pos := range b.Txs {
		tx := &b.Txs[pos]
		for vin, in := range tx.Spends() {
			l.keyBuf = appendBulkEventKey(l.keyBuf[:0], in, b.Height, uint32(pos), bulkSpend, uint32(vin))
			if err := l.events.Add(l.keyBuf, tx.Hash[:]); err != nil {
				return err
			}
		}
		var err error
		tx.Creates(func(index uint32, out *chain.Output, collateral bool) {
			if err != nil {
				return
			}
			u := chain.NewUtxo(b, uint32(pos), tx, index, out, collateral)
			l.keyBuf = appendBulkEventKey(l.keyBuf[:0], u.OutPoint, b.Height, uint32(pos), bulkCreate, index)
			l.valBuf = appendRecord(l.valBuf[:0], &Record{Utxo: u})
			err = l.events.Add(l.keyBuf, l.valBuf)
		})
		if err != nil {
			return err
		}
	}
	l.keyBuf = binary.BigEndian.AppendUint64(l.keyBuf[:0], b.Height)
	l.valBuf = appendBlockTimeRow(appendBlockHashRow(l.valBuf[:0], b.Hash, b.Slot), b.Time)
	if err := l.blocks.Add(l.keyBuf, l.valBuf); err != nil {
		return err
	}
	l.tip = chain.Tip{Height: b.Height, Hash: b.Hash}
	l.added++
	return nil
}

// The event sort's key: the outpoint (hash, index), then the event's place
// in chain order. Spends come before creations within a transaction, as
// the writer applies them.
const (
	bulkSpend  byte = 0
	bulkCreate byte = 1

	bulkOutPointLen = chain.HashSize + 4
	bulkEventKeyLen = bulkOutPointLen + 8 + 4 + 1 + 4
)

func appendBulkEventKey(dst []byte, op chain.OutPoint, height uint64, pos uint32, kind byte, n uint32) []byte {
	dst = append(dst, op.TxHash[:]...)
	dst = binary.BigEndian.AppendUint32(dst, op.Index)
	dst = binary.BigEndian.AppendUint64(dst, height)
	dst = binary.BigEndian.AppendUint32(dst, pos)
	dst = append(dst, kind)
	return binary.BigEndian.AppendUint32(dst, n)
}

// bulkEvent is an event key decoded.
type bulkEvent struct {
	op     chain.OutPoint
	height uint64
	order  []byte // the key's chain-order part: height, pos, kind, n
	kind   byte
	n      uint32
}

func decodeBulkEvent(k []byte) (bulkEvent, error) {
	if len(k) != bulkEventKeyLen {
		return bulkEvent{}, fmt.Errorf("disk: bulk load: event key of %d bytes: %w", len(k), ErrCorrupt)
	}
	var e bulkEvent
	copy(e.op.TxHash[:], k)
	e.op.Index = binary.BigEndian.Uint32(k[chain.HashSize:])
	e.order = k[bulkOutPointLen:]
	e.height = binary.BigEndian.Uint64(e.order)
	e.kind = e.order[12]
	e.n = binary.BigEndian.Uint32(e.order[13:])
	return e, nil
}

// refusal is the first refused event found so far, in chain order.
type refusal struct {
	order []byte
	err   error
}

func (r *refusal) offer(order []byte, err error) {
	if r.err == nil || bytes.Compare(order, r.order) < 0 {
		r.order, r.err = bytes.Clone(order), err
	}
}

// Finish loads the blocks added below height below (every block added
// when below is above the last) into the store, in one ingestion, and
// returns the state it is at. It refuses to load nothing (below at or
// under the first block's height). On an error nothing is loaded: a
// refused block's error is the one the writer gives the first block it
// refuses (chain.ErrUnknownInput, chain.ErrDoubleSpend,
// chain.ErrDuplicateOutpoint). The blocks at and above below, if any, are
// the caller's to apply through the writer. Call it once.
func (l *BulkLoad) Finish(ctx context.Context, below uint64) (State, error) {
	if l.failed != nil {
		return State{}, l.failed
	}
	if l.finished {
		return State{}, errors.New("disk: bulk load: Finish called twice")
	}
	l.finished = true
	below = min(below, l.tip.Height+1)
	if l.added == 0 || below <= l.first {
		return State{}, fmt.Errorf("disk: bulk load: no block below height %d to load", below)
	}
	st, paths, err := l.build(ctx, below)
	if err != nil {
		return State{}, err
	}
	s := l.s
	if err := errors.Join(ctx.Err(), s.bulkFillable()); err != nil {
		return State{}, err // a writer took a block meanwhile, say
	}
	// The memtable holds the store's first rows (schema, settings, state):
	// flushed, the tables the ingestion does not overlap (all but the
	// state row's) go to the bottom level, not behind the memtable.
	if err := s.db.Flush(); err != nil {
		return State{}, fmt.Errorf("disk: bulk load: flush: %w", err)
	}
	if err := s.db.Ingest(ctx, paths); err != nil {
		return State{}, s.fail(fmt.Errorf("ingest the bulk load's tables: %w", err))
	}
	s.state.Store(&st)
	if err := s.loadLogFloor(); err != nil {
		return State{}, s.fail(fmt.Errorf("read the change log: %w", err))
	}
	s.txf = nil // rebuilt from the loaded outputs by the next block
	s.Publish()
	return st, nil
}

// Check looks for a refused block among the blocks added (the ones before
// an Add that failed, say: a block that does not link to them) and returns
// the error the writer would give the first, or nil: a caller that stops
// at a bad record reports an earlier refused block first, as the writer
// applying the blocks in order would have. It writes nothing; the load
// can only be closed after it.
func (l *BulkLoad) Check(ctx context.Context) error {
	if l.finished {
		return errors.New("disk: bulk load: Check after Finish")
	}
	l.finished = true
	if l.added == 0 {
		return nil
	}
	var st State
	var refused refusal
	if err := l.mergeEvents(ctx, l.tip.Height+1, &st, nil, nil, nil, &refused); err != nil {
		return err
	}
	return refused.err
}

// build writes the tables of the blocks below height below, and the table
// of the state row, and returns the state and the tables' paths.
func (l *BulkLoad) build(ctx context.Context, below uint64) (State, []string, error) {
	if err := ctx.Err(); err != nil {
		return State{}, nil, err
	}
	s := l.s
	st := State{
		Tip:       chain.Tip{Height: below - 1},
		MaxHeight: below - 1,
		Seq:       below - l.first,
	}
	if keep := s.opts.PruneDepth + s.opts.RollbackWindow; st.Tip.Height > keep {
		st.PruneHeight = st.Tip.Height - keep // what pruneSpent leaves at this tip
	}
	if w := s.opts.RollbackWindow; st.Tip.Height >= w {
		st.UndoFloor = st.Tip.Height - w + 1 // what prune leaves at this tip
	}
	rows, err := extsort.New(l.sortOptions(l.opts.MemBytes))
	if err != nil {
		return State{}, nil, fmt.Errorf("disk: bulk load: %w", err)
	}
	defer rows.Close()
	utxos := l.newTables("outputs")
	defer utxos.abort()
	tail, err := l.newTail(below - 1)
	if err != nil {
		return State{}, nil, err
	}
	defer tail.close()
	var refused refusal
	if err := l.mergeEvents(ctx, below, &st, rows, utxos, tail, &refused); err != nil {
		return State{}, nil, err
	}
	if refused.err != nil {
		return State{}, nil, refused.err
	}
	// The events' runs are read: let their disk (and page cache) go to
	// the rows' sort.
	if err := l.events.Close(); err != nil {
		return State{}, nil, fmt.Errorf("disk: bulk load: %w", err)
	}
	l.events = nil
	hashes := map[uint64]chain.Hash{}
	from := min(tail.undoFrom, tail.logFrom)
	if from > 0 {
		from--
	}
	if err := l.addBlockRows(below, from, &st, rows, hashes); err != nil {
		return State{}, nil, err
	}
	if err := l.writeTail(ctx, tail, hashes, &st, rows); err != nil {
		return State{}, nil, err
	}
	derived := l.newTables("rows")
	defer derived.abort()
	if err := l.writeRows(ctx, rows, derived); err != nil {
		return State{}, nil, err
	}
	meta := l.newTables("state")
	defer meta.abort()
	if err := meta.set(keyState, appendState(nil, &st)); err != nil {
		return State{}, nil, err
	}
	var paths []string
	for _, t := range []*bulkTables{meta, utxos, derived} {
		if err := t.finish(); err != nil {
			return State{}, nil, err
		}
		paths = append(paths, t.paths...)
	}
	return st, paths, nil
}

// mergeEvents replays each outpoint's events below height below: it
// writes the rows of the outputs live after block below-1, and of those
// spent since tail.keepFrom, to utxos, the live outputs' derived rows to
// rows, and what the tip's blocks keep to tail; it sums the count and
// digest into st and counts skipped inputs. Refused events go to refused
// (the earliest kept): once one is found, nothing more is written, and the
// merge goes on only to find the earliest. With rows nil (Check) it writes
// nothing.
func (l *BulkLoad) mergeEvents(ctx context.Context, below uint64, st *State, rows *extsort.Sorter, utxos *bulkTables, tail *bulkTail, refused *refusal) error {
	it, err := l.events.Sort()
	if err != nil {
		return fmt.Errorf("disk: bulk load: %w", err)
	}
	defer it.Close()
	total := l.events.Records()
	m := outpointReplay{l: l, st: st, rows: rows, utxos: utxos, tail: tail, refused: refused}
	if tail != nil {
		m.ot.t = tail
	}
	var done uint64
	for it.Next() {
		if done++; done%(1<<20) == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
			l.progress("outputs", done, total)
		}
		e, err := decodeBulkEvent(it.Key())
		if err != nil {
			return err
		}
		if !m.started || e.op != m.op {
			if err := m.end(); err != nil {
				return err
			}
			m.start(e.op)
		}
		if m.broken || e.height >= below {
			continue
		}
		if err := m.event(&e, it.Value()); err != nil {
			return err
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("disk: bulk load: %w", err)
	}
	l.progress("outputs", done, total)
	return m.end()
}

// outpointReplay replays one outpoint's events at a time (mergeEvents).
type outpointReplay struct {
	l       *BulkLoad
	st      *State
	rows    *extsort.Sorter // nil: check only
	utxos   *bulkTables
	tail    *bulkTail
	refused *refusal
	ot      outpointTail

	op      chain.OutPoint
	started bool
	broken  bool   // the outpoint's events hit a refusal
	live    bool   // rec is a live output's row
	rec     []byte // the last output at the outpoint's row (live or spent)
	liveAt  uint64 // the height that created it
	spent   bool   // it was spent: spentAt, spender, vin
	spentAt uint64
	// spentIn is the height of the last spend of a live output at the
	// outpoint, kept across a creation again (the writer refuses a
	// second spend of an outpoint in one block, whatever came between).
	spentIn   uint64
	spentSeen bool
	spender   chain.Hash
	vin       uint32

	key, val []byte
	dimKeys  []DimKey
	filters  []assetFilter
}

func (m *outpointReplay) start(op chain.OutPoint) {
	m.op, m.started, m.broken, m.live, m.spent, m.spentSeen = op, true, false, false, false, false
	m.ot.op, m.ot.pending = op, false
}

// spentRecord returns the row of the last output as spent.
func (m *outpointReplay) spentRecord() ([]byte, error) {
	r, err := decodeRecord(m.op, m.rec)
	if err != nil {
		return nil, fmt.Errorf("disk: bulk load: %w", err)
	}
	r.Spent, r.SpentVin, r.SpentVinKnown = &chain.Spent{TxHash: m.spender, Height: m.spentAt}, m.vin, true
	return appendRecord(nil, &r), nil
}

func (m *outpointReplay) event(e *bulkEvent, v []byte) error {
	l, refused := m.l, m.refused
	switch e.kind {
	case bulkSpend:
		var spender chain.Hash
		copy(spender[:], v)
		switch {
		case m.spentSeen && m.spentIn == e.height:
			m.broken = true
			refused.offer(e.order, fmt.Errorf("block %d tx %s spends %s twice in the block: %w", e.height, spender, e.op, chain.ErrDoubleSpend))
		case !m.live && l.opts.SkipUnknownInputs:
			m.st.SkippedInputs++
			if m.tail != nil {
				m.tail.skip(e.height)
			}
		case !m.live:
			m.broken = true
			refused.offer(e.order, fmt.Errorf("block %d tx %s input %s is not a live unspent output: %w", e.height, spender, e.op, chain.ErrUnknownInput))
		default:
			if m.liveAt == e.height {
				l.created-- // created and spent in one block: neither
			} else {
				l.spent++
			}
			if m.tail != nil && m.rows != nil {
				if err := m.ot.touch(e, m.rec, true, false); err != nil {
					return err
				}
				if err := m.tail.spend(e, m.rec, m.liveAt); err != nil {
					return err
				}
			}
			m.live, m.spent, m.spentAt, m.spender, m.vin = false, true, e.height, spender, e.n
			m.spentSeen, m.spentIn = true, e.height
		}
	case bulkCreate:
		if m.live {
			m.broken = true
			refused.offer(e.order, fmt.Errorf("block %d tx %s output %d: %s is already live: %w", e.height, e.op.TxHash, e.op.Index, e.op, chain.ErrDuplicateOutpoint))
			return nil
		}
		if m.tail != nil && m.rows != nil {
			var before []byte // a spent record pruning has not removed yet
			if m.spent && m.tail.recordPresent(m.spentAt, e.height) {
				var err error
				if before, err = m.spentRecord(); err != nil {
					return err
				}
			}
			if err := m.ot.touch(e, before, false, true); err != nil {
				return err
			}
			if err := m.tail.create(e, v); err != nil {
				return err
			}
		}
		m.rec = append(m.rec[:0], v...)
		m.live, m.liveAt, m.spent = true, e.height, false
		l.created++
	default:
		return fmt.Errorf("disk: bulk load: event kind %d: %w", e.kind, ErrCorrupt)
	}
	return nil
}

// end writes what the outpoint's events leave: its row (live, or spent
// recently enough to keep its record) and a live output's derived rows.
func (m *outpointReplay) end() error {
	if !m.started || m.broken || m.refused.err != nil || m.rows == nil {
		return nil
	}
	if m.tail != nil {
		if err := m.ot.flush(); err != nil {
			return err
		}
	}
	if !m.live {
		if m.spent && m.tail != nil && m.spentAt >= m.tail.keepFrom {
			row, err := m.spentRecord()
			if err != nil {
				return err
			}
			m.key = appendOutPointKey(m.key[:0], m.op)
			return m.utxos.set(m.key, row)
		}
		return nil
	}
	r, err := decodeRecord(m.op, m.rec)
	if err != nil {
		return fmt.Errorf("disk: bulk load: %w", err)
	}
	u := &r.Utxo
	m.key = appendOutPointKey(m.key[:0], m.op)
	if err := m.utxos.set(m.key, m.rec); err != nil {
		return err
	}
	m.st.UtxoCount++
	m.st.Digest.AddTerm(chain.UtxoTerm(u))
	s := m.l.s
	pos := u.Position()
	m.val = appendIndexValue(m.val[:0], u)
	m.dimKeys, m.filters = appendDimKeys(m.dimKeys[:0], m.filters[:0], s.dims, s.dimFuncs, u)
	var q [8]byte
	for i, k := range m.dimKeys {
		m.key = appendIndexKey(m.key[:0], k, pos)
		if err := m.rows.Add(m.key, m.val); err != nil {
			return err
		}
		m.key = appendBalanceKey(m.key[:0], k)
		if err := m.rows.Add(m.key, binary.BigEndian.AppendUint64(q[:0], u.Value)); err != nil {
			return err
		}
		for j := range u.Assets {
			a := &u.Assets[j]
			if !m.filters[i].keep(a) {
				continue
			}
			m.key = appendAssetKey(m.key[:0], k, a.Policy, a.Name)
			if err := m.rows.Add(m.key, binary.BigEndian.AppendUint64(q[:0], a.Quantity)); err != nil {
				return err
			}
		}
	}
	return nil
}

// addBlockRows adds the hash, time and hash-to-height rows of the blocks
// below height below to rows, the tip's hash to st, and to hashes the
// hashes of the blocks from height from up.
func (l *BulkLoad) addBlockRows(below, from uint64, st *State, rows *extsort.Sorter, hashes map[uint64]chain.Hash) error {
	it, err := l.blocks.Sort()
	if err != nil {
		return fmt.Errorf("disk: bulk load: %w", err)
	}
	defer it.Close()
	var height [8]byte
	for it.Next() {
		h := binary.BigEndian.Uint64(it.Key())
		if h >= below {
			break
		}
		v := it.Value()
		hashRow, timeRow := v[:len(v)-blockTimeRowLen], v[len(v)-blockTimeRowLen:]
		var hash chain.Hash
		copy(hash[:], hashRow)
		if err := errors.Join(
			rows.Add(heightKey(prefixBlockHash, h), hashRow),
			rows.Add(heightKey(prefixBlockTime, h), timeRow),
			rows.Add(hashBlockKey(hash), binary.BigEndian.AppendUint64(height[:0], h)),
		); err != nil {
			return err
		}
		if h >= from {
			hashes[h] = hash
		}
		if h == below-1 {
			st.Tip.Hash = hash
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("disk: bulk load: %w", err)
	}
	return nil
}

// writeRows writes rows' records in key order to t: index and block rows
// as they are, a value's balance row and asset rows summed from the
// contributions of its outputs (a balance row counts its asset rows, which
// follow it in key order, so a value's asset rows are held until its last).
func (l *BulkLoad) writeRows(ctx context.Context, rows *extsort.Sorter, t *bulkTables) error {
	it, err := rows.Sort()
	if err != nil {
		return fmt.Errorf("disk: bulk load: %w", err)
	}
	defer it.Close()
	total := rows.Records()
	var (
		done    uint64
		balKey  []byte // the balance row being summed, or nil
		bal     chain.Balance
		assets  [][2][]byte // its asset rows: key, quantity
		assetK  []byte      // the asset row being summed, or nil
		assetQ  chain.Uint128
		row, kb []byte
	)
	endAsset := func() {
		if assetK != nil && !assetQ.IsZero() {
			assets = append(assets, [2][]byte{assetK, appendAssetQuantity(nil, assetQ)})
		}
		assetK, assetQ = nil, chain.Uint128{}
	}
	endBalance := func() error {
		endAsset()
		if balKey == nil {
			return nil
		}
		r := balanceRow{bal: chain.Balance{Count: bal.Count, Value: bal.Value}, assetRows: uint64(len(assets))}
		row = appendRow(row[:0], &r)
		if err := t.set(balKey, row); err != nil {
			return err
		}
		for _, a := range assets {
			if err := t.set(a[0], a[1]); err != nil {
				return err
			}
		}
		balKey, bal, assets = nil, chain.Balance{}, assets[:0]
		return nil
	}
	const balanceKeyLen = 1 + dimKeySize
	for it.Next() {
		if done++; done%(1<<20) == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
			l.progress("rows", done, total)
		}
		k, v := it.Key(), it.Value()
		switch {
		case len(k) == balanceKeyLen && k[0] == prefixBalance:
			if balKey == nil || !bytes.Equal(k, balKey) {
				if err := endBalance(); err != nil {
					return err
				}
				balKey = append(kb[:0:0], k...)
			}
			bal.Count++
			bal.Value = bal.Value.AddU64(binary.BigEndian.Uint64(v))
		case len(k) > balanceKeyLen && k[0] == prefixBalance:
			if balKey == nil || !bytes.HasPrefix(k, balKey) {
				return fmt.Errorf("disk: bulk load: asset row %x without its balance row: %w", k, ErrCorrupt)
			}
			if assetK == nil || !bytes.Equal(k, assetK) {
				endAsset()
				assetK = bytes.Clone(k)
			}
			assetQ = assetQ.AddU64(binary.BigEndian.Uint64(v))
		default:
			if err := endBalance(); err != nil {
				return err
			}
			if err := t.set(k, v); err != nil {
				return err
			}
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("disk: bulk load: %w", err)
	}
	l.progress("rows", done, total)
	return endBalance()
}

func (l *BulkLoad) progress(phase string, done, total uint64) {
	if l.opts.Progress != nil {
		l.opts.Progress(BulkProgress{Phase: phase, Done: done, Total: total})
	}
}

// Close ends the load and removes its temporary files. A Finish that
// returned no error has already ingested its tables.
func (l *BulkLoad) Close() error {
	var errs []error
	for _, so := range []*extsort.Sorter{l.events, l.blocks} {
		if so != nil {
			errs = append(errs, so.Close())
		}
	}
	errs = append(errs, os.RemoveAll(l.dir))
	return errors.Join(errs...)
}

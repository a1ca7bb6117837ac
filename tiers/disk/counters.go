package disk

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"github.com/utxo-cache/utxo-cache/chain"
)

// # Address counters
//
// A store that keeps address counters (Options.Counters, recorded: see
// below) keeps, per address and per script hash (DimScriptHash, when the
// store indexes it), the lifetime figures Esplora's chain_stats answer:
//
//   - tx_count: the distinct transactions that fund or spend it;
//   - funded_txo_count and funded_txo_sum: the outputs created under it
//     (every creation: an output created and spent in one block or one
//     catch-up window counts as funded and as spent);
//   - spent_txo_count and spent_txo_sum: the outputs under it spent.
//
// They are counted as the writer reports each spend and creation (Spend,
// Create), so they count what the block does, not the net change rows
// keep. A transaction's spends and creations are reported together, so a
// transaction that both spends from and pays to an address counts once. A
// Bitcoin block that repeats an earlier coinbase's txid (BIP30) spends the
// earlier outputs through the adapter's pseudo-transaction, which counts
// as a transaction of the address as it counts as a spender in /v1.
//
// A key's counters live in its balance row (0x04, version 2: balance.go),
// which every block that touches the key rewrites anyway: counting adds no
// row per touched address, only bytes to rows already written. A store
// written when the counters had rows of their own (0x14 'c' below) moves
// them into its balance rows when it opens (migrateCounterRows).
//
// Each block also writes its counter delta (0x14 'u' height), kept as long
// as its undo delta; a rollback of the block subtracts it, so the counters
// are exact at every tip a rollback reaches. A catch-up window counts block
// by block, and writes the deltas of the blocks it keeps undo data for.
//
// The store records from which height its counters count (0x14 'f'): the
// height of the first block it applied with counting on. 0 for a store
// imported from genesis; a store created mid-chain, or one that had blocks
// before counting began, counts from a later height, and Counters says so
// (Counters.FromHeight). A rollback below that height lowers it to the
// height rolled back to plus one: the counters then hold no block at all,
// and count the blocks applied again. Once the row exists, every open keeps
// counting, whatever its Options say, so no block is ever missed.
//
// Keys (prefix 0x14, then a one-byte kind):
//
//	0x14 'c' dim_key[16]   former counter row (read only to move it into
//	                       the balance row): version 0x01, then tx_count,
//	                       funded_count, funded_sum, spent_count, spent_sum
//	                       (the counts uvarints, each 128-bit sum two:
//	                       high 64 bits, then low); absent when all are 0
//	0x14 'u' height[8]     the block's counter delta: version 0x01, uvarint
//	                       n, then n × (dim_key[16], the five figures)
//	0x14 'f'               from height: version 0x01, height uint64
//
// Example former counter row, 2 transactions funding 3 outputs of 5,000 in all
// and spending 1 of 1,000: 01 02 03 00 8827 01 00 e807.
const prefixCounters byte = 0x14

const (
	counterKindRow   byte = 'c'
	counterKindUndo  byte = 'u'
	counterKindFrom  byte = 'f'
	countersVersion  byte = 0x01
	counterRowKeyLen      = 2 + dimKeySize
)

// ErrNoCounters is returned by View.Counters on a store that keeps no
// address counters.
var ErrNoCounters = errors.New("disk: the store keeps no address counters")

// Counters are the lifetime figures of an address or script hash (see the
// section comment): counted from FromHeight, the height of the first block
// the store counted (0: the whole chain).
type Counters struct {
	TxCount     uint64
	FundedCount uint64
	FundedSum   chain.Uint128
	SpentCount  uint64
	SpentSum    chain.Uint128
	FromHeight  uint64
}

// counterFigures are the five counted figures of one key. The sums are
// 128-bit: a lifetime sum of values may pass 2^64 where one value cannot.
type counterFigures struct {
	tx, fundedCount, spentCount uint64
	fundedSum, spentSum         chain.Uint128
}

func (c *counterFigures) zero() bool { return *c == counterFigures{} }

func (c *counterFigures) add(d *counterFigures) {
	c.tx += d.tx
	c.fundedCount += d.fundedCount
	c.fundedSum = c.fundedSum.Add(d.fundedSum)
	c.spentCount += d.spentCount
	c.spentSum = c.spentSum.Add(d.spentSum)
}

// sub subtracts d, failing (ErrCorrupt) when d is larger than c anywhere:
// a rollback subtracts what the block added, never more.
func (c *counterFigures) sub(d *counterFigures) error {
	fs, ok1 := c.fundedSum.Sub(d.fundedSum)
	ss, ok2 := c.spentSum.Sub(d.spentSum)
	if d.tx > c.tx || d.fundedCount > c.fundedCount || d.spentCount > c.spentCount || !ok1 || !ok2 {
		return fmt.Errorf("counters: subtracting %+v from %+v: %w", *d, *c, ErrCorrupt)
	}
	c.tx -= d.tx
	c.fundedCount -= d.fundedCount
	c.fundedSum = fs
	c.spentCount -= d.spentCount
	c.spentSum = ss
	return nil
}

func appendCounterFigures(dst []byte, c *counterFigures) []byte {
	dst = binary.AppendUvarint(dst, c.tx)
	dst = binary.AppendUvarint(dst, c.fundedCount)
	dst = appendSum(dst, c.fundedSum)
	dst = binary.AppendUvarint(dst, c.spentCount)
	return appendSum(dst, c.spentSum)
}

// appendSum writes a 128-bit sum as uvarint(high 64 bits), then
// uvarint(low 64 bits): a sum below 2^64 costs one byte more than its low
// half.
func appendSum(dst []byte, v chain.Uint128) []byte {
	dst = binary.AppendUvarint(dst, v.Hi)
	return binary.AppendUvarint(dst, v.Lo)
}

func parseCounterFigures(d *decbuf) counterFigures {
	var c counterFigures
	c.tx = d.uvarint()
	c.fundedCount = d.uvarint()
	c.fundedSum.Hi = d.uvarint()
	c.fundedSum.Lo = d.uvarint()
	c.spentCount = d.uvarint()
	c.spentSum.Hi = d.uvarint()
	c.spentSum.Lo = d.uvarint()
	return c
}

func counterRowKey(dst []byte, k DimKey) []byte {
	dst = append(dst, prefixCounters, counterKindRow)
	return append(dst, k[:]...)
}

func counterUndoKey(h uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{prefixCounters, counterKindUndo}, h)
}

var counterFromKey = []byte{prefixCounters, counterKindFrom}

func appendCounterRow(dst []byte, c *counterFigures) []byte {
	return appendCounterFigures(append(dst, countersVersion), c)
}

// decodeCounterRow decodes a counter row, strictly: an all-zero row is
// never written, so it is corrupt.
func decodeCounterRow(b []byte) (counterFigures, error) {
	d := decbuf{b: b, ctx: "counter row"}
	if v := d.byte1(); d.err() == nil && v != countersVersion {
		d.fail("unknown version")
	}
	c := parseCounterFigures(&d)
	if err := d.done(); err != nil {
		return counterFigures{}, err
	}
	if c.zero() {
		return c, fmt.Errorf("counter row of zeros: %w", ErrCorrupt)
	}
	return c, nil
}

// counterDelta is one key's figures in one block's delta.
type counterDelta struct {
	k DimKey
	counterFigures
}

func appendCounterUndo(dst []byte, ds []counterDelta) []byte {
	dst = append(dst, countersVersion)
	dst = binary.AppendUvarint(dst, uint64(len(ds)))
	for i := range ds {
		dst = append(dst, ds[i].k[:]...)
		dst = appendCounterFigures(dst, &ds[i].counterFigures)
	}
	return dst
}

// decodeCounterUndo decodes a block's counter delta: its keys in ascending
// order, none twice, none all zero.
func decodeCounterUndo(b []byte) ([]counterDelta, error) {
	d := decbuf{b: b, ctx: "counter delta"}
	if v := d.byte1(); d.err() == nil && v != countersVersion {
		d.fail("unknown version")
	}
	n := d.count(dimKeySize + 7)
	var ds []counterDelta
	if d.err() == nil {
		ds = make([]counterDelta, 0, n)
	}
	for i := 0; i < n && d.err() == nil; i++ {
		var cd counterDelta
		copy(cd.k[:], d.fixed(dimKeySize))
		cd.counterFigures = parseCounterFigures(&d)
		if d.err() != nil {
			break
		}
		if cd.zero() {
			d.fail("all-zero entry")
		}
		if i > 0 && bytes.Compare(ds[i-1].k[:], cd.k[:]) >= 0 {
			d.fail("keys out of order")
		}
		ds = append(ds, cd)
	}
	if err := d.done(); err != nil {
		return nil, err
	}
	return ds, nil
}

func appendCounterFrom(dst []byte, h uint64) []byte {
	return binary.BigEndian.AppendUint64(append(dst, countersVersion), h)
}

func decodeCounterFrom(b []byte) (uint64, error) {
	if len(b) != 9 || b[0] != countersVersion {
		return 0, fmt.Errorf("counter from row of %d bytes: %w", len(b), ErrCorrupt)
	}
	return binary.BigEndian.Uint64(b[1:]), nil
}

// counting is the store's counter state: whether it counts, and from which
// height (fromKnown false: it counts, but has applied no block since
// counting began). Writer goroutine only, after Open.
type counting struct {
	on        bool
	from      uint64
	fromKnown bool
	// scriptHash is set when the store indexes DimScriptHash: its values
	// are counted too.
	scriptHash ValuesFunc
}

// loadCounting reads the counter state at open: a store that recorded a
// from height counts; one that did not starts counting when opts.Counters
// asks.
func (s *Store) loadCounting() error {
	v, err := s.get(counterFromKey)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
		s.count.on = s.opts.Counters
	case err != nil:
		return fmt.Errorf("disk: read the counters' height: %w", err)
	default:
		h, err := decodeCounterFrom(v)
		if err != nil {
			return err
		}
		s.count = counting{on: true, from: h, fromKnown: true}
	}
	if i := slices.Index(s.dims, DimScriptHash); i >= 0 {
		s.count.scriptHash = s.dimFuncs[i]
	}
	if s.count.on {
		return s.migrateCounterRows()
	}
	return nil
}

// migrateChunk is the most counter rows one batch of migrateCounterRows
// moves.
const migrateChunk = 1 << 14

// migrateCounterRows moves the counter rows of a store written when they
// had rows of their own (0x14 'c', beside version 1 balance rows) into the
// balance rows (version 2), deleting them: at open, before any block. Each
// batch moves some rows and deletes them, so a crash midway leaves every
// key's counters in exactly one place and the next open goes on.
func (s *Store) migrateCounterRows() error {
	bounds := &pebble.IterOptions{
		LowerBound: []byte{prefixCounters, counterKindRow},
		UpperBound: []byte{prefixCounters, counterKindRow + 1},
	}
	for {
		n, err := s.migrateCounterChunk(bounds)
		if err != nil {
			return fmt.Errorf("disk: move the counter rows into the balance rows: %w", err)
		}
		if n == 0 {
			return nil
		}
	}
}

func (s *Store) migrateCounterChunk(bounds *pebble.IterOptions) (n int, err error) {
	it, err := s.db.NewIter(bounds)
	if err != nil {
		return 0, err
	}
	b := s.db.NewBatch()
	defer b.Close()
	var kb, vb []byte
	for ok := it.First(); ok && n < migrateChunk; ok = it.Next() {
		if len(it.Key()) != counterRowKeyLen {
			err = fmt.Errorf("counter row key %x: %w", it.Key(), ErrCorrupt)
			break
		}
		var k DimKey
		copy(k[:], it.Key()[2:])
		var v []byte
		if v, err = it.ValueAndErr(); err != nil {
			break
		}
		var ctr counterFigures
		if ctr, err = decodeCounterRow(v); err != nil {
			break
		}
		kb = appendBalanceKey(kb[:0], k)
		var row balanceRow
		raw, closer, gerr := s.db.Get(kb)
		switch {
		case errors.Is(gerr, pebble.ErrNotFound):
		case gerr != nil:
			err = gerr
		default:
			row, err = decodeBalanceRow(raw)
			closer.Close()
			if err == nil && !row.ctr.zero() {
				err = fmt.Errorf("key %x has both a counter row and counters in its balance row: %w", k, ErrCorrupt)
			}
		}
		if err != nil {
			break
		}
		row.ctr = ctr
		vb = appendRow(vb[:0], &row)
		_ = b.Set(kb, vb, nil)
		_ = b.Delete(it.Key(), nil)
		n++
	}
	if err = errors.Join(err, it.Error(), it.Close()); err != nil {
		return 0, err
	}
	if n > 0 {
		if err := s.commit(b); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// Counting reports whether the store keeps address counters.
func (s *Store) Counting() bool { return s.count.on }

// blockCounters accumulates the counter delta of the block a txn applies:
// keys[m[k]] is key k's, in first-touch order (one allocation per block,
// not per key).
type blockCounters struct {
	// byAddr indexes keys by address: an output's address key is hashed
	// once a block, when the block first touches the address.
	byAddr map[string]int
	m      map[DimKey]int
	keys   []countedKey
	// cur holds the keys of the output being counted, collect appends a
	// script hash's to it: made once, so counting an output allocates
	// nothing.
	cur     []DimKey
	collect func(v []byte)
}

type countedKey struct {
	k DimKey
	counterFigures
	lastTx chain.Hash
}

// count records that tx funded (spent false) or spent u.
func (t *BlockTxn) count(u *chain.Utxo, tx chain.Hash, spent bool) {
	c := &t.s.count
	if !c.on {
		return
	}
	bc := &t.counters
	if bc.m == nil {
		bc.m = make(map[DimKey]int, 64)
		bc.byAddr = make(map[string]int, 64)
	}
	i, seen := bc.byAddr[u.Address]
	if !seen {
		i = len(bc.keys)
		bc.byAddr[u.Address] = i
		bc.keys = append(bc.keys, countedKey{k: dimKeyOf(DimAddress, u.Address), lastTx: tx})
	}
	bc.countKey(i, seen, u, tx, spent)
	if c.scriptHash == nil {
		return
	}
	if bc.collect == nil {
		bc.collect = func(v []byte) { bc.cur = append(bc.cur, MakeDimKey(DimScriptHash, v)) }
	}
	bc.cur = bc.cur[:0]
	c.scriptHash(u, bc.collect)
	for _, k := range bc.cur {
		i, seen := bc.m[k]
		if !seen {
			i = len(bc.keys)
			bc.m[k] = i
			bc.keys = append(bc.keys, countedKey{k: k, lastTx: tx})
		}
		bc.countKey(i, seen, u, tx, spent)
	}
}

// countKey counts u, funded or spent by tx, under keys[i] (seen false: its
// first count in the block).
func (bc *blockCounters) countKey(i int, seen bool, u *chain.Utxo, tx chain.Hash, spent bool) {
	ck := &bc.keys[i]
	if !seen {
		ck.tx = 1
	} else if ck.lastTx != tx {
		// A transaction's spends and creations come together (the
		// writer reports a transaction's inputs, then its outputs),
		// so a new hash is a new transaction of the key.
		ck.tx++
		ck.lastTx = tx
	}
	if spent {
		ck.spentCount++
		ck.spentSum = ck.spentSum.AddU64(u.Value)
	} else {
		ck.fundedCount++
		ck.fundedSum = ck.fundedSum.AddU64(u.Value)
	}
}

// endCounters returns the open block's counter delta, sorted by key, and
// starts the next block's.
func (t *BlockTxn) endCounters() []counterDelta {
	if len(t.counters.keys) == 0 {
		return nil
	}
	ds := make([]counterDelta, len(t.counters.keys))
	for i := range t.counters.keys {
		ds[i] = counterDelta{k: t.counters.keys[i].k, counterFigures: t.counters.keys[i].counterFigures}
	}
	clear(t.counters.m)
	clear(t.counters.byAddr)
	t.counters.keys = t.counters.keys[:0]
	slices.SortFunc(ds, func(a, b counterDelta) int { return bytes.Compare(a.k[:], b.k[:]) })
	return ds
}

// mergeCounterDeltas merges sorted delta lists into one sorted list.
func mergeCounterDeltas(lists [][]counterDelta) []counterDelta {
	if len(lists) == 1 {
		return lists[0]
	}
	m := make(map[DimKey]*counterFigures)
	for _, l := range lists {
		for i := range l {
			f := m[l[i].k]
			if f == nil {
				f = &counterFigures{}
				m[l[i].k] = f
			}
			f.add(&l[i].counterFigures)
		}
	}
	out := make([]counterDelta, 0, len(m))
	for k, f := range m {
		out = append(out, counterDelta{k: k, counterFigures: *f})
	}
	slices.SortFunc(out, func(a, b counterDelta) int { return bytes.Compare(a.k[:], b.k[:]) })
	return out
}

// commitCounters writes, in b, the delta rows of the blocks of a batch
// (their deltas, in block order, the first at height first) that keep undo
// data (undo[i]), and the from height when the store has none yet, and
// gives d the batch's counter delta, which flushBalances adds to the
// balance rows. Call it before d.flushBalances. The from height is
// recorded once b commits (see counted).
func (s *Store) commitCounters(b *keyBatch, d *derived, first uint64, deltas [][]counterDelta, undo []bool, heights []uint64) {
	if !s.count.on {
		return
	}
	if !s.count.fromKnown {
		_ = b.Set(counterFromKey, appendCounterFrom(nil, first), nil)
	}
	var lists [][]counterDelta
	for i, ds := range deltas {
		if undo[i] {
			_ = b.Set(counterUndoKey(heights[i]), appendCounterUndo(nil, ds), nil)
		}
		if len(ds) > 0 {
			lists = append(lists, ds)
		}
	}
	if len(lists) > 0 {
		d.setCounters(mergeCounterDeltas(lists), false)
	}
}

// counted records that a batch of blocks from height first committed.
func (s *Store) counted(first uint64) {
	if s.count.on && !s.count.fromKnown {
		s.count.from, s.count.fromKnown = first, true
	}
}

// rollbackCounters gives d block h's counter delta to subtract (call it
// before d.flushBalances) and deletes the delta row, in b; for a block
// applied before counting began, it lowers the from height to h (the
// counters then hold no block at or above h). It returns the from height
// to record once b commits.
func (s *Store) rollbackCounters(b *keyBatch, d *derived, h uint64) (from uint64, lowered bool, err error) {
	if !s.count.on || !s.count.fromKnown {
		return 0, false, nil
	}
	if h < s.count.from {
		_ = b.Set(counterFromKey, appendCounterFrom(nil, h), nil)
		return h, true, nil
	}
	raw, err := s.get(counterUndoKey(h))
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, false, fmt.Errorf("disk: no counter delta for block %d, counted from %d: %w", h, s.count.from, ErrCorrupt)
	}
	if err != nil {
		return 0, false, fmt.Errorf("disk: read counter delta %d: %w", h, err)
	}
	ds, err := decodeCounterUndo(raw)
	if err != nil {
		return 0, false, err
	}
	_ = b.Delete(counterUndoKey(h), nil)
	d.setCounters(ds, true)
	return 0, false, nil
}

// Counters returns the counters of value in dimension dim (DimAddress or
// DimScriptHash) at the view's tip: zeros for a value no counted block
// touched. ErrNoCounters on a store that keeps none, or for another
// dimension.
func (v *View) Counters(dim Dimension, value []byte) (Counters, error) {
	if !v.s.count.on || (dim != DimAddress && (dim != DimScriptHash || v.s.count.scriptHash == nil)) {
		return Counters{}, ErrNoCounters
	}
	var c Counters
	raw, closer, err := v.snap.Get(counterFromKey)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
		// Counting, but no block applied since: the next block is the
		// first counted.
		if !v.state.Tip.Empty {
			c.FromHeight = v.state.Tip.Height + 1
		}
		return c, nil
	case err != nil:
		return c, fmt.Errorf("disk: read the counters' height: %w", err)
	}
	c.FromHeight, err = decodeCounterFrom(raw)
	closer.Close()
	if err != nil {
		return c, err
	}
	var kb [1 + dimKeySize]byte
	raw, closer, err = v.snap.Get(appendBalanceKey(kb[:0], MakeDimKey(dim, value)))
	switch {
	case errors.Is(err, pebble.ErrNotFound):
		return c, nil
	case err != nil:
		return c, fmt.Errorf("disk: read counters: %w", err)
	}
	r, err := decodeBalanceRow(raw)
	closer.Close()
	if err != nil {
		return c, err
	}
	f := &r.ctr
	c.TxCount, c.FundedCount, c.FundedSum, c.SpentCount, c.SpentSum = f.tx, f.fundedCount, f.fundedSum, f.spentCount, f.spentSum
	return c, nil
}

package disk

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/changeset"
)

// # Pending transactions
//
// A pending transaction is one a wallet backend posted (or a follower
// mirrored from its node's mempool) and no block holds yet. Posts,
// withdrawals and expiries are operations of wallet changes
// (chain.ChangeWallet), committed with the leases' group commit; blocks and
// rollbacks change the pending set in their own batches. Rows, all written
// only by those changes, keys big-endian and fixed-width:
//
//	prefix  key                                 value
//	0x0b    tx_hash[32]                          pending transaction (pendingRow)
//	0x0c    tx_hash[32] index[4]                 its pending spender: version 0x01,
//	                                             spender tx_hash[32], input uint32
//	0x0d    dim_key[16] order[8] index[4]        an unconfirmed output under one of its
//	                                             dimension values: version 0x01, since
//	                                             uint64, then the output as an index
//	                                             value (tx hash, live record at height 0)
//	0x0e    dim_key[16] tx_hash[32] index[4]     an output (confirmed or unconfirmed) that
//	                                             a pending transaction spends, under one
//	                                             of its dimension values: version 0x01,
//	                                             spender tx_hash[32], input uint32, then
//	                                             the output as an index value
//	0x0f    tx_hash[32]                          status of a transaction that left the
//	                                             pending set (statusRow)
//	0x12    forget_at[8] tx_hash[32]             the status rows to forget, by the highest
//	                                             height the chain had reached when the
//	                                             transaction left (empty value)
//	0x13    height[8]                            what the block at height did to the
//	                                             pending set (blockPendingRow)
//
// One key per spent outpoint in 0x0c makes "at most one pending spender" a
// key, not a scan. The pending sums of a key (funded, spent) are computed
// from its 0x0d and 0x0e rows when a read asks for them: both are bounded
// by the pending set, and no sums row is rewritten per post.
//
// The posting order of a transaction is seq<<16 | i, the seq of the change
// that posted it and its operation's place in that change: unique for
// ever, the same on every node, and kept by a rollback that returns the
// transaction to the pending set (so it keeps its place in listings).
//
// The writer goroutine (on every node) keeps the pending set in memory
// (pendingSet, loaded when the store opens): each transaction with the
// outputs its inputs spend, and the spender of each outpoint. A post is
// decided against it and the committed 0x02 rows; a block checks its
// transactions and spends with map probes and no read. The expiry queue
// is that memory too: no row orders transactions by expiry.
//
// Invariants, at every committed state: a pending transaction's inputs are
// each a live confirmed output or an output of another pending transaction,
// and each is spent by it alone; its outputs are not confirmed (a block
// that holds it confirms it and takes it out).
const (
	prefixPending       byte = 0x0b
	prefixPendingSpend  byte = 0x0c
	prefixPendingOut    byte = 0x0d
	prefixPendingSpent  byte = 0x0e
	prefixPendingStatus byte = 0x0f
	prefixPendingForget byte = 0x12
	prefixPendingBlock  byte = 0x13
	pendingRowVersion   byte = 0x01
)

// pendingEntry is one pending transaction in memory: immutable once stored
// in a pendingSet.
type pendingEntry struct {
	order, since, expires uint64
	replace               bool
	tx                    *chain.Tx
	// spent is the output each input spends, as the post found it.
	spent []chain.Utxo
	size  int64 // bytes of its 0x0b row: what --pending-max-bytes counts
}

type spendRef struct {
	tx    chain.Hash
	input uint32
}

type spendChange struct {
	ref spendRef
	del bool
}

// spenderShards is an immutable map from outpoint to its pending spender
// (what the 0x0c rows say), in shards by the outpoint's tx hash, and in
// each shard by tx hash then output index. A commit makes a new one that
// copies only the shards, and in them the transactions, it changes and
// shares the others, so every published view keeps the one of its state at
// the cost of a pointer: a read marks the outputs pending transactions
// spend with a map probe, where a Pebble Get per output would cost several
// times the listing itself. A listing probes the outputs of one
// transaction in a row (PendingSpenders.Of) with one probe of the tx hash.
type spenderShards struct {
	shard [1 << spenderShardBits]map[chain.Hash]txSpenders
	n     int // the entries (outpoints) of all shards
}

// txSpenders is the pending spender of each spent output of one
// transaction, by output index: never empty, immutable once committed.
type txSpenders map[uint32]spendRef

// spenderShardBits sets 4,096 shards: at 100,000 pending transactions some
// 25 entries each, so a change of 50 posts copies about 1,250 entries.
const spenderShardBits = 12

func spenderShardOf(h *chain.Hash) int {
	return int(binary.BigEndian.Uint16(h[:2]) >> (16 - spenderShardBits))
}

func (m *spenderShards) get(op chain.OutPoint) (spendRef, bool) {
	r, ok := m.tx(&op.TxHash)[op.Index]
	return r, ok
}

// tx returns the spenders of transaction h's outputs (nil: none).
func (m *spenderShards) tx(h *chain.Hash) txSpenders {
	if m == nil {
		return nil
	}
	return m.shard[spenderShardOf(h)][*h]
}

// with returns m with changes applied: a new value sharing the shards and
// transactions the changes do not touch. m is not modified.
func (m *spenderShards) with(changes map[chain.OutPoint]spendChange) *spenderShards {
	next := new(spenderShards)
	if m != nil {
		*next = *m
	}
	copiedShard := map[int]bool{}
	copiedTx := map[chain.Hash]bool{}
	for op, c := range changes {
		i := spenderShardOf(&op.TxHash)
		if !copiedShard[i] {
			copiedShard[i] = true
			next.shard[i] = maps.Clone(next.shard[i])
			if next.shard[i] == nil {
				next.shard[i] = map[chain.Hash]txSpenders{}
			}
		}
		sh := next.shard[i]
		if !copiedTx[op.TxHash] {
			copiedTx[op.TxHash] = true
			fresh := make(txSpenders, len(sh[op.TxHash])+1)
			maps.Copy(fresh, sh[op.TxHash])
			sh[op.TxHash] = fresh
		}
		t := sh[op.TxHash]
		_, had := t[op.Index]
		if c.del {
			delete(t, op.Index)
		} else {
			t[op.Index] = c.ref
		}
		if _, has := t[op.Index]; has != had {
			if has {
				next.n++
			} else {
				next.n--
			}
		}
	}
	for h := range copiedTx {
		if i := spenderShardOf(&h); len(next.shard[i][h]) == 0 {
			delete(next.shard[i], h)
		}
	}
	return next
}

// pendingSet is the committed pending set and the batch being built's
// changes over it, as leaseSet is for leases. Writer goroutine only (a
// published view holds a spender map of its own, which never changes).
type pendingSet struct {
	txs     map[chain.Hash]*pendingEntry
	spender *spenderShards
	bytes   int64
	// The batch's changes: a nil entry marks a removal.
	txsNew     map[chain.Hash]*pendingEntry
	spenderNew map[chain.OutPoint]spendChange
	bytesNew   int64 // delta
	countNew   int   // delta
	// decided is the plan decidePost made for the post applyPendingOp
	// applies next (the writer's: it saves a second read of each input);
	// nil for a replica's, which plans again.
	decided *decidedPost
}

type decidedPost struct {
	tx   *chain.Tx
	plan postPlan
}

func newPendingSet() *pendingSet {
	return &pendingSet{txs: map[chain.Hash]*pendingEntry{}, spender: new(spenderShards),
		txsNew: map[chain.Hash]*pendingEntry{}, spenderNew: map[chain.OutPoint]spendChange{}}
}

func (p *pendingSet) get(h chain.Hash) *pendingEntry {
	if e, ok := p.txsNew[h]; ok {
		return e
	}
	return p.txs[h]
}

func (p *pendingSet) spenderOf(op chain.OutPoint) (spendRef, bool) {
	if c, ok := p.spenderNew[op]; ok {
		return c.ref, !c.del
	}
	return p.spender.get(op)
}

func (p *pendingSet) count() int { return len(p.txs) + p.countNew }

func (p *pendingSet) empty() bool { return p.count() == 0 }

func (p *pendingSet) commit() {
	for h, e := range p.txsNew {
		if e == nil {
			delete(p.txs, h)
		} else {
			p.txs[h] = e
		}
	}
	if len(p.spenderNew) > 0 {
		p.spender = p.spender.with(p.spenderNew)
	}
	p.bytes += p.bytesNew
	p.reset()
}

func (p *pendingSet) reset() {
	clear(p.txsNew)
	clear(p.spenderNew)
	p.bytesNew, p.countNew = 0, 0
	p.decided = nil
}

// The 0x0b row (pendingRow), version 1:
//
//	version   1 byte = 0x01
//	order     uint64   posting order
//	since     uint64   when it was posted (unix seconds)
//	expires   uint64   when it expires (unix seconds)
//	flags     1 byte   bit 0: posted with replace; other bits corrupt
//	tx        the rest: the transaction in the block format's CBOR
//
// Example: order 0x30000, posted at 1764300000, expiring 14 days later, no
// replace, then the transaction's CBOR map:
//
//	01 0000000000030000 00000000692914e0 00000000693b89e0 00 a3 …
func appendPendingRow(dst []byte, e *pendingEntry) []byte {
	dst = append(dst, pendingRowVersion)
	dst = binary.BigEndian.AppendUint64(dst, e.order)
	dst = binary.BigEndian.AppendUint64(dst, e.since)
	dst = binary.BigEndian.AppendUint64(dst, e.expires)
	var flags byte
	if e.replace {
		flags |= 1
	}
	dst = append(dst, flags)
	return chain.AppendTxCBOR(dst, e.tx)
}

// decodePendingRow decodes a 0x0b value (without spent, which the caller
// fills). It copies what it keeps.
func decodePendingRow(b []byte) (pendingEntry, error) {
	d := decbuf{b: b, ctx: "pending row"}
	var e pendingEntry
	if v := d.byte1(); d.err() == nil && v != pendingRowVersion {
		d.fail("unknown version")
	}
	e.order, e.since, e.expires = d.u64(), d.u64(), d.u64()
	flags := d.byte1()
	if d.err() == nil && flags&^1 != 0 {
		d.fail("unknown flags")
	}
	e.replace = flags&1 != 0
	if err := d.err(); err != nil {
		return e, err
	}
	tx, err := chain.DecodeTxCBOR(d.b, chain.Limits{})
	if err != nil {
		return e, fmt.Errorf("disk: pending row: transaction: %v: %w", err, ErrCorrupt)
	}
	if err := chain.CheckPendingTx(tx); err != nil {
		return e, fmt.Errorf("disk: pending row: %v: %w", err, ErrCorrupt)
	}
	e.tx, e.size = tx, int64(len(b))
	return e, nil
}

func appendPendingKey(dst []byte, h chain.Hash) []byte {
	dst = append(dst, prefixPending)
	return append(dst, h[:]...)
}

func appendPendingSpendKey(dst []byte, op chain.OutPoint) []byte {
	dst = append(dst, prefixPendingSpend)
	dst = append(dst, op.TxHash[:]...)
	return binary.BigEndian.AppendUint32(dst, op.Index)
}

// The 0x0c value: version 0x01, spender tx_hash[32], input uint32. Example,
// input 1 of 2222…22: 01 2222…22 00000001.
func appendSpendRow(dst []byte, r spendRef) []byte {
	dst = append(dst, pendingRowVersion)
	dst = append(dst, r.tx[:]...)
	return binary.BigEndian.AppendUint32(dst, r.input)
}

func decodeSpendRef(d *decbuf) spendRef {
	var r spendRef
	if v := d.byte1(); d.err() == nil && v != pendingRowVersion {
		d.fail("unknown version")
	}
	copy(r.tx[:], d.fixed(chain.HashSize))
	r.input = d.u32()
	return r
}

func decodeSpendRow(b []byte) (spendRef, error) {
	d := decbuf{b: b, ctx: "pending spend row"}
	r := decodeSpendRef(&d)
	return r, d.done()
}

func appendPendingOutKey(dst []byte, dk DimKey, order uint64, index uint32) []byte {
	dst = append(dst, prefixPendingOut)
	dst = append(dst, dk[:]...)
	dst = binary.BigEndian.AppendUint64(dst, order)
	return binary.BigEndian.AppendUint32(dst, index)
}

// The 0x0d value: version 0x01, since uint64, then an index value (0x03's:
// tx hash, live record at height 0). Example, output 0 of 2222…22 posted
// at 1764300000, 5 to "a": 01 00000000692914e0 2222…22 01 01 0000000000000000
// 00000000 00 05 01 61 00 00 00 00.
func appendPendingOutRow(dst []byte, since uint64, u *chain.Utxo) []byte {
	dst = append(dst, pendingRowVersion)
	dst = binary.BigEndian.AppendUint64(dst, since)
	return appendIndexValue(dst, u)
}

func decodePendingOutRow(index uint32, b []byte) (since uint64, u chain.Utxo, err error) {
	var o PendingOutputRef
	if err := parsePendingOutRow(index, b, &o); err != nil {
		return 0, u, err
	}
	return o.Since, o.Ref.record().Utxo, nil
}

// parsePendingOutRow parses a 0x0d value of output index into o in place
// (o.Ref aliases b); o.Order is the caller's.
func parsePendingOutRow(index uint32, b []byte, o *PendingOutputRef) error {
	d := decbuf{b: b, ctx: "pending output row"}
	if v := d.byte1(); d.err() == nil && v != pendingRowVersion {
		d.fail("unknown version")
	}
	o.Since = d.u64()
	if err := d.err(); err != nil {
		return err
	}
	return parseIndexValue(index, d.b, &o.Ref)
}

func appendPendingSpentKey(dst []byte, dk DimKey, op chain.OutPoint) []byte {
	dst = append(dst, prefixPendingSpent)
	dst = append(dst, dk[:]...)
	dst = append(dst, op.TxHash[:]...)
	return binary.BigEndian.AppendUint32(dst, op.Index)
}

// The 0x0e value: the 0x0c value, then the spent output as an index value.
func appendPendingSpentRow(dst []byte, r spendRef, u *chain.Utxo) []byte {
	return appendIndexValue(appendSpendRow(dst, r), u)
}

func decodePendingSpentRow(index uint32, b []byte) (spendRef, chain.Utxo, error) {
	d := decbuf{b: b, ctx: "pending spent row"}
	r := decodeSpendRef(&d)
	if err := d.err(); err != nil {
		return r, chain.Utxo{}, err
	}
	u, err := decodeIndexValue(index, d.b)
	return r, u, err
}

// The 0x0f row (statusRow), version 1:
//
//	version         1 byte = 0x01
//	status          1 byte  chain.PendingStatus, 2..5
//	since           uint64  when it entered the status (unix seconds)
//	height          uint64  the confirming block (confirmed), else 0
//	conflicts_with  32 bytes the winning transaction (conflicting), else zeros
//	forget_at       uint64  the key of its 0x12 entry
//	order           uint64  its posting order
//
// Example: confirmed at height 7 by a block of time 1764300000, forgotten
// once the chain passes 7 + the rollback window, posted with order 0x30000:
//
//	01 02 00000000692914e0 0000000000000007 0000…00 0000000000000007 0000000000030000
type statusRow struct {
	info     chain.PendingInfo
	forgetAt uint64
}

const statusRowLen = 2 + 8 + 8 + 32 + 8 + 8

func appendStatusRow(dst []byte, r *statusRow) []byte {
	dst = append(dst, pendingRowVersion, byte(r.info.Status))
	dst = binary.BigEndian.AppendUint64(dst, r.info.Since)
	dst = binary.BigEndian.AppendUint64(dst, r.info.Height)
	dst = append(dst, r.info.ConflictsWith[:]...)
	dst = binary.BigEndian.AppendUint64(dst, r.forgetAt)
	return binary.BigEndian.AppendUint64(dst, r.info.Order)
}

func decodeStatusRow(h chain.Hash, b []byte) (statusRow, error) {
	d := decbuf{b: b, ctx: "pending status row"}
	var r statusRow
	if v := d.byte1(); d.err() == nil && v != pendingRowVersion {
		d.fail("unknown version")
	}
	r.info.TxHash = h
	r.info.Status = chain.PendingStatus(d.byte1())
	if d.err() == nil && (r.info.Status < chain.PendingConfirmed || r.info.Status > chain.PendingExpired) {
		d.fail("unknown status")
	}
	r.info.Since, r.info.Height = d.u64(), d.u64()
	copy(r.info.ConflictsWith[:], d.fixed(chain.HashSize))
	r.forgetAt, r.info.Order = d.u64(), d.u64()
	return r, d.done()
}

func appendForgetKey(dst []byte, at uint64, h chain.Hash) []byte {
	dst = append(dst, prefixPendingForget)
	dst = binary.BigEndian.AppendUint64(dst, at)
	return append(dst, h[:]...)
}

// The 0x13 row (blockPendingRow), version 1: what one block did to the
// pending set, which its rollback undoes:
//
//	version  1 byte = 0x01
//	count    uvarint
//	then per transaction, in posting order:
//	  status    1 byte  confirmed (2) or conflicting (3)
//	  tx_hash   32 bytes
//	  row       uvarint length, its 0x0b row as it was
//
// Example: one transaction confirmed, its row r of 0x5a bytes:
//
//	01 01 02 2222…22 5a r
type blockPendingItem struct {
	status chain.PendingStatus
	hash   chain.Hash
	row    []byte
}

func appendBlockPendingRow(dst []byte, items []blockPendingItem) []byte {
	dst = append(dst, pendingRowVersion)
	dst = binary.AppendUvarint(dst, uint64(len(items)))
	for _, it := range items {
		dst = append(dst, byte(it.status))
		dst = append(dst, it.hash[:]...)
		dst = appendLenBytes(dst, it.row)
	}
	return dst
}

// maxPendingRowLen bounds a 0x0b row a decoder accepts.
const maxPendingRowLen = 64 + chain.MaxPendingTxBytes

func decodeBlockPendingRow(b []byte) ([]blockPendingItem, error) {
	d := decbuf{b: b, ctx: "block pending row"}
	if v := d.byte1(); d.err() == nil && v != pendingRowVersion {
		d.fail("unknown version")
	}
	n := d.count(1 + chain.HashSize + 1)
	items := make([]blockPendingItem, 0, n)
	for i := 0; i < n && d.err() == nil; i++ {
		var it blockPendingItem
		it.status = chain.PendingStatus(d.byte1())
		if d.err() == nil && it.status != chain.PendingConfirmed && it.status != chain.PendingConflicting {
			d.fail("unknown status")
		}
		copy(it.hash[:], d.fixed(chain.HashSize))
		it.row = d.lenBytes(maxPendingRowLen)
		items = append(items, it)
	}
	return items, d.done()
}

// PendingOptions bound the pending set. The zero value of each field means
// its default.
type PendingOptions struct {
	// MaxTxs bounds the pending transactions; default 100,000.
	MaxTxs int
	// MaxBytes bounds the bytes of their stored rows (the transactions in
	// the block format's CBOR, and 25 bytes each); default 256 MiB.
	MaxBytes int64
	// TTL is how long a posted transaction stays pending, in seconds;
	// default chain.DefaultPendingTTL (14 days).
	TTL uint64
}

// Defaults of PendingOptions.
const (
	DefaultPendingMaxTxs   = 100_000
	DefaultPendingMaxBytes = 256 << 20
)

// EnsureDefaults returns o with its zero fields at their defaults.
func (o PendingOptions) EnsureDefaults() PendingOptions {
	if o.MaxTxs == 0 {
		o.MaxTxs = DefaultPendingMaxTxs
	}
	if o.MaxBytes == 0 {
		o.MaxBytes = DefaultPendingMaxBytes
	}
	if o.TTL == 0 {
		o.TTL = chain.DefaultPendingTTL
	}
	return o
}

// Validate checks o's bounds (on the filled copy).
func (o PendingOptions) Validate() error {
	if o.MaxTxs < 0 || o.MaxBytes < 0 {
		return fmt.Errorf("disk: pending bounds must be positive (max txs %d, max bytes %d)", o.MaxTxs, o.MaxBytes)
	}
	return nil
}

// loadPending reads every 0x0b row into the writer's pendingSet, with the
// outputs their inputs spend. Open calls it once.
func (s *Store) loadPending() error {
	p := newPendingSet()
	s.pending = p
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixPending}, UpperBound: []byte{prefixPending + 1}})
	if err != nil {
		return fmt.Errorf("disk: read pending: %w", err)
	}
	defer it.Close()
	var all []*pendingEntry
	for it.First(); it.Valid(); it.Next() {
		e, err := decodePendingRow(it.Value())
		if err != nil {
			return fmt.Errorf("disk: pending %x: %w", it.Key()[1:], errors.Join(err, ErrCorrupt))
		}
		all = append(all, &e)
		p.txs[e.tx.Hash] = &e
		p.bytes += e.size
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("disk: read pending: %w", err)
	}
	for _, e := range all {
		e.spent = make([]chain.Utxo, len(e.tx.Inputs))
		for i, op := range e.tx.Inputs {
			u, ok, err := s.spendable(op)
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("disk: pending %s spends %s, which is neither live nor pending: %w", e.tx.Hash, op, ErrCorrupt)
			}
			e.spent[i] = u
			p.spenderNew[op] = spendChange{ref: spendRef{e.tx.Hash, uint32(i)}}
		}
	}
	p.spender = p.spender.with(p.spenderNew)
	p.reset()
	return nil
}

// pendingOutput returns output op of pending transaction e as a Utxo (height
// 0), and false when e creates no such output.
func pendingOutput(e *pendingEntry, op chain.OutPoint) (chain.Utxo, bool) {
	if int(op.Index) >= len(e.tx.Outputs) || e.tx.Outputs[op.Index].Unspendable {
		return chain.Utxo{}, false
	}
	return chain.Utxo{OutPoint: op, Output: e.tx.Outputs[op.Index]}, true
}

// spendable returns the output op names if a pending transaction may spend
// it: a live confirmed output (the committed row) or an output of a pending
// transaction (the batch's pending set). Writer goroutine only.
func (s *Store) spendable(op chain.OutPoint) (chain.Utxo, bool, error) {
	if e := s.pending.get(op.TxHash); e != nil {
		u, ok := pendingOutput(e, op)
		return u, ok, nil
	}
	rec, found, err := s.readRecord(op)
	if err != nil || !found || rec.Spent != nil {
		return chain.Utxo{}, false, err
	}
	return rec.Utxo, true, nil
}

// addPending writes e's rows to b and adds it to the batch's pending set;
// each input's lease lapses (a pending spend ends it as a block's does).
// Writer goroutine only.
func (s *Store) addPending(b *keyBatch, e *pendingEntry) {
	s.touchPending(e, chain.PendingActive)
	h := e.tx.Hash
	raw := appendPendingRow(nil, e)
	e.size = int64(len(raw))
	_ = b.Set(appendPendingKey(nil, h), raw, nil)
	_ = b.Delete(append([]byte{prefixPendingStatus}, h[:]...), nil)
	var keys []DimKey
	var filters []assetFilter
	for i, op := range e.tx.Inputs {
		ref := spendRef{h, uint32(i)}
		_ = b.Set(appendPendingSpendKey(nil, op), appendSpendRow(nil, ref), nil)
		s.pending.spenderNew[op] = spendChange{ref: ref}
		keys, filters = appendDimKeys(keys[:0], filters[:0], s.dims, s.dimFuncs, &e.spent[i])
		val := appendPendingSpentRow(nil, ref, &e.spent[i])
		for _, k := range keys {
			_ = b.Set(appendPendingSpentKey(nil, k, op), val, nil)
		}
		s.lapseLease(b, op)
	}
	s.forPendingOutputs(e, func(u *chain.Utxo) {
		keys, filters = appendDimKeys(keys[:0], filters[:0], s.dims, s.dimFuncs, u)
		val := appendPendingOutRow(nil, e.since, u)
		for _, k := range keys {
			_ = b.Set(appendPendingOutKey(nil, k, e.order, u.Index), val, nil)
		}
	})
	if s.pending.get(h) == nil {
		s.pending.countNew++
		s.pending.bytesNew += e.size
	}
	s.pending.txsNew[h] = e
}

// forPendingOutputs calls fn with each output e creates.
func (s *Store) forPendingOutputs(e *pendingEntry, fn func(u *chain.Utxo)) {
	e.tx.Creates(func(index uint32, out *chain.Output, _ bool) {
		u := chain.Utxo{OutPoint: chain.OutPoint{TxHash: e.tx.Hash, Index: index}, Output: *out}
		fn(&u)
	})
}

// removePending deletes e's rows from b and takes it out of the batch's
// pending set: its own rows and the spend rows of its inputs (the spend
// rows of its outputs are its children's). Unless it is confirmed, its
// outputs leave the live set and their leases lapse. Writer goroutine only.
func (s *Store) removePending(b *keyBatch, e *pendingEntry, status chain.PendingStatus) {
	confirmed := status == chain.PendingConfirmed
	s.touchPending(e, status)
	h := e.tx.Hash
	_ = b.Delete(appendPendingKey(nil, h), nil)
	var keys []DimKey
	var filters []assetFilter
	for i, op := range e.tx.Inputs {
		if r, ok := s.pending.spenderOf(op); ok && r.tx == h {
			_ = b.Delete(appendPendingSpendKey(nil, op), nil)
			s.pending.spenderNew[op] = spendChange{del: true}
		}
		keys, filters = appendDimKeys(keys[:0], filters[:0], s.dims, s.dimFuncs, &e.spent[i])
		for _, k := range keys {
			_ = b.Delete(appendPendingSpentKey(nil, k, op), nil)
		}
	}
	s.forPendingOutputs(e, func(u *chain.Utxo) {
		keys, filters = appendDimKeys(keys[:0], filters[:0], s.dims, s.dimFuncs, u)
		for _, k := range keys {
			_ = b.Delete(appendPendingOutKey(nil, k, e.order, u.Index), nil)
		}
		if !confirmed {
			s.lapseLease(b, u.OutPoint)
		}
	})
	s.pending.countNew--
	s.pending.bytesNew -= e.size
	s.pending.txsNew[h] = nil
}

// leavePending removes e and writes its status row (and its forget-queue
// entry). Writer goroutine only.
func (s *Store) leavePending(b *keyBatch, e *pendingEntry, info chain.PendingInfo, forgetAt uint64) {
	s.removePending(b, e, info.Status)
	info.TxHash, info.Order = e.tx.Hash, e.order
	s.putStatus(b, &statusRow{info: info, forgetAt: forgetAt})
}

func (s *Store) putStatus(b *keyBatch, r *statusRow) {
	h := r.info.TxHash
	_ = b.Set(append([]byte{prefixPendingStatus}, h[:]...), appendStatusRow(nil, r), nil)
	_ = b.Set(appendForgetKey(nil, r.forgetAt, h), nil, nil)
}

// descendants returns the pending transactions that spend outputs of h,
// and theirs, in posting order (h not included).
func (s *Store) descendants(h chain.Hash) []*pendingEntry {
	var out []*pendingEntry
	seen := map[chain.Hash]bool{h: true}
	queue := []chain.Hash{h}
	for len(queue) > 0 {
		e := s.pending.get(queue[0])
		queue = queue[1:]
		if e == nil {
			continue
		}
		s.forPendingOutputs(e, func(u *chain.Utxo) {
			if r, ok := s.pending.spenderOf(u.OutPoint); ok && !seen[r.tx] {
				seen[r.tx] = true
				if c := s.pending.get(r.tx); c != nil {
					out = append(out, c)
					queue = append(queue, r.tx)
				}
			}
		})
	}
	slices.SortFunc(out, func(a, b *pendingEntry) int { return cmpU64(a.order, b.order) })
	return out
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// withDescendants returns e followed by its descendants, children after
// parents (posting order).
func (s *Store) withDescendants(e *pendingEntry) []*pendingEntry {
	return append([]*pendingEntry{e}, s.descendants(e.tx.Hash)...)
}

// forgetAt is the forget-queue height of a transaction leaving the pending
// set in the batch that leaves st.
func forgetAt(st *State) uint64 { return st.MaxHeight }

// decidePost decides a post at now: the operation, or why not. A post of a
// transaction already pending is no operation (nil, nil).
func (s *Store) decidePost(p *chain.PendingPost, now uint64) (*chain.WalletOp, error) {
	if err := chain.CheckPendingTx(&p.Tx); err != nil {
		return nil, err
	}
	if s.pending.get(p.Tx.Hash) != nil {
		return nil, nil
	}
	plan, err := s.checkPost(&p.Tx, p.Replace)
	if err != nil {
		return nil, err
	}
	s.pending.decided = &decidedPost{tx: &p.Tx, plan: plan}
	ttl := s.opts.Pending.TTL
	return &chain.WalletOp{Kind: chain.WalletPost, Tx: &p.Tx, Replace: p.Replace, Since: now, ExpiresAt: now + ttl}, nil
}

// checkPost checks tx against the batch's state: its inputs spendable, no
// other pending spender (or, with replace, the transactions it evicts, in
// posting order), the bounds. It returns the outputs its inputs spend and
// the evicted transactions.
func (s *Store) checkPost(tx *chain.Tx, replace bool) (postPlan, error) {
	var plan postPlan
	plan.spent = make([]chain.Utxo, len(tx.Inputs))
	evict := map[chain.Hash]bool{}
	for i, op := range tx.Inputs {
		u, ok, err := s.spendable(op)
		if err != nil {
			return plan, err
		}
		if !ok {
			return plan, fmt.Errorf("%s is neither a live output nor an output of a pending transaction: %w", op, chain.ErrUnknownInput)
		}
		plan.spent[i] = u
		r, taken := s.pending.spenderOf(op)
		if !taken {
			continue
		}
		if !replace {
			return plan, &chain.ConflictError{OutPoint: op, Spender: r.tx, Input: r.input}
		}
		if !evict[r.tx] {
			for _, d := range s.withDescendants(s.pending.get(r.tx)) {
				if !evict[d.tx.Hash] {
					evict[d.tx.Hash] = true
					plan.evict = append(plan.evict, d)
				}
			}
		}
	}
	for _, op := range tx.Inputs {
		if evict[op.TxHash] {
			return plan, fmt.Errorf("%s is an output of a transaction the post replaces: %w", op, chain.ErrUnknownInput)
		}
	}
	slices.SortFunc(plan.evict, func(a, b *pendingEntry) int { return cmpU64(a.order, b.order) })
	size := int64(len(appendPendingRow(nil, &pendingEntry{tx: tx})))
	count, bytes := s.pending.count()+1, s.pending.bytes+s.pending.bytesNew+size
	for _, e := range plan.evict {
		count--
		bytes -= e.size
	}
	o := s.opts.Pending
	if count > o.MaxTxs {
		return plan, fmt.Errorf("%d pending transactions, at most %d: %w", count, o.MaxTxs, chain.ErrInsufficientStorage)
	}
	if bytes > o.MaxBytes {
		return plan, fmt.Errorf("%d bytes of pending transactions, at most %d: %w", bytes, o.MaxBytes, chain.ErrInsufficientStorage)
	}
	return plan, nil
}

type postPlan struct {
	spent []chain.Utxo
	evict []*pendingEntry
}

// applyPendingOp adds a pending operation, decided by the writer, to b at
// the change leaving st; i is its place in the change. It reads no clock.
// Writer goroutine only.
func (s *Store) applyPendingOp(b *keyBatch, op *chain.WalletOp, st *State, i int) error {
	switch op.Kind {
	case chain.WalletPost:
		if s.pending.get(op.Tx.Hash) != nil {
			return fmt.Errorf("disk: post of %s, which is pending: %w", op.Tx.Hash, chain.ErrInvalidArgument)
		}
		var plan postPlan
		if d := s.pending.decided; d != nil && d.tx == op.Tx {
			plan = d.plan // decided just before, against this batch
		} else {
			var err error
			plan, err = s.checkPost(op.Tx, op.Replace)
			if err != nil && !errors.Is(err, chain.ErrInsufficientStorage) {
				// The bounds are the writer's: a replica takes what it logged.
				return fmt.Errorf("disk: post of %s: %w", op.Tx.Hash, err)
			}
		}
		s.pending.decided = nil
		for _, e := range plan.evict {
			s.leavePending(b, e, chain.PendingInfo{Status: chain.PendingConflicting, ConflictsWith: op.Tx.Hash, Since: op.Since}, forgetAt(st))
		}
		s.addPending(b, &pendingEntry{order: st.Seq<<16 | uint64(i), since: op.Since, expires: op.ExpiresAt,
			replace: op.Replace, tx: op.Tx, spent: plan.spent})
	case chain.WalletWithdraw, chain.WalletExpire:
		e := s.pending.get(op.TxHash)
		if e == nil {
			return fmt.Errorf("disk: %s of %s, which is not pending: %w", op.Kind, op.TxHash, chain.ErrInvalidArgument)
		}
		status := chain.PendingWithdrawn
		if op.Kind == chain.WalletExpire {
			status = chain.PendingExpired
		}
		since := e.expires
		if op.Kind == chain.WalletWithdraw {
			since = op.Since // the writer's clock
		}
		for _, d := range s.withDescendants(e) {
			s.leavePending(b, d, chain.PendingInfo{Status: status, Since: since}, forgetAt(st))
		}
	default:
		return fmt.Errorf("disk: pending operation of kind %d: %w", op.Kind, chain.ErrInvalidArgument)
	}
	return nil
}

// expiredPending returns the expire operations of the pending transactions
// whose expiry is at or before now and that the batch has not touched, in
// posting order.
func (s *Store) expiredPending(now uint64) []chain.WalletOp {
	var es []*pendingEntry
	for h, e := range s.pending.txs {
		if _, touched := s.pending.txsNew[h]; !touched && e.expires <= now {
			es = append(es, e)
		}
	}
	slices.SortFunc(es, func(a, b *pendingEntry) int { return cmpU64(a.order, b.order) })
	ops := make([]chain.WalletOp, len(es))
	for i, e := range es {
		ops[i] = chain.WalletOp{Kind: chain.WalletExpire, TxHash: e.tx.Hash}
	}
	return ops
}

// PendingCount returns how many transactions the committed pending set
// holds, and their bytes. Writer goroutine only.
func (s *Store) PendingCount() (int, int64) { return len(s.pending.txs), s.pending.bytes }

// NextPendingExpiry returns the earliest expiry of the committed pending
// transactions, and false when there are none. Writer goroutine only.
func (s *Store) NextPendingExpiry() (uint64, bool) {
	var m uint64
	for _, e := range s.pending.txs {
		if m == 0 || e.expires < m {
			m = e.expires
		}
	}
	return m, m != 0
}

// pendingBlockTx is what a block's pending effects need of one of its
// transactions.
type pendingBlockTx struct {
	hash   chain.Hash
	spends []chain.OutPoint
}

func pendingBlockTxs(blk *chain.Block) []pendingBlockTx {
	out := make([]pendingBlockTx, len(blk.Txs))
	for i := range blk.Txs {
		out[i] = pendingBlockTx{hash: blk.Txs[i].Hash, spends: slices.Clone(blk.Txs[i].Spends())}
	}
	return out
}

// pendingBlock adds to b what the block at height (of time t, unix seconds)
// does to the pending set: it confirms the pending transactions it holds,
// makes conflicting (with their descendants) those whose inputs its
// transactions spend, and records both in its 0x13 row. Writer goroutine
// only.
func (s *Store) pendingBlock(b *keyBatch, height uint64, t int64, txs []pendingBlockTx, st *State) {
	if s.pending.empty() {
		return
	}
	since := uint64(max(t, 0))
	var items []blockPendingItem
	var order []uint64
	record := func(e *pendingEntry, status chain.PendingStatus) {
		items = append(items, blockPendingItem{status: status, hash: e.tx.Hash, row: appendPendingRow(nil, e)})
		order = append(order, e.order)
	}
	for _, tx := range txs {
		if e := s.pending.get(tx.hash); e != nil {
			record(e, chain.PendingConfirmed)
			s.leavePending(b, e, chain.PendingInfo{Status: chain.PendingConfirmed, Height: height, Since: since}, forgetAt(st))
		}
		for _, op := range tx.spends {
			r, ok := s.pending.spenderOf(op)
			if !ok {
				continue
			}
			for _, d := range s.withDescendants(s.pending.get(r.tx)) {
				record(d, chain.PendingConflicting)
				s.leavePending(b, d, chain.PendingInfo{Status: chain.PendingConflicting, ConflictsWith: tx.hash, Since: since}, forgetAt(st))
			}
		}
	}
	if len(items) == 0 {
		return
	}
	idx := make([]int, len(items))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmpU64(order[a], order[b]) })
	sorted := make([]blockPendingItem, len(items))
	for i, j := range idx {
		sorted[i] = items[j]
	}
	_ = b.Set(heightKey(prefixPendingBlock, height), appendBlockPendingRow(nil, sorted), nil)
}

// pendingRollback adds to b what the rollback of the block at height does
// to the pending set, after its rows were undone. First the pending
// transactions that spend an output the rollback replaced (see
// Store.rollbackBlock: the output they spend is gone, another is live on
// its outpoint) are withdrawn with their descendants; then the
// transactions the block confirmed or made conflicting return to the
// pending set in posting order, or are withdrawn when an input is no longer
// live or already has a pending spender; then the pending transactions that
// spend an output the rollback removed, and their descendants, are
// withdrawn. live tells what the undo made of an outpoint it touched (found
// false: it did not touch it). Writer goroutine only.
func (s *Store) pendingRollback(b *keyBatch, height uint64, st *State, live func(op chain.OutPoint) (u *chain.Utxo, found bool), removed, replaced []chain.OutPoint) error {
	raw, err := s.get(heightKey(prefixPendingBlock, height))
	if err != nil && !errors.Is(err, pebble.ErrNotFound) {
		return fmt.Errorf("disk: read pending of block %d: %w", height, err)
	}
	var items []blockPendingItem
	if err == nil {
		if items, err = decodeBlockPendingRow(raw); err != nil {
			return errors.Join(err, ErrCorrupt)
		}
		_ = b.Delete(heightKey(prefixPendingBlock, height), nil)
	}
	for _, op := range replaced {
		if r, ok := s.pending.spenderOf(op); ok {
			if e := s.pending.get(r.tx); e != nil {
				for _, d := range s.withDescendants(e) {
					s.leavePending(b, d, chain.PendingInfo{Status: chain.PendingWithdrawn, Since: d.since}, forgetAt(st))
				}
			}
		}
	}
	spendableNow := func(op chain.OutPoint) (chain.Utxo, bool, error) {
		if e := s.pending.get(op.TxHash); e != nil {
			// An output of a transaction pending again (returned just
			// before, in posting order): the undo removed its confirmed
			// row.
			u, ok := pendingOutput(e, op)
			return u, ok, nil
		}
		if u, found := live(op); found {
			if u == nil {
				return chain.Utxo{}, false, nil
			}
			return *u, true, nil
		}
		return s.spendable(op)
	}
	for _, it := range items {
		e, err := decodePendingRow(it.row)
		if err != nil {
			return errors.Join(err, ErrCorrupt)
		}
		if s.pending.get(e.tx.Hash) != nil {
			continue // posted again since
		}
		ok := true
		e.spent = make([]chain.Utxo, len(e.tx.Inputs))
		for i, op := range e.tx.Inputs {
			u, live, err := spendableNow(op)
			if err != nil {
				return err
			}
			if _, taken := s.pending.spenderOf(op); !live || taken {
				ok = false
				break
			}
			e.spent[i] = u
		}
		if ok {
			s.addPending(b, &e)
			continue
		}
		s.putStatus(b, &statusRow{info: chain.PendingInfo{TxHash: e.tx.Hash, Status: chain.PendingWithdrawn, Since: e.since, Order: e.order}, forgetAt: forgetAt(st)})
	}
	for _, op := range removed {
		r, ok := s.pending.spenderOf(op)
		if !ok || s.pending.get(op.TxHash) != nil {
			continue
		}
		if e := s.pending.get(r.tx); e != nil {
			for _, d := range s.withDescendants(e) {
				s.leavePending(b, d, chain.PendingInfo{Status: chain.PendingWithdrawn, Since: d.since}, forgetAt(st))
			}
		}
	}
	return nil
}

// prunePending forgets, with bounded work, the status rows of transactions
// that left the pending set more than the rollback window ago, and the 0x13
// rows of heights no rollback can reach. Writer goroutine only.
func (s *Store) prunePending(b *keyBatch, st *State, budget int) error {
	w := s.opts.RollbackWindow
	if st.MaxHeight <= w {
		return nil
	}
	limit := st.MaxHeight - w // forget what left below it
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixPendingForget}, UpperBound: appendForgetKey(nil, limit, chain.Hash{})})
	if err != nil {
		return err
	}
	for valid := it.First(); valid && budget > 0; valid = it.Next() {
		budget--
		k := it.Key()
		if len(k) != 1+8+chain.HashSize {
			it.Close()
			return fmt.Errorf("disk: forget key of %d bytes: %w", len(k), ErrCorrupt)
		}
		at := binary.BigEndian.Uint64(k[1:])
		var h chain.Hash
		copy(h[:], k[9:])
		sk := append([]byte{prefixPendingStatus}, h[:]...)
		if v, err := s.get(sk); err == nil {
			if r, err := decodeStatusRow(h, v); err == nil && r.forgetAt == at {
				_ = b.Delete(sk, nil)
			}
		}
		_ = b.Delete(slices.Clone(k), nil)
	}
	if err := it.Close(); err != nil {
		return err
	}
	it, err = s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixPendingBlock}, UpperBound: heightKey(prefixPendingBlock, limit)})
	if err != nil {
		return err
	}
	for valid := it.First(); valid && budget > 0; valid = it.Next() {
		budget--
		_ = b.Delete(slices.Clone(it.Key()), nil)
	}
	return it.Close()
}

// PendingTx is a pending transaction as a view shows it.
type PendingTx struct {
	Tx    *chain.Tx
	Info  chain.PendingInfo
	Since uint64
}

// PendingStatus returns the status of transaction h at this view's state:
// pending (from its 0x0b row) or what became of it (its 0x0f row); found is
// false when the state knows nothing of it (never posted, or forgotten).
func (v *View) PendingStatus(h chain.Hash) (info chain.PendingInfo, found bool, err error) {
	raw, closer, err := v.snap.Get(appendPendingKey(nil, h))
	if err == nil {
		defer closer.Close()
		e, err := decodePendingRow(raw)
		if err != nil {
			return info, false, errors.Join(err, ErrCorrupt)
		}
		return chain.PendingInfo{TxHash: h, Status: chain.PendingActive, Since: e.since, Order: e.order}, true, nil
	}
	if !errors.Is(err, pebble.ErrNotFound) {
		return info, false, fmt.Errorf("disk: read pending %s: %w", h, err)
	}
	raw, closer, err = v.snap.Get(append([]byte{prefixPendingStatus}, h[:]...))
	if errors.Is(err, pebble.ErrNotFound) {
		return info, false, nil
	}
	if err != nil {
		return info, false, fmt.Errorf("disk: read pending status %s: %w", h, err)
	}
	defer closer.Close()
	r, err := decodeStatusRow(h, raw)
	if err != nil {
		return info, false, errors.Join(err, ErrCorrupt)
	}
	return r.info, true, nil
}

// PendingTxOf returns pending transaction h at this view's state, and false
// when it is not pending.
func (v *View) PendingTxOf(h chain.Hash) (*chain.Tx, chain.PendingInfo, bool, error) {
	raw, closer, err := v.snap.Get(appendPendingKey(nil, h))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, chain.PendingInfo{}, false, nil
	}
	if err != nil {
		return nil, chain.PendingInfo{}, false, fmt.Errorf("disk: read pending %s: %w", h, err)
	}
	defer closer.Close()
	e, err := decodePendingRow(raw)
	if err != nil {
		return nil, chain.PendingInfo{}, false, errors.Join(err, ErrCorrupt)
	}
	return e.tx, chain.PendingInfo{TxHash: h, Status: chain.PendingActive, Since: e.since, Order: e.order}, true, nil
}

// PendingSpend names the pending transaction that spends an outpoint: its
// hash and the input.
type PendingSpend struct {
	TxHash chain.Hash
	Input  uint32
}

// PendingSpenders looks up the pending spenders of outpoints at one view's
// state, for a listing that marks each of its outputs (View.PendingSpenders).
// It keeps the spenders of the last transaction it probed: one goroutine's.
type PendingSpenders struct {
	v *View
	m *spenderShards // a published view's spender map; nil: read 0x0c rows
	// lastTx's spenders are last (nil: none), when lastOK.
	lastTx chain.Hash
	last   txSpenders
	lastOK bool
}

// PendingSpenders returns the lookup of this view's pending spenders: on a
// published view, a probe of its state's spender map per outpoint (one per
// run of outputs of one transaction), and None true when no pending
// transaction spends anything.
func (v *View) PendingSpenders() PendingSpenders {
	if v.ref != nil {
		return PendingSpenders{v: v, m: v.ref.spenders}
	}
	return PendingSpenders{v: v}
}

// None reports that no outpoint has a pending spender at the view's state,
// as far as the lookup knows without reading (false when it would read
// rows).
func (p *PendingSpenders) None() bool { return p.m != nil && p.m.n == 0 }

// Of returns the pending transaction that spends op, as View.PendingSpender.
func (p *PendingSpenders) Of(op chain.OutPoint) (PendingSpend, bool, error) {
	if p.m == nil {
		return p.v.PendingSpender(op)
	}
	if !p.lastOK || p.lastTx != op.TxHash {
		p.lastTx, p.last, p.lastOK = op.TxHash, p.m.tx(&op.TxHash), true
	}
	r, ok := p.last[op.Index]
	return PendingSpend{TxHash: r.tx, Input: r.input}, ok, nil
}

// PendingSpender returns the pending transaction that spends op at this
// view's state, and false when none does.
func (v *View) PendingSpender(op chain.OutPoint) (PendingSpend, bool, error) {
	if v.ref != nil { // a published view: its state's spender map
		r, ok := v.ref.spenders.get(op)
		return PendingSpend{TxHash: r.tx, Input: r.input}, ok, nil
	}
	var kb [outPointKeyLen]byte
	raw, closer, err := v.snap.Get(appendPendingSpendKey(kb[:0], op))
	if errors.Is(err, pebble.ErrNotFound) {
		return PendingSpend{}, false, nil
	}
	if err != nil {
		return PendingSpend{}, false, fmt.Errorf("disk: read pending spender of %s: %w", op, err)
	}
	defer closer.Close()
	r, err := decodeSpendRow(raw)
	if err != nil {
		return PendingSpend{}, false, errors.Join(err, ErrCorrupt)
	}
	return PendingSpend{TxHash: r.tx, Input: r.input}, true, nil
}

// PendingOutput is an unconfirmed output: the Utxo (height 0) and when its
// transaction was posted.
type PendingOutput struct {
	Utxo  chain.Utxo
	Since uint64
	Order uint64
}

// PendingOutputs calls fn with the unconfirmed outputs listed under value in
// dimension dim, in posting order (then output index), from this view's
// state; desc reverses the order. fn's Utxo is the caller's.
func (v *View) PendingOutputs(dim Dimension, value []byte, desc bool, fn func(o *PendingOutput) error) error {
	return v.PendingOutputsAfter(dim, value, nil, desc, fn)
}

// PendingPos is the position of an unconfirmed output in its listing:
// posting order, then output index.
type PendingPos struct {
	Order uint64
	Index uint32
}

// PendingOutputsAfter is PendingOutputs resuming after position after
// (exclusive, in the listing's direction; nil: from the start). fn stops
// the listing with ErrStop, which is not returned.
func (v *View) PendingOutputsAfter(dim Dimension, value []byte, after *PendingPos, desc bool, fn func(o *PendingOutput) error) error {
	return v.pendingOutRows(dim, value, after, desc, func(order uint64, idx uint32, val []byte) error {
		since, u, err := decodePendingOutRow(idx, val)
		if err != nil {
			return errors.Join(err, ErrCorrupt)
		}
		return fn(&PendingOutput{Utxo: u, Since: since, Order: order})
	})
}

// PendingOutputRef is an unconfirmed output read in place (PendingOutputRefs):
// Ref (height 0, never spent) aliases the row's bytes.
type PendingOutputRef struct {
	Ref   UtxoRef
	Since uint64
	Order uint64
}

// PendingOutputRefs is PendingOutputsAfter with each output read in place,
// as ListFunc reads the confirmed ones: no chain.Utxo is built, and the
// listing allocates one PendingOutputRef, whatever its length. o and the
// bytes o.Ref aliases are valid only until fn returns. fn stops the listing
// with ErrStop, which is not returned.
func (v *View) PendingOutputRefs(dim Dimension, value []byte, after *PendingPos, desc bool, fn func(o *PendingOutputRef) error) error {
	var o PendingOutputRef
	return v.pendingOutRows(dim, value, after, desc, func(order uint64, idx uint32, val []byte) error {
		if err := parsePendingOutRow(idx, val, &o); err != nil {
			return errors.Join(err, ErrCorrupt)
		}
		o.Order = order
		return fn(&o)
	})
}

// pendingOutRows calls fn with the 0x0d rows of value in dimension dim
// after position after, in the listing's direction: each row's posting
// order, output index and value (valid until fn returns). fn stops the
// listing with ErrStop, which is not returned.
func (v *View) pendingOutRows(dim Dimension, value []byte, after *PendingPos, desc bool, fn func(order uint64, idx uint32, val []byte) error) error {
	var lob, hib, afterb [1 + dimKeySize + 8 + 4 + 1]byte
	dk := MakeDimKey(dim, value)
	lo := append(append(lob[:0], prefixPendingOut), dk[:]...)
	hi := successorPrefixTo(hib[:0], lo)
	if after != nil {
		k := appendPendingOutKey(afterb[:0], dk, after.Order, after.Index)
		if desc {
			hi = k
		} else {
			lo = append(k, 0)
		}
	}
	it, err := v.snap.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return fmt.Errorf("disk: list pending: %w", err)
	}
	defer it.Close()
	step, valid := it.Next, it.First()
	if desc {
		step, valid = it.Prev, it.Last()
	}
	for ; valid; valid = step() {
		k := it.Key()
		if len(k) != 1+dimKeySize+8+4 {
			return fmt.Errorf("disk: pending output key of %d bytes: %w", len(k), ErrCorrupt)
		}
		order := binary.BigEndian.Uint64(k[1+dimKeySize:])
		idx := binary.BigEndian.Uint32(k[1+dimKeySize+8:])
		val, err := it.ValueAndErr()
		if err != nil {
			return fmt.Errorf("disk: list pending: %w", err)
		}
		if err := fn(order, idx, val); err != nil {
			if errors.Is(err, ErrStop) {
				return nil
			}
			return err
		}
	}
	return it.Error()
}

// ErrStop, from a callback, ends a listing early without an error.
var ErrStop = errors.New("disk: stop")

// PendingSpentOutput is an output a pending transaction spends, and by
// which input.
type PendingSpentOutput struct {
	Utxo chain.Utxo
	By   PendingSpend
}

// PendingSpentOf calls fn with the outputs (confirmed or unconfirmed) listed
// under value in dimension dim that pending transactions spend, in outpoint
// order, from this view's state.
func (v *View) PendingSpentOf(dim Dimension, value []byte, fn func(o *PendingSpentOutput) error) error {
	dk := MakeDimKey(dim, value)
	lo := append([]byte{prefixPendingSpent}, dk[:]...)
	it, err := v.snap.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: successorPrefix(lo)})
	if err != nil {
		return fmt.Errorf("disk: list pending spends: %w", err)
	}
	defer it.Close()
	for valid := it.First(); valid; valid = it.Next() {
		k := it.Key()
		if len(k) != 1+dimKeySize+chain.HashSize+4 {
			return fmt.Errorf("disk: pending spent key of %d bytes: %w", len(k), ErrCorrupt)
		}
		idx := binary.BigEndian.Uint32(k[len(k)-4:])
		r, u, err := decodePendingSpentRow(idx, it.Value())
		if err != nil {
			return errors.Join(err, ErrCorrupt)
		}
		if err := fn(&PendingSpentOutput{Utxo: u, By: PendingSpend{TxHash: r.tx, Input: r.input}}); err != nil {
			return err
		}
	}
	return it.Error()
}

// successorPrefix returns the first key after every key that starts with p.
func successorPrefix(p []byte) []byte { return successorPrefixTo(nil, p) }

// successorPrefixTo is successorPrefix appended to dst (nil when no key
// follows p's: p is empty or all 0xff).
func successorPrefixTo(dst, p []byte) []byte {
	out := append(dst, p...)
	for i := len(out) - 1; i >= len(dst); i-- {
		out[i]++
		if out[i] != 0 {
			return out[:i+1]
		}
	}
	return nil
}

// pendingTouched collects, over one change, the pending transactions that
// entered or left the pending set (addPending, removePending), so that the
// change set names what they touch: the addresses and index values of the
// outputs they spend and create, and the outpoints of both. Answers that
// include the pending set (the Esplora front end's, cached under those
// guards) are then invalidated exactly as a block's are; answers without
// it are recomputed, byte for byte what they were.
type pendingTouched struct {
	entries []*pendingEntry
	// status is each entry's move: chain.PendingActive for one entering
	// the set, what became of it for one leaving (the change record's
	// "pending" member, pendingMoves).
	status []chain.PendingStatus
}

// touchPending records e as entering (status chain.PendingActive) or
// leaving the pending set in the change being built. Writer goroutine only.
func (s *Store) touchPending(e *pendingEntry, status chain.PendingStatus) {
	s.touched.entries = append(s.touched.entries, e)
	s.touched.status = append(s.touched.status, status)
}

// pendingMoves returns the change record's pending moves of the entries
// touched since mark (an index into the touched entries), in order: what
// makes the change log's records self-contained for event streams, on the
// writer and on every replica alike (each store records its own, by the
// same code). Writer goroutine only.
func (s *Store) pendingMoves(mark int) []chain.PendingMove {
	es := s.touched.entries[mark:]
	if len(es) == 0 {
		return nil
	}
	out := make([]chain.PendingMove, len(es))
	for i, e := range es {
		out[i] = chain.PendingMove{Tx: e.tx, Status: s.touched.status[mark+i], Since: e.since, Spent: e.spent}
	}
	return out
}

// addPendingTouched adds what the change's pending transactions touched to
// ch, and forgets them. With spans set (a single block's changes, whose
// Spans the read path's keep logic uses), an address the change names only
// for its pending effects is added with a span over every position: its
// confirmed listing did not change, and the keep logic then keeps nothing of
// it but what it can rebuild exactly. Writer goroutine only.
func (s *Store) addPendingTouched(ch *changes, spans bool) {
	entries := s.touched.entries
	s.touched.entries, s.touched.status = entries[:0], s.touched.status[:0]
	if len(entries) == 0 {
		return
	}
	every := changeset.PositionSpan{Hi: chain.Position{Height: math.MaxUint64, TxPos: math.MaxUint32, Index: math.MaxUint32}}
	var keys []DimKey
	var filters []assetFilter
	touch := func(u *chain.Utxo) {
		ch.outPoint(u.OutPoint)
		keys, filters = appendDimKeys(keys[:0], filters[:0], s.dims, s.dimFuncs, u)
		ch.indexKeys(keys[1:]) // keys[0] is the address's
		if _, ok := ch.addrs[u.Address]; ok {
			return
		}
		if !spans || ch.merged {
			ch.address(u.Address)
			return
		}
		ch.addrs[u.Address] = len(ch.cs.Addresses)
		ch.cs.Addresses = append(ch.cs.Addresses, u.Address)
		ch.addrKeys = append(ch.addrKeys, keys[0])
		ch.cs.Spans = append(ch.cs.Spans, every)
	}
	for _, e := range entries {
		for i := range e.spent {
			touch(&e.spent[i])
		}
		s.forPendingOutputs(e, touch)
	}
}

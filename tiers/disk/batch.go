package disk

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"github.com/utxo-cache/utxo-cache/changeset"
)

// keyBatch collects the writes of one commit (a block's, a window's, a
// rollback step's) and hands them to Pebble in key order.
//
// Why: a committed batch is inserted into Pebble's memtable one key at a
// time, each a skiplist search from the top, and on a block that search is
// most of the commit's CPU (the keys of a block are hashes: random places in
// a memtable of hundreds of thousands of entries, each search a chain of
// cache misses). Inserted in key order, consecutive searches share the upper
// part of their path, which stays in the CPU cache: measured, about a third
// less CPU per key (a 3,700-key batch into a 64 MiB memtable).
//
// Invariant: the batch Pebble receives has the same effect as the writes
// in the order they were made. Writes to distinct point keys commute, and
// writes to the same key keep their relative order (the sort breaks ties by
// arrival). A range deletion commutes with every point write outside its
// range, so range deletions go last; a commit with a point write inside one
// of its range deletions (none of the store's do so today) keeps the order
// in which the writes were made.
//
// The method signatures are pebble.Batch's, so the code that fills a batch
// reads as before; the write options are ignored (the commit is synced).
//
// A catch-up window's batch is sorted too, although it is usually larger
// than half a memtable, which Pebble does not insert into the memtable but
// keeps aside as a table of its own (a flushable batch), sorting its entries
// itself: Pebble's comparison sort of the entries in arrival order cost about
// 2 ms of the writer's time per block of a window (BenchmarkApply), and of
// entries already in key order it is a single pass. Only a window too large
// for the 32-bit spans (keyBatchLimit) goes in arrival order (directBatch).
type keyBatch struct {
	buf    []byte // keys and values, back to back
	points []keyOp
	ranges []keyOp   // range deletions: key is the start, val the end
	order  []sortKey // scratch of pebbleBatch
	// direct, when set, takes every write as it is made, unordered.
	direct *pebble.Batch
	// limit bounds len(buf) (the spans are 32-bit offsets; 0, or anything
	// past keyBatchLimit, stands for keyBatchLimit): a write past it is not collected and sets overflow,
	// and commitKeys refuses the batch (ErrBatchTooLarge) with nothing
	// written.
	limit    int
	overflow bool
}

// ErrBatchTooLarge is commitKeys' answer to a sorted batch whose writes
// went past its limit: it wrote nothing. A catch-up window refused so is
// applied again block by block (writer.ApplyBlocks).
var ErrBatchTooLarge = errors.New("batch too large to sort")

// keyBatchLimit is a sorted keyBatch's limit: its spans are 32-bit.
const keyBatchLimit = math.MaxUint32

// keyBatchKeep is the largest buffer a keyBatch keeps for the next commit: a
// block's writes (about 0.5 MB for 300 transactions) fit, a catch-up
// window's large batch is let go.
const keyBatchKeep = 8 << 20

// scratchKeepEntries is the most entries the dedup maps of a block's
// changes keep for the next block, and scratchKeepBytes the largest encoded
// undo delta and change-log record buffers kept: a block of everyday size
// (300 transactions touch about 1,500 rows, their log record is some
// 200 KB) reuses them, a larger one's are let go with its commit.
const (
	scratchKeepEntries = 1 << 14
	scratchKeepBytes   = 1 << 20
)

// releaseScratch lets go of what a commit of one block (or one rollback
// step) leaves in the store's reused buffers once they outgrew an everyday
// block's: the keyBatch, the encoded undo delta and change-log record, the
// changes' dedup maps; and of the change set the commit handed its caller,
// whose outputs point into the commit's rows. So a giant block's memory goes
// with its commit, not with the next block. (Go maps never shrink: cleared,
// they keep their buckets.) A catch-up window keeps its sorted buffers for
// the next window (bounded by the writer's window budget); the next single
// block lets them go. Writer goroutine only.
func (s *Store) releaseScratch() {
	if cap(s.batch.buf) > keyBatchKeep || cap(s.batch.points) > scratchKeepEntries || cap(s.batch.order) > 2*scratchKeepEntries {
		s.batch = keyBatch{}
	}
	if cap(s.undoBuf) > scratchKeepBytes {
		s.undoBuf = nil
	}
	if cap(s.logBuf) > scratchKeepBytes {
		s.logBuf = nil
	}
	c := &s.changes
	c.cs = changeset.Set{}
	if len(c.addrs) > scratchKeepEntries || len(c.ops) > scratchKeepEntries {
		c.addrs, c.ops = nil, nil
	}
	if cap(c.addrKeys) > scratchKeepEntries {
		c.addrKeys = nil
	}
}

// afterCommit lets Pebble's log writer go of a large commit's record: it
// keeps the buffers of every record it wrote (32 KiB blocks) for its next
// ones until the log rotates, which happens when the memtable fills, maybe
// hours later on a quiet chain. After a single commit of more than
// logKeepBytes (a giant block, or its rollback) the memtable is flushed at
// once, in the background, which rotates the log and frees them. A
// catch-up window does not come here: its memory is the window budget's,
// and a window larger than half the memtable rotates the log itself.
// Writer goroutine only, after a successful commit of b.
func (s *Store) afterCommit(b *keyBatch) {
	if len(b.buf)+16*b.Len() <= logKeepBytes {
		return
	}
	// A failed flush is a background error (backgroundErrors).
	if done, err := s.db.AsyncFlush(); err == nil {
		s.flushed = done
	}
}

// logKeepBytes is the largest commit whose log buffers Pebble may keep
// until its log rotates on its own (see afterCommit).
const logKeepBytes = 4 << 20

// writeBatch returns the store's keyBatch, emptied, for the next commit: its
// buffers are reused from commit to commit. Writer goroutine only, one commit
// at a time.
func (s *Store) writeBatch() *keyBatch {
	s.touched.entries, s.touched.status = s.touched.entries[:0], s.touched.status[:0] // a failed change's, if any
	b := &s.batch
	if cap(b.buf) > keyBatchKeep {
		*b = keyBatch{}
	}
	b.reset(s.batchLimit)
	return b
}

// reset empties b, keeping its buffers, for writes of at most limit bytes
// (see keyBatch.limit).
func (b *keyBatch) reset(limit int) {
	b.buf, b.points, b.ranges, b.order = b.buf[:0], b.points[:0], b.ranges[:0], b.order[:0]
	b.limit, b.overflow = limit, false
}

// sizedBatch returns the store's keyBatch, emptied, with room for about
// size bytes of keys and values in ops writes (hints: it grows past them),
// or a directBatch when size is beyond a quarter of keyBatchLimit (an
// estimate short by 4 times would still fit; one shorter than that makes
// commitKeys refuse the batch with ErrBatchTooLarge). A good hint matters
// for a window's batch of tens of megabytes, which would otherwise be
// copied at every doubling. Writer goroutine only, one commit at a time;
// close it once done.
func (s *Store) sizedBatch(size, ops int) *keyBatch {
	if size > keyBatchLimit/4 {
		return s.directBatch(size)
	}
	b := &s.batch
	b.reset(s.batchLimit)
	b.buf = slices.Grow(b.buf, size)
	b.points = slices.Grow(b.points, ops)
	return b
}

// directBatch returns a keyBatch that writes straight into a new Pebble
// batch of size bytes (a hint: it grows past it), in the order the writes are
// made; close it once done. A good hint matters for a window's batch of tens
// of megabytes, which would otherwise be copied at every doubling.
func (s *Store) directBatch(size int) *keyBatch {
	return &keyBatch{direct: s.db.NewBatchWithSize(size)}
}

// close releases a direct batch's Pebble batch (a no-op otherwise: a
// window's sorted buffers serve the next window of a catch-up, and the next
// single block's writeBatch lets them go).
func (b *keyBatch) close() {
	if b.direct != nil {
		b.direct.Close()
	}
}

// keyOp is one write: its kind, its key and value as spans of buf, and the
// key's first 8 bytes as a number (most comparisons stop there).
type keyOp struct {
	head     uint64
	kind     uint8
	key, val span
}

type span struct{ off, n uint32 }

// sortKey is a point write's place in the sort: its key's head, then its
// index in points (the full key decides between equal heads).
type sortKey struct {
	head uint64
	i    int32
}

const (
	opSet uint8 = iota
	opDelete
	opDeleteRange
)

// full reports whether n more bytes would take b past its limit, and then
// marks it overflowed.
func (b *keyBatch) full(n int) bool {
	limit := b.limit
	if limit <= 0 || limit > keyBatchLimit {
		limit = keyBatchLimit
	}
	if len(b.buf)+n > limit {
		b.overflow = true
	}
	return b.overflow
}

func (b *keyBatch) add(kind uint8, key, val []byte) keyOp {
	op := keyOp{head: keyHead(key), kind: kind, key: span{uint32(len(b.buf)), uint32(len(key))}}
	b.buf = append(b.buf, key...)
	op.val = span{uint32(len(b.buf)), uint32(len(val))}
	b.buf = append(b.buf, val...)
	return op
}

// keyHead is the first 8 bytes of k, big-endian, zero-padded: keys order as
// their heads do unless the heads are equal.
func keyHead(k []byte) uint64 {
	if len(k) >= 8 {
		return binary.BigEndian.Uint64(k)
	}
	var p [8]byte
	copy(p[:], k)
	return binary.BigEndian.Uint64(p[:])
}

// Set sets key to value.
func (b *keyBatch) Set(key, value []byte, _ *pebble.WriteOptions) error {
	if b.direct != nil {
		return b.direct.Set(key, value, nil)
	}
	if b.full(len(key) + len(value)) {
		return ErrBatchTooLarge
	}
	b.points = append(b.points, b.add(opSet, key, value))
	return nil
}

// Delete deletes key.
func (b *keyBatch) Delete(key []byte, _ *pebble.WriteOptions) error {
	if b.direct != nil {
		return b.direct.Delete(key, nil)
	}
	if b.full(len(key)) {
		return ErrBatchTooLarge
	}
	b.points = append(b.points, b.add(opDelete, key, nil))
	return nil
}

// DeleteRange deletes the keys in [start, end).
func (b *keyBatch) DeleteRange(start, end []byte, _ *pebble.WriteOptions) error {
	if b.direct != nil {
		return b.direct.DeleteRange(start, end, nil)
	}
	if b.full(len(start) + len(end)) {
		return ErrBatchTooLarge
	}
	op := b.add(opDeleteRange, start, end)
	op.head = uint64(len(b.points)) // its place among the point writes
	b.ranges = append(b.ranges, op)
	return nil
}

func (b *keyBatch) bytes(s span) []byte { return b.buf[s.off : s.off+s.n : s.off+s.n] }

// Len is the number of writes collected (not counting a direct batch's).
func (b *keyBatch) Len() int { return len(b.points) + len(b.ranges) }

// pebbleBatch returns a Pebble batch holding the writes, in key order where
// that has the same effect (see the type comment). The caller commits and
// closes it.
func (b *keyBatch) pebbleBatch(db *pebble.DB) *pebble.Batch {
	pb := db.NewBatchWithSize(len(b.buf) + 16*b.Len())
	if b.rangeCoversPoint() {
		b.writeInOrder(pb)
		return pb
	}
	for _, k := range b.sortPoints() {
		b.writePoint(pb, &b.points[k.i])
	}
	for i := range b.ranges {
		r := &b.ranges[i]
		_ = pb.DeleteRange(b.bytes(r.key), b.bytes(r.val), nil)
	}
	return pb
}

// sortPoints returns the point writes in key order, writes of the same key
// in the order they were made: a stable radix sort on the keys' heads, then
// a stable sort by the whole key of each run of equal heads (the index rows
// of one address, the outputs of one transaction).
func (b *keyBatch) sortPoints() []sortKey {
	n := len(b.points)
	if n == 0 {
		return nil
	}
	if cap(b.order) < 2*n {
		b.order = make([]sortKey, 0, 2*n)
	}
	src, dst := b.order[:n], b.order[n:2*n]
	for i := range b.points {
		src[i] = sortKey{b.points[i].head, int32(i)}
	}
	for shift := 0; shift < 64; shift += 8 {
		var count [256]int
		for _, k := range src {
			count[byte(k.head>>shift)]++
		}
		if count[byte(src[0].head>>shift)] == n {
			continue // every head has this byte: the pass would not move anything
		}
		pos := 0
		for d, c := range count {
			count[d] = pos
			pos += c
		}
		for _, k := range src {
			d := byte(k.head >> shift)
			dst[count[d]] = k
			count[d]++
		}
		src, dst = dst, src
	}
	for lo := 0; lo < n; {
		hi := lo + 1
		for hi < n && src[hi].head == src[lo].head {
			hi++
		}
		if hi-lo > 1 {
			slices.SortStableFunc(src[lo:hi], func(x, y sortKey) int {
				return bytes.Compare(b.bytes(b.points[x.i].key), b.bytes(b.points[y.i].key))
			})
		}
		lo = hi
	}
	return src
}

// rangeCoversPoint reports whether a point write lies inside some range
// deletion: then only the order of arrival is sure to have the effect the
// writer meant.
func (b *keyBatch) rangeCoversPoint() bool {
	for i := range b.ranges {
		r := &b.ranges[i]
		start, end := b.bytes(r.key), b.bytes(r.val)
		for j := range b.points {
			k := b.bytes(b.points[j].key)
			if bytes.Compare(k, start) >= 0 && bytes.Compare(k, end) < 0 {
				return true
			}
		}
	}
	return false
}

// writeInOrder writes every write in the order it was made.
func (b *keyBatch) writeInOrder(pb *pebble.Batch) {
	p := 0
	for i := range b.ranges {
		r := &b.ranges[i]
		for ; p < int(r.head); p++ {
			b.writePoint(pb, &b.points[p])
		}
		_ = pb.DeleteRange(b.bytes(r.key), b.bytes(r.val), nil)
	}
	for ; p < len(b.points); p++ {
		b.writePoint(pb, &b.points[p])
	}
}

func (b *keyBatch) writePoint(pb *pebble.Batch, op *keyOp) {
	if op.kind == opSet {
		_ = pb.Set(b.bytes(op.key), b.bytes(op.val), nil)
	} else {
		_ = pb.Delete(b.bytes(op.key), nil)
	}
}

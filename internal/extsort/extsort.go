// Package extsort sorts more key-value records than fit in memory: records
// are added in any order, held in a buffer of bounded size, and each full
// buffer is sorted and written to a run file (on a goroutine of its own,
// while the next buffer fills); Sort then merges the runs, and the records
// still buffered, into one stream in ascending key order (bytewise). A
// bulk load (tiers/disk) sorts the outputs of a chain by outpoint with it,
// and its index and balance rows by key.
//
// Memory: at most two buffers of Options.MemBytes (the one filling and the
// one being written), and during the merge a read buffer per run. Disk:
// every record once, in run files under a directory of their own, removed
// by Close.
//
// Run file layout: records back to back, each
//
//	uvarint len(key), uvarint len(value), key, value
//
// A run is read only by the Sorter that wrote it; a record longer than
// MaxRecordBytes, or a run cut short, is an error (ErrCorruptRun), never a
// panic.
package extsort

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
)

// MaxRecordBytes is the largest key plus value a record may hold.
const MaxRecordBytes = 64 << 20

// ErrCorruptRun reports a run file that does not read back as written.
var ErrCorruptRun = errors.New("extsort: corrupt run file")

// Options configure a Sorter.
type Options struct {
	// Dir is the directory the Sorter makes its own directory of run files
	// in (default: os.TempDir()).
	Dir string
	// BeforeWrite, when set, is called with the size of a run before it is
	// written (a spill, or a merge of runs into a longer one); an error
	// stops the sort with nothing more written (a caller that keeps free
	// space on its file system refuses there).
	BeforeWrite func(bytes int64) error
	// MemBytes is how many bytes of records (keys, values and 24 bytes of
	// bookkeeping each) a buffer holds before it is sorted and written as a
	// run (default 64 MiB). Two buffers may be held at once.
	MemBytes int
}

// EnsureDefaults fills zero fields with their defaults.
func (o Options) EnsureDefaults() Options {
	if o.Dir == "" {
		o.Dir = os.TempDir()
	}
	if o.MemBytes <= 0 {
		o.MemBytes = 64 << 20
	}
	return o
}

// entry is one buffered record: its key and value are buf[off:off+k] and
// buf[off+k:off+k+v], and head is the key's first 8 bytes as a big-endian
// number (zero-padded): the sort compares heads first, in the entry
// itself, and reaches into the buffer only for keys whose heads are equal
// (measured on a bulk load's sorts: the comparisons' reads of the buffer,
// a cache miss each, were most of the sort).
type entry struct {
	head uint64
	off  int
	k, v uint32
}

// keyHead is the first 8 bytes of k as a big-endian number, zero-padded.
func keyHead(k []byte) uint64 {
	if len(k) >= 8 {
		return binary.BigEndian.Uint64(k)
	}
	var b [8]byte
	copy(b[:], k)
	return binary.BigEndian.Uint64(b[:])
}

// buffer is a batch of records as added.
type buffer struct {
	data    []byte
	entries []entry
}

func (b *buffer) size() int { return len(b.data) + 24*len(b.entries) }

func (b *buffer) key(e entry) []byte { return b.data[e.off : e.off+int(e.k)] }

func (b *buffer) sort() {
	slices.SortFunc(b.entries, func(x, y entry) int {
		switch {
		case x.head < y.head:
			return -1
		case x.head > y.head:
			return 1
		}
		return bytes.Compare(b.key(x), b.key(y))
	})
}

// Sorter collects records and sorts them. Not safe for concurrent use:
// one goroutine adds, then sorts and reads.
type Sorter struct {
	opts  Options
	dir   string
	cur   *buffer
	spare *buffer // a buffer written out, to reuse
	runs  []run
	// writing is the run being written in the background, if any: its
	// result arrives on done.
	writing bool
	done    chan spillResult
	err     error // sticky: the first failure
	sorted  bool
	records uint64
	spilled int64
	named   int // run files named so far
}

type spillResult struct {
	buf  *buffer
	path string
	n    int64
	err  error
}

// run is a run file and how many records it holds (a run read back with
// fewer was cut short).
type run struct {
	path    string
	records int
	bytes   int64 // upper bound, for Options.BeforeWrite
}

// maxMergeRuns bounds the runs one merge reads at once (each an open file
// and a read buffer): more are first merged, this many at a time, into
// longer runs. A variable for the tests.
var maxMergeRuns = 128

// New makes a Sorter, with its directory of run files under opts.Dir.
func New(opts Options) (*Sorter, error) {
	opts = opts.EnsureDefaults()
	dir, err := os.MkdirTemp(opts.Dir, "extsort-")
	if err != nil {
		return nil, fmt.Errorf("extsort: %w", err)
	}
	return &Sorter{opts: opts, dir: dir, cur: &buffer{}, done: make(chan spillResult, 1)}, nil
}

// Add adds a record; key and value are copied.
func (s *Sorter) Add(key, value []byte) error {
	if s.err != nil {
		return s.err
	}
	if s.sorted {
		return errors.New("extsort: Add after Sort")
	}
	if len(key)+len(value) > MaxRecordBytes {
		return fmt.Errorf("extsort: record of %d bytes, more than %d", len(key)+len(value), MaxRecordBytes)
	}
	b := s.cur
	b.entries = append(b.entries, entry{head: keyHead(key), off: len(b.data), k: uint32(len(key)), v: uint32(len(value))})
	b.data = append(b.data, key...)
	b.data = append(b.data, value...)
	s.records++
	if b.size() >= s.opts.MemBytes {
		return s.spill()
	}
	return nil
}

// Records returns how many records were added.
func (s *Sorter) Records() uint64 { return s.records }

// SpilledBytes returns the bytes written to run files so far.
func (s *Sorter) SpilledBytes() int64 { return s.spilled }

// spill hands the current buffer to a background writer, after the
// previous one has finished.
func (s *Sorter) spill() error {
	if err := s.wait(); err != nil {
		return err
	}
	b := s.cur
	if f := s.opts.BeforeWrite; f != nil {
		if err := f(int64(len(b.data) + 2*binary.MaxVarintLen32*len(b.entries))); err != nil {
			s.err = fmt.Errorf("extsort: %w", err)
			return s.err
		}
	}
	s.cur = s.spare
	if s.cur == nil {
		s.cur = &buffer{data: make([]byte, 0, cap(b.data)), entries: make([]entry, 0, cap(b.entries))}
	}
	s.spare = nil
	path := s.runPath()
	s.runs = append(s.runs, run{path: path, records: len(b.entries), bytes: int64(len(b.data) + 2*binary.MaxVarintLen32*len(b.entries))})
	s.writing = true
	go func() {
		n, err := writeRun(path, b)
		s.done <- spillResult{buf: b, path: path, n: n, err: err}
	}()
	return nil
}

// runPath names a new run file.
func (s *Sorter) runPath() string {
	s.named++
	return filepath.Join(s.dir, fmt.Sprintf("run-%06d", s.named))
}

// wait waits for the background writer, if one runs.
func (s *Sorter) wait() error {
	if !s.writing {
		return s.err
	}
	r := <-s.done
	s.writing = false
	s.spilled += r.n
	r.buf.data, r.buf.entries = r.buf.data[:0], r.buf.entries[:0]
	s.spare = r.buf
	if r.err != nil && s.err == nil {
		s.err = fmt.Errorf("extsort: write %s: %w", r.path, r.err)
	}
	return s.err
}

// writeRun sorts b and writes it to a new file at path.
func writeRun(path string, b *buffer) (int64, error) {
	b.sort()
	return writeEntries(path, b)
}

// writeEntries writes b's records, in the order of its entries, to a new
// file at path.
func writeEntries(path string, b *buffer) (int64, error) {
	w, err := createRun(path)
	if err != nil {
		return 0, err
	}
	for _, e := range b.entries {
		w.add(b.data[e.off:e.off+int(e.k)], b.data[e.off+int(e.k):e.off+int(e.k)+int(e.v)])
	}
	return w.n, w.close()
}

// runWriter writes a run file (the layout in the package comment).
type runWriter struct {
	f       *os.File
	w       *bufio.Writer
	head    [2 * binary.MaxVarintLen32]byte
	n       int64 // bytes written
	records int
}

func createRun(path string) (*runWriter, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	return &runWriter{f: f, w: bufio.NewWriterSize(f, 1<<20)}, nil
}

// add appends a record; an error shows at close.
func (r *runWriter) add(k, v []byte) {
	h := binary.AppendUvarint(r.head[:0], uint64(len(k)))
	h = binary.AppendUvarint(h, uint64(len(v)))
	r.w.Write(h)
	r.w.Write(k)
	r.w.Write(v)
	r.n += int64(len(h) + len(k) + len(v))
	r.records++
}

func (r *runWriter) close() error { return errors.Join(r.w.Flush(), r.f.Close()) }

// Sort ends the adding and returns the records in ascending key order
// (records of equal keys in no particular order). Call it once.
func (s *Sorter) Sort() (*Iter, error) {
	if s.sorted {
		return nil, errors.New("extsort: Sort called twice")
	}
	s.sorted = true
	if err := s.wait(); err != nil {
		return nil, err
	}
	s.spare = nil // not needed again: let it go before the merge
	for len(s.runs) > maxMergeRuns {
		if err := s.mergeRuns(maxMergeRuns); err != nil {
			return nil, err
		}
	}
	it, err := s.open(s.runs)
	if err != nil {
		return nil, err
	}
	if len(s.cur.entries) > 0 {
		s.cur.sort()
		m := &memSource{b: s.cur}
		if m.next() {
			it.sources = append(it.sources, m)
			it.heap = append(it.heap, m)
			it.init()
		}
	}
	return it, nil
}

// open returns an Iter over runs.
func (s *Sorter) open(runs []run) (*Iter, error) {
	it := &Iter{}
	for _, r := range runs {
		f, err := os.Open(r.path)
		if err != nil {
			it.Close()
			return nil, fmt.Errorf("extsort: %w", err)
		}
		it.sources = append(it.sources, &runSource{f: f, r: newReader(f), path: r.path, want: r.records})
	}
	for _, src := range it.sources {
		if src.next() {
			it.heap = append(it.heap, src)
		} else if err := src.error(); err != nil {
			it.Close()
			return nil, err
		}
	}
	it.init()
	return it, nil
}

// mergeRuns merges the first n runs into one, at the end of the list.
func (s *Sorter) mergeRuns(n int) error {
	var bytes int64
	for _, r := range s.runs[:n] {
		bytes += r.bytes
	}
	if f := s.opts.BeforeWrite; f != nil {
		if err := f(bytes); err != nil {
			return fmt.Errorf("extsort: %w", err)
		}
	}
	it, err := s.open(s.runs[:n])
	if err != nil {
		return err
	}
	defer it.Close()
	path := s.runPath()
	w, err := createRun(path)
	if err != nil {
		return fmt.Errorf("extsort: %w", err)
	}
	for it.Next() {
		w.add(it.Key(), it.Value())
	}
	if err := errors.Join(it.Err(), w.close()); err != nil {
		return fmt.Errorf("extsort: merge runs into %s: %w", path, err)
	}
	for _, r := range s.runs[:n] {
		os.Remove(r.path)
	}
	s.runs = append(s.runs[n:], run{path: path, records: w.records, bytes: bytes})
	return nil
}

// Close waits for a background write and removes every run file. The
// records of an Iter from Sort are unreadable after it.
func (s *Sorter) Close() error {
	s.wait()
	s.cur, s.spare = nil, nil
	return os.RemoveAll(s.dir)
}

// source is one sorted stream of the merge.
type source interface {
	next() bool // advance; false at the end or on an error
	key() []byte
	value() []byte
	error() error
	close()
}

type memSource struct {
	b *buffer
	i int // the current entry is b.entries[i-1]
}

func (m *memSource) next() bool {
	if m.i >= len(m.b.entries) {
		return false
	}
	m.i++
	return true
}

func (m *memSource) key() []byte { return m.b.key(m.b.entries[m.i-1]) }

func (m *memSource) value() []byte {
	e := m.b.entries[m.i-1]
	return m.b.data[e.off+int(e.k) : e.off+int(e.k)+int(e.v)]
}

func (m *memSource) error() error { return nil }
func (m *memSource) close()       {}

// newReader buffers the reading of a run.
func newReader(f *os.File) *bufio.Reader { return bufio.NewReaderSize(f, 256<<10) }

type runSource struct {
	f    *os.File
	r    *bufio.Reader
	path string
	want int // records the run holds (-1: unknown)
	read int
	rec  []byte
	k    int
	err  error
}

func (r *runSource) next() bool {
	if r.err != nil {
		return false
	}
	k, err := binary.ReadUvarint(r.r)
	if err == io.EOF {
		if r.want >= 0 && r.read != r.want {
			r.err = fmt.Errorf("%w: %s: %d records, want %d", ErrCorruptRun, r.path, r.read, r.want)
		}
		return false
	}
	v, err2 := binary.ReadUvarint(r.r)
	if err = errors.Join(err, err2); err != nil || k > MaxRecordBytes || v > MaxRecordBytes || k+v > MaxRecordBytes {
		r.err = fmt.Errorf("%w: %s: record head: %v", ErrCorruptRun, r.path, err)
		return false
	}
	r.read++
	if uint64(cap(r.rec)) < k+v {
		r.rec = make([]byte, k+v)
	}
	r.rec = r.rec[:k+v]
	if _, err := io.ReadFull(r.r, r.rec); err != nil {
		r.err = fmt.Errorf("%w: %s: record of %d bytes: %v", ErrCorruptRun, r.path, k+v, err)
		return false
	}
	r.k = int(k)
	return true
}

func (r *runSource) key() []byte   { return r.rec[:r.k] }
func (r *runSource) value() []byte { return r.rec[r.k:] }
func (r *runSource) error() error  { return r.err }
func (r *runSource) close()        { r.f.Close() }

// Iter reads a Sorter's records in key order. Not safe for concurrent use.
type Iter struct {
	sources []source
	heap    []source // a min-heap on key of the sources not exhausted
	cur     source   // the source of the current record
	err     error
}

func (it *Iter) less(i, j int) bool {
	return bytes.Compare(it.heap[i].key(), it.heap[j].key()) < 0
}

func (it *Iter) init() {
	for i := len(it.heap)/2 - 1; i >= 0; i-- {
		it.down(i)
	}
}

func (it *Iter) down(i int) {
	n := len(it.heap)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		j := l
		if r := l + 1; r < n && it.less(r, l) {
			j = r
		}
		if !it.less(j, i) {
			return
		}
		it.heap[i], it.heap[j] = it.heap[j], it.heap[i]
		i = j
	}
}

// Next moves to the next record; false at the end or on an error (Err).
func (it *Iter) Next() bool {
	if it.err != nil {
		return false
	}
	if it.cur != nil {
		// The current record's source is at the heap's top: advance it.
		if it.cur.next() {
			it.down(0)
		} else {
			if it.err = it.cur.error(); it.err != nil {
				return false
			}
			last := len(it.heap) - 1
			it.heap[0] = it.heap[last]
			it.heap = it.heap[:last]
			if last > 0 {
				it.down(0)
			}
		}
	}
	if len(it.heap) == 0 {
		it.cur = nil
		return false
	}
	it.cur = it.heap[0]
	return true
}

// Key returns the current record's key, valid until the next Next.
func (it *Iter) Key() []byte { return it.cur.key() }

// Value returns the current record's value, valid until the next Next.
func (it *Iter) Value() []byte { return it.cur.value() }

// Err returns the error that ended the iteration, if any.
func (it *Iter) Err() error { return it.err }

// Close closes the run files (the Sorter's Close removes them).
func (it *Iter) Close() {
	for _, s := range it.sources {
		s.close()
	}
	it.sources, it.heap, it.cur = nil, nil, nil
}

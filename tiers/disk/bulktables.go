package disk

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// bulkTableBytes is about the size of each table a bulk load writes:
// Pebble's target for its bottom level's files.
const bulkTableBytes = 128 << 20

// bulkBatchBytes is how many bytes of keys and values set collects before
// it hands them to the table writer's goroutine.
const bulkBatchBytes = 4 << 20

// bulkTables writes keys in ascending order into a series of tables of
// about bulkTableBytes each, for ingestion. Building a table (its blocks'
// encoding, compression, filter) runs on a goroutine of its own, fed with
// batches of keys and values, so that it overlaps the merge that produces
// them: on one goroutine a bulk load's last merge left a core idle.
// set, finish and abort are for one goroutine.
type bulkTables struct {
	l     *BulkLoad
	name  string
	fs    vfs.FS
	paths []string // the tables begun, in key order (the writer's, until finish)
	last  []byte

	batch   *bulkBatch
	spare   chan *bulkBatch // emptied batches, back from the writer
	work    chan *bulkBatch // nil until the first set
	done    chan struct{}   // closed when the writer has ended
	err     error           // the writer's, once done is closed
	aborted bool
}

// bulkBatch is keys and values back to back, and where each ends.
type bulkBatch struct {
	buf  []byte
	ends []int // per record: end of key, end of value
}

func (l *BulkLoad) newTables(name string) *bulkTables {
	return &bulkTables{l: l, name: name, fs: l.s.po.FS}
}

func (t *bulkTables) set(k, v []byte) error {
	if t.last != nil && bytes.Compare(k, t.last) <= 0 {
		return fmt.Errorf("disk: bulk load: key %x after %x: %w", k, t.last, ErrCorrupt)
	}
	t.last = append(t.last[:0], k...)
	if t.work == nil {
		t.work, t.spare, t.done = make(chan *bulkBatch, 2), make(chan *bulkBatch, 4), make(chan struct{})
		t.batch = &bulkBatch{}
		go t.write()
	}
	b := t.batch
	b.buf = append(b.buf, k...)
	b.ends = append(b.ends, len(b.buf))
	b.buf = append(b.buf, v...)
	b.ends = append(b.ends, len(b.buf))
	if len(b.buf) >= bulkBatchBytes {
		return t.send()
	}
	return nil
}

// send hands the batch to the writer and takes an empty one.
func (t *bulkTables) send() error {
	select {
	case <-t.done: // the writer failed
		return t.err
	default:
	}
	select {
	case t.work <- t.batch:
	case <-t.done:
		return t.err
	}
	select {
	case t.batch = <-t.spare:
		t.batch.buf, t.batch.ends = t.batch.buf[:0], t.batch.ends[:0]
	default:
		t.batch = &bulkBatch{}
	}
	return nil
}

// write is the writer's goroutine: it adds each batch's records to the
// current table, beginning a new one past bulkTableBytes.
func (t *bulkTables) write() {
	defer close(t.done)
	var w *sstable.Writer
	closeTable := func() error {
		err := w.Close() // syncs the file
		w = nil
		if err != nil {
			return fmt.Errorf("disk: bulk load: write %s: %w", t.paths[len(t.paths)-1], err)
		}
		return nil
	}
	for b := range t.work {
		start := 0
		for i := 0; i < len(b.ends); i += 2 {
			k, v := b.buf[start:b.ends[i]], b.buf[b.ends[i]:b.ends[i+1]]
			start = b.ends[i+1]
			if w != nil && w.Raw().EstimatedSize() >= bulkTableBytes {
				if t.err = closeTable(); t.err != nil {
					break
				}
			}
			if w == nil {
				if t.err = t.l.checkSpace(bulkTableBytes); t.err != nil {
					break
				}
				path := filepath.Join(t.l.dir, fmt.Sprintf("%s-%06d.sst", t.name, len(t.paths)+1))
				f, err := t.fs.Create(path, vfs.WriteCategoryUnspecified)
				if err != nil {
					t.err = fmt.Errorf("disk: bulk load: %w", err)
					break
				}
				t.paths = append(t.paths, path)
				s := t.l.s
				w = sstable.NewWriter(objstorageprovider.NewFileWritable(f), s.po.MakeWriterOptions(len(s.po.Levels)-1, s.db.TableFormat()))
			}
			if err := w.Set(k, v); err != nil {
				t.err = fmt.Errorf("disk: bulk load: write %s: %w", t.paths[len(t.paths)-1], err)
				break
			}
		}
		if t.err != nil {
			// done, closed, tells set and finish at once.
			if w != nil {
				w.Close() // its file goes with the load's directory
			}
			return
		}
		select {
		case t.spare <- b:
		default:
		}
	}
	if w != nil {
		if t.aborted || t.err != nil {
			w.Close() // its file goes with the load's directory
		} else {
			t.err = closeTable()
		}
	}
}

// finish writes what is left and closes the last table.
func (t *bulkTables) finish() error {
	if t.work == nil {
		return nil
	}
	if len(t.batch.ends) > 0 {
		if err := t.send(); err != nil {
			return err
		}
	}
	close(t.work)
	<-t.done
	t.work = nil
	return t.err
}

// abort stops an unfinished writer (its files go with the load's
// directory). A no-op after finish.
func (t *bulkTables) abort() {
	if t.work == nil {
		return
	}
	t.aborted = true // before close(work): the writer reads it after
	close(t.work)
	<-t.done
	t.work = nil
	if t.err == nil {
		t.err = errors.New("disk: bulk load: tables aborted")
	}
}

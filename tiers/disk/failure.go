package disk

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// ErrFailed is returned for every write after a storage failure (an I/O
// error or a full disk while committing). The store is then at the last
// state it committed, which may be in the middle of a rollback; it keeps
// serving its published state to readers, and reopening it recovers a state
// of its commit sequence (Open completes an interrupted rollback): the last
// acknowledged change, or the one that failed, whose outcome is unknown.
// iofault_test.go injects such failures. On a full disk the writer's
// free-space guard (writer/guard.go) refuses writes before Pebble can hit
// ENOSPC, so this is the fallback, not the way a full disk is handled.
//
// Two storage failures do not end here. A failure to rotate the WAL (to
// close the full one or create the next) ends the process inside Pebble
// v2.1.7 (rotateWAL panics with DB.mu released, and the deferred unlock is a
// fatal error no recover stops); a restart recovers it like a power cut. And
// sstable writes that keep failing make Pebble retry the flush for ever:
// once the memtables are full, the commit waits in Pebble's write stall,
// without an error, until a flush succeeds.
var ErrFailed = errors.New("disk: store failed a write; restart to recover")

// fatalCommit is what pebbleLogger.Fatalf panics with: Pebble calls Fatalf
// on the committing goroutine when it cannot write its log, and commit turns
// it back into an error.
type fatalCommit struct{ msg string }

// commit commits b with Sync. A failure of any kind, including Pebble's
// fatal commit errors, leaves the batch uncommitted as far as the caller
// knows (it may have reached the log: a reopen decides) and fails the store.
func (s *Store) commit(b *pebble.Batch) (err error) {
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(fatalCommit)
			if !ok {
				panic(r)
			}
			err = s.fail(fmt.Errorf("pebble: %s", f.msg))
		}
	}()
	if err := b.Commit(pebble.Sync); err != nil {
		return s.fail(err)
	}
	return nil
}

// commitKeys commits the writes of b (see keyBatch) as commit does. A
// sorted batch whose writes went past its limit is refused with
// ErrBatchTooLarge: nothing is written and the store does not fail.
func (s *Store) commitKeys(b *keyBatch) error {
	if b.direct != nil {
		if s.batchBuilt != nil {
			s.batchBuilt()
		}
		return s.commit(b.direct)
	}
	if b.overflow {
		return fmt.Errorf("disk: %d bytes of writes and more: %w", len(b.buf), ErrBatchTooLarge)
	}
	pb := b.pebbleBatch(s.db)
	defer pb.Close()
	if s.batchBuilt != nil {
		s.batchBuilt()
	}
	return s.commit(pb)
}

// fail records err as the store's first storage failure and returns it
// wrapped with ErrFailed.
func (s *Store) fail(err error) error {
	if errors.Is(err, ErrFailed) {
		return err
	}
	wrapped := fmt.Errorf("%w: %w", ErrFailed, err)
	s.failed.CompareAndSwap(nil, &wrapped)
	s.opts.Logger.Error("storage failure: the store takes no more writes", "err", err)
	return wrapped
}

// writable returns nil, or the first storage failure (matching ErrFailed).
func (s *Store) writable() error {
	if p := s.failed.Load(); p != nil {
		return *p
	}
	return nil
}

// canWrite is writable, and then ErrNoDeriver when a dimension the store
// indexes has no deriver: the writes' entry points check it.
func (s *Store) canWrite() error {
	if err := s.writable(); err != nil {
		return err
	}
	return s.noDeriver
}

// Failed reports the store's first storage failure, nil while it has none.
// Safe from any goroutine.
func (s *Store) Failed() error { return s.writable() }

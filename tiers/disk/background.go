package disk

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// ErrNoSpace matches an error of OpenContext when the file system is full:
// Pebble could not write what opening the store needs (the flush of the
// memtables its log holds).
var ErrNoSpace = errors.New("disk: no space left on the store's file system")

// backgroundErrorInterval is the least time between two log lines of
// background errors. Pebble retries a failed flush or compaction at once,
// and on a full disk that is every few milliseconds, for ever.
const backgroundErrorInterval = 30 * time.Second

// backgroundErrors receives Pebble's background errors (failed flushes and
// compactions, which Pebble retries by itself): it logs the first, then at
// most one line per backgroundErrorInterval with the count of those it did
// not log, and tells onNoSpace of every ENOSPC. Safe for concurrent use.
type backgroundErrors struct {
	log      *slog.Logger
	interval time.Duration
	// onNoSpace, when set, hears of every ENOSPC first (flush: a failed
	// memtable flush, which Open waits for; else a background error of any
	// kind); when it reports the error handled (OpenContext, while it
	// waits), the error is not logged: the caller reports it.
	onNoSpace func(err error, flush bool) bool
	now       func() time.Time

	total atomic.Uint64
	mu    struct {
		sync.Mutex
		last       time.Time // of the last logged line; zero: none yet
		suppressed uint64    // since the last logged line
	}
}

// flushEnd hears of every memtable flush that ended.
func (b *backgroundErrors) flushEnd(err error) {
	if err != nil && b.onNoSpace != nil && errors.Is(err, syscall.ENOSPC) {
		b.onNoSpace(err, true)
	}
}

func (b *backgroundErrors) report(err error) {
	b.total.Add(1)
	if b.onNoSpace != nil && errors.Is(err, syscall.ENOSPC) && b.onNoSpace(err, false) {
		return
	}
	now := b.now()
	b.mu.Lock()
	if !b.mu.last.IsZero() && now.Sub(b.mu.last) < b.interval {
		b.mu.suppressed++
		b.mu.Unlock()
		return
	}
	suppressed := b.mu.suppressed
	b.mu.last, b.mu.suppressed = now, 0
	b.mu.Unlock()
	b.log.Error("background error (Pebble retries it)", "component", "pebble", "err", err,
		"suppressed", suppressed, "log_interval", b.interval.String())
}

// OpenContext is Open for a process's start-up: it returns early, with the
// store still opening, when ctx is done (an error matching ctx.Err()) or
// when Pebble reports that the file system is full (an error matching
// ErrNoSpace), instead of waiting: Pebble's Open cannot be cancelled, and on
// a full disk it retries its flush for ever.
//
// The abandoned open goes on in the background, holding the directory's
// lock; should it complete, it closes the store again. A caller that gets
// an early return is expected to exit: to Pebble, that is a crash, which
// the store recovers from (its log replays on the next open).
func OpenContext(ctx context.Context, dir string, opts Options) (*Store, error) {
	noSpace := make(chan error, 1)
	var waiting atomic.Bool // OpenContext has not returned: it reports ENOSPC
	waiting.Store(true)
	defer waiting.Store(false)
	opts.onNoSpace = func(err error, flush bool) bool {
		if !waiting.Load() {
			return false
		}
		if flush {
			select {
			case noSpace <- err:
			default:
			}
		}
		return true
	}
	type opened struct {
		s   *Store
		err error
	}
	// Unbuffered: the open hands its store over only to a receiver; once
	// abandoned is closed, it closes the store itself.
	done := make(chan opened)
	abandoned := make(chan struct{})
	go func() {
		s, err := Open(dir, opts)
		select {
		case done <- opened{s, err}:
		case <-abandoned:
			if err == nil {
				s.Close()
			}
		}
	}()
	// finished takes the open's result if it is ready this instant.
	finished := func() (opened, bool) {
		select {
		case o := <-done:
			return o, true
		default:
			return opened{}, false
		}
	}
	select {
	case o := <-done:
		return o.s, o.err
	case <-ctx.Done():
		if o, ok := finished(); ok {
			return o.s, o.err
		}
		close(abandoned)
		return nil, fmt.Errorf("disk: open %s abandoned: %w", dir, context.Cause(ctx))
	case err := <-noSpace:
		if o, ok := finished(); ok {
			return o.s, o.err
		}
		close(abandoned)
		return nil, fmt.Errorf("%w: open %s: %w", ErrNoSpace, dir, err)
	}
}

// LogBytes returns the size of the write-ahead log files in dir: at most
// what opening the store there writes into sstables when it flushes the
// memtables the log holds. 0 for a directory that does not exist.
func LogBytes(dir string) (uint64, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("disk: log size: %w", err)
	}
	var n uint64
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".log") || e.IsDir() {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue // removed meanwhile
		}
		n += uint64(fi.Size())
	}
	return n, nil
}

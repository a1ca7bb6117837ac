package disk_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/utxo-cache/utxo-cache/internal/model"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
	"github.com/utxo-cache/utxo-cache/writer"
)

// diskFullHook is an errorfs.Injector that, while full is set, fails every
// sstable creation and write with ENOSPC, as a full disk does; and, while
// hold is set, blocks reads of the WAL until it is released (an open that
// is slow to replay its log).
type diskFullHook struct {
	full     atomic.Bool
	injected atomic.Int64
	hold     atomic.Bool
	holding  chan struct{} // closed once a read is held
	once     sync.Once
	release  chan struct{}
}

func newDiskFullHook() *diskFullHook {
	return &diskFullHook{holding: make(chan struct{}), release: make(chan struct{})}
}

func (h *diskFullHook) String() string { return "diskFullHook" }

func (h *diskFullHook) MaybeError(op errorfs.Op) error {
	if h.hold.Load() && strings.HasSuffix(op.Path, ".log") && (op.Kind == errorfs.OpFileRead || op.Kind == errorfs.OpFileReadAt) {
		h.once.Do(func() { close(h.holding) })
		<-h.release
	}
	if h.full.Load() && strings.HasSuffix(op.Path, ".sst") {
		switch op.Kind {
		case errorfs.OpCreate, errorfs.OpFileWrite, errorfs.OpFileWriteAt:
			h.injected.Add(1)
			return fmt.Errorf("write %s: %w", op.Path, syscall.ENOSPC)
		}
	}
	return nil
}

// lineCounter is a slog handler that counts the records at Error.
type lineCounter struct{ errors *atomic.Int64 }

func (c lineCounter) Enabled(context.Context, slog.Level) bool { return true }
func (c lineCounter) Handle(_ context.Context, r slog.Record) error {
	if r.Level >= slog.LevelError {
		c.errors.Add(1)
	}
	return nil
}
func (c lineCounter) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c lineCounter) WithGroup(string) slog.Handler      { return c }

// storeWithLog builds a store on mem behind hook with a few blocks in its
// WAL (not flushed: the next open must flush them), and closes it.
func storeWithLog(t *testing.T, mem *vfs.MemFS, hook *diskFullHook, opts disk.Options) uint64 {
	t.Helper()
	s, err := disk.Open(faultDir, disk.WithFS(opts, errorfs.Wrap(mem, hook)))
	if err != nil {
		t.Fatal(err)
	}
	w := writer.New(s, writer.Options{})
	g := model.NewGen(3, model.GenOptions{})
	m := model.New(opts.EnsureDefaults().PruneDepth, opts.EnsureDefaults().RollbackWindow)
	for range 8 {
		b := g.Block(m)
		if _, err := w.Apply(context.Background(), b); err != nil {
			t.Fatal(err)
		}
		if _, err := m.Apply(b, false); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	seq := s.State().Seq
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return seq
}

// reopenWhenFree opens the store once the abandoned open has let go of it
// (it completes and closes in the background once the fault is gone).
func reopenWhenFree(t *testing.T, mem *vfs.MemFS, hook *diskFullHook, opts disk.Options) *disk.Store {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s, err := disk.Open(faultDir, disk.WithFS(opts, errorfs.Wrap(mem, hook)))
		if err == nil {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("the store did not reopen after the abandoned open: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestOpenContextFullDisk opens a store whose log must be flushed on a file
// system that answers ENOSPC to every sstable write: Pebble retries that
// flush for ever, inside its Open. OpenContext must return at once with an
// error matching ErrNoSpace (before: Open never returned, logging a
// background error every few milliseconds), and the store's log must not
// repeat the error as Pebble retries it. Once space returns, the abandoned
// open completes in the background and lets go of the store, which then
// opens at its last state.
func TestOpenContextFullDisk(t *testing.T) {
	mem, hook := vfs.NewMem(), newDiskFullHook()
	opts := disk.Options{PruneDepth: 3, RollbackWindow: 6}
	seq := storeWithLog(t, mem, hook, opts)

	var errorLines atomic.Int64
	o := opts
	o.Logger = slog.New(lineCounter{&errorLines})
	hook.full.Store(true)
	s, err := disk.OpenContext(context.Background(), faultDir, disk.WithFS(o, errorfs.Wrap(mem, hook)))
	if !errors.Is(err, disk.ErrNoSpace) || !errors.Is(err, syscall.ENOSPC) || s != nil {
		t.Fatalf("OpenContext on a full disk: %v; want ErrNoSpace", err)
	}
	// Pebble keeps retrying in the background: many failures, few lines.
	deadline := time.Now().Add(30 * time.Second)
	for hook.injected.Load() < 50 {
		if time.Now().After(deadline) {
			t.Fatalf("only %d ENOSPC injected in 30 s", hook.injected.Load())
		}
		time.Sleep(time.Millisecond)
	}
	if n := errorLines.Load(); n > 1 {
		t.Fatalf("%d error lines logged for %d retried background errors; want at most 1", n, hook.injected.Load())
	}
	hook.full.Store(false)
	s = reopenWhenFree(t, mem, hook, opts)
	defer s.Close()
	if got := s.State().Seq; got != seq {
		t.Fatalf("after the disk had room again: seq %d, want %d", got, seq)
	}
	t.Logf("%d ENOSPC injected, %d error lines", hook.injected.Load(), errorLines.Load())
}

// TestOpenContextCancel cancels OpenContext while Pebble is replaying the
// log (held in the file system): it must return at once with the context's
// error, and the open, released, completes and lets go of the store.
func TestOpenContextCancel(t *testing.T) {
	mem, hook := vfs.NewMem(), newDiskFullHook()
	opts := disk.Options{PruneDepth: 3, RollbackWindow: 6}
	seq := storeWithLog(t, mem, hook, opts)

	hook.hold.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		s, err := disk.OpenContext(ctx, faultDir, disk.WithFS(opts, errorfs.Wrap(mem, hook)))
		if s != nil {
			s.Close()
		}
		errc <- err
	}()
	select {
	case <-hook.holding:
	case <-time.After(30 * time.Second):
		t.Fatal("the open never read its log")
	}
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("OpenContext cancelled while replaying: %v; want context.Canceled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("OpenContext did not return after its context was cancelled")
	}
	hook.hold.Store(false)
	close(hook.release)
	s := reopenWhenFree(t, mem, hook, opts)
	defer s.Close()
	if got := s.State().Seq; got != seq {
		t.Fatalf("after the abandoned open: seq %d, want %d", got, seq)
	}
}

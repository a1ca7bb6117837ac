// Package storedir owns a read replica's data directory: which of its stores
// is the active one (the CURRENT file), how a newly verified store takes
// over, and what is removed. It knows nothing of what a store holds; it
// works over FS, a few file-system calls (OS in production), so that a test
// can crash it at any step.
//
// It imports only the standard library and internal/durable: the replica
// (cmd/utxo-cache) and the checkpoint install (replication) build on it.
package storedir

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// CurrentFile is the name, in the data directory, of the file that names
// the active store.
const CurrentFile = "CURRENT"

// installingSuffix marks a store directory being installed.
const installingSuffix = ".installing"

// storePrefix starts the name of every store directory (and install).
const storePrefix = "store-"

// ErrBadCurrent marks a CURRENT file that does not name a store of the
// directory: a file this package did not write, or a store removed by hand.
var ErrBadCurrent = errors.New("storedir: CURRENT names no store of this replica")

// Dir is a replica's data directory:
//
//	DATA_DIR/CURRENT                     the active store's name, one line
//	DATA_DIR/CURRENT.tmp                 a CURRENT being written (overwritten by the next)
//	DATA_DIR/store-<nanos>/              a verified store (Pebble)
//	DATA_DIR/store-<nanos>.installing/   an install in progress (removed at start)
//
// # Invariants
//
// A store is named in CURRENT only after it was verified against its
// writer's checkpoint: an install fills Installing(name), syncs every file
// and the directory, verifies the store, and only then renames it to name
// and syncs DATA_DIR (replication.Install); the caller names it with
// SetCurrent before the store serves. CURRENT is replaced atomically and
// durably (SetCurrent), and removed durably as soon as the active store is
// found to have diverged from its writer (Forget). Only stores that CURRENT
// does not name are removed (RemoveAllBut).
//
// So a replica killed at any moment, power cut included, restarts on a
// verified store at least as new as anything it served, or bootstraps when
// it has none: CURRENT names nothing, or a complete verified store, never a
// partial one, never one that was replaced or forgotten.
//
// # Worked example
//
//	step                           DATA_DIR afterwards                 a crash after it restarts on
//	start, empty                   (nothing)                           a bootstrap
//	install store-1                store-1/                            a bootstrap (store-1 is removed)
//	SetCurrent(store-1), serve     CURRENT=store-1, store-1/           store-1
//	store-1 diverged: Forget       store-1/                            a bootstrap (store-1 is removed)
//	install store-2                store-1/, store-2/                  a bootstrap
//	SetCurrent(store-2), serve     CURRENT=store-2, store-1/, store-2/ store-2
//	RemoveAllBut(store-2)          CURRENT=store-2, store-2/           store-2
//
// A store that merely fell behind its writer's retention is not forgotten:
// it is the writer's, and a crash before its replacement is named restarts
// on it.
//
// TestCrashAtEveryStep lives this example (and a replacement of a store that
// fell behind) on a crashable file system, crashing before each change.
//
// A Dir holds no state of its own: its methods may be called from any
// goroutine, but the replica calls the ones that change the directory from
// one goroutine only, in the order above.
type Dir struct {
	fs   FS
	path string
}

// New returns the data directory at path, on fsys. It does no I/O: the
// directory may not exist yet.
func New(fsys FS, path string) *Dir { return &Dir{fs: fsys, path: path} }

// Path returns the path of the store (or install) name.
func (d *Dir) Path(name string) string { return filepath.Join(d.path, name) }

// NewStoreName returns the name of a store bootstrapped at now:
// store-<nanos>. Install it at Installing(name) first.
func NewStoreName(now time.Time) string {
	return storePrefix + strconv.FormatInt(now.UnixNano(), 10)
}

// Installing returns the name (or path) under which the store name (at
// that path) is extracted and verified before it takes its name.
func Installing(name string) string { return name + installingSuffix }

// validName reports whether name is a store's directory name: store-...,
// a plain name, not an install.
func validName(name string) bool {
	return strings.HasPrefix(name, storePrefix) && name == filepath.Base(name) && !strings.HasSuffix(name, installingSuffix)
}

// Current returns the name of the active store, "" when there is none (no
// CURRENT file: the replica bootstraps). A CURRENT file that names no store
// directory of d fails with ErrBadCurrent.
func (d *Dir) Current() (string, error) {
	raw, err := d.fs.ReadFile(d.Path(CurrentFile))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	name := strings.TrimSpace(string(raw))
	if !validName(name) {
		return "", fmt.Errorf("%w: %s names %q", ErrBadCurrent, CurrentFile, name)
	}
	fi, err := d.fs.Stat(d.Path(name))
	if errors.Is(err, fs.ErrNotExist) || err == nil && !fi.IsDir() {
		return "", fmt.Errorf("%w: %s names %q, which is not a directory of %s", ErrBadCurrent, CurrentFile, name, d.path)
	}
	if err != nil {
		return "", err
	}
	return name, nil
}

// SetCurrent makes name the active store, atomically and durably: it
// writes CURRENT.tmp, syncs it, renames it over CURRENT and syncs the
// directory. A crash at any moment leaves CURRENT naming the previous store
// (or none) or name; once it returns, name. Call it only with a store
// that was verified and installed under its name, and before it serves.
func (d *Dir) SetCurrent(name string) error {
	if !validName(name) {
		return fmt.Errorf("storedir: %q is not a store's name", name)
	}
	if fi, err := d.fs.Stat(d.Path(name)); err != nil || !fi.IsDir() {
		return fmt.Errorf("storedir: set current store %s: not installed (%v)", name, err)
	}
	tmp := d.Path(CurrentFile + ".tmp")
	f, err := d.fs.Create(tmp)
	if err != nil {
		return err
	}
	_, err = f.Write([]byte(name + "\n"))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := d.fs.Rename(tmp, d.Path(CurrentFile)); err != nil {
		return err
	}
	return d.fs.SyncDir(d.path)
}

// Forget removes CURRENT durably: once it returns, a restart bootstraps
// instead of reopening the active store. A replica calls it as soon as its
// store is found to have diverged from the writer (it may hold a committed
// change that failed verification, which reopening it would serve).
func (d *Dir) Forget() error {
	if err := d.fs.Remove(d.Path(CurrentFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return d.fs.SyncDir(d.path)
}

// RemoveAllBut removes every store directory but keep, and every
// interrupted install: what a replica does at start (keep is Current's
// answer, possibly "") and after a new store took over. It goes on past a
// store it cannot remove and returns every failure, joined. Nothing it
// removes is named in CURRENT, so it needs no sync: a crash at most leaves
// some of them, for the next call.
func (d *Dir) RemoveAllBut(keep string) error {
	entries, err := d.fs.ReadDir(d.path)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), storePrefix) && e.Name() != keep {
			if err := d.fs.RemoveAll(d.Path(e.Name())); err != nil {
				errs = append(errs, fmt.Errorf("remove %s: %w", e.Name(), err))
			}
		}
	}
	return errors.Join(errs...)
}

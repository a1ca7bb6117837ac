// Package durable owns the few file operations whose result must survive a
// power cut: syncing a directory (so that the names created, renamed and
// removed in it are on disk), renaming durably, and writing a file under its
// final name only once it is complete.
//
// A file's data is durable after the file's Sync; its name is durable after
// its directory's Sync. Every function here does both, in that order, so
// that a crash leaves either the old state or the complete new one, never a
// name that points at missing data.
//
// It imports only the standard library, so that every package that writes
// files the service relies on (the replica's data directory, checkpoint
// archives and installs, the ballast) shares one copy of these steps.
package durable

import (
	"io"
	"os"
	"path/filepath"
)

// SyncDir syncs the directory dir, making durable the entries created,
// renamed or removed in it.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// Rename renames oldpath to newpath and syncs newpath's directory, and
// oldpath's when it is another one: once it returns, a crash leaves the
// file (or directory) under newpath only. What oldpath holds must already
// be durable (synced) for a crash to leave it complete.
func Rename(oldpath, newpath string) error {
	if err := os.Rename(oldpath, newpath); err != nil {
		return err
	}
	dir := filepath.Dir(newpath)
	if err := SyncDir(dir); err != nil {
		return err
	}
	if old := filepath.Dir(oldpath); old != dir {
		return SyncDir(old)
	}
	return nil
}

// SyncClose syncs and closes f when err is nil, closes it otherwise, and
// returns the first error of err, the sync and the close: the end of a
// function that wrote f and must leave it durable.
func SyncClose(f *os.File, err error) error {
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// WriteFileAtomic creates or replaces path with what write writes, and
// returns what write returned as the byte count. It writes into a temporary
// file beside path (".NAME.partial-*", mode 0644 once complete), syncs it,
// renames it over path and syncs the directory: readers, and a crash at any
// moment, see either the old path (or none) or the complete new one. On any
// error the temporary file is removed and path is left as it was.
func WriteFileAtomic(path string, write func(io.Writer) (int64, error)) (n int64, err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".partial-*")
	if err != nil {
		return 0, err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = os.Remove(tmp)
		}
	}()
	n, err = write(f)
	if err == nil {
		err = f.Chmod(0o644)
	}
	if err = SyncClose(f, err); err != nil {
		return n, err
	}
	return n, Rename(tmp, path)
}

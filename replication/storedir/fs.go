package storedir

import (
	"io/fs"
	"os"

	"github.com/utxo-cache/utxo-cache/internal/durable"
)

// FS is what Dir needs of a file system: the calls of its protocol, and the
// two syncs that make them durable (File.Sync for a file's data, SyncDir
// for the names in a directory). Names are paths, as the os package takes
// them.
type FS interface {
	// Create creates or truncates the file name, for writing.
	Create(name string) (File, error)
	ReadFile(name string) ([]byte, error)
	Stat(name string) (fs.FileInfo, error)
	ReadDir(name string) ([]fs.DirEntry, error)
	Rename(oldname, newname string) error
	Remove(name string) error
	RemoveAll(name string) error
	// SyncDir makes durable the entries created, renamed and removed in
	// the directory name.
	SyncDir(name string) error
}

// File is a file of FS open for writing.
type File interface {
	Write(p []byte) (int, error)
	// Sync makes what was written durable.
	Sync() error
	Close() error
}

// OS returns the operating system's file system, the one a replica runs on.
func OS() FS { return osFS{} }

type osFS struct{}

func (osFS) Create(name string) (File, error) {
	f, err := os.Create(name)
	if err != nil {
		return nil, err // not a File holding a nil *os.File
	}
	return f, nil
}

func (osFS) ReadFile(name string) ([]byte, error)       { return os.ReadFile(name) }
func (osFS) Stat(name string) (fs.FileInfo, error)      { return os.Stat(name) }
func (osFS) ReadDir(name string) ([]fs.DirEntry, error) { return os.ReadDir(name) }
func (osFS) Rename(oldname, newname string) error       { return os.Rename(oldname, newname) }
func (osFS) Remove(name string) error                   { return os.Remove(name) }
func (osFS) RemoveAll(name string) error                { return os.RemoveAll(name) }
func (osFS) SyncDir(name string) error                  { return durable.SyncDir(name) }

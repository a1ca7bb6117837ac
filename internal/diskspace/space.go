package diskspace

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// ErrUnsupported is returned by Available where the platform offers no statfs.
var ErrUnsupported = errors.New("diskspace: free space is not known on this platform")

// Usage is what statfs says of a file system.
type Usage struct {
	// Available is the bytes an unprivileged process may still allocate
	// (statfs f_bavail × f_bsize): what the store can use.
	Available uint64
	// Total is the file system's size in bytes.
	Total uint64
}

// Dir reports the usage of the file system holding a directory. It
// implements the writer's DiskSpace. Safe for concurrent use.
type Dir string

// AvailableBytes returns the bytes available on d's file system.
func (d Dir) AvailableBytes() (uint64, error) {
	u, err := UsageOf(string(d))
	return u.Available, err
}

// UsageOf returns the usage of the file system that holds path. A path that
// does not exist yet (a data directory serve is about to create) is
// measured at its nearest existing parent: the directory will be created
// on that file system.
func UsageOf(path string) (Usage, error) {
	p := filepath.Clean(path)
	for {
		_, err := os.Stat(p)
		if err == nil {
			break
		}
		parent := filepath.Dir(p)
		if !errors.Is(err, os.ErrNotExist) || parent == p {
			return Usage{}, fmt.Errorf("diskspace: %s: %w", path, err)
		}
		p = parent
	}
	u, err := statfs(p)
	if err != nil {
		return Usage{}, fmt.Errorf("diskspace: statfs %s: %w", p, err)
	}
	return u, nil
}

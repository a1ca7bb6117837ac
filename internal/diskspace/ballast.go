package diskspace

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/utxo-cache/utxo-cache/internal/durable"
)

// BallastName is the ballast file's name inside the data directory. Pebble
// ignores files whose names it does not know, and checkpoints copy only
// Pebble's own files, so the ballast never travels with a backup.
const BallastName = "ballast"

// MaxDefaultBallast caps DefaultBallastBytes.
const MaxDefaultBallast = 1 << 30

// DefaultBallastBytes is the ballast size used when the operator sets none:
// 1% of the file system, at most 1 GiB. That is enough room for the store
// to open (flush the memtables its log holds) and for the writer's reserve
// to be met again, without costing a small volume much.
func DefaultBallastBytes(total uint64) uint64 {
	return min(total/100, MaxDefaultBallast)
}

// Ballast is the state of a data directory's ballast file.
type Ballast struct {
	Path string
	// Size is the file's size; 0 when it does not exist.
	Size uint64
	// Created is true when EnsureBallast created it just now.
	Created bool
}

// BallastPath returns the ballast's path in dataDir.
func BallastPath(dataDir string) string { return filepath.Join(dataDir, BallastName) }

// EnsureBallast creates dataDir's ballast file of size bytes unless it
// already exists (whatever its size: the operator may have made it so) or
// the file system lacks room for it with keepFree bytes left over: a ballast
// must never be what pushes the store below its reserve. It returns
// ErrNoRoom (with the figures) in that last case, and creates dataDir if
// missing. The space is allocated (fallocate where the platform has it,
// else written), synced, and the file appears under its name only when
// complete. size 0 does nothing.
func EnsureBallast(dataDir string, size, keepFree uint64) (Ballast, error) {
	b := Ballast{Path: BallastPath(dataDir)}
	if size == 0 {
		return b, nil
	}
	if fi, err := os.Stat(b.Path); err == nil {
		b.Size = uint64(fi.Size())
		return b, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return b, fmt.Errorf("diskspace: ballast: %w", err)
	}
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return b, fmt.Errorf("diskspace: ballast: %w", err)
	}
	u, err := UsageOf(dataDir)
	if err != nil {
		return b, err
	}
	if u.Available < size || u.Available-size < keepFree {
		return b, fmt.Errorf("%w: %d bytes available, a %d-byte ballast would leave less than the %d bytes to keep free",
			ErrNoRoom, u.Available, size, keepFree)
	}
	tmp := b.Path + ".tmp"
	if err := writeBallast(tmp, size); err != nil {
		_ = os.Remove(tmp)
		return b, fmt.Errorf("diskspace: create ballast: %w", err)
	}
	if err := durable.Rename(tmp, b.Path); err != nil {
		_ = os.Remove(tmp) // gone already if the rename was done
		return b, fmt.Errorf("diskspace: create ballast: %w", err)
	}
	b.Size, b.Created = size, true
	return b, nil
}

// ErrNoRoom is returned by EnsureBallast when the file system cannot hold
// the ballast and still keep its reserve free.
var ErrNoRoom = errors.New("diskspace: no room for the ballast")

// BallastSize returns the size of dataDir's ballast, 0 when there is none.
func BallastSize(dataDir string) (uint64, error) {
	fi, err := os.Stat(BallastPath(dataDir))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("diskspace: ballast: %w", err)
	}
	return uint64(fi.Size()), nil
}

// RemoveBallast deletes dataDir's ballast (and a partial one an interrupted
// creation left) and returns the bytes it held; 0 and no error when there
// is none.
func RemoveBallast(dataDir string) (uint64, error) {
	p := BallastPath(dataDir)
	_ = os.Remove(p + ".tmp")
	fi, err := os.Stat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("diskspace: ballast: %w", err)
	}
	if err := os.Remove(p); err != nil {
		return 0, fmt.Errorf("diskspace: remove ballast: %w", err)
	}
	return uint64(fi.Size()), durable.SyncDir(dataDir)
}

func writeBallast(path string, size uint64) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	return durable.SyncClose(f, allocate(f, size))
}

// writeZeros fills f with size zero bytes: the portable way to take the
// space (a sparse file, from Truncate, would take none).
func writeZeros(f *os.File, size uint64) error {
	buf := make([]byte, 1<<20)
	for size > 0 {
		n := min(size, uint64(len(buf)))
		if _, err := f.Write(buf[:n]); err != nil {
			return err
		}
		size -= n
	}
	return nil
}

package diskspace

import (
	"errors"
	"os"
	"syscall"
)

// allocate reserves size bytes for f with fallocate(2), falling back to
// writing zeros on file systems that do not support it.
func allocate(f *os.File, size uint64) error {
	err := syscall.Fallocate(int(f.Fd()), 0, 0, int64(size))
	if errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENOSYS) {
		return writeZeros(f, size)
	}
	return err
}

//go:build !linux

package diskspace

import "os"

// allocate reserves size bytes for f by writing zeros.
func allocate(f *os.File, size uint64) error { return writeZeros(f, size) }

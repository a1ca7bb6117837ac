package diskspace

import (
	"os"
	"syscall"
)

// allocatedBytes returns the bytes the file system allocated for the file.
func allocatedBytes(fi os.FileInfo) (int64, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return st.Blocks * 512, true
}

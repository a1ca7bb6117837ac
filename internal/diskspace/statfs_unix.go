//go:build linux || darwin || freebsd

package diskspace

import "syscall"

func statfs(path string) (Usage, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return Usage{}, err
	}
	bsize := uint64(st.Bsize)
	return Usage{Available: uint64(st.Bavail) * bsize, Total: uint64(st.Blocks) * bsize}, nil
}

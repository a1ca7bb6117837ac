//go:build !amd64 && !arm64

package netlab

// sysSetns is unknown here: entering a host fails with ENOSYS, and so do
// the tests that need it.
const sysSetns = -1

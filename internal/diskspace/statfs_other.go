//go:build !(linux || darwin || freebsd)

package diskspace

func statfs(string) (Usage, error) { return Usage{}, ErrUnsupported }

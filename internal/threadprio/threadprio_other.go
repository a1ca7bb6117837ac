//go:build !linux

package threadprio

func lowerThread(int) (int, error) { return 0, ErrUnsupported }

func onMainThread() bool { return false }

// Supported reports whether this system lowers threads: not this one.
const Supported = false

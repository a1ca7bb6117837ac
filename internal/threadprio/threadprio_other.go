//go:build !linux

package threadprio

func lowerThread(int) (int, error) { return 0, ErrUnsupported }

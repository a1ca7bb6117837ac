package threadprio

import "syscall"

// lowerThread adds n to the calling thread's niceness.
func lowerThread(n int) (int, error) {
	tid := syscall.Gettid()
	// The raw getpriority system call answers 20 - niceness.
	raw, err := syscall.Getpriority(syscall.PRIO_PROCESS, tid)
	if err != nil {
		return 0, err
	}
	nice := min(20-raw+n, MaxNice)
	if err := syscall.Setpriority(syscall.PRIO_PROCESS, tid, nice); err != nil {
		return 0, err
	}
	return nice, nil
}

// Supported reports whether this system lowers threads: Linux does.
const Supported = true

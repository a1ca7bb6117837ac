package threadprio

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// onMainThread reports whether the calling thread is the process's main
// thread: the one whose thread id is the process id.
func onMainThread() bool { return syscall.Gettid() == syscall.Getpid() }

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

// ThreadNices returns the niceness of each thread of process pid, by
// thread id, as the kernel reports it in /proc (field 19 of each task's
// stat): what the scheduler goes by, read apart from getpriority. A thread
// that ends while it reads is left out.
func ThreadNices(pid int) (map[int]int, error) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("threadprio: threads of %d: %w", pid, err)
	}
	nices := make(map[int]int, len(tasks))
	for _, task := range tasks {
		tid, err := strconv.Atoi(task.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, task.Name(), "stat"))
		if err != nil {
			continue // the thread ended meanwhile
		}
		// The fields after the command name, which ends with the last ')':
		// the first of them is field 3, so field 19 is the 17th.
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 17 {
			return nil, fmt.Errorf("threadprio: %s/%s/stat: %d fields after the name", dir, task.Name(), len(f))
		}
		if nices[tid], err = strconv.Atoi(f[16]); err != nil {
			return nil, fmt.Errorf("threadprio: %s/%s/stat: niceness: %w", dir, task.Name(), err)
		}
	}
	return nices, nil
}

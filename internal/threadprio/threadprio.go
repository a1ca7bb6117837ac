// Package threadprio runs a goroutine behind the others of its process: on
// an OS thread of its own, at a lower kernel scheduling priority.
//
// Why: Go schedules goroutines on its Ps without priorities, and preempts a
// running goroutine only after 10 ms. A CPU-heavy background goroutine (the
// writer applying a block: about 15 ms of CPU for 300 transactions, most of
// it inserting the block's keys into Pebble's memtable, which cannot yield)
// holds a P that long, and on a one-CPU service every read queues behind
// it. Lowered here, the goroutine's thread competes with the readers'
// threads in the kernel, whose scheduler preempts it within a fraction of a
// millisecond when a reader's thread wakes, and gives it the CPU the
// readers leave. Its thread needs a P of its own to run on while the
// readers use the others, so the process should run with one P more than
// it has CPUs (ExtraP).
//
// The niceness is relative: a thread lowered by n runs at the process's
// niceness plus n (Linux keeps a niceness per thread). Raising a thread's
// priority back needs privileges, so a lowered goroutine stays on its
// thread until it exits, and the thread ends with it.
package threadprio

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
)

// MaxNice is the largest niceness a thread can take.
const MaxNice = 19

// ErrUnsupported: this operating system has no per-thread priority here.
var ErrUnsupported = errors.ErrUnsupported

// Lower locks the calling goroutine to its OS thread for the rest of its
// life and lowers that thread's priority by n (1..MaxNice; the result is
// capped at MaxNice). It returns the thread's niceness. On an error the
// goroutine is unlocked and runs as before.
func Lower(n int) (int, error) {
	if n < 1 || n > MaxNice {
		return 0, fmt.Errorf("threadprio: niceness %d outside 1..%d", n, MaxNice)
	}
	runtime.LockOSThread()
	nice, err := lowerThread(n)
	if err != nil {
		runtime.UnlockOSThread()
		return 0, fmt.Errorf("threadprio: lowering the thread by %d: %w", n, err)
	}
	return nice, nil
}

// ExtraP gives the runtime one P more than its default (the CPUs the
// process may use), so that a lowered goroutine's thread holds a P of its
// own while the readers keep as many as there are CPUs; the kernel decides
// which thread runs. It returns the GOMAXPROCS now in force and whether
// this call changed it: an operator's GOMAXPROCS environment variable is
// kept as set, and only the process's first call adds the P. Setting
// GOMAXPROCS ends the runtime's own updates of it from the process's CPU
// limit, so call it at start, in a process that runs a lowered goroutine.
func ExtraP() (int, bool) {
	changed := false
	extraOnce.Do(func() {
		if os.Getenv("GOMAXPROCS") != "" {
			return
		}
		runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + 1)
		changed = true
	})
	return runtime.GOMAXPROCS(0), changed
}

var extraOnce sync.Once

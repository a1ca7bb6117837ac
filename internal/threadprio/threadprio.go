// Package threadprio runs a goroutine behind the others of its process: on
// an OS thread of its own, at a lower kernel scheduling priority.
//
// Why: Go schedules goroutines on its Ps without priorities, and preempts a
// running goroutine only after 10 ms. A CPU-heavy background goroutine
// holds a P that long, and on a one-CPU service every read queues behind
// it. The writer is one: a block of 300 transactions costs it about 15 ms
// of CPU, 4 ms of which is a single call of Pebble's that inserts the
// block's keys into the memtable and has no point to yield at; an
// execution trace shows the runtime preempting the writer inside that call.
// Lowered here, the goroutine's thread competes with the readers' threads
// in the kernel, which runs a waking reader's thread ahead of it and gives
// it the CPU the readers leave. Its thread needs a P of its own to run on
// while the readers use the others, so the process should run with one P
// more than it has CPUs (ExtraP).
//
// The niceness is relative: a thread lowered by n runs at the process's
// niceness plus n (Linux keeps a niceness per thread). Raising a thread's
// priority back needs privileges, so a lowered goroutine stays on its
// thread until it exits, and the thread ends with it. Elsewhere than on
// Linux nothing is lowered (Supported).
//
// The process's main thread is never lowered: the kernel, ps and top take
// its niceness for the whole process's, and a goroutine locked to it that
// exits leaves the thread idle rather than ending it. Importing the package
// keeps the main goroutine on the main thread for its whole life (an init
// locks it there), so no other goroutine runs on it, and Lower refuses it
// (ErrMainThread) when called on the main goroutine itself.
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

// ErrMainThread: Lower was called on the process's main thread, which
// stands for the process (see the package comment).
var ErrMainThread = errors.New("threadprio: the goroutine runs on the process's main thread")

// init keeps the main goroutine on the main thread for the process's life
// (a lock taken in an init function holds in main), so that no goroutine
// that Lower locks to its thread is on the main thread.
func init() { runtime.LockOSThread() }

// Lower locks the calling goroutine to its OS thread for the rest of its
// life and lowers that thread's priority by n (1..MaxNice; the result is
// capped at MaxNice). It returns the thread's niceness. On an error the
// goroutine is unlocked and runs as before: ErrMainThread on the main
// goroutine, which runs on the main thread.
func Lower(n int) (int, error) {
	if n < 1 || n > MaxNice {
		return 0, fmt.Errorf("threadprio: niceness %d outside 1..%d", n, MaxNice)
	}
	runtime.LockOSThread()
	if onMainThread() {
		runtime.UnlockOSThread()
		return 0, ErrMainThread
	}
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
// kept as set, only the process's first call adds the P, and none is
// added where threads cannot be lowered (Supported). Setting
// GOMAXPROCS ends the runtime's own updates of it from the process's CPU
// limit, so call it at start, in a process that runs a lowered goroutine.
func ExtraP() (int, bool) {
	changed := false
	extraOnce.Do(func() {
		if !Supported || os.Getenv("GOMAXPROCS") != "" {
			return
		}
		runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + 1)
		changed = true
	})
	return runtime.GOMAXPROCS(0), changed
}

var extraOnce sync.Once

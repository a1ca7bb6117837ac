package threadprio

import (
	"errors"
	"os"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"testing"
)

// threadNice reads the niceness of thread tid of this process from /proc
// (ThreadNices): what the kernel schedules by, apart from getpriority.
func threadNice(t *testing.T, tid int) int {
	t.Helper()
	nices, err := ThreadNices(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	nice, ok := nices[tid]
	if !ok {
		t.Fatalf("no thread %d in /proc", tid)
	}
	return nice
}

// TestLowerOneThread: the lowered goroutine's thread runs at the process's
// niceness plus n, capped at 19, and stays locked to it; other threads
// keep theirs; the thread ends with its goroutine.
func TestLowerOneThread(t *testing.T) {
	base := threadNice(t, syscall.Gettid())
	for _, n := range []int{5, MaxNice} {
		type got struct {
			tid, nice, reported int
			err                 error
		}
		ch := make(chan got)
		stop := make(chan struct{})
		go func() {
			nice, err := Lower(n)
			ch <- got{syscall.Gettid(), 0, nice, err}
			<-stop
			// Still on the same thread, still lowered.
			ch <- got{syscall.Gettid(), 0, 0, nil}
		}()
		g := <-ch
		if g.err != nil {
			t.Fatal(g.err)
		}
		want := min(base+n, MaxNice)
		if g.reported != want || threadNice(t, g.tid) != want {
			t.Fatalf("lowered by %d from %d: reported %d, /proc says %d; want %d", n, base, g.reported, threadNice(t, g.tid), want)
		}
		if other := threadNice(t, syscall.Gettid()); other != base {
			t.Fatalf("the test's own thread went from %d to %d", base, other)
		}
		// Make the runtime busy on other threads meanwhile.
		for range 100 {
			runtime.Gosched()
		}
		close(stop)
		if again := <-ch; again.tid != g.tid {
			t.Fatalf("the lowered goroutine moved from thread %d to %d", g.tid, again.tid)
		}
	}
}

// TestLowerRefusesOutOfRange: a niceness outside 1..19 is refused and
// changes nothing.
func TestLowerRefusesOutOfRange(t *testing.T) {
	base := threadNice(t, syscall.Gettid())
	for _, n := range []int{-1, 0, 20} {
		type got struct {
			tid int
			err error
		}
		done := make(chan got)
		release := make(chan struct{})
		go func() {
			runtime.LockOSThread() // stay on the thread while the test reads it
			defer runtime.UnlockOSThread()
			_, err := Lower(n)
			done <- got{syscall.Gettid(), err}
			<-release
		}()
		g := <-done
		nice := threadNice(t, g.tid)
		close(release)
		if g.err == nil || nice != base {
			t.Fatalf("Lower(%d): %v, niceness %d (was %d)", n, g.err, nice, base)
		}
	}
}

// TestExtraP: one P more than the default, once per process; none when
// the operator set GOMAXPROCS.
func TestExtraP(t *testing.T) {
	before := runtime.GOMAXPROCS(0)
	defer func() {
		runtime.GOMAXPROCS(before)
		extraOnce = sync.Once{}
	}()
	t.Setenv("GOMAXPROCS", strconv.Itoa(before))
	if n, changed := ExtraP(); changed || n != before || runtime.GOMAXPROCS(0) != before {
		t.Fatalf("ExtraP with GOMAXPROCS=%d set: %d %v, GOMAXPROCS %d", before, n, changed, runtime.GOMAXPROCS(0))
	}
	extraOnce = sync.Once{}
	t.Setenv("GOMAXPROCS", "")
	for i := range 2 {
		if n, changed := ExtraP(); changed != (i == 0) || n != before+1 || runtime.GOMAXPROCS(0) != before+1 {
			t.Fatalf("call %d of ExtraP from %d: %d %v, GOMAXPROCS %d", i+1, before, n, changed, runtime.GOMAXPROCS(0))
		}
	}
}

// mainLower is what Lower answered on the main goroutine (TestMain), and
// mainNice the main thread's niceness before and after.
var (
	mainLower                     error
	mainNiceBefore, mainNiceAfter int
)

func TestMain(m *testing.M) {
	nice := func() int {
		nices, err := ThreadNices(os.Getpid())
		if err != nil {
			panic(err)
		}
		return nices[os.Getpid()]
	}
	mainNiceBefore = nice()
	_, mainLower = Lower(5)
	mainNiceAfter = nice()
	os.Exit(m.Run())
}

// TestMainThreadNeverLowered: the process's main thread stands for the
// process (ps shows its niceness as the process's), so it is never
// lowered. No goroutine but the main one runs on it: here many goroutines,
// each locked to a thread while all of them are, land on other threads
// (without the package's init lock the runtime gives the idle main thread
// to one of them, which Lower would then lower); and Lower on the main
// goroutine refuses, changing nothing.
func TestMainThreadNeverLowered(t *testing.T) {
	if !errors.Is(mainLower, ErrMainThread) || mainNiceAfter != mainNiceBefore {
		t.Fatalf("Lower on the main goroutine: %v, main thread's niceness %d then %d; want ErrMainThread, unchanged",
			mainLower, mainNiceBefore, mainNiceAfter)
	}
	const n = 64
	tids := make(chan int, n)
	var locked, release sync.WaitGroup
	locked.Add(n)
	release.Add(1)
	for range n {
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			tids <- syscall.Gettid()
			locked.Done()
			release.Wait() // hold the thread until every goroutine has one
		}()
	}
	locked.Wait()
	release.Done()
	for range n {
		if tid := <-tids; tid == os.Getpid() {
			t.Fatalf("a goroutine other than main ran locked on the main thread (%d)", tid)
		}
	}
}

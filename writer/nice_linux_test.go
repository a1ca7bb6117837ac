package writer

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

// niceOf reads a thread's niceness, field 19 of /proc/self/task/TID/stat.
func niceOf(t *testing.T, statPath string) (int, bool) {
	t.Helper()
	b, err := os.ReadFile(statPath)
	if err != nil {
		return 0, false // the thread ended meanwhile
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	n, err := strconv.Atoi(f[16])
	if err != nil {
		t.Fatal(err)
	}
	return n, true
}

// TestWriterThreadLowered: with Options.Nice the writer applies blocks on
// one thread of the process whose niceness is the process's plus Nice, as
// the kernel reports it; the caller's thread keeps its own.
func TestWriterThreadLowered(t *testing.T) {
	st, err := disk.Open(t.TempDir(), disk.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	base, _ := niceOf(t, "/proc/self/task/"+strconv.Itoa(syscall.Gettid())+"/stat")
	const nice = 7
	if base >= 19 {
		t.Skipf("the test runs at niceness %d: no lower niceness to observe", base)
	}
	want := min(base+nice, 19)
	lowered := func() map[string]bool {
		stats, err := filepath.Glob("/proc/self/task/*/stat")
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]bool{}
		for _, p := range stats {
			if n, ok := niceOf(t, p); ok && n == want {
				m[p] = true
			}
		}
		return m
	}
	// A writer of an earlier test run may still be ending its thread.
	before := lowered()
	w := New(st, Options{Nice: nice})
	defer w.Close()
	b := &chain.Block{Height: 1, Hash: h(1), Txs: []chain.Tx{{Hash: h(10), Coinbase: true, Outputs: []chain.Output{{Address: "alice", Value: 50}}}}}
	if r, err := w.Apply(context.Background(), b); err != nil || !r.Applied {
		t.Fatalf("apply: %+v %v", r, err)
	}
	var added []string
	for p := range lowered() {
		if !before[p] {
			added = append(added, p)
		}
	}
	if len(added) != 1 {
		t.Fatalf("threads newly at niceness %d: %v, want the writer's alone", want, added)
	}
	if n, _ := niceOf(t, "/proc/self/task/"+strconv.Itoa(syscall.Gettid())+"/stat"); n != base {
		t.Fatalf("the caller's thread went from niceness %d to %d", base, n)
	}
}

package writer

import (
	"context"
	"os"
	"syscall"
	"testing"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/internal/threadprio"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

// TestWriterThreadLowered: with Options.Nice the writer applies blocks on
// one thread of the process whose niceness is the process's plus Nice, as
// the kernel reports it; the caller's thread keeps its own.
func TestWriterThreadLowered(t *testing.T) {
	st, err := disk.Open(t.TempDir(), disk.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	nices := func() map[int]int {
		m, err := threadprio.ThreadNices(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	base := nices()[syscall.Gettid()]
	const nice = 7
	if base >= 19 {
		t.Skipf("the test runs at niceness %d: no lower niceness to observe", base)
	}
	want := min(base+nice, 19)
	lowered := func() map[int]bool {
		m := map[int]bool{}
		for tid, n := range nices() {
			if n == want {
				m[tid] = true
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
	var added []int
	for tid := range lowered() {
		if !before[tid] {
			added = append(added, tid)
		}
	}
	if len(added) != 1 {
		t.Fatalf("threads newly at niceness %d: %v, want the writer's alone", want, added)
	}
	if n := nices()[syscall.Gettid()]; n != base {
		t.Fatalf("the caller's thread went from niceness %d to %d", base, n)
	}
}

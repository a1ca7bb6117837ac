package main

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/utxo-cache/utxo-cache/internal/threadprio"
)

// gomaxprocs reads the service's GOMAXPROCS from its /metrics.
func gomaxprocs(t *testing.T, p *serveProc) int {
	t.Helper()
	_, body := p.rawDo(http.MethodGet, "/metrics", nil)
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_sched_gomaxprocs_threads "); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no go_sched_gomaxprocs_threads in /metrics: %s", body)
	return 0
}

// TestServeWriterNice: by default serve's writer applies blocks on one
// thread of the process at its niceness plus 5 (as the kernel reports it),
// and the process runs one P more than Go's default; --writer-nice 0 keeps
// every thread at the process's niceness and Go's default.
func TestServeWriterNice(t *testing.T) {
	t.Parallel()
	if os.Getenv("GOMAXPROCS") != "" {
		t.Skip("GOMAXPROCS is set: serve keeps it, and this test compares the extra P with Go's default")
	}
	c := newTestChain(1)
	procs := map[string]int{}
	for _, nice := range []string{"0", "default"} {
		extra := []string{"--memory-cache-bytes", "0"}
		if nice != "default" {
			extra = append(extra, "--writer-nice", nice)
		}
		p := startServe(t, t.TempDir(), extra...)
		if r := p.do("POST", "/v1/blocks", "application/json", blockJSON(t, c.blocks[0])); r.code != 200 {
			t.Fatalf("--writer-nice %s: posting a block: %s", nice, r)
		}
		nices, err := threadprio.ThreadNices(p.cmd.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		base := nices[p.cmd.Process.Pid] // the main thread's
		if base >= 19 {
			t.Skipf("serve runs at niceness %d: no lower niceness to observe", base)
		}
		var lowered []string
		for tid, n := range nices {
			if n != base {
				lowered = append(lowered, fmt.Sprintf("%d at %d", tid, n))
			}
		}
		switch {
		case nice == "0" && len(lowered) != 0:
			t.Fatalf("--writer-nice 0: threads %v, not at the process's niceness %d", lowered, base)
		case nice == "default" && (len(lowered) != 1 || !strings.HasSuffix(lowered[0], fmt.Sprintf(" at %d", min(base+5, 19)))):
			t.Fatalf("default --writer-nice: lowered threads %v, want the writer's alone at %d", lowered, min(base+5, 19))
		}
		procs[nice] = gomaxprocs(t, p)
		p.stop()
	}
	if procs["default"] != procs["0"]+1 {
		t.Fatalf("GOMAXPROCS %d with the writer lowered, %d without: want one more", procs["default"], procs["0"])
	}
}

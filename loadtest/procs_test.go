package loadtest

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
)

// TestFreePortNeverRepeats checks that freePort does not hand out a port
// twice in a process, even to callers at once (a replica set's services
// start concurrently), and that each port was free when handed out.
func TestFreePortNeverRepeats(t *testing.T) {
	const callers, each = 4, 50
	ports := make([][]int, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			for range each {
				p, err := freePort()
				if err != nil {
					t.Error(err)
					return
				}
				ports[i] = append(ports[i], p)
			}
		})
	}
	wg.Wait()
	seen := map[int]bool{}
	for _, ps := range ports {
		for _, p := range ps {
			if seen[p] {
				t.Fatalf("port %d handed out twice", p)
			}
			seen[p] = true
		}
	}
	if len(seen) != callers*each {
		t.Fatalf("%d ports handed out, want %d", len(seen), callers*each)
	}
	// The last one is free: a listener can bind it.
	var last int
	for p := range seen {
		last = p
	}
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(last))
	if err != nil {
		t.Fatalf("port %d from freePort: %v", last, err)
	}
	l.Close()
}

// TestLostPort checks how startServe tells a serve that lost its port from
// one that failed otherwise: by its log.
func TestLostPort(t *testing.T) {
	dir := t.TempDir()
	for name, text := range map[string]string{
		"lost":  "utxo-cache: listen on 127.0.0.1:40000: listen tcp 127.0.0.1:40000: bind: address already in use\n",
		"other": "utxo-cache: open store: disk: corrupt\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name+".log"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if !lostPort(filepath.Join(dir, "lost.log")) || lostPort(filepath.Join(dir, "other.log")) || lostPort(filepath.Join(dir, "missing.log")) {
		t.Fatal("lostPort misreads a log")
	}
}

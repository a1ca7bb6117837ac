package main

import (
	"archive/tar"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/utxo-cache/utxo-cache/chain"
)

// TestReplicaRefusesALyingWriter: a replica whose --replica-of answers the
// checkpoint request with a manifest announced as 10 GiB followed by zeros
// without end writes none of it, logs the refusal, counts it, keeps nothing
// of the attempt (every retry finds no .installing directory), stays not
// ready, and retries.
func TestReplicaRefusesALyingWriter(t *testing.T) {
	t.Parallel()
	dataDir := filepath.Join(t.TempDir(), "replica")
	const guard = 64 << 20 // an "endless" body ends here: a replica that reads this far failed
	var (
		requests, sent, maxHeld atomic.Int64
		mu                      sync.Mutex
		leftovers               []string // .installing directories a retry found
	)
	held := func() {
		var n int64
		_ = filepath.WalkDir(dataDir, func(_ string, d fs.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				if fi, err := d.Info(); err == nil {
					n += fi.Size()
				}
			}
			return nil
		})
		if n > maxHeld.Load() {
			maxHeld.Store(n)
		}
	}
	writer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/replication/checkpoint" {
			http.NotFound(w, r)
			return
		}
		if requests.Add(1) > 1 {
			entries, _ := os.ReadDir(dataDir)
			for _, e := range entries {
				if strings.HasSuffix(e.Name(), ".installing") {
					mu.Lock()
					leftovers = append(leftovers, e.Name())
					mu.Unlock()
				}
			}
		}
		h := w.Header()
		h.Set("X-Commit-Seq", "1")
		h.Set("X-Utxo-Count", "0")
		h.Set("X-Utxo-Digest", chain.Digest{}.String())
		w.WriteHeader(http.StatusOK)
		tw := tar.NewWriter(w)
		if err := tw.WriteHeader(&tar.Header{Name: "UTXO-CACHE-CHECKPOINT.json", Mode: 0o644, Size: 10 << 30, Typeflag: tar.TypeReg}); err != nil {
			return
		}
		zeros := make([]byte, 256<<10)
		for sent.Load() < guard {
			n, err := tw.Write(zeros)
			sent.Add(int64(n))
			if err == nil {
				err = http.NewResponseController(w).Flush()
			}
			held()
			if err != nil {
				return
			}
		}
	}))
	t.Cleanup(writer.Close) // after the replica is stopped

	p := launchServe(t, []string{"serve", "--replica-of", writer.URL, "--replication-token", replToken,
		"--data-dir", dataDir, "--listen", "127.0.0.1:0", "--log-level", "info", "--checkpoint-idle-timeout", "5s"})
	// Three requests: two downloads refused, and retried.
	for deadline := time.Now().Add(replDeadline); requests.Load() < 3; time.Sleep(10 * time.Millisecond) {
		select {
		case <-p.exited:
			t.Fatalf("the replica exited: %v", p.err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replica asked for %d checkpoints in %v; want a retry after each refusal", requests.Load(), replDeadline)
		}
	}
	t.Logf("the replica held at most %d bytes on disk; the writer sent %d", maxHeld.Load(), sent.Load())
	const failures = `utxo_cache_replica_bootstrap_failures_total{reason="bad_archive"}`
	if n := p.metric(failures); n < 2 {
		t.Errorf("%s = %v after two refusals", failures, n)
	}
	if n := maxHeld.Load(); n > 0 {
		t.Errorf("the replica held %d bytes of the lying checkpoint on disk; want none", n)
	}
	if n := sent.Load(); n >= guard {
		t.Errorf("the replica read %d bytes of an endless body", n)
	}
	mu.Lock()
	if len(leftovers) > 0 {
		t.Errorf("retries found earlier attempts' directories: %v", leftovers)
	}
	mu.Unlock()
	if out := p.stderr.String(); !strings.Contains(out, "checkpoint refused, nothing of it kept: retrying") ||
		!strings.Contains(out, "manifest of 10737418240 bytes") {
		t.Errorf("the refusal is not logged with its reason:\n%s", out)
	}
	if res, err := p.try(http.MethodGet, "/readyz"); err != nil || res.code != http.StatusServiceUnavailable {
		t.Errorf("/readyz of a replica refusing its writer's checkpoints: %v %v, want 503", res, err)
	}
	select {
	case <-p.exited:
		t.Fatalf("the replica exited: %v", p.err)
	default:
	}
}

// TestCheckpointIdleTimeoutSetting: the idle timeout of a checkpoint
// download must be positive, from the command line or the environment.
func TestCheckpointIdleTimeoutSetting(t *testing.T) {
	t.Parallel()
	wantFail(t, cli(t, nil, nil, "serve", "--checkpoint-idle-timeout", "0s"), 2, "--checkpoint-idle-timeout 0s: must be positive")
	wantFail(t, cli(t, []string{"UTXO_CACHE_CHECKPOINT_IDLE_TIMEOUT=-1s"}, nil, "serve"), 2, "--checkpoint-idle-timeout -1s: must be positive")
	if out := mustCLI(t, "serve", "--help").stdout; !strings.Contains(out, "--checkpoint-idle-timeout DURATION") && !strings.Contains(out, "--checkpoint-idle-timeout duration") {
		t.Errorf("serve --help does not show --checkpoint-idle-timeout:\n%s", out)
	}
}

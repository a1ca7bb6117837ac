package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/internal/diskspace"
)

// bigBlock is a block of about 240 KB (four outputs with 60 KB datums of
// incompressible bytes), so that a 20 MB file system fills in a few dozen
// blocks.
func bigBlock(h uint64, prev chain.Hash) *chain.Block {
	b := &chain.Block{Height: h, Hash: testHash("big", h), PrevHash: prev}
	var outs []chain.Output
	for i := range 4 {
		datum := make([]byte, 0, 60000)
		for j := 0; len(datum) < 60000; j++ {
			x := testHash("datum", h, i, j)
			datum = append(datum, x[:]...)
		}
		outs = append(outs, chain.Output{Address: fmt.Sprintf("addr%d", i), Value: h, Datum: datum[:60000]})
	}
	b.Txs = []chain.Tx{{Hash: testHash("big-tx", h), Coinbase: true, Outputs: outs}}
	return b
}

func blockJSON(t *testing.T, b *chain.Block) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := chain.NewJSONLWriter(&buf)
	if err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// rawDo sends a request and returns the status and body, whatever they are
// (serveProc.do fails the test on any 5xx, and 507 is one here).
func (p *serveProc) rawDo(method, path string, body []byte) (int, string) {
	p.t.Helper()
	req, err := http.NewRequest(method, p.base+path, bytes.NewReader(body))
	if err != nil {
		p.t.Fatal(err)
	}
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+e2eToken)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		p.t.Fatalf("%s %s: %v (the process: %v)\n%s", method, path, err, p.exitState(), p.stderr)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		p.t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func (p *serveProc) exitState() string {
	select {
	case <-p.exited:
		return fmt.Sprintf("exited: %v", p.err)
	default:
		return "alive"
	}
}

// mountTmpfs mounts a tmpfs of size bytes on a new directory, or skips the
// test when this machine does not let it (not root, no mount namespace).
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a %s tmpfs here (needs root and mount permission): %v %s", size, err, out)
	}
	t.Cleanup(func() { // registered before the processes': runs after they are gone
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", dir, err, out)
		}
	})
	return dir
}

// runWithin runs the binary with args and fails the test unless it exits
// within d.
func runWithin(t *testing.T, d time.Duration, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = testEnv(nil)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("utxo-cache %v still running after %v (killed):\n%s", args, d, stderr.String())
	}
	res := cliResult{stdout: stdout.String(), stderr: stderr.String()}
	var xe *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &xe):
		res.code = xe.ExitCode()
	default:
		t.Fatalf("run %v: %v", args, err)
	}
	return res
}

// TestFullDiskServe drives the real binary on a 20 MB tmpfs, as the report
// of issue 12 did: post blocks until the disk is nearly full, with reads
// going on. Before the fix the process panicked (pebble: fatal commit
// error: no space left on device), every read failed, and a restart on the
// full disk never listened, spinning on Pebble's background error and
// ignoring SIGTERM. Now:
//
//   - a block that could fill the disk answers 507 insufficient_storage and
//     changes nothing; reads go on at the last acknowledged tip; /readyz is
//     200 and says why writes are refused; the metrics count it;
//   - removing the ballast (utxo-cache ballast --remove) makes room, and
//     writes resume by themselves (while serving);
//   - SIGTERM stops it cleanly; a restart on the nearly full disk serves
//     reads and refuses writes; a restart on a full disk exits 1 at once
//     with one line (TestOpenContextFullDisk in tiers/disk covers an open
//     that Pebble cannot finish for want of room);
//   - once room returns, the store is exactly the acknowledged chain.
func TestFullDiskServe(t *testing.T) {
	mnt := mountTmpfs(t, "20m")
	data := filepath.Join(mnt, "data")
	// The default shape, scaled down: a reserve of two memtables and a
	// little more, a ballast larger than what opening the store needs.
	guard := []string{"--memtable-bytes", "1MiB", "--disk-reserve-bytes", "4MiB", "--ballast-bytes", "6MiB"}
	p := startServe(t, data, guard...)
	if size, err := diskspace.BallastSize(data); err != nil || size != 6<<20 {
		t.Fatalf("ballast at start: %d, %v; want 6MiB", size, err)
	}

	// Readers, all along: every answer 200, tips never going back.
	var stopReads atomic.Bool
	var reads sync.WaitGroup
	var readCount atomic.Int64
	readErr := make(chan string, 1)
	reads.Add(1)
	go func() {
		defer reads.Done()
		var last uint64
		for !stopReads.Load() {
			resp, err := p.client.Get(p.base + "/v1/tip")
			if err != nil {
				readErr <- err.Error()
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var tip struct {
				Tip *struct{ Height uint64 } `json:"tip"`
			}
			if resp.StatusCode != 200 || json.Unmarshal(b, &tip) != nil {
				readErr <- fmt.Sprintf("%d %s", resp.StatusCode, b)
				return
			}
			if tip.Tip != nil {
				if tip.Tip.Height < last {
					readErr <- fmt.Sprintf("tip went back from %d: %s", last, b)
					return
				}
				last = tip.Tip.Height
			}
			readCount.Add(1)
		}
	}()

	var blocks []*chain.Block
	var post func() string
	var prev chain.Hash
	// post posts blocks until one is refused; it returns the refusal.
	post = func() string {
		t.Helper()
		for range 200 {
			b := bigBlock(uint64(len(blocks))+1, prev)
			code, body := p.rawDo(http.MethodPost, "/v1/blocks", blockJSON(t, b))
			switch code {
			case 200:
				blocks, prev = append(blocks, b), b.Hash
				continue
			case http.StatusInsufficientStorage:
				return body
			}
			t.Fatalf("block %d: %d %s", b.Height, code, body)
		}
		t.Fatal("200 big blocks fit in 20 MB: the guard never refused one")
		return ""
	}
	// wantRefusing checks a node that has just refused a block. A flush or
	// compaction that ends in between may free room (Pebble deletes the log
	// and the inputs it replaced): /readyz then rightly says writes are
	// taken, and the test posts on until the next refusal.
	wantRefusing := func() {
		t.Helper()
		for attempt := 0; ; attempt++ {
			tipWant := fmt.Sprintf(`"tip":{"height":%d,"hash":"%s"}`, len(blocks), prev)
			// The refused block changed nothing; reads answer the last tip.
			if code, body := p.rawDo(http.MethodGet, "/v1/tip", nil); code != 200 || !strings.Contains(body, tipWant) {
				t.Fatalf("tip after the refusal: %d %s; want %s", code, body, tipWant)
			}
			code, body := p.rawDo(http.MethodGet, "/readyz", nil)
			if code != 200 {
				t.Fatalf("/readyz after a refusal: %d %s", code, body)
			}
			if strings.Contains(body, `"writes":"refused","reason":"insufficient_storage"`) {
				break
			}
			if attempt == 5 {
				t.Fatalf("/readyz after 5 refusals: %s; want writes refused", body)
			}
			t.Logf("/readyz after a refusal: %s (a flush freed room): posting on", body)
			post()
		}
		// A re-post of the tip block changes nothing and succeeds.
		if code, body := p.rawDo(http.MethodPost, "/v1/blocks", blockJSON(t, blocks[len(blocks)-1])); code != 200 || !strings.Contains(body, `"applied":false`) {
			t.Fatalf("re-post on a full disk: %d %s", code, body)
		}
	}

	refusal := post()
	if !strings.Contains(refusal, `"code":"insufficient_storage"`) {
		t.Fatalf("refusal: %s", refusal)
	}
	first := len(blocks)
	wantRefusing()
	if _, body := p.rawDo(http.MethodGet, "/metrics", nil); !strings.Contains(body, `utxo_cache_writes_refused_total{reason="insufficient_storage"} `) ||
		strings.Contains(body, `utxo_cache_writes_refused_total{reason="insufficient_storage"} 0`) ||
		!strings.Contains(body, "utxo_cache_disk_free_bytes ") {
		t.Fatalf("metrics after a refusal lack the refusal or the free bytes")
	}

	// The operator removes the ballast: writes resume by themselves.
	r := mustCLI(t, "ballast", "--data-dir", data, "--remove")
	if !strings.Contains(r.stdout, "6MiB freed") {
		t.Fatalf("ballast --remove: %s", r)
	}
	if code, body := p.rawDo(http.MethodGet, "/readyz", nil); code != 200 || body != `{"status":"ready"}` {
		t.Fatalf("/readyz after the ballast went: %d %s", code, body)
	}
	post()
	if len(blocks) == first {
		t.Fatal("no block applied after the ballast was removed")
	}
	wantRefusing()
	stopReads.Store(true)
	reads.Wait()
	select {
	case e := <-readErr:
		t.Fatalf("a read failed while the disk filled: %s", e)
	default:
	}
	t.Logf("%d blocks applied (%d before the first refusal), %d reads answered 200", len(blocks), first, readCount.Load())
	p.stop()

	// A restart on the nearly full disk serves reads, takes the blocks
	// that fit (opening the store flushed its log into compressed
	// sstables: that can free room) and refuses the others.
	p = startServe(t, data, guard...)
	if code, body := p.rawDo(http.MethodGet, "/v1/tip", nil); code != 200 || !strings.Contains(body, prev.String()) {
		t.Fatalf("tip after a restart on a nearly full disk: %d %s", code, body)
	}
	before := len(blocks)
	post()
	wantRefusing()
	t.Logf("after the restart: %d more blocks, then refused", len(blocks)-before)
	p.stop()

	// A full disk: start-up fails at once, with one line, exit status 1;
	// with the guard off too (Pebble's open cannot flush its log).
	u, err := diskspace.UsageOf(mnt)
	if err != nil {
		t.Fatal(err)
	}
	filler := filepath.Join(mnt, "filler")
	if err := os.WriteFile(filler, make([]byte, u.Available-(64<<10)), 0o600); err != nil {
		t.Fatalf("fill the disk: %v", err)
	}
	args := []string{"serve", "--listen", "127.0.0.1:0", "--data-dir", data, "--admin-token", e2eToken, "--log-level", "warn"}
	start := time.Now()
	res := runWithin(t, 60*time.Second, append(args, guard...)...)
	took := time.Since(start)
	if res.code != 1 || strings.Count(strings.TrimSpace(res.stderr), "\n") != 0 ||
		!strings.Contains(res.stderr, "utxo-cache serve: disk full: ") || !strings.Contains(res.stderr, "ballast") {
		t.Fatalf("serve on a full disk: %s", res)
	}
	t.Logf("serve on a full disk: exit %d after %v: %s", res.code, took.Round(time.Millisecond), res.stderr)
	// Releasing the ballast (when a restart had room to recreate it) is
	// enough room to start.
	if size, _ := diskspace.BallastSize(data); size > 0 {
		if !strings.Contains(res.stderr, "ballast --data-dir "+data+" --remove") {
			t.Fatalf("serve on a full disk does not name the ballast command: %s", res)
		}
		if r := mustCLI(t, "ballast", "--data-dir", data, "--remove"); !strings.Contains(r.stdout, "freed") {
			t.Fatalf("ballast --remove: %s", r)
		}
		p = startServe(t, data, append(guard[:4:4], "--ballast-bytes", "0")...)
		if code, body := p.rawDo(http.MethodGet, "/v1/tip", nil); code != 200 || !strings.Contains(body, prev.String()) {
			t.Fatalf("tip after starting on the ballast's room: %d %s", code, body)
		}
		p.stop()
	} else {
		t.Log("no ballast to release: the restart had no room to recreate it")
	}

	// Room returns, as an operator gives it: the filler goes and the volume
	// grows. (Removing the filler alone leaves the disk as nearly full as
	// before it, where a block may still be refused, and a compaction
	// Pebble retries there can take the rest for a moment.) The store is
	// exactly the acknowledged chain.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-o", "remount,size=60m", mnt).CombinedOutput(); err != nil {
		t.Fatalf("grow the tmpfs: %v %s", err, out)
	}
	refDir := t.TempDir()
	mustCLI(t, "ingest", "--data-dir", refDir, "--disk-reserve-bytes", "0", writeJSONL(t, t.TempDir(), "blocks.jsonl", blocks))
	if got, want := statsJSONLine(t, data), statsJSONLine(t, refDir); got != want {
		t.Fatalf("the store after the full disk:\n got %s\nwant %s", got, want)
	}
	mustCLI(t, "ballast", "--data-dir", data, "--remove")
	p = startServe(t, data, "--memtable-bytes", "1MiB", "--disk-reserve-bytes", "4MiB", "--ballast-bytes", "0")
	if code, body := p.rawDo(http.MethodPost, "/v1/blocks", blockJSON(t, bigBlock(uint64(len(blocks))+1, prev))); code != 200 {
		t.Fatalf("a block once room returned: %d %s", code, body)
	}
	p.stop()
}

// TestServeStopsDuringStartup sends SIGTERM to serve at several moments of
// its start-up (flag parsing, opening the store and replaying its log,
// creating the ballast, starting the writer): it must exit within the
// shutdown timeout every time, never hang in a stage that does not watch
// for signals (before: one that arrived while Pebble opened the store was
// ignored until the open ended, and on a full disk it never did).
func TestServeStopsDuringStartup(t *testing.T) {
	data := t.TempDir()
	c := newTestChain(40)
	mustCLI(t, "ingest", "--data-dir", data, writeJSONL(t, t.TempDir(), "blocks.jsonl", c.blocks))
	for _, delay := range []time.Duration{0, 2 * time.Millisecond, 10 * time.Millisecond, 30 * time.Millisecond,
		80 * time.Millisecond, 200 * time.Millisecond} {
		t.Run(delay.String(), func(t *testing.T) {
			cmd := exec.Command(binary, "serve", "--listen", "127.0.0.1:0", "--data-dir", data, "--log-level", "warn")
			cmd.Env = testEnv(nil)
			var stderr syncBuffer
			cmd.Stdout, cmd.Stderr = &stderr, &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			time.Sleep(delay) // a moment of start-up, not a condition: any is valid
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-exited:
				var xe *exec.ExitError
				// Before Go installs its handler, SIGTERM's default action
				// ends the process; after, serve exits 0.
				if err != nil && !(errors.As(err, &xe) && !xe.Exited()) {
					t.Fatalf("serve after SIGTERM at %v: %v\n%s", delay, err, stderr.String())
				}
			case <-time.After(2 * e2eShutdownTimeout):
				_ = cmd.Process.Kill()
				t.Fatalf("serve still running %v after SIGTERM at %v of start-up:\n%s", 2*e2eShutdownTimeout, delay, stderr.String())
			}
			if out := stderr.String(); strings.Contains(out, "panic") || strings.Contains(out, "DATA RACE") {
				t.Fatalf("serve after SIGTERM at %v:\n%s", delay, out)
			}
		})
	}
	// The store is whole after every interrupted start.
	wantStats(t, data, c.stats(40))
}

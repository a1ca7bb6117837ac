package api_test

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// benchClientEnv, set in a child of this test binary, makes
// TestBenchClientProcess the client of serveBenchProc: "URL N BYTES".
const benchClientEnv = "UTXO_CACHE_BENCH_CLIENT"

// serveBenchProc serves req's target b.N times over HTTP to a client in
// another process (this test binary run again as TestBenchClientProcess):
// one connection kept alive, each body read to the end, one request at a
// time. The client's CPU is the child's, so cpu-ns/op is what each answer
// costs the server alone, its network writes included; ns/op is the round
// trip, the client's share included, with the client on its own CPU when
// one is free. This is the figure that says what a front end costs a
// server against /v1: write=http counts the in-process client's reading
// too, which grows with the bytes of the body and not with the server's
// work.
func serveBenchProc(b *testing.B, h http.Handler, req *http.Request) {
	srv := httptest.NewServer(h)
	defer srv.Close()
	url := srv.URL + req.URL.RequestURI()
	resp, err := srv.Client().Get(url)
	if err != nil {
		b.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("warm-up: %d, %v", resp.StatusCode, err)
	}
	b.SetBytes(n)
	cmd := exec.Command(os.Args[0], "-test.run=^TestBenchClientProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %d %d", benchClientEnv, url, b.N, n))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	// The child says "ready" once its connection is open and warm; the
	// timer and the server's CPU start then.
	lines := bufio.NewScanner(out)
	if !lines.Scan() || lines.Text() != "ready" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		b.Fatalf("bench client did not start: %q", lines.Text())
	}
	b.ResetTimer()
	cpu0 := processCPU(b)
	done := false
	for !done && lines.Scan() {
		done = lines.Text() == "done"
	}
	cpu := processCPU(b) - cpu0
	b.StopTimer()
	_, _ = io.Copy(io.Discard, out) // the test framework's own lines
	if err := cmd.Wait(); err != nil || !done {
		b.Fatalf("bench client: %v (done: %v)", err, done)
	}
	b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
}

// TestBenchClientProcess is serveBenchProc's client, run only in a child
// process it starts (benchClientEnv set); anywhere else it returns at once.
func TestBenchClientProcess(t *testing.T) {
	spec := os.Getenv(benchClientEnv)
	if spec == "" {
		return
	}
	f := strings.Fields(spec)
	if len(f) != 3 {
		t.Fatalf("%s=%q: want URL N BYTES", benchClientEnv, spec)
	}
	n, err1 := strconv.Atoi(f[1])
	size, err2 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("%s=%q: want URL N BYTES", benchClientEnv, spec)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	get := func() {
		resp, err := client.Get(f[0])
		if err != nil {
			t.Fatal(err)
		}
		m, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || m != size {
			t.Fatalf("%d, %d bytes, %v; want 200, %d bytes", resp.StatusCode, m, err, size)
		}
	}
	get()
	fmt.Println("ready")
	for range n {
		get()
	}
	fmt.Println("done")
}

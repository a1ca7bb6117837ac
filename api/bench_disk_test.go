package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/utxo-cache/utxo-cache/api"
	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/internal/workload"
	"github.com/utxo-cache/utxo-cache/query"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
	"github.com/utxo-cache/utxo-cache/writer"
)

// BenchmarkDiskHandlers serves the read endpoints through the whole handler
// with the disk tier alone (no memory tier, no Redis, no warming), on a
// store of UTXO_BENCH_UTXOS live outputs (default 1,000,000, the standard
// chain: workload.Bitcoin, seed 1) that then took churnBlocks ordinary
// blocks, not compacted afterwards, so index scans meet the tombstones of
// real spends. Each iteration reads another key (20,000 live outpoints and
// their addresses, and pages of the hot addresses at every cursor):
//
//	read=balance   GET /v1/addresses/{a}/balance
//	read=page100   GET /v1/addresses/{hot}/utxos?limit=100[&cursor=…]
//	read=outpoint  GET /v1/utxos/{tx}/{i}
//	read=lookup100 POST /v1/utxos/lookup with 100 outpoints
//
// The response writer is reused and discards the body, so allocs/op are the
// handler's own. Building the store takes minutes: it is cached in the temp
// directory under a name that holds every parameter (diskFixtureDir), and
// each run opens a copy of it. Compare runs with
//
//	go test ./api -run '^$' -bench DiskHandlers -count 6 | benchstat -
func BenchmarkDiskHandlers(b *testing.B) {
	f := getDiskFixture(b)
	store := f.openCopy(b)
	reads := query.New(store, query.Options{HotAddresses: -1})
	b.Cleanup(reads.Close)
	h := api.New(reads, nil, api.Options{})

	for _, r := range f.requests() {
		b.Run("read="+r.name, func(b *testing.B) {
			w := newDiscardWriter()
			for _, req := range r.reqs { // warm Pebble's block cache
				serveOK(b, h, w, req)
			}
			serveTimed(b, h, w, r.reqs)
		})
	}
}

// serveTimed is the timed loop of a handler benchmark: reqs in turn, with
// allocations, CPU per request and requests/s reported.
func serveTimed(b *testing.B, h http.Handler, w *discardWriter, reqs []*replayRequest) {
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU(b)
	i := 0
	for b.Loop() {
		serveOK(b, h, w, reqs[i%len(reqs)])
		i++
	}
	// On a shared machine wall time measures the neighbours too: the
	// process's CPU time per request (garbage collection and Pebble's
	// background work included) is the figure to compare.
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
}

// openCopy opens a copy of the fixture's store, closed when b ends: the
// fixture itself is never opened in place.
func (f *diskFixture) openCopy(b *testing.B) *disk.Store {
	dir := b.TempDir()
	if err := os.CopyFS(dir, os.DirFS(f.dir)); err != nil {
		b.Fatal(err)
	}
	store, err := disk.Open(dir, disk.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = store.Close() })
	return store
}

// processCPU is the user and system CPU time the process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchRequests are the requests of one read kind, served in turn.
type benchRequests struct {
	name string
	reqs []*replayRequest
}

// replayRequest is an http.Request that can be served again and again
// without allocating: its body is rewound before each use.
type replayRequest struct {
	req  *http.Request
	body []byte
	rd   bytes.Reader
}

func newReplayRequest(method, target string, body []byte) *replayRequest {
	r := &replayRequest{body: body}
	req, err := http.NewRequest(method, target, nil)
	if err != nil {
		panic(err)
	}
	req.RequestURI = target
	if body != nil {
		req.Body = io.NopCloser(&r.rd)
		req.ContentLength = int64(len(body))
		req.Header.Set("Content-Type", "application/json")
	}
	r.req = req
	return r
}

func (r *replayRequest) request() *http.Request {
	if r.body != nil {
		r.rd.Reset(r.body)
	}
	return r.req
}

// discardWriter is a reusable http.ResponseWriter that keeps the status and
// counts the body bytes.
type discardWriter struct {
	h      http.Header
	status int
	n      int
}

func newDiscardWriter() *discardWriter { return &discardWriter{h: make(http.Header)} }

func (w *discardWriter) reset() {
	clear(w.h)
	w.status, w.n = 0, 0
}
func (w *discardWriter) Header() http.Header { return w.h }
func (w *discardWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}
func (w *discardWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	w.n += len(p)
	return len(p), nil
}

func serveOK(b testing.TB, h http.Handler, w *discardWriter, r *replayRequest) {
	w.reset()
	h.ServeHTTP(w, r.request())
	if w.status != http.StatusOK || w.n == 0 {
		b.Fatalf("%s %s: status %d, %d bytes", r.req.Method, r.req.RequestURI, w.status, w.n)
	}
}

// The disk fixture's parameters; every one is part of its directory name.
const (
	diskFixtureVersion = 2 // bump when the fixture's construction changes
	diskFixtureSeed    = 1
	churnBlocks        = 200   // ordinary blocks after the seed chain (300 txs each)
	sampleOutPoints    = 20000 // live outpoints (and their addresses) read
	envBenchUTXOs      = "UTXO_BENCH_UTXOS"
)

// diskFixture is a store directory, never opened in place, and the keys to
// read from it.
type diskFixture struct {
	dir       string
	outPoints []chain.OutPoint // live at the store's tip
	addresses []string         // the address of each outpoint
	pages     []string         // page targets of the hot addresses: first pages and every cursor
}

var (
	diskFixtureOnce sync.Once
	diskFixtureVal  *diskFixture
	diskFixtureErr  error
)

func getDiskFixture(b *testing.B) *diskFixture {
	b.Helper()
	diskFixtureOnce.Do(func() { diskFixtureVal, diskFixtureErr = loadDiskFixture() })
	if diskFixtureErr != nil {
		b.Fatal(diskFixtureErr)
	}
	return diskFixtureVal
}

// diskFixtureDir returns where the fixture of utxos live outputs is cached.
func diskFixtureDir() (dir string, utxos int, err error) {
	utxos = 1_000_000
	if s := os.Getenv(envBenchUTXOs); s != "" {
		n, err := strconv.ParseInt(s, 0, 64) // base 0 accepts 1_000_000
		if err != nil || n < 20_000 {
			return "", 0, fmt.Errorf("%s=%q: want an integer >= 20000", envBenchUTXOs, s)
		}
		utxos = int(n)
	}
	name := fmt.Sprintf("utxo-cache-apibench-v%d-utxos%d-seed%d-churn%d-sample%d",
		diskFixtureVersion, utxos, diskFixtureSeed, churnBlocks, sampleOutPoints)
	return filepath.Join(os.TempDir(), name), utxos, nil
}

// loadDiskFixture opens the cached fixture, building it first when absent.
// A build goes to a temporary directory renamed into place when complete, so
// an interrupted build leaves nothing that looks finished.
func loadDiskFixture() (*diskFixture, error) {
	dir, utxos, err := diskFixtureDir()
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, "keys.json")); errors.Is(err, fs.ErrNotExist) {
		start := time.Now()
		if err := buildDiskFixture(dir, utxos); err != nil {
			return nil, fmt.Errorf("build disk fixture: %w", err)
		}
		fmt.Fprintf(os.Stderr, "disk fixture built in %s: %s\n", time.Since(start).Round(time.Second), dir)
	} else if err != nil {
		return nil, err
	}
	raw, err := os.ReadFile(filepath.Join(dir, "keys.json"))
	if err != nil {
		return nil, err
	}
	var k fixtureKeys
	if err := json.Unmarshal(raw, &k); err != nil {
		return nil, fmt.Errorf("disk fixture %s: %w", dir, err)
	}
	f := &diskFixture{dir: filepath.Join(dir, "store"), addresses: k.Addresses, pages: k.Pages}
	for _, s := range k.OutPoints {
		hash, index, _ := strings.Cut(s, ":")
		h, err := chain.ParseHash(hash)
		if err != nil {
			return nil, fmt.Errorf("disk fixture %s: %w", dir, err)
		}
		i, err := strconv.ParseUint(index, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("disk fixture %s: %w", dir, err)
		}
		f.outPoints = append(f.outPoints, chain.OutPoint{TxHash: h, Index: uint32(i)})
	}
	return f, nil
}

// fixtureKeys is keys.json, written last.
type fixtureKeys struct {
	OutPoints []string `json:"outpoints"`
	Addresses []string `json:"addresses"`
	Pages     []string `json:"pages"`
}

func buildDiskFixture(dir string, target int) error {
	tmp, err := os.MkdirTemp(filepath.Dir(dir), filepath.Base(dir)+".building-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	gen, err := workload.New(workload.Options{Seed: diskFixtureSeed, Profile: workload.Bitcoin})
	if err != nil {
		return err
	}
	st, err := disk.Open(filepath.Join(tmp, "store"), disk.Options{})
	if err != nil {
		return err
	}
	defer func() { _ = st.Close() }()
	w := writer.New(st, writer.Options{})
	defer func() { _ = w.Close() }()
	ctx := context.Background()
	for gen.Live() < target {
		if _, err := w.Apply(ctx, gen.NextSeed(min(50_000, target-gen.Live()+1000))); err != nil {
			return err
		}
	}
	for range churnBlocks {
		if _, err := w.Apply(ctx, gen.Next()); err != nil {
			return err
		}
	}

	var k fixtureKeys
	rng := rand.New(rand.NewPCG(diskFixtureSeed, 2))
	var live []chain.OutPoint
	for op := range gen.LiveOutPoints() {
		live = append(live, op)
	}
	rng.Shuffle(len(live), func(i, j int) { live[i], live[j] = live[j], live[i] })
	v, err := st.NewView()
	if err != nil {
		return err
	}
	for _, op := range live[:min(sampleOutPoints, len(live))] {
		u, _, err := v.Utxo(op)
		if err != nil {
			v.Close()
			return fmt.Errorf("sampled outpoint %s: %w", op, err)
		}
		k.OutPoints = append(k.OutPoints, op.String())
		k.Addresses = append(k.Addresses, u.Address)
	}
	v.Close()
	// Every page of every hot address, each as its cursor names it (the
	// cursors are bound to the store's secret, which the copies keep).
	reads := query.New(st, query.Options{HotAddresses: -1})
	defer reads.Close()
	for _, a := range gen.HotAddresses() {
		cursor := ""
		for {
			target := "/v1/addresses/" + url.PathEscape(a) + "/utxos?limit=100"
			if cursor != "" {
				target += "&cursor=" + cursor
			}
			ans, err := reads.AddressUtxos(ctx, a, false, 100, cursor)
			if err != nil {
				return err
			}
			var page struct {
				Utxos []json.RawMessage `json:"utxos"`
				Next  *string           `json:"next_cursor"`
			}
			if err := json.Unmarshal(ans.AppendBody(nil), &page); err != nil {
				return err
			}
			if len(page.Utxos) < 100 {
				break // a short last page is not a 100-item page
			}
			k.Pages = append(k.Pages, target)
			if page.Next == nil {
				break
			}
			cursor = *page.Next
		}
	}
	if len(k.Pages) == 0 {
		return fmt.Errorf("no hot address has a 100-item page")
	}
	w.Close()
	if err := st.Close(); err != nil {
		return err
	}
	if err := settleStore(filepath.Join(tmp, "store")); err != nil {
		return err
	}
	raw, err := json.Marshal(&k)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tmp, "keys.json"), raw, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, dir)
}

// settleStore opens the store once more and closes it when Pebble's
// background work is done: the open flushes what the log replays and the
// compactions that follow run here, not in every benchmark run that opens a
// copy. Settled means no new flush or compaction for 3 s; nothing is
// compacted by hand, so the tombstones of the churn stay where Pebble's own
// compactions left them.
func settleStore(dir string) error {
	st, err := disk.Open(dir, disk.Options{})
	if err != nil {
		return err
	}
	work := func() int64 { h := st.Health(); return h.Compactions + h.Flushes }
	last, since := work(), time.Now()
	for deadline := time.Now().Add(10 * time.Minute); time.Since(since) < 3*time.Second; {
		if time.Now().After(deadline) {
			_ = st.Close()
			return fmt.Errorf("store %s did not settle in 10 minutes", dir)
		}
		time.Sleep(100 * time.Millisecond) // polling Pebble's counters: no event to wait on
		if n := work(); n != last {
			last, since = n, time.Now()
		}
	}
	return st.Close()
}

// requests builds each read kind's requests.
func (f *diskFixture) requests() []benchRequests {
	var balance, page, outpoint, lookup []*replayRequest
	for _, a := range f.addresses {
		balance = append(balance, newReplayRequest(http.MethodGet, "/v1/addresses/"+url.PathEscape(a)+"/balance", nil))
	}
	for _, p := range f.pages {
		page = append(page, newReplayRequest(http.MethodGet, p, nil))
	}
	for _, op := range f.outPoints {
		outpoint = append(outpoint, newReplayRequest(http.MethodGet, "/v1/utxos/"+op.TxHash.String()+"/"+strconv.FormatUint(uint64(op.Index), 10), nil))
	}
	for i := 0; i+100 <= len(f.outPoints); i += 100 {
		var body bytes.Buffer
		bw := bufio.NewWriter(&body)
		bw.WriteString(`{"outpoints":[`)
		for j, op := range f.outPoints[i : i+100] {
			if j > 0 {
				bw.WriteByte(',')
			}
			fmt.Fprintf(bw, `{"tx_hash":"%s","index":%d}`, op.TxHash, op.Index)
		}
		bw.WriteString(`]}`)
		bw.Flush()
		lookup = append(lookup, newReplayRequest(http.MethodPost, "/v1/utxos/lookup", body.Bytes()))
	}
	return []benchRequests{
		{"balance", balance},
		{"page100", page},
		{"outpoint", outpoint},
		{"lookup100", lookup},
	}
}

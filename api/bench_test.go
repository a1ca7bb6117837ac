package api_test

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/utxo-cache/utxo-cache/cache"
	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/internal/testredis"
	"github.com/utxo-cache/utxo-cache/tiers/redis"
)

// The read benchmarks serve GETs in-process (httptest.NewRecorder, no
// network) through the whole handler, answered by one tier at a time:
//
//	tier=memory  a memory-tier hit
//	tier=redis   a Redis hit (memory tier off; a real redis-server)
//	tier=disk    computed from a Pebble snapshot (no tier)
//
// BenchmarkBareGin returns the same bytes from a bare Gin handler: the
// ceiling of the framework and the recorder. Compare with
//
//	go test ./api -run '^$' -bench 'Read|BareGin' -count 6 | benchstat -col /tier -

// benchReads are the answers read: a balance, and a 100-item page of an
// address with 1000 live outputs.
var benchReads = []struct{ name, target string }{
	{"balance", "/v1/addresses/hot/balance"},
	{"page100", "/v1/addresses/hot/utxos?limit=100"},
}

// benchChain fills s: "hot" holds 1000 outputs with an asset each, over ten
// transactions.
func benchChain(s *stack) {
	var txs []chain.Tx
	for i := range 10 {
		var outs []chain.Output
		for j := range 100 {
			outs = append(outs, out("hot", uint64(1000*i+j+1), chain.Asset{Policy: []byte{byte(j % 3)}, Name: []byte("tok"), Quantity: 5}))
		}
		txs = append(txs, tx(fmt.Sprintf("bench-%d", i), nil, outs...))
	}
	s.apply(txs...)
}

// serveBench serves req b.N times; every answer must be 200 of the warm-up's
// length.
func serveBench(b *testing.B, h http.Handler, req *http.Request) {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		b.Fatalf("warm-up: %d %s", rec.Code, rec.Body)
	}
	n := rec.Body.Len()
	b.SetBytes(int64(n))
	b.ReportAllocs()
	cpu0 := processCPU(b)
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK || rec.Body.Len() != n {
			b.Fatalf("%d, %d bytes", rec.Code, rec.Body.Len())
		}
	}
	// The process's CPU per request (the GC's included): on a shared
	// machine wall time measures the neighbours too.
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
}

// serveBenchConn is serveBench with each answer written into a connWriter
// rather than a new recorder: what a server's own writing costs, for
// comparing answers of different sizes (the front ends' against /v1's).
func serveBenchConn(b *testing.B, h http.Handler, req *http.Request) {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		b.Fatalf("warm-up: %d %s", rec.Code, rec.Body)
	}
	n := rec.Body.Len()
	b.SetBytes(int64(n))
	b.ReportAllocs()
	w := &connWriter{body: make([]byte, 0, n)}
	cpu0 := processCPU(b)
	for b.Loop() {
		w.reset()
		h.ServeHTTP(w, req)
		if w.status != http.StatusOK || len(w.body) != n {
			b.Fatalf("%d, %d bytes", w.status, len(w.body))
		}
	}
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
}

// serveBenchHTTP serves req's target b.N times over HTTP: a real server on
// the loopback interface and a client keeping its connection alive, the
// body read to the end. The CPU per request is the server's and the
// client's (one process).
func serveBenchHTTP(b *testing.B, h http.Handler, req *http.Request) {
	srv := httptest.NewServer(h)
	defer srv.Close()
	client := srv.Client()
	url := srv.URL + req.URL.RequestURI()
	get := func() (int, int64) {
		resp, err := client.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		if cerr := resp.Body.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			b.Fatal(err)
		}
		return resp.StatusCode, n
	}
	code, n := get()
	if code != http.StatusOK {
		b.Fatalf("warm-up: %d", code)
	}
	b.SetBytes(n)
	b.ReportAllocs()
	cpu0 := processCPU(b)
	for b.Loop() {
		if c, m := get(); c != http.StatusOK || m != n {
			b.Fatalf("%d, %d bytes", c, m)
		}
	}
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
}

// connWriter is a ResponseWriter as a server's connection is one: a new
// header map for each response, as net/http makes, and the body copied into
// one buffer kept from response to response, as net/http's buffered
// connection writer is (whose bytes then go to the socket). httptest's
// recorder instead grows a new buffer to each body's size: an allocation
// and its clearing, a large object past 32 KiB, that no server makes, and
// that in a comparison of bodies of different sizes weighs on the larger
// one alone.
type connWriter struct {
	h      http.Header
	status int
	body   []byte
}

func (w *connWriter) Header() http.Header { return w.h }

func (w *connWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}

func (w *connWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	w.body = append(w.body, p...)
	return len(p), nil
}

// reset readies w for the next response.
func (w *connWriter) reset() {
	w.h, w.status, w.body = make(http.Header), 0, w.body[:0]
}

func BenchmarkRead(b *testing.B) {
	b.Run("tier=memory", func(b *testing.B) {
		s := newStack(b, stackConfig{noSpec: true, hot: -1})
		benchChain(s)
		for _, r := range benchReads {
			b.Run(r.name, func(b *testing.B) {
				req := httptest.NewRequest(http.MethodGet, r.target, nil)
				s.h.ServeHTTP(httptest.NewRecorder(), req) // fill
				s.mem.Wait()
				before := s.mem.Stats().Hits
				serveBench(b, s.h, req)
				if hits := s.mem.Stats().Hits - before; hits < uint64(b.N) {
					b.Fatalf("%d memory hits for %d reads", hits, b.N)
				}
			})
		}
	})
	b.Run("tier=redis", func(b *testing.B) {
		rs := testredis.Start(b)
		rt, err := redis.New(redis.Options{URL: rs.URL(), Namespace: "bench", Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = rt.Close() })
		if !rt.Healthy() {
			b.Fatal("redis tier not healthy")
		}
		s := newStack(b, stackConfig{noSpec: true, hot: -1, noMemory: true, tiers: []cache.Tier{rt}})
		benchChain(s)
		for _, r := range benchReads {
			b.Run(r.name, func(b *testing.B) {
				req := httptest.NewRequest(http.MethodGet, r.target, nil)
				fills := rt.Stats().Fills
				s.h.ServeHTTP(httptest.NewRecorder(), req) // fill, queued off the read path
				for deadline := time.Now().Add(10 * time.Second); rt.Stats().Fills == fills; {
					if time.Now().After(deadline) {
						b.Fatal("the Redis fill did not land within 10s")
					}
					runtime.Gosched()
				}
				before := rt.Stats().Hits
				serveBench(b, s.h, req)
				if hits := rt.Stats().Hits - before; hits < uint64(b.N) {
					b.Fatalf("%d Redis hits for %d reads", hits, b.N)
				}
			})
		}
	})
	b.Run("tier=disk", func(b *testing.B) {
		s := newStack(b, stackConfig{noSpec: true, hot: -1, noMemory: true})
		benchChain(s)
		for _, r := range benchReads {
			b.Run(r.name, func(b *testing.B) {
				serveBench(b, s.h, httptest.NewRequest(http.MethodGet, r.target, nil))
			})
		}
	})
}

// BenchmarkBareGin is the ceiling: a bare Gin handler that writes the bytes
// (and the headers) the real API answers, with no read path behind it.
func BenchmarkBareGin(b *testing.B) {
	s := newStack(b, stackConfig{noSpec: true, hot: -1})
	benchChain(s)
	gin.SetMode(gin.ReleaseMode)
	for _, r := range benchReads {
		b.Run(r.name, func(b *testing.B) {
			req := httptest.NewRequest(http.MethodGet, r.target, nil)
			rec := httptest.NewRecorder()
			s.h.ServeHTTP(rec, req)
			body, hdr := rec.Body.Bytes(), rec.Result().Header
			e := gin.New()
			handler := func(c *gin.Context) {
				h := c.Writer.Header()
				h["X-Tip-Height"] = hdr["X-Tip-Height"]
				h["X-Tip-Hash"] = hdr["X-Tip-Hash"]
				h["Etag"] = hdr["Etag"]
				c.Data(http.StatusOK, "application/json", body)
			}
			e.GET("/v1/addresses/:address/balance", handler)
			e.GET("/v1/addresses/:address/utxos", handler)
			serveBench(b, e, req)
		})
	}
}

// TestAnswerBufferReused: a cached answer is written without allocating a
// copy of its body per request (the handler keeps a pool of answer buffers
// for this). The recorder's own copy is the only body-sized allocation.
//
// Not parallel: testing.Benchmark counts every goroutine's allocations.
func TestAnswerBufferReused(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation figures are meaningless under -race")
	}
	s := newStack(t, stackConfig{noSpec: true, hot: -1})
	benchChain(s)
	req := httptest.NewRequest(http.MethodGet, "/v1/addresses/hot/utxos?limit=1000", nil)
	s.h.ServeHTTP(httptest.NewRecorder(), req) // fill
	s.mem.Wait()
	rec := httptest.NewRecorder()
	s.h.ServeHTTP(rec, req)
	size := rec.Body.Len()
	var perRequest float64
	res := testing.Benchmark(func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			s.h.ServeHTTP(httptest.NewRecorder(), req)
		}
	})
	perRequest = float64(res.AllocedBytesPerOp())
	if perRequest > 1.5*float64(size) {
		t.Errorf("a memory-tier hit of a %d-byte answer allocates %.0f bytes: the body is copied into a fresh buffer on every request", size, perRequest)
	}
}

// TestDiskReadAllocs: a read answered from the disk tier alone (no cache
// tier) is encoded in place into pooled buffers: a 100-item page costs at
// most 20 allocations in the whole handler, whatever its size (it allocated
// 244 when every output was decoded into a chain.Utxo first), and an
// outpoint at most 15. The response writer is reused, so the figures are the
// handler's own.
//
// Not parallel: AllocsPerRun counts every goroutine's allocations.
func TestDiskReadAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation figures are meaningless under -race")
	}
	s := newStack(t, stackConfig{noSpec: true, hot: -1, noMemory: true})
	benchChain(s)
	w := newDiscardWriter()
	page := newReplayRequest(http.MethodGet, "/v1/addresses/hot/utxos?limit=100", nil)
	serveOK(t, s.h, w, page)
	rec := httptest.NewRecorder()
	s.h.ServeHTTP(rec, page.request())
	var body struct {
		Utxos []struct {
			TxHash string `json:"tx_hash"`
			Index  uint32 `json:"index"`
		} `json:"utxos"`
		Next string `json:"next_cursor"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || len(body.Utxos) != 100 || body.Next == "" {
		t.Fatalf("page: %v, %d items, cursor %q", err, len(body.Utxos), body.Next)
	}
	first := body.Utxos[0]
	for _, c := range []struct {
		name string
		req  *replayRequest
		max  float64
	}{
		{"page100", page, 20},
		{"page100 after a cursor", newReplayRequest(http.MethodGet, "/v1/addresses/hot/utxos?limit=100&cursor="+body.Next, nil), 20},
		{"outpoint", newReplayRequest(http.MethodGet, "/v1/utxos/"+first.TxHash+"/"+strconv.FormatUint(uint64(first.Index), 10), nil), 15},
	} {
		serveOK(t, s.h, w, c.req) // fill the pools
		n := testing.AllocsPerRun(200, func() { serveOK(t, s.h, w, c.req) })
		t.Logf("%s: %.1f allocations per request", c.name, n)
		if n > c.max {
			t.Errorf("%s: %.1f allocations per request, want at most %.0f", c.name, n, c.max)
		}
	}
}

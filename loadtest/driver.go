package loadtest

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/utxo-cache/utxo-cache/chain"
)

// driver sends the mix's requests for one phase and records what happened.
// do is safe for concurrent use by the pacer's workers; each worker uses
// only its own workerRand.
type driver struct {
	client        *http.Client
	targets       []string // base URLs; request i goes to targets[i % len]
	gen           *reqGen
	rec           *recorder
	wrs           []*workerRand
	check         *checker // nil: no correctness sample
	checkFraction float64
	capture       *bodyCapture // nil unless recording bodies for the bare handler
	bufs          sync.Pool
}

func newDriver(client *http.Client, targets []string, gen *reqGen, rec *recorder, workers int, seed int64) *driver {
	d := &driver{client: client, targets: targets, gen: gen, rec: rec}
	d.wrs = make([]*workerRand, workers)
	for i := range d.wrs {
		d.wrs[i] = newWorkerRand(seed, i, len(gen.w.addrs))
	}
	d.bufs.New = func() any { return new(bytes.Buffer) }
	return d
}

// newClient returns the HTTP client of a run: keep-alive connections, at
// most conns idle per target, no compression (the service does not
// compress, and decompressing would cost the harness CPU).
func newClient(conns int, timeout time.Duration) *http.Client {
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        conns * 4,
		MaxIdleConnsPerHost: conns,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}
	return &http.Client{Transport: tr, Timeout: timeout}
}

func (d *driver) do(ctx context.Context, s shot) {
	wr := d.wrs[s.worker]
	req := d.gen.next(wr)
	target := d.targets[int(s.seq%int64(len(d.targets)))]
	var body io.Reader
	if req.body != nil {
		body = bytes.NewReader(req.body)
	}
	hr, err := http.NewRequestWithContext(ctx, req.method, target+req.path, body)
	if err != nil {
		panic(err) // the harness built a bad URL
	}
	if req.body != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	if req.inm != "" {
		hr.Header.Set("If-None-Match", req.inm)
	}
	buf := d.bufs.Get().(*bytes.Buffer)
	defer d.bufs.Put(buf)
	buf.Reset()
	sent := time.Now()
	resp, err := d.client.Do(hr)
	status := 0
	if err == nil {
		status = resp.StatusCode
		_, err = buf.ReadFrom(resp.Body)
		resp.Body.Close()
	}
	lat := time.Since(s.intended)
	if ctx.Err() != nil {
		return // the phase was cut short: not the service's failure
	}
	class := classify(err, status)
	if status == http.StatusNotFound && (req.kind == kindOutpoint || req.kind == kindRevalidate) {
		// An outpoint of a rolled-back block, between the rollback and the
		// new branch: the contract's answer, not an error.
		class = ""
	}
	d.rec.record(s.worker, outcome{kind: req.kind, status: status, errClass: class,
		intended: s.intended, sent: sent, latency: lat})
	if err == nil {
		d.after(wr, &req, resp.Header, status, buf.Bytes())
	}
}

// after feeds an answer back into the mix (ETags to revalidate, cursors to
// follow), the correctness sample and the body capture.
func (d *driver) after(wr *workerRand, req *request, h http.Header, status int, body []byte) {
	if status == http.StatusOK {
		if etag := h.Get("ETag"); etag != "" && (req.kind == kindRevalidate || wr.r.IntN(8) == 0) {
			d.gen.sawETag(req.path, etag)
		}
		if req.kind == kindDeep {
			if cursor, end, ok := pageEnd(body, h); ok {
				d.gen.continueWalk(req, cursor, end)
			}
		}
		if d.capture != nil && req.kind != kindRevalidate {
			d.capture.add(routeOf(req.kind), body)
		}
	}
	answered := status == http.StatusOK || (status == http.StatusNotFound && req.kind == kindOutpoint)
	if d.check != nil && answered && req.kind != kindRevalidate && wr.r.Float64() < d.checkFraction {
		d.check.offer(sample{req: *req, status: status, headHeight: h.Get("X-Tip-Height"), commitSeq: h.Get("X-Commit-Seq"), body: bytes.Clone(body)})
	}
}

// pageEnd finds a listing page's next_cursor and the position where the page
// ended (its last item, at the tip of the answer's headers) without decoding
// the whole page: the service writes next_cursor last, and every item starts
// with its tx_hash and index.
func pageEnd(body []byte, h http.Header) (cursor string, end *pagePosition, ok bool) {
	const key = `"next_cursor":"`
	i := bytes.LastIndex(body, []byte(key))
	if i < 0 {
		return "", nil, false
	}
	rest := body[i+len(key):]
	j := bytes.IndexByte(rest, '"')
	if j <= 0 {
		return "", nil, false
	}
	cursor = string(rest[:j])
	const item = `{"tx_hash":"`
	k := bytes.LastIndex(body[:i], []byte(item))
	if k < 0 {
		return cursor, nil, true
	}
	tail := body[k+len(item):]
	const idx = `","index":`
	if len(tail) < 64+len(idx) || !bytes.HasPrefix(tail[64:], []byte(idx)) {
		return cursor, nil, true
	}
	var pos pagePosition
	if _, err := hex.Decode(pos.last.TxHash[:], tail[:64]); err != nil {
		return cursor, nil, true
	}
	digits := tail[64+len(idx):]
	n := 0
	for n < len(digits) && digits[n] >= '0' && digits[n] <= '9' {
		n++
	}
	index, err1 := strconv.ParseUint(string(digits[:n]), 10, 32)
	height, err2 := strconv.ParseUint(h.Get("X-Tip-Height"), 10, 64)
	hash, err3 := chain.ParseHash(h.Get("X-Tip-Hash"))
	if errors.Join(err1, err2, err3) != nil {
		return cursor, nil, true
	}
	pos.last.Index = uint32(index)
	pos.tip = chain.Tip{Height: height, Hash: hash}
	return cursor, &pos, true
}

// routeOf is the bare handler's key (bare.NewHandler) of a request kind.
func routeOf(k kind) string {
	switch k {
	case kindPage, kindDeep:
		return "GET /v1/addresses/:address/utxos"
	case kindBalance:
		return "GET /v1/addresses/:address/balance"
	case kindOutpoint:
		return "GET /v1/utxos/:tx_hash/:index"
	case kindLookup:
		return "POST /v1/utxos/lookup"
	}
	return "GET /v1/tip"
}

// bodyCapture keeps the first answers of each route, to give the bare
// handler bodies of the sizes the service really sends.
type bodyCapture struct {
	mu     sync.Mutex
	bodies map[string][][]byte // guarded by mu
}

const captureKeep = 101

func newBodyCapture() *bodyCapture { return &bodyCapture{bodies: map[string][][]byte{}} }

func (c *bodyCapture) add(route string, body []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.bodies[route]) < captureKeep {
		c.bodies[route] = append(c.bodies[route], bytes.Clone(body))
	}
}

// medians returns, per route, the captured body of median size.
func (c *bodyCapture) medians() map[string][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string][]byte{}
	for route, bs := range c.bodies {
		sorted := append([][]byte(nil), bs...)
		sort.Slice(sorted, func(i, j int) bool { return len(sorted[i]) < len(sorted[j]) })
		out[route] = sorted[len(sorted)/2]
	}
	return out
}

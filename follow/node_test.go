package follow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/utxo-cache/utxo-cache/bitcoin"
	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
	"github.com/utxo-cache/utxo-cache/writer"
)

// A fake Bitcoin Core REST interface serving real blocks, and the stores the
// tests compare.

// nodeBlock is one block as the fake node serves it.
type nodeBlock struct {
	height uint64
	raw    []byte       // serialized, as /rest/block/<hash>.bin
	block  *chain.Block // converted at height, for the expected stores
}

func (b *nodeBlock) hash() chain.Hash { return b.block.Hash }

// loadBlocks reads up to max blocks of a fixture of ../testdata/bitcoin,
// whose blocks sit at heights start, start+1, …
func loadBlocks(tb testing.TB, name string, start uint64, max int) []*nodeBlock {
	tb.Helper()
	br, err := bitcoin.OpenBlockFile(filepath.Join("..", "testdata", "bitcoin", name), bitcoin.Mainnet)
	if err != nil {
		tb.Fatal(err)
	}
	defer br.Close()
	a, err := bitcoin.NewAdapter(bitcoin.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	var out []*nodeBlock
	for len(out) < max {
		blk, err := br.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			tb.Fatal(err)
		}
		h := start + uint64(len(out))
		b, err := a.Convert(blk, h)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, &nodeBlock{height: h, raw: bitcoin.AppendBlock(nil, blk), block: b})
	}
	return out
}

// fault may answer request n (0-based, counted over every request) itself,
// returning true; false lets the node answer normally.
type fault func(n int, w http.ResponseWriter, r *http.Request) bool

// fakeNode speaks the three REST endpoints the follower uses. Its chain can
// be switched while a follower runs. Safe for concurrent use.
type fakeNode struct {
	mu       sync.Mutex
	chainTag string                    // chaininfo "chain"
	active   []*nodeBlock              // the best chain, by height from 0
	known    map[chain.Hash]*nodeBlock // every block ever served (stale ones stay fetchable, as in Core)
	fault    fault
	requests int
	mempool  mempoolState // mempool_test.go
}

func newFakeNode(t *testing.T, blocks []*nodeBlock) (*fakeNode, *httptest.Server) {
	n := &fakeNode{chainTag: "main", known: map[chain.Hash]*nodeBlock{}}
	n.setChain(blocks)
	srv := httptest.NewServer(n)
	t.Cleanup(srv.Close)
	return n, srv
}

func (n *fakeNode) setChain(blocks []*nodeBlock) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.active = blocks
	for _, b := range blocks {
		n.known[b.hash()] = b
	}
}

func (n *fakeNode) setFault(f fault) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.fault = f
}

func (n *fakeNode) requestCount() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.requests
}

func (n *fakeNode) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n.mu.Lock()
	req := n.requests
	n.requests++
	f := n.fault
	active, tag := n.active, n.chainTag
	n.mu.Unlock()
	if f != nil && f(req, w, r) {
		return
	}
	if r.Method != http.MethodGet {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if n.serveMempool(w, r) {
		return
	}
	path := r.URL.Path
	switch {
	case path == "/rest/chaininfo.json":
		tipBlock := active[len(active)-1]
		writeJSON(w, map[string]any{
			"chain": tag, "blocks": tipBlock.height, "headers": tipBlock.height,
			"bestblockhash": tipBlock.hash().String(), "verificationprogress": 1,
		})
	case strings.HasPrefix(path, "/rest/blockhashbyheight/") && strings.HasSuffix(path, ".json"):
		h, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(path, "/rest/blockhashbyheight/"), ".json"), 10, 64)
		if err != nil {
			http.Error(w, "Invalid height", http.StatusBadRequest)
			return
		}
		if h >= uint64(len(active)) {
			http.Error(w, "Block height out of range", http.StatusNotFound)
			return
		}
		writeJSON(w, map[string]string{"blockhash": active[h].hash().String()})
	case strings.HasPrefix(path, "/rest/block/") && strings.HasSuffix(path, ".bin"):
		h, err := chain.ParseHash(strings.TrimSuffix(strings.TrimPrefix(path, "/rest/block/"), ".bin"))
		if err != nil {
			http.Error(w, "Invalid hash", http.StatusBadRequest)
			return
		}
		n.mu.Lock()
		b := n.known[h]
		n.mu.Unlock()
		if b == nil {
			http.Error(w, h.String()+" not found", http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(b.raw)
	default:
		http.NotFound(w, r)
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// call is one Apply or Rollback the follower made.
type call struct {
	rollback bool
	height   uint64 // of the block applied, or the rollback target
	hash     chain.Hash
	applied  bool
	err      error
}

func (c call) String() string {
	if c.rollback {
		return fmt.Sprintf("rollback→%d(err %v)", c.height, c.err)
	}
	return fmt.Sprintf("apply %d/%s applied=%v err=%v", c.height, c.hash.String()[56:], c.applied, c.err)
}

// recordingWriter is a writer.Writer that records what the follower asked
// of it.
type recordingWriter struct {
	*writer.Writer
	mu      sync.Mutex
	calls   []call
	batches []writer.BatchResult
	// batchHeights holds the heights of each ApplyBlocks' blocks.
	batchHeights [][]uint64
}

func (r *recordingWriter) Apply(ctx context.Context, b *chain.Block) (writer.Result, error) {
	res, err := r.Writer.Apply(ctx, b)
	r.mu.Lock()
	r.calls = append(r.calls, call{height: b.Height, hash: b.Hash, applied: res.Applied, err: err})
	r.mu.Unlock()
	return res, err
}

// ApplyBlocks records each block the writer handled as an apply call
// (applied, or already there: a BatchResult does not say which), and the
// refused one with its error.
func (r *recordingWriter) ApplyBlocks(ctx context.Context, blocks []*chain.Block, target uint64) (writer.BatchResult, error) {
	res, err := r.Writer.ApplyBlocks(ctx, blocks, target)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.batches = append(r.batches, res)
	heights := make([]uint64, len(blocks))
	for i, b := range blocks {
		heights[i] = b.Height
	}
	r.batchHeights = append(r.batchHeights, heights)
	for _, b := range blocks[:res.Done] {
		r.calls = append(r.calls, call{height: b.Height, hash: b.Hash, applied: true})
	}
	if err != nil && res.Done < len(blocks) {
		b := blocks[res.Done]
		r.calls = append(r.calls, call{height: b.Height, hash: b.Hash, err: err})
	}
	return res, err
}

func (r *recordingWriter) Rollback(ctx context.Context, h uint64) (writer.Result, error) {
	res, err := r.Writer.Rollback(ctx, h)
	r.mu.Lock()
	r.calls = append(r.calls, call{rollback: true, height: h, err: err})
	r.mu.Unlock()
	return res, err
}

func (r *recordingWriter) history() []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]call(nil), r.calls...)
}

// newStore opens a store and a recording writer over it, closed by cleanup.
func newStore(t *testing.T, opts disk.Options) (*disk.Store, *recordingWriter) {
	t.Helper()
	st, err := disk.Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	w := &recordingWriter{Writer: writer.New(st, writer.Options{})}
	t.Cleanup(func() {
		w.Close()
		st.Close()
	})
	return st, w
}

// directState applies blocks in order to a fresh store and returns its state.
func directState(t *testing.T, blocks []*nodeBlock) disk.State {
	t.Helper()
	st, w := newStore(t, disk.Options{})
	for _, b := range blocks {
		if _, err := w.Apply(context.Background(), b.block); err != nil {
			t.Fatalf("direct apply %d: %v", b.height, err)
		}
	}
	return st.State()
}

func chainOf(parts ...[]*nodeBlock) []*nodeBlock {
	var out []*nodeBlock
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

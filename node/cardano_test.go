package node_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/utxo-cache/utxo-cache/cardano/n2n"
	"github.com/utxo-cache/utxo-cache/cardano/n2n/n2ntest"
	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/changeset"
	"github.com/utxo-cache/utxo-cache/node"
)

var cardanoFixtures = filepath.Join("..", "testdata", "cardano")

// cardanoConfig is a writer node following the fake node fn from its first
// block, with a rollback window of window blocks.
func cardanoConfig(dir string, fn *n2ntest.Node, start n2ntest.Block, window uint64) node.Config {
	return node.Config{
		DataDir: dir, MemTableBytes: 4 << 20, MemoryCacheBytes: 8 << 20, RollbackWindow: window,
		SkipUnknownInputs: true, // the chunk starts mid-chain
		FollowCardano:     fn.Addr(), CardanoMagic: n2n.MagicPreview,
		CardanoStart: &n2n.Point{Slot: start.Slot, Hash: start.Hash},
	}
}

// TestFollowCardano: serve --follow-cardano assembled by node.Start follows
// the fake node to its tip (figures on /metrics), stays ready, and answers
// /readyz 503 with the reason once the node rolls back deeper than the
// rollback window; the node shuts down leaving nothing running.
func TestFollowCardano(t *testing.T) {
	defer goleak.VerifyNone(t)
	blocks := n2ntest.ChunkBlocks(t, cardanoFixtures, "01836", 40)
	fn := n2ntest.NewNode(t, n2n.MagicPreview, blocks)
	n, err := node.Start(context.Background(), cardanoConfig(t.TempDir(), fn, blocks[0], 10))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(n.Handler())
	tip := blocks[len(blocks)-1]
	waitFor(t, "the store at the node's tip", func() bool { return n.Store().Published().Tip.Hash == tip.Hash })
	if code, body := do(t, srv, http.MethodGet, "/readyz", "", nil); code != http.StatusOK {
		t.Fatalf("/readyz at the tip: %d %s", code, body)
	}
	if p, found, err := n.Store().PointAt(tip.Height); err != nil || !found || p.Slot != tip.Slot {
		t.Fatalf("PointAt(%d) = %v %v %v, want slot %d", tip.Height, p, found, err, tip.Slot)
	}
	_, metrics := do(t, srv, http.MethodGet, "/metrics", "", nil)
	for _, want := range []string{
		"utxo_cache_cardano_follow_blocks_applied_total " + strconv.FormatFloat(float64(len(blocks)-1), 'g', -1, 64),
		"utxo_cache_cardano_follow_tip_slot " + strconv.FormatFloat(float64(tip.Slot), 'g', -1, 64),
		`utxo_cache_cardano_follow_errors_total{reason="rollback_too_deep"} 0`,
	} {
		if !strings.Contains(metrics, want+"\n") {
			t.Errorf("/metrics lacks %q", want)
		}
	}

	fn.Rollback(15) // deeper than the window of 10
	waitFor(t, "/readyz 503", func() bool {
		code, _ := do(t, srv, http.MethodGet, "/readyz", "", nil)
		return code == http.StatusServiceUnavailable
	})
	if _, body := do(t, srv, http.MethodGet, "/readyz", "", nil); !strings.Contains(body, "rollback window") {
		t.Errorf("/readyz gives no reason: %s", body)
	}
	if got := n.Store().Published().Tip; got.Hash != tip.Hash {
		t.Errorf("a rollback too deep moved the tip to %s", got)
	}

	if err := n.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv.Close()
	if err := n.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	fn.Close()
}

// BenchmarkCardanoAnnounceToVisible measures, for each block the fake node
// announces at its tip, the time from the announcement (Extend) to the block
// being the store's published tip (what readers see, and what X-Commit-Seq
// reports), with a node assembled by node.Start. Run it with -benchtime=Nx,
// N at most 900 (the blocks of chunk 01836 after the first ten).
func BenchmarkCardanoAnnounceToVisible(b *testing.B) {
	blocks := n2ntest.ChunkBlocks(b, cardanoFixtures, "01836", 0)
	fn := n2ntest.NewNode(b, n2n.MagicPreview, blocks[:10])
	n, err := node.Start(context.Background(), cardanoConfig(b.TempDir(), fn, blocks[0], 4320))
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = n.Close(context.Background()) }()
	deadline := time.Now().Add(30 * time.Second)
	for n.Store().Published().Tip.Hash != blocks[9].Hash {
		if time.Now().After(deadline) {
			b.Fatal("no catch-up within 30s")
		}
		time.Sleep(time.Millisecond)
	}
	if b.N > len(blocks)-10 {
		b.Fatalf("-benchtime=%dx: at most %dx", b.N, len(blocks)-10)
	}
	published := make(chan chain.Tip, 1)
	n.Writer().Subscribe(publishedTips(published))
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		want := blocks[10+i]
		t0 := time.Now()
		fn.Extend(want)
		for tip := range published {
			if tip.Hash == want.Hash {
				break
			}
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(lat)
	q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(q(0.50), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
}

// publishedTips tells of every published tip, from the writer's goroutine
// (AfterPublish runs once readers see the change); a slow reader misses
// none that matter, since each tip is sent once.
type publishedTips chan chain.Tip

func (p publishedTips) Changed(*changeset.Set) {}

func (p publishedTips) AfterPublish(cs *changeset.Set) { p <- cs.NewTip }

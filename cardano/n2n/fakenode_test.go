package n2n

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"

	ouroboros "github.com/blinklabs-io/gouroboros"
	"github.com/blinklabs-io/gouroboros/cbor"
	"github.com/blinklabs-io/gouroboros/protocol/blockfetch"
	"github.com/blinklabs-io/gouroboros/protocol/chainsync"
	pcommon "github.com/blinklabs-io/gouroboros/protocol/common"

	"github.com/utxo-cache/utxo-cache/cardano"
	"github.com/utxo-cache/utxo-cache/chain"
)

// A fake Cardano node on loopback, built on gouroboros' server side: the
// handshake, ChainSync and BlockFetch servers over a real TCP listener. It
// serves a chain of real blocks (an ImmutableDB chunk of the fixtures) that
// the test changes as it goes: extend it (a block announced), roll it back,
// replace its end, and inject faults (a connection dropped in the middle
// of a block-fetch batch, garbage bytes instead of an answer).

// fakeBlock is one block the fake node serves.
type fakeBlock struct {
	era    uint
	inner  []byte // the block without its [tag, …] wrapper (BlockFetch sends it; ChainSync its header)
	slot   uint64
	hash   chain.Hash
	height uint64
	conv   *cardano.Block // the adapter's conversion, for the reference store
}

func (b *fakeBlock) point() pcommon.Point {
	return pcommon.NewPoint(b.slot, append([]byte(nil), b.hash[:]...))
}

// chunkBlocks reads the fixture chunk name (consecutive blocks of one
// chain) and returns its first n blocks (all when n is 0). The facts the
// node announces (slot, hash, block number) come from the adapter, which
// the chunk's own secondary index checks in package cardano's tests.
func chunkBlocks(tb testing.TB, name string, n int) []fakeBlock {
	tb.Helper()
	dir := filepath.Join("..", "..", "testdata", "cardano")
	data, err := os.ReadFile(filepath.Join(dir, name+".chunk"))
	if err != nil {
		tb.Fatal(err)
	}
	sec, err := os.ReadFile(filepath.Join(dir, name+".secondary"))
	if err != nil {
		tb.Fatal(err)
	}
	c, err := cardano.SplitChunk(data, sec)
	if err != nil {
		tb.Fatal(err)
	}
	a, err := cardano.NewAdapter(cardano.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	if n == 0 || n > len(c.Blocks) {
		n = len(c.Blocks)
	}
	out := make([]fakeBlock, n)
	for i, tagged := range c.Blocks[:n] {
		var parts []cbor.RawMessage
		if _, err := cbor.Decode(tagged, &parts); err != nil || len(parts) != 2 {
			tb.Fatalf("block %d: not [tag, block]: %v", i, err)
		}
		var era uint
		if _, err := cbor.Decode(parts[0], &era); err != nil {
			tb.Fatal(err)
		}
		b, err := a.Convert(tagged)
		if err != nil {
			tb.Fatal(err)
		}
		out[i] = fakeBlock{era: era, inner: parts[1], slot: b.Slot, hash: b.Chain.Hash, height: b.Chain.Height, conv: b}
	}
	return out
}

// fakeNode is the node. Its chain is blocks[0..]; blocks[0] is the start
// point the follower's empty store intersects at.
type fakeNode struct {
	t     testing.TB
	ln    net.Listener
	magic uint32

	mu struct {
		sync.Mutex
		blocks []fakeBlock
		conns  map[*fakeConn]struct{}
		// Faults, each used once: drop the connection after sending this
		// many blocks of the next batch (-1: none); answer the next
		// RequestNext with garbage bytes.
		dropAfter   int
		garbageNext bool
		fetches     int
	}
	wg sync.WaitGroup
}

type fakeConn struct {
	raw  net.Conn
	conn *ouroboros.Connection
	// Guarded by fakeNode.mu.
	cursor   int  // index of the last block the client has
	rollTo   int  // pending roll backward to this index; -1: none
	awaiting bool // the client waits for a block (AwaitReply sent)
}

func newFakeNode(t testing.TB, blocks []fakeBlock) *fakeNode {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := &fakeNode{t: t, ln: ln, magic: MagicPreview}
	n.mu.blocks = append([]fakeBlock(nil), blocks...)
	n.mu.conns = map[*fakeConn]struct{}{}
	n.mu.dropAfter = -1
	n.wg.Add(1)
	go n.accept()
	t.Cleanup(n.close)
	return n
}

func (n *fakeNode) addr() string { return n.ln.Addr().String() }

func (n *fakeNode) close() {
	_ = n.ln.Close()
	n.mu.Lock()
	conns := make([]*fakeConn, 0, len(n.mu.conns))
	for c := range n.mu.conns {
		conns = append(conns, c)
	}
	n.mu.Unlock()
	for _, c := range conns {
		_ = c.raw.Close()
	}
	n.wg.Wait()
}

func (n *fakeNode) accept() {
	defer n.wg.Done()
	for {
		raw, err := n.ln.Accept()
		if err != nil {
			return
		}
		n.wg.Add(1)
		go n.serve(raw)
	}
}

// serve runs one connection until it fails.
func (n *fakeNode) serve(raw net.Conn) {
	defer n.wg.Done()
	fc := &fakeConn{raw: raw, cursor: -1, rollTo: -1}
	errc := make(chan error, 10)
	conn, err := ouroboros.NewConnection(
		ouroboros.WithConnection(raw),
		ouroboros.WithNetworkMagic(n.magic),
		ouroboros.WithNodeToNode(true),
		ouroboros.WithServer(true),
		ouroboros.WithErrorChan(errc),
		ouroboros.WithChainSyncConfig(chainsync.NewConfig(
			chainsync.WithFindIntersectFunc(func(_ chainsync.CallbackContext, pts []pcommon.Point) (pcommon.Point, chainsync.Tip, error) {
				return n.findIntersect(fc, pts)
			}),
			chainsync.WithRequestNextFunc(func(ctx chainsync.CallbackContext) error { return n.requestNext(fc, ctx.Server) }),
		)),
		ouroboros.WithBlockFetchConfig(mustBlockFetch(blockfetch.WithRequestRangeFunc(func(ctx blockfetch.CallbackContext, start, end pcommon.Point) error {
			return n.requestRange(fc, ctx.Server, start, end)
		}))),
	)
	if err != nil {
		_ = raw.Close()
		return
	}
	fc.conn = conn
	n.mu.Lock()
	n.mu.conns[fc] = struct{}{}
	n.mu.Unlock()
	for range errc { // until the connection shuts down (it closes errc)
		_ = conn.Close()
	}
	n.mu.Lock()
	delete(n.mu.conns, fc)
	n.mu.Unlock()
}

func mustBlockFetch(opts ...blockfetch.BlockFetchOptionFunc) blockfetch.Config {
	c, err := blockfetch.NewConfig(opts...)
	if err != nil {
		panic(err)
	}
	return c
}

// tipLocked is the node's tip.
func (n *fakeNode) tipLocked() chainsync.Tip {
	b := &n.mu.blocks[len(n.mu.blocks)-1]
	return chainsync.Tip{Point: b.point(), BlockNumber: b.height}
}

func (n *fakeNode) indexLocked(p pcommon.Point) int {
	for i := range n.mu.blocks {
		b := &n.mu.blocks[i]
		if b.slot == p.Slot && string(b.hash[:]) == string(p.Hash) {
			return i
		}
	}
	return -1
}

func (n *fakeNode) findIntersect(fc *fakeConn, pts []pcommon.Point) (pcommon.Point, chainsync.Tip, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, p := range pts {
		if i := n.indexLocked(p); i >= 0 {
			fc.cursor, fc.rollTo, fc.awaiting = i, i, false
			return p, n.tipLocked(), nil
		}
	}
	return pcommon.Point{}, n.tipLocked(), chainsync.ErrIntersectNotFound
}

// requestNext answers as a node does: a pending roll backward first, then
// the next block, else "await" (and the block when one is announced).
func (n *fakeNode) requestNext(fc *fakeConn, srv *chainsync.Server) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.mu.garbageNext {
		n.mu.garbageNext = false
		// Bytes that are no mux segment the client expects: a header for
		// an unknown mini-protocol with a body that is not CBOR.
		_, _ = fc.raw.Write([]byte{0, 0, 0, 1, 0x7f, 0x7f, 0, 8, 0xff, 0xfe, 0xfd, 0xfc, 0xfb, 0xfa, 0xf9, 0xf8})
		return nil
	}
	return n.nextLocked(fc, srv)
}

func (n *fakeNode) nextLocked(fc *fakeConn, srv *chainsync.Server) error {
	switch {
	case fc.rollTo >= 0:
		i := fc.rollTo
		fc.rollTo, fc.cursor = -1, i
		return srv.RollBackward(n.mu.blocks[i].point(), n.tipLocked())
	case fc.cursor+1 < len(n.mu.blocks):
		fc.cursor++
		b := &n.mu.blocks[fc.cursor]
		return srv.RollForward(b.era, b.inner, n.tipLocked()) // the server sends the block's header
	default:
		fc.awaiting = true
		return srv.AwaitReply()
	}
}

// wake answers every client that awaits a block, after a change of the
// chain; the caller holds n.mu.
func (n *fakeNode) wakeLocked() {
	for fc := range n.mu.conns {
		if fc.awaiting && (fc.rollTo >= 0 || fc.cursor+1 < len(n.mu.blocks)) {
			fc.awaiting = false
			if err := n.nextLocked(fc, fc.conn.ChainSync().Server); err != nil {
				_ = fc.raw.Close()
			}
		}
	}
}

// extend announces blocks at the node's tip.
func (n *fakeNode) extend(bs ...fakeBlock) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.mu.blocks = append(n.mu.blocks, bs...)
	n.wakeLocked()
}

// rollback removes the node's last k blocks: every client past the new
// tip is rolled back to it.
func (n *fakeNode) rollback(k int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.mu.blocks = n.mu.blocks[:len(n.mu.blocks)-k]
	last := len(n.mu.blocks) - 1
	for fc := range n.mu.conns {
		if fc.cursor > last || fc.rollTo > last {
			fc.rollTo = last
		}
	}
	n.wakeLocked()
}

func (n *fakeNode) setDropAfter(k int) { n.mu.Lock(); n.mu.dropAfter = k; n.mu.Unlock() }
func (n *fakeNode) setGarbageNext()    { n.mu.Lock(); n.mu.garbageNext = true; n.mu.Unlock() }

// requestRange serves a block-fetch range of the current chain.
func (n *fakeNode) requestRange(fc *fakeConn, srv *blockfetch.Server, start, end pcommon.Point) error {
	n.mu.Lock()
	i, j := n.indexLocked(start), n.indexLocked(end)
	var bs []fakeBlock
	if i >= 0 && j >= i {
		bs = append(bs, n.mu.blocks[i:j+1]...)
	}
	drop := n.mu.dropAfter
	n.mu.dropAfter = -1
	n.mu.fetches++
	n.mu.Unlock()
	if len(bs) == 0 {
		return srv.NoBlocks()
	}
	if err := srv.StartBatch(); err != nil {
		return err
	}
	for k := range bs {
		if k == drop {
			_ = fc.raw.Close() // the connection drops mid-batch
			return errors.New("fake node: dropped")
		}
		if err := srv.Block(bs[k].era, bs[k].inner); err != nil {
			return fmt.Errorf("fake node: send block: %w", err)
		}
	}
	return srv.BatchDone()
}

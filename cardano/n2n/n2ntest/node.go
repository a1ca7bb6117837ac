// Package n2ntest is a fake Cardano node for tests: the node-to-node
// handshake, ChainSync and BlockFetch servers of gouroboros over a real TCP
// listener on loopback, serving a chain of real blocks (the fixtures'
// ImmutableDB chunks) that the test changes as it goes: extend it (a block
// announced), roll it back, and inject faults (a connection dropped in the
// middle of a block-fetch batch, garbage bytes instead of an answer).
//
// It is for tests only, as net/http/httptest is: nothing of the service
// imports it.
package n2ntest

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"

	ouroboros "github.com/blinklabs-io/gouroboros"
	"github.com/blinklabs-io/gouroboros/cbor"
	"github.com/blinklabs-io/gouroboros/ledger"
	"github.com/blinklabs-io/gouroboros/protocol/blockfetch"
	"github.com/blinklabs-io/gouroboros/protocol/chainsync"
	pcommon "github.com/blinklabs-io/gouroboros/protocol/common"
	"golang.org/x/crypto/blake2b"

	"github.com/utxo-cache/utxo-cache/cardano"
	"github.com/utxo-cache/utxo-cache/chain"
)

// Block is one block the fake node serves.
type Block struct {
	Era    uint
	Inner  []byte // the block without its [tag, …] wrapper (BlockFetch sends it; ChainSync its header)
	Slot   uint64
	Hash   chain.Hash
	Height uint64
	Conv   *cardano.Block // the adapter's conversion, for a reference store
}

func (b *Block) point() pcommon.Point {
	return pcommon.NewPoint(b.Slot, append([]byte(nil), b.Hash[:]...))
}

// ChunkBlocks reads the ImmutableDB chunk name (name.chunk and
// name.secondary in dir: consecutive blocks of one chain) and returns its
// first n blocks (all when n is 0). The facts the
// node announces (slot, hash, block number) come from the adapter, which
// the chunk's own secondary index checks in package cardano's tests.
func ChunkBlocks(tb testing.TB, dir, name string, n int) []Block {
	tb.Helper()
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
	out := make([]Block, n)
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
		out[i] = Block{Era: era, Inner: parts[1], Slot: b.Slot, Hash: b.Chain.Hash, Height: b.Chain.Height, Conv: b}
	}
	return out
}

// Node is a fake node serving one chain to any number of connections. Its
// chain is blocks[0..]; blocks[0] is the point a follower's empty store
// starts at. It answers as a node does: a roll backward to the
// intersection first, then the blocks in order, then "await" until a block
// is announced (Extend) or the chain shrinks (Rollback: clients past the
// new tip are rolled back to it). Its methods are safe for concurrent use.
type Node struct {
	ln     net.Listener
	magic  uint32
	origin bool // the chain starts at the origin: blocks[0] is its first block

	mu struct {
		sync.Mutex
		blocks []Block
		conns  map[*fakeConn]struct{}
		// Faults, each used once: drop the connection, inside a batch,
		// after sending this many more blocks (-1: none); answer the next
		// RequestNext with garbage bytes.
		dropAfter   int
		garbageNext bool
	}
	wg sync.WaitGroup
}

type fakeConn struct {
	raw  net.Conn
	conn *ouroboros.Connection
	// Guarded by Node.mu.
	cursor   int  // index of the last block the client has
	rollTo   int  // pending roll backward to this index; -1: none
	toOrigin bool // pending roll backward to the origin
	awaiting bool // the client waits for a block (AwaitReply sent)
}

// NewNode starts a node of network magic serving blocks; blocks[0] is the
// point a follower's empty store starts at. It stops with the test.
func NewNode(t testing.TB, magic uint32, blocks []Block) *Node {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := &Node{ln: ln, magic: magic}
	n.mu.blocks = append([]Block(nil), blocks...)
	n.mu.conns = map[*fakeConn]struct{}{}
	n.mu.dropAfter = -1
	n.wg.Add(1)
	go n.accept()
	t.Cleanup(n.Close)
	return n
}

// NewOriginNode starts a node of network magic serving a chain that starts
// at the origin: blocks[0] is the chain's first block, and a client that
// offers the origin is rolled back to it and then sent blocks[0]. It stops
// with the test.
func NewOriginNode(t testing.TB, magic uint32, blocks []Block) *Node {
	n := NewNode(t, magic, blocks)
	n.mu.Lock()
	n.origin = true
	n.mu.Unlock()
	return n
}

// Addr is the node's HOST:PORT.
func (n *Node) Addr() string { return n.ln.Addr().String() }

// Close stops the node and drops its connections.
func (n *Node) Close() {
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

func (n *Node) accept() {
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
func (n *Node) serve(raw net.Conn) {
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
func (n *Node) tipLocked() chainsync.Tip {
	b := &n.mu.blocks[len(n.mu.blocks)-1]
	return chainsync.Tip{Point: b.point(), BlockNumber: b.Height}
}

func (n *Node) indexLocked(p pcommon.Point) int {
	for i := range n.mu.blocks {
		b := &n.mu.blocks[i]
		if b.Slot == p.Slot && string(b.Hash[:]) == string(p.Hash) {
			return i
		}
	}
	return -1
}

func (n *Node) findIntersect(fc *fakeConn, pts []pcommon.Point) (pcommon.Point, chainsync.Tip, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, p := range pts {
		if len(p.Hash) == 0 && n.origin {
			fc.cursor, fc.rollTo, fc.toOrigin, fc.awaiting = -1, -1, true, false
			return p, n.tipLocked(), nil
		}
		if i := n.indexLocked(p); i >= 0 {
			fc.cursor, fc.rollTo, fc.toOrigin, fc.awaiting = i, i, false, false
			return p, n.tipLocked(), nil
		}
	}
	return pcommon.Point{}, n.tipLocked(), chainsync.ErrIntersectNotFound
}

// requestNext answers as a node does: a pending roll backward first, then
// the next block, else "await" (and the block when one is announced).
func (n *Node) requestNext(fc *fakeConn, srv *chainsync.Server) error {
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

func (n *Node) nextLocked(fc *fakeConn, srv *chainsync.Server) error {
	switch {
	case fc.toOrigin:
		fc.toOrigin, fc.cursor = false, -1
		return srv.RollBackward(pcommon.NewPointOrigin(), n.tipLocked())
	case fc.rollTo >= 0:
		i := fc.rollTo
		fc.rollTo, fc.cursor = -1, i
		return srv.RollBackward(n.mu.blocks[i].point(), n.tipLocked())
	case fc.cursor+1 < len(n.mu.blocks):
		fc.cursor++
		b := &n.mu.blocks[fc.cursor]
		if b.Era <= ledger.BlockTypeByronMain {
			// The library's server announces no Byron block in node-to-node
			// mode: the header is wrapped with its Byron kind here (0: a
			// boundary block, 1: a main block), as a node sends it.
			msg, err := chainsync.NewMsgRollForwardNtN(ledger.BlockHeaderTypeByron, b.Era, b.Inner, n.tipLocked())
			if err != nil {
				return err
			}
			return srv.SendMessage(msg)
		}
		return srv.RollForward(b.Era, b.Inner, n.tipLocked()) // the server sends the block's header
	default:
		fc.awaiting = true
		return srv.AwaitReply()
	}
}

// wake answers every client that awaits a block, after a change of the
// chain; the caller holds n.mu.
func (n *Node) wakeLocked() {
	for fc := range n.mu.conns {
		if fc.awaiting && (fc.rollTo >= 0 || fc.cursor+1 < len(n.mu.blocks)) {
			fc.awaiting = false
			if err := n.nextLocked(fc, fc.conn.ChainSync().Server); err != nil {
				_ = fc.raw.Close()
			}
		}
	}
}

// Extend announces blocks at the node's tip: a client waiting for a block
// is sent the first at once.
func (n *Node) Extend(bs ...Block) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.mu.blocks = append(n.mu.blocks, bs...)
	n.wakeLocked()
}

// Rollback removes the node's last k blocks: every client past the new
// tip is rolled back to it.
func (n *Node) Rollback(k int) {
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

// DropAfter makes the node drop a connection in the middle of a block-fetch
// batch, once it has sent k more blocks (in one batch or several).
func (n *Node) DropAfter(k int) { n.mu.Lock(); n.mu.dropAfter = k; n.mu.Unlock() }

// GarbageNext makes the node answer the next ChainSync request with bytes
// that are no protocol message.
func (n *Node) GarbageNext() { n.mu.Lock(); n.mu.garbageNext = true; n.mu.Unlock() }

// requestRange serves a block-fetch range of the current chain.
func (n *Node) requestRange(fc *fakeConn, srv *blockfetch.Server, start, end pcommon.Point) error {
	n.mu.Lock()
	i, j := n.indexLocked(start), n.indexLocked(end)
	var bs []Block
	if i >= 0 && j >= i {
		bs = append(bs, n.mu.blocks[i:j+1]...)
	}
	n.mu.Unlock()
	if len(bs) == 0 {
		return srv.NoBlocks()
	}
	if err := srv.StartBatch(); err != nil {
		return err
	}
	for k := range bs {
		if n.dropNow() {
			_ = fc.raw.Close() // the connection drops mid-batch
			return errors.New("fake node: dropped")
		}
		if err := srv.Block(bs[k].Era, bs[k].Inner); err != nil {
			return fmt.Errorf("fake node: send block: %w", err)
		}
	}
	return srv.BatchDone()
}

// dropNow counts a block about to be sent and reports whether the armed
// DropAfter says to drop the connection instead.
func (n *Node) dropNow() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case n.mu.dropAfter < 0:
		return false
	case n.mu.dropAfter == 0:
		n.mu.dropAfter = -1
		return true
	}
	n.mu.dropAfter--
	return false
}

// Fork returns another branch in place of orig (consecutive blocks): copies
// of them in which the first transaction of the first block pays a fee one
// lovelace different, so that its id, and the outpoints of its outputs,
// differ. Each block is re-hashed as a node would see it: the first one's
// header gets the new body hash, each later one's the new parent hash, so
// that every block passes the adapter's checks (the body hash included) and
// the branch links to orig[0]'s parent. The headers' signatures no longer
// verify; nothing here checks them.
func Fork(tb testing.TB, orig []Block) []Block {
	tb.Helper()
	a, err := cardano.NewAdapter(cardano.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	out := make([]Block, 0, len(orig))
	var oldPrev, newPrev chain.Hash
	for i, b := range orig {
		inner := append([]byte(nil), b.Inner...)
		if i == 0 {
			parts := splitArray(tb, inner)
			if len(parts) < 5 {
				tb.Fatalf("Fork: block %d has %d parts, want a Shelley-era block of 5", b.Height, len(parts))
			}
			oldHash := bodyHash(parts)
			bodies := splitArray(tb, parts[1])
			if len(bodies) == 0 {
				tb.Fatalf("Fork: block %d has no transaction", b.Height)
			}
			var fields map[uint]cbor.RawMessage
			if _, err := cbor.Decode(bodies[0], &fields); err != nil {
				tb.Fatal(err)
			}
			fee, ok := fields[2]
			if !ok {
				tb.Fatal("Fork: the transaction has no fee")
			}
			oldFee := append([]byte{0x02}, fee...)
			newFee := append([]byte(nil), oldFee...)
			newFee[len(newFee)-1] ^= 1
			body := replaceOnce(tb, bodies[0], oldFee, newFee)
			inner = replaceOnce(tb, inner, bodies[0], body)
			newHash := bodyHash(splitArray(tb, inner))
			inner = replaceOnce(tb, inner, oldHash[:], newHash[:])
		} else {
			inner = replaceOnce(tb, inner, oldPrev[:], newPrev[:])
		}
		conv, err := a.ConvertEra(cardano.Era(b.Era), inner)
		if err != nil {
			tb.Fatalf("Fork: block %d: %v", b.Height, err)
		}
		if i > 0 && conv.Chain.PrevHash != newPrev || i == 0 && conv.Chain.PrevHash != b.Conv.Chain.PrevHash {
			tb.Fatalf("Fork: block %d does not link", b.Height)
		}
		oldPrev, newPrev = b.Hash, conv.Chain.Hash
		out = append(out, Block{Era: b.Era, Inner: inner, Slot: conv.Slot, Hash: conv.Chain.Hash, Height: conv.Chain.Height, Conv: conv})
	}
	return out
}

func splitArray(tb testing.TB, data []byte) []cbor.RawMessage {
	tb.Helper()
	var parts []cbor.RawMessage
	if _, err := cbor.Decode(data, &parts); err != nil {
		tb.Fatal(err)
	}
	return parts
}

// bodyHash is a Shelley-era block's body hash: blake2b-256 over the
// blake2b-256 of each part after the header.
func bodyHash(parts []cbor.RawMessage) [32]byte {
	var cat []byte
	for _, p := range parts[1:] {
		h := blake2b.Sum256(p)
		cat = append(cat, h[:]...)
	}
	return blake2b.Sum256(cat)
}

// replaceOnce replaces the one occurrence of old in data.
func replaceOnce(tb testing.TB, data, old, repl []byte) []byte {
	tb.Helper()
	if n := bytes.Count(data, old); n != 1 {
		tb.Fatalf("Fork: %d occurrences of the %d bytes to replace, want 1", n, len(old))
	}
	return bytes.Replace(data, old, repl, 1)
}

// Renumber returns copies of orig (consecutive blocks of a Shelley-era
// chain) made into the chain that starts after parent: the first block's
// header names parent as its parent hash, the blocks are numbered first,
// first+1, …, and each is re-hashed as a node would see it (a later block's
// header names the new hash of the one before). The bodies are unchanged,
// so each passes the adapter's checks; the headers' signatures no longer
// verify, and nothing here checks them.
func Renumber(tb testing.TB, orig []Block, parent chain.Hash, first uint64) []Block {
	tb.Helper()
	a, err := cardano.NewAdapter(cardano.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	out := make([]Block, 0, len(orig))
	prev := parent
	for i, b := range orig {
		parts := splitArray(tb, b.Inner)
		if len(parts) < 5 || !bytes.Equal(joinArray(parts), b.Inner) {
			tb.Fatalf("Renumber: block %d is not a Shelley-era block of definite-length arrays", b.Height)
		}
		header := splitArray(tb, parts[0])
		if len(header) != 2 {
			tb.Fatalf("Renumber: block %d: header of %d parts, want 2", b.Height, len(header))
		}
		body := splitArray(tb, header[0])
		if len(body) < 3 || !bytes.Equal(joinArray(body), header[0]) || !bytes.Equal(joinArray(header), parts[0]) {
			tb.Fatalf("Renumber: block %d: header not of definite-length arrays", b.Height)
		}
		num, err := cbor.Encode(first + uint64(i))
		if err != nil {
			tb.Fatal(err)
		}
		ph, err := cbor.Encode(prev[:])
		if err != nil {
			tb.Fatal(err)
		}
		body[0], body[2] = num, ph
		header[0] = joinArray(body)
		parts[0] = joinArray(header)
		inner := joinArray(parts)
		conv, err := a.ConvertEra(cardano.Era(b.Era), inner)
		if err != nil {
			tb.Fatalf("Renumber: block %d: %v", b.Height, err)
		}
		if conv.Chain.PrevHash != prev || conv.Chain.Height != first+uint64(i) || conv.Slot != b.Slot {
			tb.Fatalf("Renumber: block %d converts to height %d parent %s, want %d %s", b.Height, conv.Chain.Height, conv.Chain.PrevHash, first+uint64(i), prev)
		}
		prev = conv.Chain.Hash
		out = append(out, Block{Era: b.Era, Inner: inner, Slot: conv.Slot, Hash: conv.Chain.Hash, Height: conv.Chain.Height, Conv: conv})
	}
	return out
}

// joinArray encodes items as a definite-length CBOR array.
func joinArray(items []cbor.RawMessage) []byte {
	n := uint64(len(items))
	var out []byte
	switch {
	case n < 24:
		out = []byte{0x80 | byte(n)}
	case n < 256:
		out = []byte{0x98, byte(n)}
	default:
		out = []byte{0x99, byte(n >> 8), byte(n)}
	}
	for _, it := range items {
		out = append(out, it...)
	}
	return out
}

package n2n

import (
	"bytes"
	"context"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	gcbor "github.com/blinklabs-io/gouroboros/cbor"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/crypto/blake2b"

	"github.com/utxo-cache/utxo-cache/cardano"
	"github.com/utxo-cache/utxo-cache/cardano/n2n/n2ntest"
	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
	"github.com/utxo-cache/utxo-cache/writer"
)

// originChain is a chain that starts at the origin, as the fake node
// serves it: the fixture chunk's first n blocks renumbered 1.. after a
// genesis hash (n2ntest.Renumber), with the genesis outputs of the preview
// Byron genesis file and a small Shelley genesis file written here.
type originChain struct {
	hash    chain.Hash // the genesis hash the first block names as its parent
	txs     []chain.Tx // the genesis outputs
	genesis *chain.Block
	blocks  []n2ntest.Block
}

func newOriginChain(t *testing.T, n int) originChain {
	t.Helper()
	byronFile, err := os.ReadFile(filepath.Join(fixtureDir, "preview-byron-genesis.json"))
	if err != nil {
		t.Fatal(err)
	}
	byron, err := cardano.ByronGenesisTxs(bytes.NewReader(byronFile))
	if err != nil {
		t.Fatal(err)
	}
	shelley, err := cardano.ShelleyGenesisTxs(strings.NewReader(`{"networkMagic": 2, "initialFunds": {"60` +
		strings.Repeat("11", 28) + `": 1000000, "60` + strings.Repeat("22", 28) + `": 2500000}}`))
	if err != nil || len(byron) != 8 || len(shelley) != 2 {
		t.Fatalf("genesis: %d Byron and %d Shelley outputs, %v; want 8 and 2", len(byron), len(shelley), err)
	}
	c := originChain{hash: chain.Hash(blake2b.Sum256(byronFile)), txs: append(byron, shelley...)}
	// The reference genesis block is made here from the outputs, as the
	// ledger defines it: height 0, the genesis hash, no parent.
	c.genesis = &chain.Block{Height: 0, Hash: c.hash, Txs: append([]chain.Tx(nil), c.txs...)}
	c.blocks = n2ntest.Renumber(t, n2ntest.ChunkBlocks(t, fixtureDir, testChunk, n), c.hash, 1)
	return c
}

// reference is a store built by applying the genesis block, then blocks,
// directly.
func (c originChain) reference(t *testing.T, blocks []n2ntest.Block) *disk.Store {
	t.Helper()
	ref, w := openStore(t)
	all := []*chain.Block{c.genesis}
	for i := range blocks {
		b := blocks[i].Conv.Chain
		all = append(all, &b)
	}
	for _, b := range all {
		if _, err := w.Apply(context.Background(), b); err != nil {
			t.Fatalf("reference: apply %d: %v", b.Height, err)
		}
	}
	return ref
}

// checkOrigin compares got with the reference of the genesis block and
// blocks: the state (tip, UTXO count, digest), every point, and every
// genesis output.
func (c originChain) checkOrigin(t *testing.T, got *disk.Store, blocks []n2ntest.Block) {
	t.Helper()
	ref := c.reference(t, blocks)
	gs, rs := got.State(), ref.State()
	if gs.Tip != rs.Tip || gs.UtxoCount != rs.UtxoCount || gs.Digest != rs.Digest {
		t.Fatalf("store state %+v\nreference   %+v", gs, rs)
	}
	if rs.Tip.Hash != blocks[len(blocks)-1].Hash || rs.Tip.Height != uint64(len(blocks)) {
		t.Fatalf("reference tip %s, want height %d", rs.Tip, len(blocks))
	}
	for h := uint64(0); h <= rs.Tip.Height; h++ {
		gp, gf, gerr := got.PointAt(h)
		rp, rf, rerr := ref.PointAt(h)
		if gerr != nil || rerr != nil || !gf || !rf || gp != rp {
			t.Fatalf("point at %d: %v %v %v, reference %v %v %v", h, gp, gf, gerr, rp, rf, rerr)
		}
	}
	if p, _, _ := got.PointAt(0); p.Hash != c.hash || p.Slot != 0 {
		t.Fatalf("block 0 is %v, want the genesis block %s", p, c.hash)
	}
	v, err := got.NewView()
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	for _, tx := range c.txs {
		u, _, err := v.Utxo(chain.OutPoint{TxHash: tx.Hash})
		if err != nil || u.Value != tx.Outputs[0].Value || u.Address != tx.Outputs[0].Address {
			t.Fatalf("genesis output %s#0: %+v, %v; want %d to %s", tx.Hash, u, err, tx.Outputs[0].Value, tx.Outputs[0].Address)
		}
	}
}

// followOrigin starts a follower of node over store (no start point: the
// origin) with genesis outputs txs (nil: none).
func followOrigin(t *testing.T, node *n2ntest.Node, store *disk.Store, w *writer.Writer, txs []chain.Tx) *rig {
	r := &rig{t: t, node: node, store: store, w: w, reg: prometheus.NewRegistry(), done: make(chan error, 1)}
	r.f = New(Options{
		Address: node.Addr(), Magic: MagicPreview, Genesis: txs,
		Writer: w, Points: store, Metrics: r.reg,
		BackoffMin: 5 * time.Millisecond, BackoffMax: 40 * time.Millisecond,
		BatchBlocks: 16, FlushAfter: 5 * time.Millisecond, FetchTimeout: 10 * time.Second,
		Logger: testLogger(),
	})
	ctx, cancel := context.WithCancel(context.Background())
	r.stop = cancel
	go func() { r.done <- r.f.Run(ctx) }()
	t.Cleanup(r.close)
	return r
}

// TestOriginWithGenesis: an empty store with the genesis outputs follows a
// chain from its origin: the follower seeds the genesis block (named by
// the first block's parent) before the first block, and reaches the node's
// tip with the store a direct application of the genesis block and the
// blocks would build; the blocks the node then announces follow. A
// restart over that store intersects at its tip and applies nothing twice.
func TestOriginWithGenesis(t *testing.T) {
	c := newOriginChain(t, 40)
	node := n2ntest.NewOriginNode(t, MagicPreview, c.blocks[:30])
	store, w := openStore(t)
	r := followOrigin(t, node, store, w, c.txs)
	r.waitTip(&c.blocks[29])
	for i := 30; i < 35; i++ {
		node.Extend(c.blocks[i])
		r.waitTip(&c.blocks[i])
	}
	c.checkOrigin(t, store, c.blocks[:35])
	if got := r.metric("utxo_cache_cardano_follow_blocks_applied_total"); got != 36 {
		t.Errorf("blocks_applied_total %v, want 36 (the genesis block and 35)", got)
	}
	r.close()

	r2 := followOrigin(t, node, store, w, c.txs)
	for i := 35; i < 40; i++ {
		node.Extend(c.blocks[i])
		r2.waitTip(&c.blocks[i])
	}
	c.checkOrigin(t, store, c.blocks)
	if got := r2.metric("utxo_cache_cardano_follow_blocks_applied_total"); got != 5 {
		t.Errorf("after the restart blocks_applied_total %v, want 5", got)
	}
	if got := r2.metric("utxo_cache_cardano_follow_rollbacks_total"); got != 0 {
		t.Errorf("after the restart rollbacks_total %v, want 0", got)
	}
}

// TestOriginAfterSeeding: a store that holds only the genesis block (as
// import-cardano --byron-genesis seeds it) offers the origin, which the
// node takes; the roll backward to it is a resume, and the first block
// links to the genesis block. The follower needs no genesis outputs.
func TestOriginAfterSeeding(t *testing.T) {
	c := newOriginChain(t, 30)
	node := n2ntest.NewOriginNode(t, MagicPreview, c.blocks)
	store, w := openStore(t)
	g, err := cardano.GenesisBlock(c.hash, c.txs)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Apply(context.Background(), g); err != nil {
		t.Fatal(err)
	}
	r := followOrigin(t, node, store, w, nil)
	r.waitTip(&c.blocks[len(c.blocks)-1])
	c.checkOrigin(t, store, c.blocks)
	if got := r.metric("utxo_cache_cardano_follow_rollbacks_total"); got != 0 {
		t.Errorf("rollbacks_total %v, want 0", got)
	}
	if err := r.f.Ready(); err != nil {
		t.Errorf("Ready: %v", err)
	}
}

// TestOriginRollbackToGenesis: a store of the genesis block and three
// blocks of a branch the node does not have (n2ntest.Fork) shares only the
// origin with the node: the follower rolls the store back to the genesis
// block, exactly, and follows the node's chain from there.
func TestOriginRollbackToGenesis(t *testing.T) {
	c := newOriginChain(t, 30)
	branch := n2ntest.Fork(t, c.blocks[:3])
	node := n2ntest.NewOriginNode(t, MagicPreview, c.blocks)
	store, w := openStore(t)
	g, err := cardano.GenesisBlock(c.hash, c.txs)
	if err != nil {
		t.Fatal(err)
	}
	blocks := []*chain.Block{g}
	for i := range branch {
		b := branch[i].Conv.Chain
		blocks = append(blocks, &b)
	}
	for _, b := range blocks {
		if _, err := w.Apply(context.Background(), b); err != nil {
			t.Fatal(err)
		}
	}
	r := followOrigin(t, node, store, w, nil)
	r.waitTip(&c.blocks[len(c.blocks)-1])
	c.checkOrigin(t, store, c.blocks)
	if got := r.metric("utxo_cache_cardano_follow_rollbacks_total"); got != 1 {
		t.Errorf("rollbacks_total %v, want 1", got)
	}
	// The branch's outputs are gone.
	v, err := store.NewView()
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if _, _, err := v.Utxo(chain.OutPoint{TxHash: branch[0].Conv.Chain.Txs[0].Hash}); err == nil {
		t.Errorf("the branch's output is still in the store")
	}
}

// TestOriginGenesisNeedsBlockOne: genesis outputs go before the chain's
// first main block (number 1); a chain from the origin whose first block
// has another number is refused (not linked) and the store stays empty. A
// start point with genesis outputs is an invalid option.
func TestOriginGenesisNeedsBlockOne(t *testing.T) {
	c := newOriginChain(t, 5)
	blocks := n2ntest.Renumber(t, n2ntest.ChunkBlocks(t, fixtureDir, testChunk, 5), c.hash, 0)
	node := n2ntest.NewOriginNode(t, MagicPreview, blocks)
	store, w := openStore(t)
	r := followOrigin(t, node, store, w, c.txs)
	waitFor(t, "a not-linked error", func() bool {
		return r.metric("utxo_cache_cardano_follow_errors_total", "reason", ReasonNotLinked) >= 2
	})
	if tip := store.Published().Tip; !tip.Empty {
		t.Fatalf("store tip %s, want empty", tip)
	}
	start := Point{Slot: 1}
	err := Options{Address: "127.0.0.1:1", Magic: MagicPreview, Writer: w, Points: store, Start: &start, Genesis: c.txs}.EnsureDefaults().Validate()
	if err == nil || !strings.Contains(err.Error(), "start point") {
		t.Fatalf("Validate with Start and Genesis: %v", err)
	}
}

// TestOriginMainnetBoundary: mainnet's start as a node serves it: the
// epoch-0 boundary block (the fixture genesis.block, whose parent is the
// Byron genesis hash 5f20df93…0ebb), then main blocks from number 1 (the
// chunk's blocks renumbered after the boundary block). With mainnet's
// Byron genesis file, the follower seeds the genesis block under the hash
// the boundary block names, and block 1 links to it through the linker.
func TestOriginMainnetBoundary(t *testing.T) {
	hexBlock, err := os.ReadFile(filepath.Join(fixtureDir, "genesis.block"))
	if err != nil {
		t.Fatal(err)
	}
	tagged, err := hex.DecodeString(strings.TrimSpace(string(hexBlock)))
	if err != nil {
		t.Fatal(err)
	}
	a, err := cardano.NewAdapter(cardano.Options{})
	if err != nil {
		t.Fatal(err)
	}
	conv, err := a.Convert(tagged)
	if err != nil || !conv.Boundary {
		t.Fatalf("genesis.block: %v, boundary %v", err, conv != nil && conv.Boundary)
	}
	var parts []gcbor.RawMessage
	if _, err := gcbor.Decode(tagged, &parts); err != nil || len(parts) != 2 {
		t.Fatalf("genesis.block is not [tag, block]: %v", err)
	}
	ebb := n2ntest.Block{Era: uint(conv.Era), Inner: parts[1], Slot: conv.Slot, Hash: conv.Chain.Hash, Height: conv.Chain.Height, Conv: conv}
	wantHash, _ := chain.ParseHash("5f20df933584822601f9e3f8c024eb5eb252fe8cefb24d1317dc3d432e940ebb")
	if conv.Chain.PrevHash != wantHash {
		t.Fatalf("the boundary block's parent is %s, want mainnet's genesis hash", conv.Chain.PrevHash)
	}
	byronFile, err := os.ReadFile(filepath.Join(fixtureDir, "mainnet-byron-genesis.json"))
	if err != nil {
		t.Fatal(err)
	}
	txs, err := cardano.ByronGenesisTxs(bytes.NewReader(byronFile))
	if err != nil || len(txs) != 14505 {
		t.Fatalf("mainnet genesis: %d outputs, %v", len(txs), err)
	}
	c := originChain{hash: wantHash, txs: txs, genesis: &chain.Block{Height: 0, Hash: wantHash, Txs: append([]chain.Tx(nil), txs...)}}
	c.blocks = n2ntest.Renumber(t, n2ntest.ChunkBlocks(t, fixtureDir, testChunk, 20), ebb.Hash, 1)
	node := n2ntest.NewOriginNode(t, MagicPreview, append([]n2ntest.Block{ebb}, c.blocks...))
	store, w := openStore(t)
	r := followOrigin(t, node, store, w, txs)
	r.waitTip(&c.blocks[len(c.blocks)-1])
	// The reference applies block 1 as the linker must give it: with the
	// boundary block's parent, the genesis hash, as its prev_hash.
	want := slices.Clone(c.blocks)
	first := *want[0].Conv
	first.Chain.PrevHash = wantHash
	want[0].Conv = &first
	c.checkOrigin(t, store, want)
	if p, _, _ := store.PointAt(1); p.Hash != c.blocks[0].Hash {
		t.Fatalf("block 1 is %v", p)
	}

	// A store seeded with the genesis block alone (import-cardano
	// --byron-genesis) resumes at the origin: the boundary block links to
	// the genesis block (its parent, same number), then block 1.
	seeded, sw := openStore(t)
	g, err := cardano.GenesisBlock(wantHash, txs)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sw.Apply(context.Background(), g); err != nil {
		t.Fatal(err)
	}
	r2 := followOrigin(t, node, seeded, sw, nil)
	r2.waitTip(&c.blocks[len(c.blocks)-1])
	c.checkOrigin(t, seeded, want)
}

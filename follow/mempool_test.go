package follow

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/utxo-cache/utxo-cache/bitcoin"
	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
	"github.com/utxo-cache/utxo-cache/writer"
)

// A mempool transaction as the fake node serves it, built by hand in
// Bitcoin's serialization (no witness): what the mirror posts is exactly
// these bytes, and the txid is computed here, independently of the adapter.
type memTx struct {
	txid    chain.Hash
	raw     []byte
	inputs  []chain.OutPoint
	outputs int
	depends []chain.Hash // in-mempool parents, for the verbose listing
}

// newMemTx serializes a version-2 transaction spending inputs (empty
// scriptSigs) to n P2PKH outputs of 1000 satoshis each.
func newMemTx(inputs []chain.OutPoint, n int, tag byte) *memTx {
	var b []byte
	b = binary.LittleEndian.AppendUint32(b, 2)
	b = append(b, byte(len(inputs)))
	for _, in := range inputs {
		for i := 31; i >= 0; i-- { // wire order is the display hash reversed
			b = append(b, in.TxHash[i])
		}
		b = binary.LittleEndian.AppendUint32(b, in.Index)
		b = append(b, 0)                      // scriptSig length
		b = append(b, 0xff, 0xff, 0xff, 0xff) // sequence
	}
	b = append(b, byte(n))
	for i := 0; i < n; i++ {
		b = binary.LittleEndian.AppendUint64(b, 1000)
		script := append([]byte{0x76, 0xa9, 20}, make([]byte, 20)...)
		script[3], script[4] = tag, byte(i)
		script = append(script, 0x88, 0xac)
		b = append(b, byte(len(script)))
		b = append(b, script...)
	}
	b = binary.LittleEndian.AppendUint32(b, 0) // locktime
	first := sha256.Sum256(b)
	second := sha256.Sum256(first[:])
	var id chain.Hash
	for i := range id {
		id[i] = second[31-i]
	}
	return &memTx{txid: id, raw: b, inputs: inputs, outputs: n}
}

func coinbaseOf(b *nodeBlock) chain.OutPoint {
	return chain.OutPoint{TxHash: b.block.Txs[0].Hash, Index: 0}
}

// mempoolState is the fake node's mempool: what /rest/mempool/contents.json
// lists (modern: txids and sequence; legacy: the verbose object) and
// /rest/tx/<txid>.bin serves.
type mempoolState struct {
	txs    []*memTx
	seq    uint64
	legacy bool
	txGets int
}

// setMempool replaces the node's mempool, raising its sequence.
func (n *fakeNode) setMempool(txs ...*memTx) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.mempool.txs = txs
	n.mempool.seq += uint64(len(txs)) + 1
}

func (n *fakeNode) txGets() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.mempool.txGets
}

// serveMempool answers the two mempool endpoints; false for another path.
func (n *fakeNode) serveMempool(w http.ResponseWriter, r *http.Request) bool {
	n.mu.Lock()
	mp := n.mempool
	txs := slices.Clone(mp.txs)
	if strings.HasPrefix(r.URL.Path, "/rest/tx/") {
		n.mempool.txGets++
	}
	n.mu.Unlock()
	switch path := r.URL.Path; {
	case path == "/rest/mempool/contents.json":
		if mp.legacy {
			v := map[string]any{}
			for _, tx := range txs {
				deps := []string{}
				for _, d := range tx.depends {
					deps = append(deps, d.String())
				}
				v[tx.txid.String()] = map[string]any{"vsize": len(tx.raw), "depends": deps}
			}
			writeJSON(w, v)
			return true
		}
		if r.URL.Query().Get("verbose") != "false" || r.URL.Query().Get("mempool_sequence") != "true" {
			http.Error(w, "the mirror must ask for the txid listing with its sequence", http.StatusBadRequest)
			return true
		}
		ids := []string{}
		for _, tx := range txs {
			ids = append(ids, tx.txid.String())
		}
		writeJSON(w, map[string]any{"txids": ids, "mempool_sequence": mp.seq})
		return true
	case strings.HasPrefix(path, "/rest/tx/") && strings.HasSuffix(path, ".bin"):
		h, err := chain.ParseHash(strings.TrimSuffix(strings.TrimPrefix(path, "/rest/tx/"), ".bin"))
		if err != nil {
			http.Error(w, "Invalid hash", http.StatusBadRequest)
			return true
		}
		for _, tx := range txs {
			if tx.txid == h {
				w.Header().Set("Content-Type", "application/octet-stream")
				w.Write(tx.raw)
				return true
			}
		}
		http.Error(w, h.String()+" not found", http.StatusNotFound)
		return true
	}
	return false
}

// modelPending is the pending set's rules as the contract states them,
// kept here independently of the writer: inputs live in the store or
// outputs of pending transactions, one pending spender per outpoint,
// replace evicting the conflicting transactions and their descendants.
type modelPending struct {
	st    *disk.Store
	known map[chain.Hash]*memTx // by txid: what the test built

	mu       sync.Mutex
	pending  map[chain.Hash]*memTx
	order    []chain.Hash // posting order of pending ones
	spender  map[chain.OutPoint]chain.Hash
	refused  int // posts refused for an unknown input
	withdraw []withdrawal
}

type withdrawal struct {
	txid chain.Hash
	tip  chain.Tip // the store's tip when it was withdrawn
}

var errConflict = errors.New("model: input spent by another pending transaction")

func newModelPending(st *disk.Store, txs ...*memTx) *modelPending {
	m := &modelPending{st: st, known: map[chain.Hash]*memTx{}, pending: map[chain.Hash]*memTx{}, spender: map[chain.OutPoint]chain.Hash{}}
	for _, tx := range txs {
		m.known[tx.txid] = tx
	}
	return m
}

func (m *modelPending) liveConfirmed(op chain.OutPoint) bool {
	v, err := m.st.NewView()
	if err != nil {
		return false
	}
	defer v.Close()
	_, spent, err := v.Utxo(op)
	return err == nil && spent == nil
}

// Post checks the adapter's conversion against what the test built (the
// txid computed here, the inputs in order, the output count), then applies
// the rules.
func (m *modelPending) Post(_ context.Context, p chain.PendingPost) (writer.PendingResult, error) {
	res := writer.PendingResult{TxHash: p.Tx.Hash}
	replace := p.Replace
	tx := m.known[p.Tx.Hash]
	if tx == nil {
		return res, fmt.Errorf("model: a transaction the test did not build: %s", p.Tx.Hash)
	}
	if !slices.Equal(p.Tx.Inputs, tx.inputs) || len(p.Tx.Outputs) != tx.outputs {
		return res, fmt.Errorf("model: %s converted to inputs %v and %d outputs, built with %v and %d", p.Tx.Hash, p.Tx.Inputs, len(p.Tx.Outputs), tx.inputs, tx.outputs)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.pending[tx.txid]; ok {
		return res, nil
	}
	for _, in := range tx.inputs {
		parent, ok := m.pending[in.TxHash]
		if !(ok && int(in.Index) < parent.outputs) && !m.liveConfirmed(in) {
			m.refused++
			return res, fmt.Errorf("%w: %s", chain.ErrUnknownInput, in)
		}
		if s, ok := m.spender[in]; ok && !replace {
			return res, fmt.Errorf("%w: %s spent by %s", errConflict, in, s)
		}
	}
	for _, in := range tx.inputs {
		if s, ok := m.spender[in]; ok {
			m.evictLocked(s)
		}
	}
	m.pending[tx.txid] = tx
	m.order = append(m.order, tx.txid)
	for _, in := range tx.inputs {
		m.spender[in] = tx.txid
	}
	res.Changed = true
	return res, nil
}

func (m *modelPending) Withdraw(_ context.Context, txid chain.Hash) (writer.PendingResult, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.pending[txid]; !ok {
		return writer.PendingResult{TxHash: txid}, nil
	}
	m.withdraw = append(m.withdraw, withdrawal{txid: txid, tip: m.st.State().Tip})
	m.evictLocked(txid)
	return writer.PendingResult{TxHash: txid, Changed: true}, nil
}

// evictLocked removes txid and its descendants.
func (m *modelPending) evictLocked(txid chain.Hash) {
	tx := m.pending[txid]
	if tx == nil {
		return
	}
	delete(m.pending, txid)
	m.order = slices.DeleteFunc(m.order, func(h chain.Hash) bool { return h == txid })
	for _, in := range tx.inputs {
		delete(m.spender, in)
	}
	for i := 0; i < tx.outputs; i++ {
		if s, ok := m.spender[chain.OutPoint{TxHash: txid, Index: uint32(i)}]; ok {
			m.evictLocked(s)
		}
	}
}

// holds reports whether the pending set is exactly txs, in posting order.
func (m *modelPending) holds(txs ...*memTx) func() bool {
	return func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		if len(m.order) != len(txs) {
			return false
		}
		for i, tx := range txs {
			if m.order[i] != tx.txid {
				return false
			}
		}
		return true
	}
}

func (m *modelPending) stats() (refused int, withdrawn []withdrawal) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.refused, slices.Clone(m.withdraw)
}

// TestMempoolMirror: additions (a child listed before its parent), a
// replacement by fee that drops the replaced transaction's child, an
// eviction, and an unchanged mempool that costs no transaction fetch.
func TestMempoolMirror(t *testing.T) {
	blocks := loadBlocks(t, "blk_0_to_4.dat.bz2", 0, 5)
	// Live at the fixture's tip: the coinbases of blocks 3 and 4, and the
	// first output of block 3's second transaction.
	a := newMemTx([]chain.OutPoint{coinbaseOf(blocks[3])}, 2, 1)
	b := newMemTx([]chain.OutPoint{{TxHash: a.txid, Index: 1}}, 1, 2)
	a2 := newMemTx([]chain.OutPoint{coinbaseOf(blocks[3]), coinbaseOf(blocks[4])}, 1, 3) // replaces a (and so b)
	c := newMemTx([]chain.OutPoint{{TxHash: blocks[3].block.Txs[1].Hash, Index: 0}}, 1, 4)

	node, srv := newFakeNode(t, blocks)
	st, w := newStore(t, disk.Options{})
	model := newModelPending(st, a, b, a2, c)
	node.setMempool(b, a) // the child first: its post waits for its parent's
	r := start(t, srv.URL, st, w, func(o *Options) {
		o.Mempool = model
		o.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})

	waitFor(t, "a, then b pending", model.holds(a, b))
	if refused, _ := model.stats(); refused == 0 {
		t.Error("b, listed before its parent, was never refused: the test does not exercise the retry")
	}

	node.setMempool(a2, c)
	waitFor(t, "a2 and c pending, a and b gone", model.holds(a2, c))
	if _, wd := model.stats(); len(wd) != 2 || wd[0].txid != b.txid || wd[1].txid != a.txid {
		t.Errorf("withdrawals %v: want b, then its parent a (replaced)", wd)
	}

	node.setMempool(c)
	waitFor(t, "a2 withdrawn (evicted)", model.holds(c))

	// Unchanged: further polls list the mempool and fetch no transaction.
	gets := node.txGets()
	polls := node.requestCount()
	waitFor(t, "ten more requests", func() bool { return node.requestCount() > polls+10 })
	if got := node.txGets(); got != gets {
		t.Errorf("an unchanged mempool cost %d transaction fetches", got-gets)
	}
	if got := r.metric(t, "utxo_cache_follow_mempool_txs"); got != 1 {
		t.Errorf("utxo_cache_follow_mempool_txs = %v, want 1", got)
	}
	if got := r.metric(t, "utxo_cache_follow_mempool_withdrawn_total"); got != 3 {
		t.Errorf("utxo_cache_follow_mempool_withdrawn_total = %v, want 3", got)
	}
}

// TestMempoolMirrorLegacy: a node before Core 25 answers the verbose
// listing; its "depends" order parents first, so no post is refused.
func TestMempoolMirrorLegacy(t *testing.T) {
	blocks := loadBlocks(t, "blk_0_to_4.dat.bz2", 0, 5)
	a := newMemTx([]chain.OutPoint{coinbaseOf(blocks[3])}, 2, 1)
	b := newMemTx([]chain.OutPoint{{TxHash: a.txid, Index: 0}}, 1, 2)
	b.depends = []chain.Hash{a.txid}
	c := newMemTx([]chain.OutPoint{{TxHash: b.txid, Index: 0}, {TxHash: a.txid, Index: 1}}, 1, 3)
	c.depends = []chain.Hash{b.txid, a.txid}

	node, srv := newFakeNode(t, blocks)
	node.mu.Lock()
	node.mempool.legacy = true
	node.mu.Unlock()
	st, w := newStore(t, disk.Options{})
	model := newModelPending(st, a, b, c)
	node.setMempool(c, b, a)
	start(t, srv.URL, st, w, func(o *Options) {
		o.Mempool = model
		o.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	waitFor(t, "a, b, c pending in dependency order", model.holds(a, b, c))
	if refused, _ := model.stats(); refused != 0 {
		t.Errorf("%d posts refused: the verbose listing's depends should order parents first", refused)
	}
}

// TestMempoolMirrorWaitsForBlock: a transaction spending an output of a
// block the store does not have yet waits, and is posted once the follower
// applies that block; a block arriving between the listing and the check
// after it defers withdrawals to after the block is applied.
func TestMempoolMirrorWaitsForBlock(t *testing.T) {
	main, branch := reorgFixtures(t)
	onBranch := chainOf(main[:3], branch)                        // 0,1,2,3A,4A,5A
	d := newMemTx([]chain.OutPoint{coinbaseOf(branch[2])}, 1, 5) // spends 5A's coinbase
	// Block 3's second transaction is on both branches: its output is live
	// before the switch and after it.
	e := newMemTx([]chain.OutPoint{{TxHash: main[3].block.Txs[1].Hash, Index: 0}}, 1, 6)

	node, srv := newFakeNode(t, main)
	st, w := newStore(t, disk.Options{})
	model := newModelPending(st, d, e)
	node.setMempool(d, e)
	start(t, srv.URL, st, w, func(o *Options) {
		o.Mempool = model
		o.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	waitFor(t, "e pending, d waiting", model.holds(e))
	if refused, _ := model.stats(); refused == 0 {
		t.Fatal("d was never refused")
	}

	// The node switches to the branch while answering the listing, and e
	// leaves its mempool with that block: the mirror must not withdraw e
	// before the store has the branch.
	var once sync.Once
	node.setFault(func(_ int, _ http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path == "/rest/mempool/contents.json" {
			once.Do(func() {
				node.setChain(onBranch)
				node.setMempool(d)
			})
		}
		return false
	})
	waitFor(t, "d pending after 5A", model.holds(d))
	waitFor(t, "the store at 5A", tipIs(st, branch[2]))
	_, wd := model.stats()
	if len(wd) != 1 || wd[0].txid != e.txid {
		t.Fatalf("withdrawals %v: want e once", wd)
	}
	if wd[0].tip.Hash == main[4].hash() {
		t.Errorf("e was withdrawn at the old tip %s, before the block that arrived with its listing was applied", wd[0].tip)
	}
}

// TestParentsFirst: the verbose listing's order, independent of map order.
func TestParentsFirst(t *testing.T) {
	h := func(b byte) chain.Hash { return chain.Hash{b} }
	deps := map[chain.Hash][]chain.Hash{
		h(1): {h(3)},       // 1 after 3
		h(2): nil,          //
		h(3): {h(4), h(9)}, // 9 is not in the mempool
		h(4): nil,
	}
	got := parentsFirst(deps)
	want := []chain.Hash{h(4), h(3), h(1), h(2)}
	if !slices.Equal(got, want) {
		t.Fatalf("parentsFirst = %v, want %v", got, want)
	}
	// A cycle (no node lists one) still lists each transaction once.
	cycle := map[chain.Hash][]chain.Hash{h(1): {h(2)}, h(2): {h(1)}}
	if got := parentsFirst(cycle); len(got) != 2 || got[0] == got[1] {
		t.Fatalf("parentsFirst of a cycle = %v", got)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// FuzzMempoolListing: whatever a node answers, the listing parser returns
// an error or a listing whose every txid round-trips through its text; it
// never panics, and a cycle of "depends" cannot make it loop.
func FuzzMempoolListing(f *testing.F) {
	f.Add([]byte(`{"txids":["` + strings.Repeat("ab", 32) + `"],"mempool_sequence":7}`))
	f.Add([]byte(`{"` + strings.Repeat("cd", 32) + `":{"depends":["` + strings.Repeat("ab", 32) + `"]},"` + strings.Repeat("ab", 32) + `":{"depends":[]}}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		l, err := parseMempoolListing(body)
		if err != nil {
			return
		}
		for _, h := range l.txids {
			if back, err := chain.ParseHash(h.String()); err != nil || back != h {
				t.Fatalf("txid %s does not round-trip", h)
			}
		}
	})
}

// rawTxOf serializes transaction i of a fixture block as a node serves it
// alone at /rest/tx/<txid>.bin.
func rawTxOf(t *testing.T, b *nodeBlock, i int) *memTx {
	t.Helper()
	blk, err := bitcoin.DecodeBlock(b.raw)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := blk.Transactions[i].Serialize(&buf); err != nil {
		t.Fatal(err)
	}
	tx := &b.block.Txs[i]
	return &memTx{txid: tx.Hash, raw: buf.Bytes(), inputs: tx.Inputs, outputs: len(tx.Outputs)}
}

// TestMempoolMirrorWriter follows a node with the real writer as the
// pending set: the node's mempool becomes pending; a block that contains a
// mirrored transaction confirms it, one that spends a mirrored
// transaction's input with another transaction makes it conflicting, and
// neither is withdrawn when it leaves the node's mempool; a reorganisation
// returns both to pending and settles them again on the new branch.
func TestMempoolMirrorWriter(t *testing.T) {
	main, branch := reorgFixtures(t)
	// t4 is block 4's second transaction (it spends block 2's coinbase);
	// y spends block 2's second transaction's output 0, which block 3
	// (and 3A) spends with another transaction.
	t4 := rawTxOf(t, main[4], 1)
	y := newMemTx([]chain.OutPoint{{TxHash: main[2].block.Txs[1].Hash, Index: 0}}, 1, 7)

	node, srv := newFakeNode(t, main[:3])
	st, w := newStore(t, disk.Options{})
	node.setMempool(t4, y)
	start(t, srv.URL, st, w, func(o *Options) { o.Mempool = w.Writer })

	status := func(h chain.Hash) chain.PendingInfo {
		v, err := st.NewView()
		if err != nil {
			t.Fatal(err)
		}
		defer v.Close()
		info, found, err := v.PendingStatus(h)
		if err != nil || !found {
			return chain.PendingInfo{}
		}
		return info
	}
	is := func(h chain.Hash, want chain.PendingStatus, height uint64, with chain.Hash) func() bool {
		return func() bool {
			got := status(h)
			return got.Status == want && got.Height == height && got.ConflictsWith == with
		}
	}
	waitFor(t, "t4 pending", is(t4.txid, chain.PendingActive, 0, chain.Hash{}))
	waitFor(t, "y pending", is(y.txid, chain.PendingActive, 0, chain.Hash{}))

	// Blocks 3 and 4: 4 confirms t4, 3 spends y's input with its third
	// transaction. The node's mempool empties with them.
	node.setChain(main)
	node.setMempool()
	waitFor(t, "the store at 4", tipIs(st, main[4]))
	waitFor(t, "t4 confirmed at 4", is(t4.txid, chain.PendingConfirmed, 4, chain.Hash{}))
	waitFor(t, "y conflicting with block 3's spender", is(y.txid, chain.PendingConflicting, 0, main[3].block.Txs[2].Hash))

	// The branch 3A 4A 5A: t4 is in 5A, and 3A spends y's input too.
	node.setChain(chainOf(main[:3], branch))
	waitFor(t, "the store at 5A", tipIs(st, branch[2]))
	waitFor(t, "t4 confirmed at 5", is(t4.txid, chain.PendingConfirmed, 5, chain.Hash{}))
	waitFor(t, "y conflicting with 3A's spender", is(y.txid, chain.PendingConflicting, 0, branch[0].block.Txs[2].Hash))
	polls := node.requestCount()
	waitFor(t, "ten more requests", func() bool { return node.requestCount() > polls+10 })
	if got := status(t4.txid); got.Status != chain.PendingConfirmed {
		t.Fatalf("t4 is %v after the mirror saw the empty mempool: a settled transaction must not be withdrawn", got.Status)
	}
}

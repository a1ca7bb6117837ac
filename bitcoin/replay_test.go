package bitcoin

import (
	"fmt"
	"testing"

	"github.com/utxo-cache/utxo-cache/chain"
)

// model is an independent, map-based UTXO set that applies chain blocks the
// way docs/blocks.md says a writer does: transactions in order, inputs spent
// (they must be live), outputs created (they must not be live).
type model struct {
	live    map[chain.OutPoint]chain.Utxo
	spentBy map[chain.OutPoint]chain.Spent
	tip     chain.Tip
	value   uint64
	digest  chain.Digest
}

func newModel() *model {
	return &model{
		live:    map[chain.OutPoint]chain.Utxo{},
		spentBy: map[chain.OutPoint]chain.Spent{},
		tip:     chain.Tip{Empty: true},
	}
}

func (m *model) apply(b *chain.Block) error {
	if !m.tip.Empty && (b.Height != m.tip.Height+1 || b.PrevHash != m.tip.Hash) {
		return fmt.Errorf("block %d/%s does not extend tip %s", b.Height, b.Hash, m.tip)
	}
	for pos := range b.Txs {
		tx := &b.Txs[pos]
		for _, op := range tx.Spends() {
			u, ok := m.live[op]
			if !ok {
				return fmt.Errorf("height %d tx %s: input %s is not live", b.Height, tx.Hash, op)
			}
			delete(m.live, op)
			m.value -= u.Value
			m.digest.Sub(&u)
			m.spentBy[op] = chain.Spent{TxHash: tx.Hash, Height: b.Height}
		}
		var err error
		tx.Creates(func(index uint32, out *chain.Output, collateralReturn bool) {
			op := chain.OutPoint{TxHash: tx.Hash, Index: index}
			if _, dup := m.live[op]; dup {
				err = fmt.Errorf("height %d: output %s is already live", b.Height, op)
				return
			}
			u := chain.Utxo{OutPoint: op, Output: *out, Height: b.Height, TxPos: uint32(pos)}
			if tx.Coinbase {
				u.Flags |= chain.FlagCoinbase
			}
			m.live[op] = u
			m.value += u.Value
			m.digest.Add(&u)
			delete(m.spentBy, op)
		})
		if err != nil {
			return err
		}
	}
	m.tip = chain.Tip{Height: b.Height, Hash: b.Hash}
	return nil
}

const satoshisPerBTC = 100_000_000

// TestReplayChain0To14131 converts mainnet blocks 0..14131 and replays them
// into the model, reproducing the facts of testdata/bitcoin/PROVENANCE.md.
func TestReplayChain0To14131(t *testing.T) {
	blocks := loadFixture(t, fixtureChain14131)
	ord, err := OrderByParent(blocks, OrderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ord.Blocks) != 14132 || len(ord.Stale) != 0 {
		t.Fatalf("ordered %d blocks, %d stale; want 14132, 0", len(ord.Blocks), len(ord.Stale))
	}
	for i := range blocks {
		if ord.Blocks[i] != blocks[i] {
			t.Fatalf("block %d out of file order", i)
		}
	}

	a := mainnetAdapter(t)
	m := newModel()
	block9Coinbase := chain.OutPoint{TxHash: mustHash("0437cd7f8525ceed2324359c2d0ba26006d92d856a9c20fa0241106ee5a597c9")}
	var pseudo int
	for i, blk := range ord.Blocks {
		height := ord.Height(i)
		b, err := a.Convert(blk, height)
		if err != nil {
			t.Fatalf("convert height %d: %v", height, err)
		}
		for j := range b.Txs {
			if IsPseudoTx(b, &b.Txs[j]) {
				pseudo++
			}
		}
		if err := m.apply(b); err != nil {
			t.Fatal(err)
		}
		switch height {
		case 9:
			u, ok := m.live[block9Coinbase]
			if !ok || u.Address != "12cbQLTFMXRnSzktFkuoG3eHoMeFtpTu3S" || u.Value != 50*satoshisPerBTC || !u.Coinbase() {
				t.Fatalf("block 9 coinbase output: %+v (live %v)", u, ok)
			}
		case 170:
			want := chain.Spent{TxHash: mustHash("f4184fc596403b9d638783cf57adfe4c75c605f6356fbc91338530e9831e9e16"), Height: 170}
			if got := m.spentBy[block9Coinbase]; got != want {
				t.Fatalf("block 9 coinbase spent by %+v, want %+v", got, want)
			}
		case 255:
			checkSet(t, m, 255, 260, 12_750)
		}
	}
	checkSet(t, m, 14131, 13_416, 706_550)
	if pseudo != 0 {
		t.Errorf("%d pseudo-transactions in blocks 0..14131, want none (no OP_RETURN yet)", pseudo)
	}
	// Regression golden: the digest (docs/digest.md) of the set after 14131 under this
	// package's address rules; a change here changes every store's digest.
	const wantDigest = "f30c6b1e158c14cf7b29b8d49fbb70c746923d227643098f73c28f9901bca826"
	if got := m.digest.String(); got != wantDigest {
		t.Errorf("digest after 14131 = %s, want %s", got, wantDigest)
	}
}

func checkSet(t *testing.T, m *model, height uint64, count int, btc uint64) {
	t.Helper()
	if len(m.live) != count || m.value != btc*satoshisPerBTC {
		t.Fatalf("after height %d: %d UTXOs holding %d sat; want %d holding %d BTC",
			height, len(m.live), m.value, count, btc)
	}
	var sum uint64
	for _, u := range m.live {
		sum += u.Value
	}
	if sum != m.value {
		t.Fatalf("model value %d != sum of live %d", m.value, sum)
	}
}

// TestReplayBlocks1To255 reads the file that starts at block 1 (its first
// block's parent, the genesis, is not in it), orders it with StartHeight 1,
// and checks it against the 0..14131 file.
func TestReplayBlocks1To255(t *testing.T) {
	blocks := loadFixture(t, fixtureBlocks1256)
	ord, err := OrderByParent(blocks, OrderOptions{StartHeight: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(ord.Blocks) != 255 || ord.Height(0) != 1 || ord.Height(254) != 255 {
		t.Fatalf("ordered %d blocks from height %d", len(ord.Blocks), ord.Height(0))
	}
	full := loadFixture(t, fixtureChain14131)
	a := mainnetAdapter(t)
	m := newModel()
	for i, blk := range ord.Blocks {
		if blk.BlockHash() != full[i+1].BlockHash() {
			t.Fatalf("height %d: %s, want %s", ord.Height(i), blk.BlockHash(), full[i+1].BlockHash())
		}
		b, err := a.Convert(blk, ord.Height(i))
		if err != nil {
			t.Fatal(err)
		}
		if err := m.apply(b); err != nil {
			t.Fatal(err)
		}
	}
	checkSet(t, m, 255, 260, 12_750)
}

package workload

import (
	"reflect"
	"strings"
	"testing"

	"github.com/utxo-cache/utxo-cache/chain"
)

func mustNew(t testing.TB, o Options) *Generator {
	t.Helper()
	g, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestDeterministic(t *testing.T) {
	for _, p := range []Profile{Bitcoin, Cardano} {
		t.Run(p.String(), func(t *testing.T) {
			a := mustNew(t, Options{Seed: 42, Profile: p, TxsPerBlock: 50})
			b := mustNew(t, Options{Seed: 42, Profile: p, TxsPerBlock: 50})
			c := mustNew(t, Options{Seed: 43, Profile: p, TxsPerBlock: 50})
			if !reflect.DeepEqual(a.NextSeed(2000), b.NextSeed(2000)) {
				t.Fatal("seed blocks differ for the same seed")
			}
			c.NextSeed(2000)
			for i := range 30 {
				x, y, z := a.Next(), b.Next(), c.Next()
				if !reflect.DeepEqual(x, y) {
					t.Fatalf("block %d differs for the same seed", i)
				}
				if reflect.DeepEqual(x, z) {
					t.Fatalf("block %d is the same for different seeds", i)
				}
			}
			if a.Live() != b.Live() || a.Tip() != b.Tip() {
				t.Fatalf("live %d vs %d, tip %v vs %v", a.Live(), b.Live(), a.Tip(), b.Tip())
			}
		})
	}
}

// model replays blocks on a plain map of live outputs and checks every rule a
// store enforces when applying them.
type model struct {
	live     map[chain.OutPoint]int // creation sequence number
	seq      int
	tip      chain.Tip
	spends   int
	young    int // spends of one of the 5000 youngest outputs
	invalid  int
	byAddr   map[string]int
	addrOf   map[chain.OutPoint]string
	assets   int
	datums   int
	inBlock  int // spends of an output created in the same block
	outputs  int
	scriptTx int
}

func newModel() *model {
	return &model{
		live:   make(map[chain.OutPoint]int),
		tip:    chain.Tip{Empty: true},
		byAddr: make(map[string]int),
		addrOf: make(map[chain.OutPoint]string),
	}
}

func (m *model) apply(t *testing.T, b *chain.Block) {
	t.Helper()
	if m.tip.Empty {
		if b.Height != 1 || !b.PrevHash.IsZero() {
			t.Fatalf("first block at %d with prev %s", b.Height, b.PrevHash)
		}
	} else if b.Height != m.tip.Height+1 || b.PrevHash != m.tip.Hash {
		t.Fatalf("block %d (prev %s) does not extend %s", b.Height, b.PrevHash, m.tip)
	}
	if err := chain.ValidateBlock(b, chain.Limits{}); err != nil {
		t.Fatalf("block %d: %v", b.Height, err)
	}
	blockStart := m.seq
	for i := range b.Txs {
		tx := &b.Txs[i]
		if tx.Coinbase && i != 0 {
			t.Fatalf("block %d: coinbase at position %d", b.Height, i)
		}
		if tx.Invalid {
			m.invalid++
			if len(tx.CollateralInputs) == 0 || tx.CollateralReturn == nil {
				t.Fatalf("block %d tx %d: invalid without collateral", b.Height, i)
			}
			for _, op := range tx.Inputs {
				if _, ok := m.live[op]; !ok {
					t.Fatalf("block %d tx %d: invalid tx lists %s which is not live", b.Height, i, op)
				}
			}
		} else if len(tx.CollateralInputs) > 0 {
			m.scriptTx++
		}
		for _, op := range tx.Spends() {
			seq, ok := m.live[op]
			if !ok {
				t.Fatalf("block %d tx %d spends %s which is not live (or spent twice)", b.Height, i, op)
			}
			if m.seq-seq <= 5000 {
				m.young++
			}
			if seq >= blockStart {
				m.inBlock++
			}
			m.spends++
			m.byAddr[m.addrOf[op]]--
			delete(m.live, op)
			delete(m.addrOf, op)
		}
		tx.Creates(func(index uint32, out *chain.Output, _ bool) {
			op := chain.OutPoint{TxHash: tx.Hash, Index: index}
			if _, ok := m.live[op]; ok {
				t.Fatalf("block %d tx %d creates %s which is live", b.Height, i, op)
			}
			m.live[op] = m.seq
			m.seq++
			m.outputs++
			m.byAddr[out.Address]++
			m.addrOf[op] = out.Address
			if len(out.Assets) > 0 {
				m.assets++
			}
			if out.DatumHash != nil || out.Datum != nil {
				m.datums++
			}
		})
	}
	m.tip = chain.Tip{Height: b.Height, Hash: b.Hash}
}

func (m *model) check(t *testing.T, g *Generator) {
	t.Helper()
	if len(m.live) != g.Live() {
		t.Fatalf("model has %d live outputs, generator %d", len(m.live), g.Live())
	}
	n := 0
	for op := range g.LiveOutPoints() {
		if _, ok := m.live[op]; !ok {
			t.Fatalf("generator's live output %s is not live", op)
		}
		n++
	}
	if n != g.Live() {
		t.Fatalf("LiveOutPoints yields %d outputs, Live says %d", n, g.Live())
	}
	if g.Tip() != m.tip {
		t.Fatalf("tip %v, model %v", g.Tip(), m.tip)
	}
}

func TestBlocksSpendLiveOutputsOnce(t *testing.T) {
	for _, p := range []Profile{Bitcoin, Cardano} {
		t.Run(p.String(), func(t *testing.T) {
			g := mustNew(t, Options{Seed: 7, Profile: p, Addresses: 5000})
			m := newModel()
			for i := range 300 {
				var b *chain.Block
				if i%50 == 10 {
					b = g.NextSeed(5000)
				} else {
					b = g.Next()
				}
				if len(b.Txs) == 0 {
					t.Fatal("empty block")
				}
				m.apply(t, b)
				if i%25 == 0 {
					m.check(t, g)
				}
			}
			m.check(t, g)
			youngShare := float64(m.young) / float64(m.spends)
			t.Logf("%d blocks, %d live, %d spends (%.0f%% of the 5000 youngest, %d in-block), %d invalid, %d script txs, %d/%d outputs with assets, %d with datums",
				g.Tip().Height, g.Live(), m.spends, 100*youngShare, m.inBlock, m.invalid, m.scriptTx, m.assets, m.outputs, m.datums)
			if youngShare < 0.45 {
				t.Errorf("only %.2f of spends are of young outputs", youngShare)
			}
			if m.inBlock == 0 {
				t.Error("no in-block spends")
			}
			for _, a := range g.HotAddresses() {
				// ~250k outputs, 1.25% to each hot address (~3100), less
				// ~1% of ~175k inputs over the four (~440): ~2650 each.
				if m.byAddr[a] < 2000 {
					t.Errorf("hot address %s holds only %d outputs", a, m.byAddr[a])
				}
			}
		})
	}
}

func TestCardanoInvalidTxs(t *testing.T) {
	g := mustNew(t, Options{Seed: 1, Profile: Cardano})
	g.NextSeed(10_000)
	var txs, invalid, withReturn int
	for range 100 {
		b := g.Next()
		for _, tx := range b.Txs {
			txs++
			if tx.Invalid {
				invalid++
				if len(tx.CollateralInputs) == 0 {
					t.Fatalf("invalid tx %s has no collateral", tx.Hash)
				}
				if tx.CollateralReturn != nil {
					withReturn++
				}
			}
		}
	}
	if share := float64(invalid) / float64(txs); share < 0.01 || share > 0.03 {
		t.Fatalf("%d of %d txs invalid (%.3f), want about 0.02", invalid, txs, share)
	}
	if withReturn != invalid {
		t.Fatalf("%d of %d invalid txs have a collateral return", withReturn, invalid)
	}
}

func TestNoInvalidTxsForBitcoin(t *testing.T) {
	g := mustNew(t, Options{Seed: 1})
	for range 20 {
		b := g.Next()
		if !b.Txs[0].Coinbase {
			t.Fatal("first tx is not a coinbase")
		}
		for _, tx := range b.Txs[1:] {
			if tx.Invalid || tx.Coinbase || len(tx.CollateralInputs) > 0 {
				t.Fatalf("unexpected tx shape %+v", tx)
			}
			if len(tx.Outputs) < 2 || len(tx.Outputs) > 3 {
				t.Fatalf("%d outputs", len(tx.Outputs))
			}
		}
	}
}

func TestAddressEncodings(t *testing.T) {
	hexb := func(s string) []byte {
		b := make([]byte, len(s)/2)
		for i := range b {
			b[i] = byte(strings.IndexByte("0123456789abcdef", s[2*i])<<4 | strings.IndexByte("0123456789abcdef", s[2*i+1]))
		}
		return b
	}
	for _, c := range []struct{ got, want string }{
		// BIP 173 and BIP 350 test vectors.
		{segwitAddress("bc", 0, hexb("751e76e8199196d454941c45d1b3a323f1433bd6")), "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4"},
		{segwitAddress("bc", 1, hexb("79be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798")),
			"bc1p0xlxvlhemja6c4dqv22uapctqupfhlxm9h8z3k2e72q4k9hcz7vqzk5jj0"},
		// The all-zero hash160 (a well-known burn address).
		{base58Check(0x00, make([]byte, 20)), "1111111111111111111114oLvT2"},
		// Bitcoin's genesis coinbase address.
		{base58Check(0x00, hexb("62e907b15cbf27d5425399ebf6f0fb50ebb88f18")), "1A1zP1eP5QGefi2DMPTfTL5SLmv7DivfNa"},
	} {
		if c.got != c.want {
			t.Errorf("got %s, want %s", c.got, c.want)
		}
	}
	lengths := map[Profile]map[int]bool{
		Bitcoin: {33: true, 34: true, 42: true, 62: true},
		Cardano: {58: true, 103: true},
	}
	for p, ok := range lengths {
		for i := range 2000 {
			a := deriveAddress(p, 3, domainOrdinary, i)
			if !ok[len(a.s)] {
				t.Fatalf("%s address %q of length %d", p, a.s, len(a.s))
			}
			if p == Cardano && !strings.HasPrefix(a.s, "addr1") {
				t.Fatalf("cardano address %q", a.s)
			}
		}
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, o := range []Options{
		{Profile: 9},
		{ZipfS: 1},
		{ZipfV: 0.5},
		{OutputsPerTx: Range{0, 0}, InputsPerTx: Range{1, 1}, Addresses: -1},
		{InputsPerTx: Range{3, 2}},
		{YoungProb: 1.5},
	} {
		if _, err := New(o); err == nil {
			t.Errorf("New(%+v) accepted", o)
		}
	}
}

func BenchmarkNext(b *testing.B) {
	for _, p := range []Profile{Bitcoin, Cardano} {
		b.Run("profile="+p.String()+"/txs=300", func(b *testing.B) {
			g := mustNew(b, Options{Seed: 1, Profile: p})
			for g.Live() < 1_000_000 {
				g.NextSeed(100_000)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				g.Next()
			}
		})
	}
}

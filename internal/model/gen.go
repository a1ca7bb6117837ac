package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/utxo-cache/utxo-cache/chain"
)

// GenOptions shape the chains a Gen builds. The zero value of every field
// means its default.
type GenOptions struct {
	// Addresses is how many distinct addresses outputs go to, with Zipf-like
	// popularity (a few hold most outputs). Default 8.
	Addresses int
	// MaxTxs bounds the transactions per block. Default 5.
	MaxTxs int
	// MaxInputs and MaxOutputs bound a transaction's inputs and outputs.
	// Defaults 3 and 3.
	MaxInputs, MaxOutputs int
}

// EnsureDefaults returns o with every unset field set to its default.
func (o GenOptions) EnsureDefaults() GenOptions {
	if o.Addresses <= 0 {
		o.Addresses = 8
	}
	if o.MaxTxs <= 0 {
		o.MaxTxs = 5
	}
	if o.MaxInputs <= 0 {
		o.MaxInputs = 3
	}
	if o.MaxOutputs <= 0 {
		o.MaxOutputs = 3
	}
	return o
}

// Gen builds random blocks on top of a Model's state: valid ones that spend
// random live outputs (including outputs created earlier in the same block),
// and deliberately bad ones. Everything it does is a function of its seed and
// of the model states it is shown, so two Gens with the same seed shown the
// same states build the same blocks. Not safe for concurrent use.
type Gen struct {
	rng      *rand.Rand
	opts     GenOptions
	addrs    []string
	zipf     *rand.Zipf
	policies [][]byte
	names    [][]byte
	txHashes []chain.Hash // every tx hash generated, for re-creation after spend
}

// NewGen returns a generator seeded with seed.
func NewGen(seed uint64, opts GenOptions) *Gen {
	opts = opts.EnsureDefaults()
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	g := &Gen{rng: rng, opts: opts}
	g.zipf = rand.NewZipf(rng, 1.3, 1, uint64(opts.Addresses-1))
	for i := range opts.Addresses {
		// Opaque strings of assorted shapes and lengths, one of them long.
		switch i % 4 {
		case 0:
			g.addrs = append(g.addrs, fmt.Sprintf("addr_test1q%06d", i))
		case 1:
			g.addrs = append(g.addrs, fmt.Sprintf("1BitcoinEater%d", i))
		case 2:
			g.addrs = append(g.addrs, fmt.Sprintf("%x", g.bytes(20)))
		default:
			g.addrs = append(g.addrs, fmt.Sprintf("long-%d-%0200d", i, i))
		}
	}
	// Policies and names of 0..64 bytes, some sharing prefixes so byte order
	// matters.
	g.policies = [][]byte{{}, g.bytes(28), g.bytes(28), {0x00}, g.bytes(64)}
	g.policies = append(g.policies, append(append([]byte(nil), g.policies[1]...), 0x01))
	g.names = [][]byte{{}, []byte("tok"), []byte("tokA"), g.bytes(32), {0xff}}
	return g
}

// Rand returns the generator's random source, for a test's own choices (so
// one seed replays everything).
func (g *Gen) Rand() *rand.Rand { return g.rng }

// Addresses returns every address outputs may go to.
func (g *Gen) Addresses() []string { return g.addrs }

func (g *Gen) bytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(g.rng.Uint32())
	}
	return b
}

// Hash returns a fresh random hash.
func (g *Gen) Hash() chain.Hash {
	var h chain.Hash
	copy(h[:], g.bytes(chain.HashSize))
	return h
}

func (g *Gen) chance(p float64) bool { return g.rng.Float64() < p }

// amount returns a uint64 that is small, or near 2^64 so sums overflow 64 bits.
func (g *Gen) amount() uint64 {
	switch g.rng.IntN(4) {
	case 0:
		return math.MaxUint64 - g.rng.Uint64N(1000)
	case 1:
		return 1 + g.rng.Uint64N(math.MaxUint64-1)
	default:
		return 1 + g.rng.Uint64N(1_000_000)
	}
}

func (g *Gen) output() chain.Output {
	out := chain.Output{Address: g.addrs[g.zipf.Uint64()], Value: g.amount()}
	if g.chance(0.05) {
		out.Value = 0
	}
	if g.chance(0.4) {
		seen := make(map[[2]string]bool)
		for range 1 + g.rng.IntN(4) {
			p, n := g.policies[g.rng.IntN(len(g.policies))], g.names[g.rng.IntN(len(g.names))]
			if k := [2]string{string(p), string(n)}; !seen[k] {
				seen[k] = true
				// Unsorted on purpose: the writer sorts them.
				out.Assets = append(out.Assets, chain.Asset{Policy: p, Name: n, Quantity: g.amount()})
			}
		}
	}
	if g.chance(0.15) {
		h := g.Hash()
		out.DatumHash = &h
	}
	if g.chance(0.15) {
		out.Datum = g.bytes(1 + g.rng.IntN(80))
	}
	if g.chance(0.1) {
		out.ScriptRef = g.bytes(1 + g.rng.IntN(120))
	}
	return out
}

// blockState tracks what a block being built has done so far.
type blockState struct {
	m       *Model
	pool    []chain.OutPoint        // spendable now: live before the block or created in it, unspent in it
	touched map[chain.OutPoint]bool // liveness of the outpoints the block spent or created so far
	spent   map[chain.OutPoint]bool // spent in the block, even if re-created since
}

func (g *Gen) newBlockState(m *Model) *blockState {
	bs := &blockState{m: m, touched: make(map[chain.OutPoint]bool), spent: make(map[chain.OutPoint]bool)}
	for _, u := range m.Live() {
		bs.pool = append(bs.pool, u.OutPoint)
	}
	return bs
}

// take removes and returns a random spendable outpoint.
func (g *Gen) take(bs *blockState) (chain.OutPoint, bool) {
	if len(bs.pool) == 0 {
		return chain.OutPoint{}, false
	}
	// Prefer young outputs (the end of the pool) half of the time.
	i := g.rng.IntN(len(bs.pool))
	if g.chance(0.5) {
		i = len(bs.pool) - 1 - g.rng.IntN(min(len(bs.pool), 4))
	}
	op := bs.pool[i]
	bs.pool[i] = bs.pool[len(bs.pool)-1]
	bs.pool = bs.pool[:len(bs.pool)-1]
	bs.spent[op] = true
	bs.touched[op] = false
	return op, true
}

// liveNow reports whether op is live at this point of the block.
func (bs *blockState) liveNow(op chain.OutPoint) bool {
	if live, ok := bs.touched[op]; ok {
		return live
	}
	return bs.m.IsLive(op)
}

// txHash returns a fresh hash, or now and then the hash of an earlier
// transaction none of whose outputs [0, n] is live: re-creating outpoints
// that were spent (their spent records may still be visible).
func (g *Gen) txHash(bs *blockState, n int) chain.Hash {
	if len(g.txHashes) > 0 && g.chance(0.08) {
		h := g.txHashes[g.rng.IntN(len(g.txHashes))]
		free := true
		for i := 0; i <= n && free; i++ {
			free = !bs.liveNow(chain.OutPoint{TxHash: h, Index: uint32(i)})
		}
		if free {
			return h
		}
	}
	h := g.Hash()
	g.txHashes = append(g.txHashes, h)
	return h
}

func (g *Gen) tx(bs *blockState, pos int) chain.Tx {
	var tx chain.Tx
	nOut := g.rng.IntN(g.opts.MaxOutputs + 1)
	switch {
	case pos == 0 && g.chance(0.3):
		tx.Coinbase = true
		nOut = max(nOut, 1)
	case g.chance(0.12):
		// Phase-2 invalid: its inputs are neither checked nor spent (some
		// are live, some never existed); only the collateral counts.
		tx.Invalid = true
		for range g.rng.IntN(3) {
			if g.chance(0.5) && len(bs.pool) > 0 {
				tx.Inputs = append(tx.Inputs, bs.pool[g.rng.IntN(len(bs.pool))])
			} else {
				tx.Inputs = append(tx.Inputs, chain.OutPoint{TxHash: g.Hash(), Index: g.rng.Uint32N(3)})
			}
		}
		for range g.rng.IntN(3) {
			if op, ok := g.take(bs); ok {
				tx.CollateralInputs = append(tx.CollateralInputs, op)
			}
		}
	default:
		for range g.rng.IntN(g.opts.MaxInputs + 1) {
			if op, ok := g.take(bs); ok {
				tx.Inputs = append(tx.Inputs, op)
			}
		}
	}
	for range nOut {
		tx.Outputs = append(tx.Outputs, g.output())
	}
	if tx.Invalid && g.chance(0.7) {
		cr := g.output()
		tx.CollateralReturn = &cr
	}
	tx.Hash = g.txHash(bs, len(tx.Outputs))
	add := func(op chain.OutPoint) {
		bs.touched[op] = true
		// An outpoint spent earlier in the block and re-created now may not
		// be spent again in this block: that is a double spend.
		if !bs.spent[op] {
			bs.pool = append(bs.pool, op)
		}
	}
	if tx.Invalid {
		if tx.CollateralReturn != nil {
			add(chain.OutPoint{TxHash: tx.Hash, Index: uint32(len(tx.Outputs))})
		}
	} else {
		for i := range tx.Outputs {
			add(chain.OutPoint{TxHash: tx.Hash, Index: uint32(i)})
		}
	}
	return tx
}

// next returns the height and parent of the block after m's tip. The first
// block of an empty model starts at a random height, with or without a
// parent hash.
func (g *Gen) next(m *Model) (height uint64, prev chain.Hash) {
	t := m.Tip()
	if !t.Empty {
		return t.Height + 1, t.Hash
	}
	switch g.rng.IntN(3) {
	case 0:
		height = 0
	case 1:
		height = 1
	default:
		height = 1 + g.rng.Uint64N(200)
	}
	if g.chance(0.5) {
		prev = g.Hash()
	}
	return height, prev
}

// Block returns a valid block extending m's tip.
func (g *Gen) Block(m *Model) *chain.Block {
	height, prev := g.next(m)
	b := &chain.Block{Height: height, Hash: g.Hash(), PrevHash: prev, Time: int64(1_600_000_000 + height*20)}
	bs := g.newBlockState(m)
	for pos := range g.rng.IntN(g.opts.MaxTxs + 1) {
		b.Txs = append(b.Txs, g.tx(bs, pos))
	}
	return b
}

// Fault names a deliberate defect of a bad block.
type Fault int

// Faults BadBlock can inject.
const (
	FaultUnknownInput      Fault = iota // an input that never existed (or such a collateral input)
	FaultSpentInput                     // an input whose output is spent
	FaultDoubleSpend                    // an input an earlier tx of the block spends
	FaultDoubleSpendSameTx              // one tx naming an input twice
	FaultDuplicateLive                  // an output on a live outpoint (or such a collateral return)
	FaultDuplicateInBlock               // two valid txs with one hash
	FaultWrongPrev                      // prev_hash is not the tip's hash
	FaultWrongHeight                    // height is not tip + 1
	numFaults
)

var faultNames = [numFaults]string{"unknown-input", "spent-input", "double-spend", "double-spend-same-tx",
	"duplicate-live", "duplicate-in-block", "wrong-prev", "wrong-height"}

// String names the fault.
func (f Fault) String() string {
	if f >= 0 && f < numFaults {
		return faultNames[f]
	}
	return fmt.Sprintf("fault(%d)", int(f))
}

// Want returns the rejection class a block with fault f gets (docs/blocks.md).
func (f Fault) Want() error {
	switch f {
	case FaultUnknownInput, FaultSpentInput:
		return chain.ErrUnknownInput
	case FaultDoubleSpend, FaultDoubleSpendSameTx:
		return chain.ErrDoubleSpend
	case FaultDuplicateLive, FaultDuplicateInBlock:
		return chain.ErrDuplicateOutpoint
	default:
		return chain.ErrNotNextBlock
	}
}

// BadBlock returns a block m must reject with f.Want(), and its fault f. The
// block is a valid one with a defective transaction (or linkage) added at the
// end, so the defect is the first thing that fails.
func (g *Gen) BadBlock(m *Model) (*chain.Block, Fault) {
	for {
		f := Fault(g.rng.IntN(int(numFaults)))
		if b, ok := g.badBlock(m, f); ok {
			return b, f
		}
	}
}

func (g *Gen) badBlock(m *Model, f Fault) (*chain.Block, bool) {
	t := m.Tip()
	if t.Empty && (f == FaultWrongPrev || f == FaultWrongHeight) {
		return nil, false // an empty model takes any first block
	}
	b := g.Block(m)
	live := make(map[chain.OutPoint]bool) // live at the end of the valid block
	for _, u := range m.Live() {
		live[u.OutPoint] = true
	}
	spentInBlock := make(map[chain.OutPoint]bool)
	for _, tx := range b.Txs {
		spends, creates := tx.Inputs, []uint32{}
		if tx.Invalid {
			spends = tx.CollateralInputs
			if tx.CollateralReturn != nil {
				creates = append(creates, uint32(len(tx.Outputs)))
			}
		} else {
			for i := range tx.Outputs {
				creates = append(creates, uint32(i))
			}
		}
		for _, op := range spends {
			delete(live, op)
			spentInBlock[op] = true // spending it again is a double spend, re-created or not
		}
		for _, i := range creates {
			live[chain.OutPoint{TxHash: tx.Hash, Index: i}] = true
		}
	}
	pickLive := func() (chain.OutPoint, bool) {
		var ops []chain.OutPoint
		for op := range live {
			ops = append(ops, op)
		}
		if len(ops) == 0 {
			return chain.OutPoint{}, false
		}
		sortOutPoints(ops)
		return ops[g.rng.IntN(len(ops))], true
	}
	bad := chain.Tx{Hash: g.Hash(), Outputs: []chain.Output{g.output()}}
	switch f {
	case FaultUnknownInput:
		bad.Inputs = []chain.OutPoint{{TxHash: g.Hash(), Index: g.rng.Uint32N(4)}}
		if g.chance(0.3) {
			// Invalid tx: the unknown outpoint is a collateral input.
			bad.Invalid, bad.CollateralInputs, bad.Inputs = true, bad.Inputs, nil
		}
		b.Txs = append(b.Txs, bad)
		return b, true
	case FaultSpentInput:
		// A spent record (visible or not) that the block does not re-create.
		var cands []chain.OutPoint
		for _, op := range m.Spent() {
			if !live[op] && !spentInBlock[op] {
				cands = append(cands, op)
			}
		}
		if len(cands) == 0 {
			return nil, false
		}
		bad.Inputs = []chain.OutPoint{cands[g.rng.IntN(len(cands))]}
		b.Txs = append(b.Txs, bad)
		return b, true
	case FaultDoubleSpend:
		var ops []chain.OutPoint
		for op := range spentInBlock {
			ops = append(ops, op)
		}
		if len(ops) == 0 {
			return nil, false
		}
		sortOutPoints(ops)
		bad.Inputs = []chain.OutPoint{ops[g.rng.IntN(len(ops))]}
		b.Txs = append(b.Txs, bad)
		return b, true
	case FaultDoubleSpendSameTx:
		op, ok := pickLive()
		if !ok {
			return nil, false
		}
		bad.Inputs = []chain.OutPoint{op, op}
		b.Txs = append(b.Txs, bad)
		return b, true
	case FaultDuplicateLive:
		op, ok := pickLive()
		if !ok {
			return nil, false
		}
		bad.Hash = op.TxHash
		bad.Outputs = make([]chain.Output, op.Index+1)
		for i := range bad.Outputs {
			bad.Outputs[i] = g.output()
		}
		if g.chance(0.3) {
			// An invalid tx whose collateral return lands on the live outpoint.
			cr := g.output()
			bad.Invalid, bad.CollateralReturn, bad.Outputs = true, &cr, bad.Outputs[:op.Index]
		}
		b.Txs = append(b.Txs, bad)
		// Creating index 0..op.Index: an earlier index may also be live,
		// which is the same class.
		return b, true
	case FaultDuplicateInBlock:
		// The same valid tx hash twice in the block.
		twin := chain.Tx{Hash: bad.Hash, Outputs: []chain.Output{g.output()}}
		b.Txs = append(b.Txs, bad, twin)
		return b, true
	case FaultWrongPrev:
		b.PrevHash = g.Hash()
		return b, true
	case FaultWrongHeight:
		switch g.rng.IntN(3) {
		case 0:
			b.Height = t.Height + 2 + g.rng.Uint64N(3)
		case 1:
			b.Height = t.Height // a different block at the tip's height
		default:
			if t.Height == 0 {
				return nil, false
			}
			b.Height = g.rng.Uint64N(t.Height)
		}
		return b, true
	}
	return nil, false
}

func sortOutPoints(ops []chain.OutPoint) { slices.SortFunc(ops, CompareOutPoints) }

// GenPolicies and GenNames return the asset policies and names g's outputs
// carry, for tests that read by policy or asset. The caller must not modify
// them.
func GenPolicies(g *Gen) [][]byte { return g.policies }
func GenNames(g *Gen) [][]byte    { return g.names }

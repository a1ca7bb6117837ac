package workload

import (
	"fmt"
	"iter"
	"math"
	"math/rand/v2"
	"strconv"

	"github.com/utxo-cache/utxo-cache/chain"
)

// Generator produces a chain of linked blocks, each valid against the outputs
// its predecessors left live. It is not safe for concurrent use.
//
// Invariant: old, the live slots of young, and hot together hold exactly the
// outputs created and not yet spent by the blocks returned so far, each in
// one place (pooled, or counted as frozen in old or hot when Spendable
// bounds them): an ordinary output enters young and is offered to old when
// youngWindow newer ones have been created; a hot one is offered to hot. Blocks
// returned are never touched again, but their Assets' policy and name bytes
// are shared between outputs and blocks: treat blocks as read-only.
type Generator struct {
	opts Options
	rng  *rand.Rand
	zipf *rand.Zipf

	old   reservoir // ordinary live outputs older than the young window
	young youngRing // the youngWindow newest ordinary outputs, live or not
	hot   reservoir // live outputs to hot addresses, spent by consolidations

	// addrs caches the addressCache most popular ordinary addresses, by
	// rank, derived on first use (s == ""); the others are derived on
	// every use, so that memory does not grow with Options.Addresses.
	addrs    []address
	hotAddrs []address

	policies   []policy // Cardano asset policies by popularity rank
	policyZipf *rand.Zipf

	height uint64
	prev   chain.Hash
	time   int64

	mem arena
}

// Shape constants that are not worth an option.
const (
	cardanoPolicies     = 2000 // distinct asset policies
	cardanoAssetOutputs = 0.25 // fraction of outputs carrying assets
	cardanoMaxAssets    = 12   // assets of one output, at most
	cardanoScriptTxs    = 0.10 // valid txs that list (unspent) collateral
	cardanoInlineDatum  = 0.20 // script outputs with an inline datum instead of a hash
	bitcoinSubsidy      = 312_500_000
	genesisTime         = 1_700_000_000
	youngDraws          = 4 // tries at a still-live young output before falling back
	referDraws          = 8 // tries at a distinct output to list without spending
	nftPolicyEvery      = 4 // every 4th policy is an NFT collection
	// addressCache is how many of the most popular ordinary addresses keep
	// their string once derived (some 10 MB at most): Zipf sends most
	// outputs to them; the rest are derived again on every use.
	addressCache           = 1 << 16
	bitcoinMeanBlockSecond = 600
	cardanoMeanBlockSecond = 20
)

// policy is one Cardano asset policy: a fungible token with one name, or an
// NFT collection whose names are prefix + serial number.
type policy struct {
	id   []byte
	nft  bool
	name []byte // the token name, or the collection's prefix
}

// New returns a Generator for opts (defaults applied) with an empty chain:
// the first block it returns is at height 1 with no parent.
func New(opts Options) (*Generator, error) {
	opts = opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(uint64(opts.Seed), 0x5eed_b10c_c4a1_0001))
	g := &Generator{
		opts:     opts,
		rng:      rng,
		zipf:     rand.NewZipf(rng, opts.ZipfS, opts.ZipfV, uint64(opts.Addresses-1)),
		young:    newYoungRing(youngWindow),
		addrs:    make([]address, min(opts.Addresses, addressCache)),
		hotAddrs: make([]address, opts.HotAddresses),
		time:     genesisTime,
	}
	if opts.Spendable > 0 {
		g.old.bound = opts.Spendable
		g.hot.bound = max(1, opts.Spendable/4)
	}
	for i := range g.hotAddrs {
		g.hotAddrs[i] = deriveAddress(opts.Profile, opts.Seed, domainHot, i)
	}
	if opts.Profile == Cardano {
		g.policies = make([]policy, cardanoPolicies)
		g.policyZipf = rand.NewZipf(rng, 1.2, 5, cardanoPolicies-1)
	}
	return g, nil
}

// Options returns the generator's effective options.
func (g *Generator) Options() Options { return g.opts }

// Live returns the number of outputs live after the blocks returned so far.
func (g *Generator) Live() int { return g.old.live() + g.young.live + g.hot.live() }

// Frozen returns how many of the Live outputs the generator no longer keeps
// (Options.Spendable): they stay live for good. Always 0 without a bound.
func (g *Generator) Frozen() int { return g.old.frozen + g.hot.frozen }

// LiveOutPoints yields every output live after the blocks returned so far
// that the generator keeps (Live - Frozen of them: all without a bound), in
// an arbitrary but deterministic order. The generator must not be used
// while the iteration runs.
func (g *Generator) LiveOutPoints() iter.Seq[chain.OutPoint] {
	return func(yield func(chain.OutPoint) bool) {
		for _, op := range g.old.pool {
			if !yield(op) {
				return
			}
		}
		for _, s := range g.young.slots {
			if s.live && !yield(s.op) {
				return
			}
		}
		for _, op := range g.hot.pool {
			if !yield(op) {
				return
			}
		}
	}
}

// HotAddresses returns the hot (exchange-like) addresses.
func (g *Generator) HotAddresses() []string {
	out := make([]string, len(g.hotAddrs))
	for i, a := range g.hotAddrs {
		out[i] = a.s
	}
	return out
}

// OrdinaryAddress returns the ordinary address of popularity rank (0 the
// most popular, below Options.Addresses): the address the generator sends
// outputs of that rank to. A pure function of the seed, profile and rank.
func (g *Generator) OrdinaryAddress(rank int) string {
	return deriveAddress(g.opts.Profile, g.opts.Seed, domainOrdinary, rank).s
}

// Tip returns the height and hash of the last block returned, Empty before
// the first.
func (g *Generator) Tip() chain.Tip {
	return chain.Tip{Height: g.height, Hash: g.prev, Empty: g.height == 0}
}

// Next returns the next block: TxsPerBlock transactions (a coinbase first for
// Bitcoin) whose inputs spend live outputs chosen by the age distribution
// (outputs of earlier transactions of the same block included) and whose
// outputs go to Zipf-chosen and hot addresses.
func (g *Generator) Next() *chain.Block {
	b := g.newBlock()
	b.Txs = make([]chain.Tx, 0, g.opts.TxsPerBlock)
	if g.opts.Profile == Bitcoin {
		b.Txs = append(b.Txs, g.coinbase())
	}
	for len(b.Txs) < g.opts.TxsPerBlock {
		b.Txs = append(b.Txs, g.tx())
	}
	return b
}

// NextSeed returns the next block shaped to grow the live set fast: about
// outputs new outputs in transactions of seedOutputsPerTx outputs that spend
// one input each (plus a coinbase for Bitcoin). Use it to build a large store
// quickly, then Next for realistic traffic on top.
func (g *Generator) NextSeed(outputs int) *chain.Block {
	b := g.newBlock()
	per := seedOutputsPerTx
	b.Txs = make([]chain.Tx, 0, 1+(outputs+per-1)/per)
	if g.opts.Profile == Bitcoin {
		b.Txs = append(b.Txs, g.coinbase())
	}
	for made := 0; made < outputs; made += per {
		tx := chain.Tx{Hash: g.hash()}
		tx.Inputs = g.spend(1)
		tx.Outputs = g.outputs(tx.Hash, min(per, outputs-made))
		b.Txs = append(b.Txs, tx)
	}
	return b
}

func (g *Generator) newBlock() *chain.Block {
	mean := float64(bitcoinMeanBlockSecond)
	if g.opts.Profile == Cardano {
		mean = cardanoMeanBlockSecond
	}
	g.time += 1 + int64(g.rng.ExpFloat64()*mean)
	b := &chain.Block{Height: g.height + 1, PrevHash: g.prev, Time: g.time, Hash: g.hash()}
	if g.opts.Profile == Bitcoin {
		clear(b.Hash[:8]) // proof of work, in display order
	}
	g.height, g.prev = b.Height, b.Hash
	return b
}

func (g *Generator) coinbase() chain.Tx {
	tx := chain.Tx{Hash: g.hash(), Coinbase: true}
	tx.Outputs = g.mem.outputs(1)
	// Mining pools are among the most popular addresses.
	tx.Outputs[0] = chain.Output{
		Address: g.address(g.rng.IntN(min(20, len(g.addrs)))).s,
		Value:   bitcoinSubsidy + g.rng.Uint64N(50_000_000),
	}
	g.created(tx.Hash, 0, false)
	return tx
}

// tx returns an ordinary transaction, for Cardano possibly a script
// transaction with collateral or a phase-2-invalid one.
func (g *Generator) tx() chain.Tx {
	tx := chain.Tx{Hash: g.hash()}
	nIn := g.draw(g.opts.InputsPerTx)
	nOut := g.draw(g.opts.OutputsPerTx)
	cardano := g.opts.Profile == Cardano
	if cardano && g.ordinaryLive() > 0 && g.chance(invalidTxFraction) {
		// Phase-2-invalid: the collateral is consumed and the collateral
		// return created at index len(Outputs); the inputs and outputs it
		// lists are not.
		tx.Invalid = true
		tx.CollateralInputs = g.spend(1 + g.rng.IntN(2))
		tx.Inputs = g.refer(nIn)
		tx.Outputs = g.describeOutputs(nOut)
		ret, hot := g.output()
		tx.CollateralReturn = &ret
		g.created(tx.Hash, uint32(nOut), hot)
		return tx
	}
	tx.Inputs = g.spend(nIn)
	if cardano && g.ordinaryLive() > 0 && g.chance(cardanoScriptTxs) {
		// A valid script transaction lists collateral it does not consume.
		tx.CollateralInputs = g.refer(1)
		ret, _ := g.output()
		tx.CollateralReturn = &ret
	}
	tx.Outputs = g.outputs(tx.Hash, nOut)
	return tx
}

// spend chooses up to n live outputs by the age distribution and removes them
// from the live set; fewer only when nothing is left.
func (g *Generator) spend(n int) []chain.OutPoint {
	ins := g.mem.outPoints(n)
	k := 0
	for ; k < n; k++ {
		op, ok := g.pickSpend()
		if !ok {
			break
		}
		ins[k] = op
	}
	return ins[:k]
}

func (g *Generator) pickSpend() (chain.OutPoint, bool) {
	if len(g.hot.pool) > 0 && g.chance(hotInputFraction) {
		return g.hot.takeAt(g.rng.IntN(len(g.hot.pool))), true
	}
	if g.young.live > 0 && g.chance(g.opts.YoungProb) {
		if i := g.young.find(g.rng, youngDraws, false); i >= 0 {
			return g.young.take(i), true
		}
	}
	// Uniform over every ordinary live output kept, young ones included.
	if n := g.ordinaryLive(); n > 0 {
		if i := g.rng.IntN(n); i < len(g.old.pool) {
			return g.old.takeAt(i), true
		}
		return g.young.take(g.young.find(g.rng, youngDraws, true)), true
	}
	if len(g.hot.pool) > 0 {
		return g.hot.takeAt(g.rng.IntN(len(g.hot.pool))), true
	}
	return chain.OutPoint{}, false
}

// ordinaryLive returns the ordinary live outputs kept (frozen ones are not).
func (g *Generator) ordinaryLive() int { return len(g.old.pool) + g.young.live }

// refer chooses up to n distinct live ordinary outputs, uniformly, without
// spending them: the inputs of an invalid transaction, a valid one's
// collateral.
func (g *Generator) refer(n int) []chain.OutPoint {
	ops := g.mem.outPoints(n)[:0]
	for tries := 0; len(ops) < n && tries < n*referDraws && g.ordinaryLive() > 0; tries++ {
		var op chain.OutPoint
		if i := g.rng.IntN(g.ordinaryLive()); i < len(g.old.pool) {
			op = g.old.pool[i]
		} else {
			op = g.young.slots[g.young.find(g.rng, youngDraws, true)].op
		}
		if !containsOutPoint(ops, op) {
			ops = append(ops, op)
		}
	}
	return ops
}

func containsOutPoint(ops []chain.OutPoint, op chain.OutPoint) bool {
	for _, o := range ops {
		if o == op {
			return true
		}
	}
	return false
}

// outputs returns n new outputs of tx txHash and makes them live.
func (g *Generator) outputs(txHash chain.Hash, n int) []chain.Output {
	outs := g.mem.outputs(n)
	for i := range outs {
		var hot bool
		outs[i], hot = g.output()
		g.created(txHash, uint32(i), hot)
	}
	return outs
}

// describeOutputs returns n outputs that will not be created (those of an
// invalid transaction).
func (g *Generator) describeOutputs(n int) []chain.Output {
	outs := g.mem.outputs(n)
	for i := range outs {
		outs[i], _ = g.output()
	}
	return outs
}

// created makes output index of txHash live.
func (g *Generator) created(txHash chain.Hash, index uint32, hot bool) {
	op := chain.OutPoint{TxHash: txHash, Index: index}
	switch {
	case hot:
		g.hot.offer(g.rng, op)
	case cap(g.young.slots) == 0:
		g.old.offer(g.rng, op)
	default:
		if aged, live := g.young.push(op); live {
			g.old.offer(g.rng, aged)
		}
	}
}

// output returns a new output and whether it goes to a hot address.
func (g *Generator) output() (chain.Output, bool) {
	hot := len(g.hotAddrs) > 0 && g.chance(g.opts.HotOutputFraction)
	var a address
	if hot {
		a = g.hotAddrs[g.rng.IntN(len(g.hotAddrs))]
	} else {
		a = g.address(int(g.zipf.Uint64()))
	}
	if g.opts.Profile == Bitcoin {
		return chain.Output{Address: a.s, Value: g.logUniform(&satoshis)}, hot
	}
	out := chain.Output{Address: a.s, Value: g.logUniform(&lovelace)}
	if g.chance(cardanoAssetOutputs) {
		out.Assets = g.assets()
	}
	if a.script {
		if g.chance(cardanoInlineDatum) {
			out.Datum = g.datum()
		} else {
			h := g.hash()
			out.DatumHash = &h
		}
	}
	return out, hot
}

// assets returns 1..cardanoMaxAssets distinct assets in (policy, name) order.
func (g *Generator) assets() []chain.Asset {
	n := 1
	for n < cardanoMaxAssets && g.rng.IntN(2) == 0 {
		n++
	}
	as := make([]chain.Asset, 0, n)
	for range n {
		p := g.policy(int(g.policyZipf.Uint64()))
		a := chain.Asset{Policy: p.id, Name: p.name, Quantity: g.logUniform(&tokens)}
		if p.nft {
			a.Name = strconv.AppendUint(append([]byte(nil), p.name...), g.rng.Uint64N(10_000), 10)
			a.Quantity = 1
		}
		if !containsAsset(as, a) {
			as = append(as, a)
		}
	}
	chain.SortAssets(as)
	return as
}

func containsAsset(as []chain.Asset, a chain.Asset) bool {
	for _, b := range as {
		if chain.CompareAssets(a, b) == 0 {
			return true
		}
	}
	return false
}

// datum returns an inline datum that looks like a Plutus constructor (CBOR
// tag 121) of 40..400 bytes.
func (g *Generator) datum() []byte {
	d := make([]byte, 40+g.rng.IntN(361))
	for i := range d {
		d[i] = byte(g.rng.Uint32())
	}
	d[0], d[1], d[2] = 0xd8, 0x79, 0x9f
	return d
}

func (g *Generator) address(rank int) address {
	if rank >= len(g.addrs) {
		return deriveAddress(g.opts.Profile, g.opts.Seed, domainOrdinary, rank)
	}
	a := &g.addrs[rank]
	if a.s == "" {
		*a = deriveAddress(g.opts.Profile, g.opts.Seed, domainOrdinary, rank)
	}
	return *a
}

func (g *Generator) policy(rank int) policy {
	p := &g.policies[rank]
	if p.id == nil {
		h := g.hash() // drawn on first use: deterministic, like every draw
		p.id = h[:28]
		if rank%nftPolicyEvery == 0 {
			p.nft = true
			p.name = fmt.Appendf(nil, "Collection%d#", rank)
		} else {
			p.name = fmt.Appendf(nil, "TOKEN%d", rank)
		}
	}
	return *p
}

func (g *Generator) hash() chain.Hash {
	var h chain.Hash
	for i := 0; i < chain.HashSize; i += 8 {
		v := g.rng.Uint64()
		for j := range 8 {
			h[i+j] = byte(v >> (8 * j))
		}
	}
	return h
}

func (g *Generator) draw(r Range) int { return r.Min + g.rng.IntN(r.Max-r.Min+1) }

// chance returns true with probability p; p = 0 consumes no randomness, so
// turning a feature off does not shift the other draws more than needed.
func (g *Generator) chance(p float64) bool { return p > 0 && g.rng.Float64() < p }

// logRange is a range of amounts whose logarithm is drawn uniformly.
type logRange struct{ logLo, logSpan float64 }

func newLogRange(lo, hi float64) logRange {
	return logRange{math.Log(lo), math.Log(hi) - math.Log(lo)}
}

var (
	satoshis = newLogRange(546, 5e9)  // the dust limit to 50 BTC
	lovelace = newLogRange(1e6, 1e11) // 1 to 100k ada
	tokens   = newLogRange(1, 1e12)
)

// logUniform returns an amount whose logarithm is uniform in r.
func (g *Generator) logUniform(r *logRange) uint64 {
	return uint64(math.Exp(r.logLo + g.rng.Float64()*r.logSpan))
}

// arena hands out the inputs and outputs slices of transactions from shared
// chunks, so a block costs a few allocations instead of two per transaction.
// Each slice has its capacity capped at its length: appending to one cannot
// overwrite its neighbour.
type arena struct {
	ops  []chain.OutPoint
	outs []chain.Output
}

const arenaChunk = 1024

func (a *arena) outPoints(n int) []chain.OutPoint {
	if cap(a.ops)-len(a.ops) < n {
		a.ops = make([]chain.OutPoint, 0, max(n, arenaChunk))
	}
	l := len(a.ops)
	a.ops = a.ops[:l+n]
	return a.ops[l : l+n : l+n]
}

func (a *arena) outputs(n int) []chain.Output {
	if cap(a.outs)-len(a.outs) < n {
		a.outs = make([]chain.Output, 0, max(n, arenaChunk))
	}
	l := len(a.outs)
	a.outs = a.outs[:l+n]
	return a.outs[l : l+n : l+n]
}

package loadtest

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/internal/model"
	"github.com/utxo-cache/utxo-cache/internal/workload"
)

// world is the harness's picture of the chain: the generator that extends
// it, the reference model of the state the service should be in, and the
// addresses and outpoints the readers ask about.
//
// # Two sides
//
// The generating side (gen, tipHash, recent, branch, script) makes the chain
// once: the preload, then the feed script (script.go), the writes every
// configuration's feed replays. It belongs to the goroutine that produces
// blocks, one at a time: the preload, then the feed (configurations run one
// after another).
//
// The replaying side is what one configuration's service should hold:
// model, byAddress, the outpoint pool and the feed's position in the
// script. freeze keeps its state right after the preload and reset returns
// to it, so that every configuration, started on its own copy of the
// preloaded store, is checked against the same model and fed the same
// blocks and rollbacks. model and byAddress are guarded by mu: the feed
// takes it exclusively to apply an acknowledged block or rollback (and reset
// to swap them), the checker shares it while it compares an answer. addrs
// and exchange are fixed after the preload; ops is swapped atomically as the
// feed creates outputs; created, next and pos belong to the feed.
type world struct {
	gen     *workload.Generator
	tipHash chain.Hash     // hash of the generated chain's tip (see rebranch)
	recent  []*chain.Block // newest last: the generated blocks a rollback may undo
	keep    int            // len(recent) bound
	branch  uint64         // rebranch counter: makes new hashes unique
	script  feedScript

	mu    sync.RWMutex
	model *model.Model // guarded by mu
	// byAddress lists every outpoint ever created for each address (on any
	// branch, possibly twice), guarded by mu: the checker asks the model
	// about these instead of calling model.List and model.Balance, which
	// scan every row the model holds (see addressUtxosLocked).
	byAddress map[string][]chain.OutPoint
	// seq is the commit sequence (CONTRACT §7) of the writer's state the
	// model is in, guarded by mu: the feed sets it, with the model, from
	// the writer's acknowledgement of each block and rollback; 0 while
	// unknown (between reset and the service's first report, see setSeq).
	// The pair identifies one state of the writer's sequence, which every
	// replica passes through: the checker compares an answer only when its
	// X-Commit-Seq is this seq.
	seq uint64

	addrs    []string // ordinary addresses by popularity (outputs received)
	exchange []string // the generator's hot addresses

	ops     atomic.Pointer[opPool]
	created []chain.OutPoint // recent outputs, ring; feed only
	next    int              // ring position in created
	pos     int              // the next step of script to post; feed only
	// forgetPosted drops each script step's block once the feed has taken
	// it (the soak: one configuration, never replayed, for an hour).
	forgetPosted bool

	base *worldBase // the replaying side after the preload; set by freeze
}

// worldBase is the replaying side's state right after the preload, which
// every configuration starts from. Read-only once made.
type worldBase struct {
	model     *model.Model
	byAddress map[string][]chain.OutPoint // slices clipped: appends copy
	ops       *opPool
	state     StoreState
}

// opPool is an immutable set of outpoints to read: the live set after the
// preload and a ring of outputs the feed created since.
type opPool struct {
	base   []chain.OutPoint
	recent []chain.OutPoint
}

const recentOutPoints = 8192

// pick returns an outpoint to read. Reads skew young, like spends: a third
// go to outputs the feed created, the others to the preload's live set
// (base, oldest first) with an exponentially distributed age whose mean is
// a tenth of the set.
func (p *opPool) pick(r *rand.Rand) chain.OutPoint {
	if len(p.recent) > 0 && (len(p.base) == 0 || r.IntN(3) == 0) {
		return p.recent[r.IntN(len(p.recent))]
	}
	n := len(p.base)
	age := int(r.ExpFloat64() * float64(n) / 10)
	return p.base[n-1-min(age, n-1)]
}

// Model retention: the service's defaults (docs/settings.md).
const (
	modelPruneDepth     = 2160
	modelRollbackWindow = 4320
)

// preloadPlan says how the preload builds its live set: seed blocks of
// seedBlockOutputs outputs up to seedUTXOs, then realistic blocks until
// the live set reaches utxos (at least minBlocks of them).
type preloadPlan struct {
	utxos            int
	seedUTXOs        int
	seedBlockOutputs int
	minBlocks        int
}

func newWorld(opts workload.Options) (*world, error) {
	g, err := workload.New(opts)
	if err != nil {
		return nil, err
	}
	return &world{
		gen:       g,
		model:     model.New(modelPruneDepth, modelRollbackWindow),
		byAddress: map[string][]chain.OutPoint{},
		exchange:  g.HotAddresses(),
		keep:      64,
	}, nil
}

// preload produces the initial chain, applies each block to the model and
// hands it to emit (which writes it to a file or posts it). It then fixes
// the address table and the outpoint pool.
func (w *world) preload(plan preloadPlan, emit func(*chain.Block) error) (blocks int, err error) {
	counts := map[string]int{}
	hot := map[string]bool{}
	for _, a := range w.exchange {
		hot[a] = true
	}
	var created []chain.OutPoint // in chain order
	step := func(b *chain.Block) error {
		for i := range b.Txs {
			tx := &b.Txs[i]
			tx.Creates(func(index uint32, out *chain.Output, _ bool) {
				if !hot[out.Address] {
					counts[out.Address]++
				}
				created = append(created, chain.OutPoint{TxHash: tx.Hash, Index: index})
			})
		}
		if err := w.applyToModel(b, 0); err != nil {
			return err
		}
		w.extend(b)
		blocks++
		return emit(b)
	}
	for w.gen.Live() < plan.seedUTXOs {
		// Each seed transaction spends one output: ask for a few more than
		// missing so that the last block still grows the live set.
		n := min(plan.seedBlockOutputs, plan.seedUTXOs-w.gen.Live()+16)
		if err := step(w.nextSeed(n)); err != nil {
			return blocks, err
		}
	}
	for i := 0; i < plan.minBlocks || w.gen.Live() < plan.utxos; i++ {
		if err := step(w.nextBlock()); err != nil {
			return blocks, err
		}
	}
	w.addrs = make([]string, 0, len(counts))
	for a := range counts {
		w.addrs = append(w.addrs, a)
	}
	// Most outputs first; ties by address so the table is deterministic.
	slices.SortFunc(w.addrs, func(a, b string) int {
		if counts[a] != counts[b] {
			return counts[b] - counts[a]
		}
		if a < b {
			return -1
		}
		return 1
	})
	live := make(map[chain.OutPoint]bool, w.gen.Live())
	for op := range w.gen.LiveOutPoints() {
		live[op] = true
	}
	base := make([]chain.OutPoint, 0, len(live))
	for _, op := range created {
		if live[op] {
			base = append(base, op)
		}
	}
	if len(base) == 0 || len(w.addrs) == 0 {
		return blocks, fmt.Errorf("loadtest: the preload left nothing to read")
	}
	w.ops.Store(&opPool{base: base})
	return blocks, nil
}

func (w *world) nextSeed(outputs int) *chain.Block {
	b := w.gen.NextSeed(outputs)
	b.PrevHash = w.tipHash
	return b
}

// nextBlock returns the generator's next block, linked to the current
// branch's tip (which differs from the generator's after a rebranch).
func (w *world) nextBlock() *chain.Block {
	b := w.gen.Next()
	if b.Height > 1 {
		b.PrevHash = w.tipHash
	}
	return b
}

// applyToModel applies an acknowledged block to the model. A block the
// model refuses after the service accepted it means the service (or the
// harness) broke the contract.
//
// seq is the commit sequence the writer's acknowledgement reported.
func (w *world) applyToModel(b *chain.Block, seq uint64) error {
	w.mu.Lock()
	applied, err := w.model.Apply(b, false)
	if err == nil && applied {
		w.seq = seq
		for i := range b.Txs {
			tx := &b.Txs[i]
			tx.Creates(func(index uint32, out *chain.Output, _ bool) {
				w.byAddress[out.Address] = append(w.byAddress[out.Address], chain.OutPoint{TxHash: tx.Hash, Index: index})
			})
		}
	}
	w.mu.Unlock()
	if err != nil {
		return fmt.Errorf("loadtest: the model refuses block %d: %w", b.Height, err)
	}
	if !applied {
		return fmt.Errorf("loadtest: block %d was already applied to the model", b.Height)
	}
	return nil
}

// extend makes a generated block the generated chain's tip.
func (w *world) extend(b *chain.Block) {
	w.tipHash = b.Hash
	w.recent = append(w.recent, b)
	if len(w.recent) > w.keep {
		w.recent = slices.Delete(w.recent, 0, len(w.recent)-w.keep)
	}
}

// noteCreated adds a block's outputs to the pool readers draw from.
func (w *world) noteCreated(b *chain.Block) {
	if w.created == nil {
		w.created = make([]chain.OutPoint, 0, recentOutPoints)
	}
	for i := range b.Txs {
		tx := &b.Txs[i]
		tx.Creates(func(index uint32, _ *chain.Output, _ bool) {
			op := chain.OutPoint{TxHash: tx.Hash, Index: index}
			if len(w.created) < recentOutPoints {
				w.created = append(w.created, op)
			} else {
				w.created[w.next] = op
				w.next = (w.next + 1) % recentOutPoints
			}
		})
	}
	old := w.ops.Load()
	w.ops.Store(&opPool{base: old.base, recent: slices.Clone(w.created)})
}

// rollbackModel rolls the model back to target after the service did; seq
// is the commit sequence the writer's acknowledgement reported.
func (w *world) rollbackModel(target, seq uint64) error {
	w.mu.Lock()
	err := w.model.Rollback(target)
	if err == nil {
		w.seq = seq
	}
	w.mu.Unlock()
	if err != nil {
		return fmt.Errorf("loadtest: the model refuses the rollback to %d: %w", target, err)
	}
	return nil
}

// rebranch takes the generated blocks above target off the generated chain
// and returns them re-made as a new branch to apply next: the same
// transactions in blocks with new hashes (see the package doc). The
// generator goes on from the new branch's tip once it is applied.
func (w *world) rebranch(target uint64) []*chain.Block {
	var undone []*chain.Block
	for len(w.recent) > 0 && w.recent[len(w.recent)-1].Height > target {
		undone = append(undone, w.recent[len(w.recent)-1])
		w.recent = w.recent[:len(w.recent)-1]
	}
	if len(undone) == 0 {
		return nil
	}
	slices.Reverse(undone)
	w.tipHash = undone[0].PrevHash
	w.branch++
	prev := w.tipHash
	branch := make([]*chain.Block, len(undone))
	for i, old := range undone {
		nb := *old // Txs are shared: blocks are read-only once made
		var in [chain.HashSize + 8]byte
		copy(in[:], old.Hash[:])
		binary.BigEndian.PutUint64(in[chain.HashSize:], w.branch)
		nb.Hash = sha256.Sum256(in[:])
		nb.PrevHash = prev
		prev = nb.Hash
		branch[i] = &nb
	}
	return branch
}

// freeze records the replaying side's state after the preload as the one
// reset returns to. It keeps a copy of the model: the harness holds two
// while configurations run.
func (w *world) freeze() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for a, ops := range w.byAddress {
		w.byAddress[a] = slices.Clip(ops)
	}
	tip := w.model.Tip()
	w.base = &worldBase{
		model: w.model.Clone(), byAddress: maps.Clone(w.byAddress), ops: w.ops.Load(),
		state: StoreState{Height: tip.Height, Hash: tip.Hash.String(), UTXOs: w.model.Count(), Digest: w.model.Digest().String()},
	}
}

// reset returns the replaying side to the state freeze recorded: the model
// right after the preload, the preload's outpoint pool and the start of the
// feed script. The generating side is untouched: the script's steps stay
// made. Call it between configurations, while no feed or checker runs.
func (w *world) reset() {
	w.mu.Lock()
	w.model = w.base.model.Clone()
	w.byAddress = maps.Clone(w.base.byAddress)
	w.seq = 0
	w.mu.Unlock()
	w.ops.Store(w.base.ops)
	w.created, w.next, w.pos = nil, 0, 0
}

// setSeq records the commit sequence of the state the model is in: the
// seq a service reports for the preloaded store before the feed starts
// (the preload's seq is the service's to count, CONTRACT §7).
func (w *world) setSeq(seq uint64) {
	w.mu.Lock()
	w.seq = seq
	w.mu.Unlock()
}

// modelTip returns the model's tip.
func (w *world) modelTip() chain.Tip {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.model.Tip()
}

// addressUtxosLocked returns the live outputs of address in chain order (reversed
// when desc), as model.List does, but in time proportional to the outputs
// the address ever received rather than to every row of the model: it asks
// the model about each of them (model.Utxo) and orders the live ones with
// model.CompareChainOrder. TestAddressIndexMatchesModel pins the
// equivalence. The caller holds mu (shared is enough).
func (w *world) addressUtxosLocked(address string, desc bool) []chain.Utxo {
	ops := w.byAddress[address]
	seen := make(map[chain.OutPoint]bool, len(ops))
	var out []chain.Utxo
	for _, op := range ops {
		if seen[op] {
			continue
		}
		seen[op] = true
		if u, spent, err := w.model.Utxo(op); err == nil && spent == nil && u.Address == address {
			out = append(out, u)
		}
	}
	slices.SortFunc(out, model.CompareChainOrder)
	if desc {
		slices.Reverse(out)
	}
	return out
}

// balanceOf sums an address's live outputs as model.Balance sums its rows.
func balanceOf(utxos []chain.Utxo) chain.Balance {
	var b chain.Balance
	type key struct{ policy, name string }
	sums := map[key]chain.Uint128{}
	for _, u := range utxos {
		b.Count++
		b.Value = b.Value.AddU64(u.Value)
		for _, a := range u.Assets {
			k := key{string(a.Policy), string(a.Name)}
			sums[k] = sums[k].AddU64(a.Quantity)
		}
	}
	for k, q := range sums {
		b.Assets = append(b.Assets, chain.AssetSum{Policy: []byte(k.policy), Name: []byte(k.name), Quantity: q})
	}
	slices.SortFunc(b.Assets, func(x, y chain.AssetSum) int {
		return chain.CompareAssets(chain.Asset{Policy: x.Policy, Name: x.Name}, chain.Asset{Policy: y.Policy, Name: y.Name})
	})
	return b
}

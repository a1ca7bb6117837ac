package loadtest

import (
	"fmt"
	"os"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/internal/workload"
)

// blockFile writes blocks to a JSONL or CBOR-sequence file (by extension),
// the formats `utxo-cache ingest` reads.
type blockFile struct {
	f     *os.File
	write func(*chain.Block) error
	flush func() error
}

func createBlockFile(path string) (*blockFile, error) {
	format, err := chain.FormatFromPath(path)
	if err != nil {
		return nil, fmt.Errorf("loadtest: chain file %s: %w", path, err)
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	bf := &blockFile{f: f}
	// The chain writers buffer by themselves.
	switch format {
	case chain.FormatCBOR:
		w := chain.NewCBORSeqWriter(f)
		bf.write, bf.flush = w.Write, w.Flush
	default:
		w := chain.NewJSONLWriter(f)
		bf.write, bf.flush = w.Write, w.Flush
	}
	return bf, nil
}

// Close flushes and syncs the file.
func (bf *blockFile) Close() error {
	err := bf.flush()
	if err == nil {
		err = bf.f.Sync()
	}
	if cerr := bf.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// streamSpendable bounds the live outputs the generator keeps while it
// streams a chain (workload.Options.Spendable): some 180 MB of outpoints,
// whatever the chain's size. Chains whose older live set stays below it are
// the managed preload's chain, byte for byte.
const streamSpendable = 4_000_000

// ChainStats describe a streamed chain.
type ChainStats struct {
	Blocks int `json:"blocks"`
	// Changes counts the UTXO changes the chain makes as the store counts
	// them: outputs created plus outputs spent (a phase-2-invalid
	// transaction's collateral and collateral return included), an output
	// created and spent in the same block in neither.
	Changes int64 `json:"changes"`
	// UTXOs is the live set at the chain's tip; Frozen of them are outputs
	// the generator no longer kept to spend (workload's bounded live set).
	UTXOs  int `json:"utxos"`
	Frozen int `json:"frozen"`
}

// streamChain generates the preload chain of plan with g and hands each block
// to emit, keeping nothing but the generator: its memory does not grow with
// the chain when g is bounded (workload.Options.Spendable). It makes the
// blocks world.preload makes from the same generator.
func streamChain(g *workload.Generator, plan preloadPlan, emit func(*chain.Block) error) (ChainStats, error) {
	var st ChainStats
	fresh := map[chain.OutPoint]struct{}{} // created by the block so far
	step := func(b *chain.Block) error {
		st.Blocks++
		clear(fresh)
		for i := range b.Txs {
			tx := &b.Txs[i]
			for _, op := range tx.Spends() {
				if _, ok := fresh[op]; ok {
					delete(fresh, op)
					st.Changes-- // its creation no longer counts
				} else {
					st.Changes++
				}
			}
			tx.Creates(func(index uint32, _ *chain.Output, _ bool) {
				fresh[chain.OutPoint{TxHash: tx.Hash, Index: index}] = struct{}{}
				st.Changes++
			})
		}
		return emit(b)
	}
	for g.Live() < plan.seedUTXOs {
		// As world.preload: a few more than missing, each seed
		// transaction spends one output.
		n := min(plan.seedBlockOutputs, plan.seedUTXOs-g.Live()+16)
		if err := step(g.NextSeed(n)); err != nil {
			return st, err
		}
	}
	for i := 0; i < plan.minBlocks || g.Live() < plan.utxos; i++ {
		if err := step(g.Next()); err != nil {
			return st, err
		}
	}
	st.UTXOs, st.Frozen = g.Live(), g.Frozen()
	return st, nil
}

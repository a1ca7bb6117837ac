package loadtest

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/internal/model"
	"github.com/utxo-cache/utxo-cache/internal/workload"
)

// replayChainFile applies every block of a chain file to a fresh reference
// model, refusing unknown inputs, and returns the model.
func replayChainFile(t *testing.T, path string) (*model.Model, int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m := model.New(modelPruneDepth, modelRollbackWindow)
	var next func() (*chain.Block, error)
	if filepath.Ext(path) == ".cbor" {
		next = chain.NewCBORSeqReader(f, chain.Limits{}).Next
	} else {
		next = chain.NewJSONLReader(f, chain.Limits{}).Next
	}
	blocks := 0
	for {
		b, err := next()
		if errors.Is(err, io.EOF) {
			return m, blocks
		}
		if err != nil {
			t.Fatalf("block after %d: %v", blocks, err)
		}
		if applied, err := m.Apply(b, false); err != nil || !applied {
			t.Fatalf("the model refuses block %d (applied %v): %v", b.Height, applied, err)
		}
		blocks++
	}
}

// TestWriteChainBoundedReplays: a streamed chain whose generator froze
// outputs (a small spendable bound) is still a valid chain: the reference
// model, which refuses an input it does not know, applies every block, and
// ends with the live set the stream reported.
func TestWriteChainBoundedReplays(t *testing.T) {
	for _, c := range []struct {
		profile workload.Profile
		ext     string
	}{{workload.Cardano, ".cbor"}, {workload.Bitcoin, ".jsonl"}} {
		t.Run(c.profile.String(), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "chain"+c.ext)
			o := Options{Scenario: ScenarioScale, Profile: c.profile, Seed: 9, UTXOs: 60_000, TxsPerBlock: 5}
			st, err := writeChain(o, path, 4000)
			if err != nil {
				t.Fatal(err)
			}
			if st.Frozen == 0 {
				t.Fatal("nothing frozen: the bound was never reached")
			}
			m, blocks := replayChainFile(t, path)
			if blocks != st.Blocks || int(m.Count()) != st.UTXOs || st.UTXOs < 60_000 {
				t.Fatalf("replayed %d blocks to %d UTXOs; the stream reported %+v", blocks, m.Count(), st)
			}
			t.Logf("%+v", st)
		})
	}
}

// TestWriteChainIsThePreload: below the spendable bound the streamed chain
// is the managed run's preload, block for block (world.preload applies
// each to the model as it goes).
func TestWriteChainIsThePreload(t *testing.T) {
	o := Options{Scenario: ScenarioSmoke, Profile: workload.Cardano, Seed: 4, Bin: "-"}.EnsureDefaults()
	w, err := newWorld(o.workloadOptions())
	if err != nil {
		t.Fatal(err)
	}
	var want []*chain.Block
	if _, err := w.preload(o.plan(), func(b *chain.Block) error { want = append(want, b); return nil }); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "chain.cbor")
	if _, _, err := WriteChain(o, path); err != nil {
		t.Fatal(err)
	}
	m, blocks := replayChainFile(t, path)
	if blocks != len(want) || m.Digest() != w.model.Digest() || m.Tip() != w.model.Tip() {
		t.Fatalf("%d blocks to %s at %v; the preload: %d blocks to %s at %v", blocks, m.Digest(), m.Tip(), len(want), w.model.Digest(), w.model.Tip())
	}
}

package bitcoin

import (
	"path/filepath"
	"sync"
	"testing"

	"github.com/btcsuite/btcd/wire"
)

// Fixture files in ../testdata/bitcoin (see PROVENANCE.md there).
const (
	fixtureChain14131 = "blk_0_to_14131.dat.bz2"
	fixtureBlocks1256 = "blocks1-256.bz2"
	fixture0To4       = "blk_0_to_4.dat.bz2"
	fixture3A         = "blk_3A.dat.bz2"
	fixture4A         = "blk_4A.dat.bz2"
	fixture5A         = "blk_5A.dat.bz2"
	fixture277647     = "277647.dat.bz2"
	// The large modern block, height 574200 (2019-05-02): 3315 transactions,
	// 976 OP_RETURN outputs, 502 of them before a spendable output.
	fixtureLarge = "block-0000000000000000001602407ac49862a7bca9d00f7f402db20b7be2f5de59d2.blk"
	// The small modern block, height 540107 (2018-09-05): 230 transactions,
	// an unparseable RSK merge-mining tag that Bitcoin Core keeps as a UTXO.
	fixtureSmall = "block-00000000000000000021868c2cefc52a480d173c849412fe81c4e5ab806f94ab.blk"
)

func fixturePath(name string) string { return filepath.Join("..", "testdata", "bitcoin", name) }

var (
	fixtureMu    sync.Mutex
	fixtureCache = map[string][]*wire.MsgBlock{}
)

// loadFixture decodes a fixture file once per test binary. Callers must not
// modify the blocks.
func loadFixture(tb testing.TB, name string) []*wire.MsgBlock {
	tb.Helper()
	fixtureMu.Lock()
	defer fixtureMu.Unlock()
	if blocks, ok := fixtureCache[name]; ok {
		return blocks
	}
	blocks, err := LoadBlockFile(fixturePath(name), Mainnet)
	if err != nil {
		tb.Fatalf("load %s: %v", name, err)
	}
	fixtureCache[name] = blocks
	return blocks
}

func mainnetAdapter(tb testing.TB) *Adapter {
	tb.Helper()
	a, err := NewAdapter(Options{})
	if err != nil {
		tb.Fatal(err)
	}
	return a
}

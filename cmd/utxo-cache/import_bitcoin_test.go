package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/utxo-cache/utxo-cache/bitcoin"
	"github.com/utxo-cache/utxo-cache/chain"
)

// Real Bitcoin blocks from ../../testdata/bitcoin (PROVENANCE.md there).

func bitcoinFixture(name string) string {
	return filepath.Join("..", "..", "testdata", "bitcoin", name)
}

// rawBlock is one fixture block: its serialization and its conversion at
// its height.
type rawBlock struct {
	raw   []byte
	block *chain.Block
}

var (
	fixtureMu     sync.Mutex
	fixtureBlocks = map[string][]rawBlock{}
)

// loadRawBlocks reads a fixture whose blocks sit at heights start, start+1,
// … once per test binary.
func loadRawBlocks(t *testing.T, name string, start uint64) []rawBlock {
	t.Helper()
	fixtureMu.Lock()
	defer fixtureMu.Unlock()
	if bs, ok := fixtureBlocks[name]; ok {
		return bs
	}
	br, err := bitcoin.OpenBlockFile(bitcoinFixture(name), bitcoin.Mainnet)
	if err != nil {
		t.Fatal(err)
	}
	defer br.Close()
	a, err := bitcoin.NewAdapter(bitcoin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var out []rawBlock
	for {
		blk, err := br.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := a.Convert(blk, start+uint64(len(out)))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rawBlock{raw: bitcoin.AppendBlock(nil, blk), block: b})
	}
	fixtureBlocks[name] = out
	return out
}

// writeBlkFile writes blocks as a mainnet blk*.dat file: records of magic,
// little-endian length, block.
func writeBlkFile(t *testing.T, dir, name string, blocks []rawBlock) string {
	t.Helper()
	var buf bytes.Buffer
	for _, b := range blocks {
		n := len(b.raw)
		buf.Write([]byte{0xf9, 0xbe, 0xb4, 0xd9, byte(n), byte(n >> 8), byte(n >> 16), byte(n >> 24)})
		buf.Write(b.raw)
	}
	return writeFile(t, dir, name, buf.Bytes())
}

// bitcoinStats is `stats --json` of a store fed blocks in order, computed
// from docs/blocks.md alone (utxoModel), not by the writer.
func bitcoinStats(blocks []rawBlock) string {
	m := utxoModel{}
	for _, b := range blocks {
		for pos := range b.block.Txs {
			tx := &b.block.Txs[pos]
			for _, in := range tx.Spends() {
				delete(m, in)
			}
			tx.Creates(func(index uint32, out *chain.Output, _ bool) {
				op := chain.OutPoint{TxHash: tx.Hash, Index: index}
				u := chain.Utxo{OutPoint: op, Output: *out, Height: b.block.Height, TxPos: uint32(pos)}
				if tx.Coinbase {
					u.Flags |= chain.FlagCoinbase
				}
				m[op] = u
			})
		}
	}
	tip := blocks[len(blocks)-1].block
	return fmt.Sprintf(`{"tip":{"height":%d,"hash":"%s"},"utxo_count":%d,"utxo_digest":"%s"}`,
		tip.Height, tip.Hash, len(m), m.digest())
}

var importSummaryRE = regexp.MustCompile(`import-bitcoin: applied (\d+) blocks, skipped (\d+) already applied, (\d+) stale \(off the main chain\), (\d+) UTXO changes in \S+; tip (\S+); (\d+) UTXOs; (\d+) blocks in (\d+) catch-up windows`)

// importSummary parses the summary line: blocks applied, skipped, stale.
func importSummary(t *testing.T, r cliResult) (applied, skipped, stale int) {
	t.Helper()
	m := importSummaryRE.FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("no summary line: %s", r)
	}
	applied, _ = strconv.Atoi(m[1])
	skipped, _ = strconv.Atoi(m[2])
	stale, _ = strconv.Atoi(m[3])
	return applied, skipped, stale
}

func wantImported(t *testing.T, r cliResult, applied, skipped, stale int) {
	t.Helper()
	if a, s, st := importSummary(t, r); a != applied || s != skipped || st != stale {
		t.Fatalf("applied %d skipped %d stale %d, want %d %d %d: %s", a, s, st, applied, skipped, stale, r)
	}
}

// TestImportBitcoinChain imports mainnet 0..14131 from the compressed
// fixture and checks PROVENANCE.md's figures through `stats --json`: 13,416
// UTXOs and the digest package bitcoin pins.
func TestImportBitcoinChain(t *testing.T) {
	if testing.Short() {
		t.Skip("imports 14132 blocks, one synced commit each")
	}
	t.Parallel()
	store := filepath.Join(t.TempDir(), "store")
	// A window longer than the chain: see TestWriterChain0To14131 in
	// package bitcoin on the cost of undo pruning.
	r := mustCLI(t, "import-bitcoin", "--data-dir", store, "--rollback-window", "20000",
		bitcoinFixture("blk_0_to_14131.dat.bz2"))
	wantImported(t, r, 14132, 0, 0)
	wantStats(t, store, `{"tip":{"height":14131,"hash":"00000000b3e750f37fdb42e1018799a9f44b546d393b130b369590a072430a1c"},`+
		`"utxo_count":13416,"utxo_digest":"f30c6b1e158c14cf7b29b8d49fbb70c746923d227643098f73c28f9901bca826"}`)
}

// TestImportBitcoinResumes imports 0..600, then 0..1000 (skipping what is
// there), then 1001..1200 from a file that starts mid-chain (placed above
// its parent in the store), and checks the store against the model.
func TestImportBitcoinResumes(t *testing.T) {
	t.Parallel()
	blocks := loadRawBlocks(t, "blk_0_to_14131.dat.bz2", 0)[:1201]
	dir := t.TempDir()
	store := filepath.Join(dir, "store")

	r := mustCLI(t, "import-bitcoin", "--data-dir", store, writeBlkFile(t, dir, "blk00000.dat", blocks[:601]))
	wantImported(t, r, 601, 0, 0)
	wantStats(t, store, bitcoinStats(blocks[:601]))

	r = mustCLI(t, "import-bitcoin", "--data-dir", store, writeBlkFile(t, dir, "blk00001.dat", blocks[:1001]))
	wantImported(t, r, 400, 601, 0)
	if !strings.Contains(r.stdout, "tip 1000/"+blocks[1000].block.Hash.String()) {
		t.Fatalf("summary lacks the tip: %s", r)
	}
	wantStats(t, store, bitcoinStats(blocks[:1001]))

	// Blocks 1001..1200, given in reverse order: ordered by parent.
	var rev []rawBlock
	for i := 1200; i > 1000; i-- {
		rev = append(rev, blocks[i])
	}
	r = mustCLI(t, "import-bitcoin", "--data-dir", store, writeBlkFile(t, dir, "blk00002.dat", rev))
	wantImported(t, r, 200, 0, 0)
	wantStats(t, store, bitcoinStats(blocks))
}

// TestImportBitcoinReorgFiles imports 0..4 and the branch 3A-4A-5A, given as
// separate files (two of them raw blocks): the longer branch is the chain,
// blocks 3 and 4 are stale.
func TestImportBitcoinReorgFiles(t *testing.T) {
	t.Parallel()
	main := loadRawBlocks(t, "blk_0_to_4.dat.bz2", 0)
	a3 := loadRawBlocks(t, "blk_3A.dat.bz2", 3)
	a4 := loadRawBlocks(t, "blk_4A.dat.bz2", 4)
	a5 := loadRawBlocks(t, "blk_5A.dat.bz2", 5)
	dir := t.TempDir()
	store := filepath.Join(dir, "store")
	raw5A := writeFile(t, dir, "5A.blk", a5[0].raw)
	r := mustCLI(t, "import-bitcoin", "--data-dir", store, "--network", "main",
		raw5A, bitcoinFixture("blk_4A.dat.bz2"), bitcoinFixture("blk_0_to_4.dat.bz2"), bitcoinFixture("blk_3A.dat.bz2"))
	wantImported(t, r, 6, 0, 2)
	wantStats(t, store, bitcoinStats([]rawBlock{main[0], main[1], main[2], a3[0], a4[0], a5[0]}))
}

// TestImportBitcoinRejectedBlock: blocks 100..200 into an empty store, placed
// at 100, meet block 170's spend of block 9's coinbase, which the store does
// not have: exit 1 naming the height and the reason, blocks 100..169 stay.
// With --skip-unknown-inputs the same import succeeds.
func TestImportBitcoinRejectedBlock(t *testing.T) {
	t.Parallel()
	blocks := loadRawBlocks(t, "blk_0_to_14131.dat.bz2", 0)[100:201]
	dir := t.TempDir()
	file := writeBlkFile(t, dir, "mid.dat", blocks)

	store := filepath.Join(dir, "store")
	r := cli(t, nil, nil, "import-bitcoin", "--data-dir", store, file)
	wantFail(t, r, 2, "--start-height", "not in the store")

	r = cli(t, nil, nil, "import-bitcoin", "--data-dir", store, "--start-height", "100", file)
	wantFail(t, r, 1, "height 170", blocks[70].block.Hash.String(), "unknown input", "nothing of it applied", "tip stays 169/")
	wantImported(t, r, 70, 0, 0)
	wantStats(t, store, bitcoinStats(blocks[:70]))

	r = mustCLI(t, "import-bitcoin", "--data-dir", store, "--start-height", "100", "--skip-unknown-inputs", file)
	wantImported(t, r, 31, 70, 0)

	// The same blocks placed one height too high are not the store's.
	r = cli(t, nil, nil, "import-bitcoin", "--data-dir", store, "--start-height", "101", file)
	wantFail(t, r, 1, "height 101", "another chain or branch")
}

func TestImportBitcoinUsageErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	store := filepath.Join(dir, "store")
	file := bitcoinFixture("blk_0_to_4.dat.bz2")
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"import-bitcoin", "--data-dir", store}, 2, "no FILE"},
		{[]string{"import-bitcoin", "--data-dir", store, "--network", "dogecoin", file}, 2, "--network"},
		{[]string{"import-bitcoin", "--data-dir", store, "--start-height", "x", file}, 2, "--start-height"},
		{[]string{"import-bitcoin", "--data-dir", store, "--rollback-window", "0", file}, 2, "--rollback-window"},
		{[]string{"import-bitcoin", "--data-dir", store, filepath.Join(dir, "missing.dat")}, 1, "missing.dat"},
		{[]string{"import-bitcoin", "--data-dir", store, "--network", "testnet", file}, 1, "another network"},
		{[]string{"import-bitcoin", "--data-dir", store, writeFile(t, dir, "junk.dat", []byte{0xf9, 0xbe, 0xb4, 0xd9, 1, 0, 0, 0})}, 1, "corrupt"},
	} {
		wantFail(t, cli(t, nil, nil, tc.args...), tc.code, tc.want)
	}
	// Environment variables set flags too.
	r := cli(t, []string{"UTXO_CACHE_DATA_DIR=" + store, "UTXO_CACHE_NETWORK=mainnet"}, nil, "import-bitcoin", file)
	if r.code != 0 {
		t.Fatal(r)
	}
	wantImported(t, r, 5, 0, 0)
	if h := cli(t, nil, nil, "help"); !strings.Contains(h.stdout, "import-bitcoin") {
		t.Fatalf("help does not list import-bitcoin: %s", h)
	}
}

// TestImportBitcoinStartHeightBIP34: block 277647 carries its height in its
// coinbase (BIP34), so --start-height 100 is refused with both numbers,
// exit 1, and nothing is created; at its own height it imports (its inputs
// are not in the store: --skip-unknown-inputs), and every output is at
// 277647.
func TestImportBitcoinStartHeightBIP34(t *testing.T) {
	t.Parallel()
	file := bitcoinFixture("277647.dat.bz2")
	dir := t.TempDir()
	store := filepath.Join(dir, "store")
	for _, h := range []string{"100", "0", "227931", "277646", "277648"} {
		r := cli(t, nil, nil, "import-bitcoin", "--data-dir", store, "--skip-unknown-inputs", "--start-height", h, file)
		wantFail(t, r, 1, "--start-height "+h, "at height 277647", "not at height "+h, "nothing was imported")
		if _, err := os.Stat(store); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("a refused import left %s behind (%v)", store, err)
		}
	}
	r := mustCLI(t, "import-bitcoin", "--data-dir", store, "--skip-unknown-inputs", "--start-height", "277647", file)
	wantImported(t, r, 1, 0, 0)
	blocks := loadRawBlocks(t, "277647.dat.bz2", 277647)
	wantStats(t, store, bitcoinStats(blocks))
	if !strings.Contains(r.stdout, "tip 277647/"+blocks[0].block.Hash.String()) {
		t.Fatalf("summary: %s", r)
	}
}

// TestImportBitcoinCatchUpBytes imports 0..1200 with catch-up windows (the
// default), with a bound small enough that windows are a few blocks (16 KiB:
// the early blocks, a coinbase of one output each, cost a window about 3 KiB
// each, disk.WindowBlockBytes; at 4 KiB every block went alone), and
// with windows off (--catch-up-bytes 0): the same summary figures and the
// same stats (tip, count, digest) each time. A bound that is not a size is
// a usage error that creates no store.
func TestImportBitcoinCatchUpBytes(t *testing.T) {
	t.Parallel()
	blocks := loadRawBlocks(t, "blk_0_to_14131.dat.bz2", 0)[:1201]
	dir := t.TempDir()
	file := writeBlkFile(t, dir, "blk00000.dat", blocks)
	want := bitcoinStats(blocks)
	var summaries []string
	var windows [3]int
	for i, bound := range []string{"", "16KiB", "0"} {
		store := filepath.Join(dir, fmt.Sprintf("store%d", i))
		args := []string{"import-bitcoin", "--data-dir", store}
		if bound != "" {
			args = append(args, "--catch-up-bytes", bound)
		}
		r := mustCLI(t, append(args, file)...)
		wantImported(t, r, 1201, 0, 0)
		wantStats(t, store, want)
		m := importSummaryRE.FindStringSubmatch(r.stdout)
		summaries = append(summaries, strings.Join([]string{m[1], m[4], m[5], m[6]}, " "))
		windows[i], _ = strconv.Atoi(m[8])
	}
	// Windows happen by default, more of them (smaller) at 16KiB, and none
	// with windows off: else this test would compare one path with itself.
	if windows[0] == 0 || windows[1] <= windows[0] || windows[2] != 0 {
		t.Fatalf("catch-up windows by default, at 16KiB and off: %v; want some, more, none", windows)
	}
	if summaries[0] != summaries[1] || summaries[0] != summaries[2] {
		t.Fatalf("summaries differ (blocks, changes, tip, UTXOs): %q", summaries)
	}
	store := filepath.Join(dir, "refused")
	r := cli(t, nil, nil, "import-bitcoin", "--data-dir", store, "--catch-up-bytes", "lots", file)
	if r.code != 2 || !strings.Contains(r.stderr, "--catch-up-bytes") {
		t.Fatalf("--catch-up-bytes lots: %s", r)
	}
	if _, err := os.Stat(store); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused import left %s: %v", store, err)
	}
}

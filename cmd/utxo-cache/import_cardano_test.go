package main

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/utxo-cache/utxo-cache/cardano"
	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

var cardanoSummaryRE = regexp.MustCompile(`^import-cardano: applied (\d+) blocks.*, skipped (\d+) already applied, (\d+) boundary blocks, (\d+) UTXO changes`)

// cardanoSummary parses the summary line: applied, skipped, UTXO changes.
func cardanoSummary(t *testing.T, stdout string) (applied, skipped, changes int) {
	t.Helper()
	m := cardanoSummaryRE.FindStringSubmatch(stdout)
	if m == nil {
		t.Fatalf("no summary line in %q", stdout)
	}
	applied, _ = strconv.Atoi(m[1])
	skipped, _ = strconv.Atoi(m[2])
	changes, _ = strconv.Atoi(m[4])
	return
}

// mustImportCardano runs import-cardano in this process and fails t on an
// error.
func mustImportCardano(t *testing.T, args ...string) (stdout, stderr string) {
	t.Helper()
	err, stdout, stderr := runIn(runImportCardano, args...)
	if err != nil {
		t.Fatalf("import-cardano %v: %v\n%s%s", args, err, stdout, stderr)
	}
	return stdout, stderr
}

// wantStoreFacts checks the store in dir against f: tip, UTXO count,
// skipped inputs, and every live outpoint with its lovelace.
func wantStoreFacts(t *testing.T, dir string, f chunkFacts) {
	t.Helper()
	s, err := disk.Open(dir, disk.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Chain() != "cardano" {
		t.Fatalf("store chain %q, want cardano", s.Chain())
	}
	st := s.State()
	if st.Tip.Hash != f.tip || st.Tip.Height != f.tipHeight || st.UtxoCount != uint64(len(f.live)) || st.SkippedInputs != uint64(f.skipped) {
		t.Fatalf("store: tip %s, %d UTXOs, %d skipped inputs; the chunk gives tip %d/%s, %d UTXOs, %d skipped",
			st.Tip, st.UtxoCount, st.SkippedInputs, f.tipHeight, f.tip, len(f.live), f.skipped)
	}
	v, err := s.NewView()
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	for op, value := range f.live {
		u, spent, err := v.Utxo(op)
		if err != nil || spent != nil || u.Output.Value != value {
			t.Fatalf("outpoint %s: %+v, spent %v, %v; want live with %d lovelace", op, u, spent, err, value)
		}
	}
}

// TestImportCardanoChunks imports each fixture chunk (they are not
// consecutive) into a store of its own, with --skip-unknown-inputs, and
// checks each store against the chunk's own bytes: block count and tip from
// the .secondary, the live outputs and their lovelace, the skipped inputs
// and the UTXO changes from an independent reading of the transactions.
// Catch-up windows are off: a window does not write (nor count) an output
// created and spent inside it, so only block by block is the count of
// changes the chunk's created plus spent (each block's net: the store
// writes nothing for an output created and spent in one block).
func TestImportCardanoChunks(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"01285", "01836", "02019"} {
		chunk := cardanoFixture(name + ".chunk")
		f := chunkFactsOf(t, chunk)
		dir := filepath.Join(t.TempDir(), "store")
		stdout, stderr := mustImportCardano(t, "--data-dir", dir, "--skip-unknown-inputs", "--catch-up-bytes", "0", chunk)
		applied, skipped, changes := cardanoSummary(t, stdout)
		if applied != f.blocks || skipped != 0 || changes != f.created+f.spent {
			t.Fatalf("%s: applied %d, skipped %d, %d changes; the chunk has %d blocks, %d outputs created and %d spent",
				name, applied, skipped, changes, f.blocks, f.created, f.spent)
		}
		wantStoreFacts(t, dir, f)
		if name == "02019" && !strings.Contains(stderr, "holds 5 blocks, its index lists 15") {
			t.Fatalf("02019: no note that the index lists more blocks: %q", stderr)
		}
		t.Logf("%s: %d blocks, %d txs, %d UTXOs, %d skipped inputs", name, f.blocks, f.txs, len(f.live), f.skipped)
	}
}

// writeIn is writeFile into dir, created when missing.
func writeIn(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return writeFile(t, dir, name, data)
}

// copyChunk writes the first n bytes of fixture chunk name to dir/as (and
// its .secondary next to it when withIndex).
func copyChunk(t *testing.T, name string, n int, dir, as string, withIndex bool) string {
	t.Helper()
	data, err := os.ReadFile(cardanoFixture(name + ".chunk"))
	if err != nil {
		t.Fatal(err)
	}
	if n < 0 {
		n = len(data)
	}
	p := writeIn(t, dir, as+".chunk", data[:n])
	if withIndex {
		sec, err := os.ReadFile(cardanoFixture(name + ".secondary"))
		if err != nil {
			t.Fatal(err)
		}
		writeIn(t, dir, as+".secondary", sec)
	}
	return p
}

// TestImportCardanoResumes: an import cut short (a chunk that ends inside a
// block: a warning, its complete blocks applied) and then given the whole
// chunk skips what is there and ends with the store of a one-shot import;
// again, it changes nothing. A directory of chunks is read in numeric order
// (9 before 10).
func TestImportCardanoResumes(t *testing.T) {
	t.Parallel()
	f := chunkFactsOf(t, cardanoFixture("01285.chunk"))
	tmp := t.TempDir()
	oneShot := filepath.Join(tmp, "one")
	mustImportCardano(t, "--data-dir", oneShot, "--skip-unknown-inputs", cardanoFixture("01285.chunk"))

	cut := f.completeByIndexEnd[399] + 100 // 400 complete blocks, then part of one
	part := copyChunk(t, "01285", cut, filepath.Join(tmp, "part"), "01285", true)
	resumed := filepath.Join(tmp, "resumed")
	stdout, stderr := mustImportCardano(t, "--data-dir", resumed, "--skip-unknown-inputs", part)
	if a, _, _ := cardanoSummary(t, stdout); a != 400 {
		t.Fatalf("the cut chunk: applied %d, want its 400 complete blocks", a)
	}
	if want := "ends inside a block: importing its 400 complete blocks, the 100 bytes after offset " + strconv.Itoa(cut-100); !strings.Contains(stderr, want) {
		t.Fatalf("no warning %q in %q", want, stderr)
	}
	stdout, _ = mustImportCardano(t, "--data-dir", resumed, "--skip-unknown-inputs", cardanoFixture("01285.chunk"))
	if a, s, _ := cardanoSummary(t, stdout); a != f.blocks-400 || s != 400 {
		t.Fatalf("resume: applied %d, skipped %d; want %d, 400", a, s, f.blocks-400)
	}
	want := statsJSONLine(t, oneShot)
	wantStats(t, resumed, want)
	stdout, _ = mustImportCardano(t, "--data-dir", resumed, cardanoFixture("01285.chunk"))
	if a, s, _ := cardanoSummary(t, stdout); a != 0 || s != f.blocks {
		t.Fatalf("again: applied %d, skipped %d; want 0, %d", a, s, f.blocks)
	}
	wantStats(t, resumed, want)

	// The chunk split at block 600 into 9.chunk and 10.chunk, no indexes.
	data, _ := os.ReadFile(cardanoFixture("01285.chunk"))
	dbDir := filepath.Join(tmp, "immutable")
	split := f.completeByIndexEnd[599]
	writeIn(t, dbDir, "00009.chunk", data[:split])
	writeIn(t, dbDir, "00010.chunk", data[split:])
	writeIn(t, dbDir, "clean", []byte{})
	fromDir := filepath.Join(tmp, "fromdir")
	mustImportCardano(t, "--data-dir", fromDir, "--skip-unknown-inputs", dbDir)
	wantStats(t, fromDir, want)
}

// TestImportCardanoBadInput: a corrupt chunk byte (caught by the index's
// CRC, or without an index by the decoder or the body hash), a truncated
// block file, an unknown era tag, blocks that do not follow the store's tip
// and a mid-chain start without --skip-unknown-inputs are errors naming the
// file (and offset); a new store is not created, an existing one is left as
// it was.
func TestImportCardanoBadInput(t *testing.T) {
	t.Parallel()
	f := chunkFactsOf(t, cardanoFixture("01285.chunk"))
	tmp := t.TempDir()
	existing := filepath.Join(tmp, "existing")
	part := copyChunk(t, "01285", f.completeByIndexEnd[99], filepath.Join(tmp, "part"), "01285", false)
	mustImportCardano(t, "--data-dir", existing, "--skip-unknown-inputs", part)
	before := statsJSONLine(t, existing)

	data, _ := os.ReadFile(cardanoFixture("01285.chunk"))
	at := f.completeByIndexEnd[199] - 40 // inside block 200, near its end (its transactions)
	corrupt := bytes.Clone(data)
	corrupt[at] ^= 0x01
	withIndex := filepath.Join(tmp, "crc")
	writeIn(t, withIndex, "01285.chunk", corrupt)
	sec, _ := os.ReadFile(cardanoFixture("01285.secondary"))
	writeIn(t, withIndex, "01285.secondary", sec)
	noIndex := writeIn(t, filepath.Join(tmp, "noindex"), "01285.chunk", corrupt)

	byron, _ := os.ReadFile(cardanoFixture("byron1.block"))
	raw, _ := cardano.DecodeHex(byron)
	eraNine := bytes.Clone(raw)
	if eraNine[0] != 0x82 || eraNine[1] != 0x01 {
		t.Fatalf("byron1 starts %x, want 8201", eraNine[:2])
	}
	eraNine[1] = 0x09
	unknownEra := writeFile(t, tmp, "era9.block", []byte(hex.EncodeToString(eraNine)))
	truncated := writeFile(t, tmp, "cut.block", raw[:len(raw)-10]) // binary

	offset := "offset " + strconv.Itoa(f.completeByIndexEnd[198])
	for _, tc := range []struct {
		name  string
		file  string
		is    error
		parts []string
	}{
		{"crc", filepath.Join(withIndex, "01285.chunk"), cardano.ErrCorrupt, []string{"01285.chunk", "CRC", "nothing was imported"}},
		{"decoder", noIndex, cardano.ErrCorrupt, []string{"01285.chunk " + offset, "nothing was imported"}},
		{"unknown era", unknownEra, cardano.ErrUnknownEra, []string{"era9.block"}},
		{"truncated", truncated, cardano.ErrCorrupt, []string{"cut.block"}},
	} {
		for _, dir := range []string{existing, filepath.Join(tmp, "new-"+tc.name)} {
			err, _, _ := runIn(runImportCardano, "--data-dir", dir, "--skip-unknown-inputs", tc.file)
			if !errors.Is(err, tc.is) {
				t.Fatalf("%s: %v, want %v", tc.name, err, tc.is)
			}
			for _, p := range tc.parts {
				if !strings.Contains(err.Error(), p) {
					t.Fatalf("%s: %q does not say %q", tc.name, err, p)
				}
			}
			if dir == existing {
				wantStats(t, existing, before)
			} else if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("%s: a store was created at %s", tc.name, dir)
			}
		}
	}

	// Two blocks that do not follow each other, in one run.
	err, _, _ := runIn(runImportCardano, "--data-dir", existing, "--skip-unknown-inputs", cardanoFixture("byron1.block"), cardanoFixture("byron2.block"))
	if !errors.Is(err, cardano.ErrNotLinked) || !strings.Contains(err.Error(), "byron2.block") {
		t.Fatalf("blocks that do not link: %v, want ErrNotLinked naming byron2.block", err)
	}
	wantStats(t, existing, before)

	// 01836 does not follow 01285's first 100 blocks.
	err, _, _ = runIn(runImportCardano, "--data-dir", existing, cardanoFixture("01836.chunk"))
	if err == nil || !strings.Contains(err.Error(), "01836.chunk offset 0") || !strings.Contains(err.Error(), "does not follow the store's tip") {
		t.Fatalf("a chunk that does not follow: %v", err)
	}
	wantStats(t, existing, before)

	// Resumed without --skip-unknown-inputs: the first block with an
	// unknown input stops the import, named with the flag that helps; the
	// blocks before it stay applied.
	err, _, _ = runIn(runImportCardano, "--data-dir", existing, cardanoFixture("01285.chunk"))
	m := regexp.MustCompile(`01285\.chunk offset \d+: height (\d+) block [0-9a-f]{64} \(slot \d+\): .*unknown input.*--skip-unknown-inputs`).FindStringSubmatch(fmt.Sprint(err))
	if !errors.Is(err, chain.ErrUnknownInput) || m == nil {
		t.Fatalf("resumed without --skip-unknown-inputs: %v", err)
	}
	if h, _ := strconv.ParseUint(m[1], 10, 64); h <= f.firstHeight+100 || tipHeightOf(t, existing) != h-1 {
		t.Fatalf("stopped at height %s, the store's tip is at %d", m[1], tipHeightOf(t, existing))
	}

	// A mid-chain start without --skip-unknown-inputs.
	fresh := filepath.Join(tmp, "fresh")
	err, _, _ = runIn(runImportCardano, "--data-dir", fresh, cardanoFixture("01836.chunk"))
	if err == nil || !strings.Contains(err.Error(), "--skip-unknown-inputs") {
		t.Fatalf("mid-chain start: %v, want it to name --skip-unknown-inputs", err)
	}
	if _, err := os.Stat(fresh); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("the refused mid-chain start created a store")
	}
}

// TestImportCardanoChainRefused: import-cardano into a bitcoin store and
// ingest into a cardano store are refused (ErrWrongChain), the stores as
// they were.
func TestImportCardanoChainRefused(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	btc := filepath.Join(tmp, "btc")
	mustCLI(t, "import-bitcoin", "--data-dir", btc, bitcoinFixture("blk_0_to_4.dat.bz2"))
	ada := filepath.Join(tmp, "ada")
	mustImportCardano(t, "--data-dir", ada, "--skip-unknown-inputs", cardanoFixture("02019.chunk"))
	btcStats, adaStats := statsJSONLine(t, btc), statsJSONLine(t, ada)

	err, _, _ := runIn(runImportCardano, "--data-dir", btc, "--skip-unknown-inputs", cardanoFixture("02019.chunk"))
	wantWrongChain(t, err, "bitcoin", "import-cardano", "cardano")
	err, _, _ = runIn(runIngest, "--data-dir", ada, writeJSONL(t, tmp, "b.jsonl", newTestChain(2).blocks))
	wantWrongChain(t, err, "cardano", "ingest", "generic")
	err, _, _ = runIn(runImportBitcoin, "--data-dir", ada, bitcoinFixture("blk_0_to_4.dat.bz2"))
	wantWrongChain(t, err, "cardano", "import-bitcoin", "bitcoin")
	wantStats(t, btc, btcStats)
	wantStats(t, ada, adaStats)
}

// TestImportCardanoGenesis: mainnet's epoch-0 boundary block with its Byron
// genesis seeds a store at height 0 with the Byron genesis hash (the
// boundary block's parent: 5f20df93…0ebb, mainnet's published genesis hash)
// and one output per balance of the file (counted from its JSON here), the
// known output among them; given again, nothing happens. A genesis file that
// does not parse, and a genesis with blocks that do not start the chain, are
// refused with the store unchanged (or not created).
func TestImportCardanoGenesis(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	genesisJSON := cardanoFixture("mainnet-byron-genesis.json")
	raw, err := os.ReadFile(genesisJSON)
	if err != nil {
		t.Fatal(err)
	}
	var g struct{ AvvmDistr, NonAvvmBalances map[string]string }
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	total := new(big.Int)
	for _, m := range []map[string]string{g.AvvmDistr, g.NonAvvmBalances} {
		for _, v := range m {
			x, _ := new(big.Int).SetString(v, 10)
			total.Add(total, x)
		}
	}
	count := len(g.AvvmDistr) + len(g.NonAvvmBalances)

	bad := writeFile(t, tmp, "bad.json", raw[:len(raw)/2])
	dir := filepath.Join(tmp, "store")
	err, _, _ = runIn(runImportCardano, "--data-dir", dir, "--byron-genesis", bad, cardanoFixture("genesis.block"))
	if !errors.Is(err, cardano.ErrBadGenesis) || !strings.Contains(err.Error(), "bad.json") {
		t.Fatalf("half a genesis file: %v, want ErrBadGenesis naming it", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("a refused genesis created a store")
	}

	stdout, _ := mustImportCardano(t, "--data-dir", dir, "--byron-genesis", genesisJSON, cardanoFixture("genesis.block"))
	if a, _, c := cardanoSummary(t, stdout); a != 1 || c != count || !strings.Contains(stdout, "1 boundary blocks") {
		t.Fatalf("genesis: %q; want 1 block applied, %d changes, 1 boundary block", stdout, count)
	}
	s, err := disk.Open(dir, disk.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st := s.State()
	v, err := s.NewView()
	if err != nil {
		t.Fatal(err)
	}
	var known chain.OutPoint
	h, _ := hex.DecodeString("0ae3da29711600e94a33fb7441d2e76876a9a1e98b5ebdefbf2e3bc535617616")
	copy(known.TxHash[:], h)
	u, spent, uerr := v.Utxo(known)
	v.Close()
	s.Close()
	if st.Tip.Height != 0 || st.Tip.Hash.String() != "5f20df933584822601f9e3f8c024eb5eb252fe8cefb24d1317dc3d432e940ebb" || st.UtxoCount != uint64(count) {
		t.Fatalf("store: tip %s, %d UTXOs; want 0/5f20df93…, %d", st.Tip, st.UtxoCount, count)
	}
	if uerr != nil || spent != nil || u.Output.Address != "Ae2tdPwUPEZKQuZh2UndEoTKEakMYHGNjJVYmNZgJk2qqgHouxDsA5oT83n" || u.Output.Value != 2_463_071_701_000_000 || u.Height != 0 {
		t.Fatalf("known output: %+v %v %v", u, spent, uerr)
	}
	t.Logf("mainnet Byron genesis: %d outputs, %s lovelace", count, total)
	before := statsJSONLine(t, dir)

	stdout, _ = mustImportCardano(t, "--data-dir", dir, "--byron-genesis", genesisJSON, cardanoFixture("genesis.block"))
	if a, s, _ := cardanoSummary(t, stdout); a != 0 || s != 1 {
		t.Fatalf("genesis again: %q, want nothing applied", stdout)
	}
	err, _, _ = runIn(runImportCardano, "--data-dir", dir, "--byron-genesis", bad, cardanoFixture("genesis.block"))
	if !errors.Is(err, cardano.ErrBadGenesis) {
		t.Fatalf("a bad genesis file on a seeded store: %v", err)
	}
	err, _, _ = runIn(runImportCardano, "--data-dir", dir, "--byron-genesis", genesisJSON, cardanoFixture("02019.chunk"))
	if err == nil || !strings.Contains(err.Error(), "seed the chain's start") {
		t.Fatalf("genesis with a mid-chain chunk: %v", err)
	}
	wantStats(t, dir, before)
}

func tipHeightOf(t *testing.T, dir string) uint64 {
	t.Helper()
	var st struct{ Tip struct{ Height uint64 } }
	if err := json.Unmarshal([]byte(statsJSONLine(t, dir)), &st); err != nil {
		t.Fatal(err)
	}
	return st.Tip.Height
}

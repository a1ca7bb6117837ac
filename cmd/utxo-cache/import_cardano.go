package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/utxo-cache/utxo-cache/cardano"
	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/node"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
	"github.com/utxo-cache/utxo-cache/writer"
)

const importCardanoAbout = `
Apply the Cardano blocks of each FILE, in the order given, to the store in
--data-dir (created when missing). A FILE is a cardano-node ImmutableDB
directory (its NNNNN.chunk files, in numeric order), one .chunk file (its
blocks back to back, checked against the .secondary index next to it when
there is one), or one era-tagged block [tag, block], binary CBOR or hex text.

Every block is decoded and its body hash checked (docs/cardano.md) before the
store is opened: a bad block (corrupt chunk, truncated CBOR, unknown era tag,
body hash mismatch) stops the import with an error naming the file and offset,
and the store is not touched. A chunk that ends inside a block is imported up
to its last complete block, with a warning; an index that lists blocks past
the chunk's end is not an error. Byron epoch boundary blocks link the chain
but are not stored. The blocks must follow one another; the first one must
follow the store's tip (blocks already in the store, same height and hash, are
skipped, so the import is resumable).

Into an empty store, the chain's first blocks need the genesis outputs they
spend: --byron-genesis (and --shelley-genesis) seed them as a block at height
0, the Byron genesis hash, which the files' first block (the epoch-0 boundary
block or block 1) names as its parent. A store that starts mid-chain needs
--skip-unknown-inputs instead. Blocks are applied through the single writer,
far from the last one in catch-up windows. All blocks of the FILEs are held in
memory (about three times their size): import a node's chunks a few hundred at
a time.

A block the writer rejects stops the import with exit status 1 and a message
naming it; nothing of it is applied, the blocks before it stay applied.
SIGINT or SIGTERM stops after the batch of blocks in flight (exit status 130
or 143). On a terminal a progress line goes to stderr; a summary line always
goes to stdout.`

func runImportCardano(e *env, args []string) error {
	cl := newCommandLine("import-cardano", "import-cardano [flags] FILE...", importCardanoAbout)
	dataDir := dataDirFlag(cl.fs)
	byronGenesis := cl.fs.String("byron-genesis", "",
		"Byron genesis `FILE` (JSON): seed its AVVM and non-AVVM balances as a block at height 0\n"+
			"before the chain's first block (an empty store only; given again to a store that has it, nothing happens)")
	shelleyGenesis := cl.fs.String("shelley-genesis", "",
		"Shelley genesis `FILE` (JSON): seed its initialFunds with the Byron genesis outputs (same rules)")
	catchUp := catchUpBytesFlag(cl.fs)
	retention := importRetentionFlag(cl.fs)
	var blockCache string
	blockCacheFlag(cl.fs, &blockCache)
	var maxBlockMemory string
	maxBlockMemoryFlag(cl.fs, &maxBlockMemory)
	skipUnknown := cl.fs.Bool("skip-unknown-inputs", false,
		"skip (and count) inputs that are not live unspent outputs instead of rejecting\n"+
			"the block, for a store that starts mid-chain")
	pruneDepth := pruneDepthFlag(cl.fs)
	window := rollbackWindowFlag(cl.fs)
	indexes := indexesFlag(cl.fs)
	var df diskFlags
	df.registerReserve(cl.fs)
	if err := cl.parse(e, args); err != nil {
		return err
	}
	if _, _, err := node.ParseIndexes(*indexes); err != nil {
		return usagef("--indexes: %v", err)
	}
	windowBytes, err := catchUpWindowBytes(*catchUp)
	if err != nil {
		return err
	}
	cacheBytes, err := blockCacheBytes(blockCache)
	if err != nil {
		return err
	}
	blockMemory, err := blockMemoryBytes(maxBlockMemory)
	if err != nil {
		return err
	}
	reserveBytes, err := df.reserveBytes()
	if err != nil {
		return err
	}
	if err := checkBlocks(cl, "prune-depth", *pruneDepth); err != nil {
		return err
	}
	if err := checkBlocks(cl, "rollback-window", *window); err != nil {
		return err
	}
	if len(cl.fs.Args()) == 0 {
		return usagef("no FILE to import")
	}
	start := time.Now()
	// Everything is read, decoded and linked before the store is opened.
	files, err := cardanoFiles(cl.fs.Args())
	if err != nil {
		return err
	}
	genesis, err := readGenesis(*byronGenesis, *shelleyGenesis)
	if err != nil {
		return fmt.Errorf("%w (nothing was imported)", err)
	}
	adapter, err := cardano.NewAdapter(cardano.Options{})
	if err != nil {
		return err
	}
	lc, err := loadCardanoChain(e, adapter, files, chain.Limits{MaxBlockMemory: blockMemory}.EnsureDefaults())
	if err != nil {
		return err
	}
	if genesis != nil {
		if err := lc.seed(genesis); err != nil {
			return err
		}
	}

	caught := make(chan os.Signal, 1)
	signal.Notify(caught, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(caught)

	opts, err := node.WithIndexes(disk.Options{
		PruneDepth:     storeDepth(cl, "prune-depth", *pruneDepth),
		RollbackWindow: storeDepth(cl, "rollback-window", *window),
		CacheBytes:     cacheBytes,
		LogRetention:   *retention,
		Chain:          chainCardano,
	}, *indexes, chainCardano)
	if err != nil {
		return usagef("--indexes: %v", err)
	}
	if len(lc.blocks) > 0 && !storeExists(*dataDir) && genesis == nil && !*skipUnknown {
		return lc.unplaced() // before a store is created
	}
	store, err := openStore(e, *dataDir, opts, false)
	if err != nil {
		return chainRefused("import-cardano", *dataDir, "", err)
	}
	im := &cardanoImporter{store: store, sigs: caught, progress: newProgress(e.stderr, e.stderrIsTerminal)}
	from, err := lc.place(store, *skipUnknown)
	if err == nil {
		space, reserve := writerSpace(*dataDir, reserveBytes)
		im.w = writer.New(store, writer.Options{SkipUnknownInputs: *skipUnknown, Space: space, Reserve: reserve, WindowBytes: windowBytes})
		im.counts.skipped = uint64(from)
		err = im.importFrom(lc, from)
		im.w.Close()
	}
	final := store.State()
	closeErr := store.Close()
	im.progress.clear()
	seeded := ""
	if lc.genesis != nil && from == 0 && im.counts.applied > 0 {
		seeded = fmt.Sprintf(" (%d genesis outputs at height 0)", len(lc.genesis.Txs))
	}
	fmt.Fprintf(e.stdout, "import-cardano: applied %d blocks%s, skipped %d already applied, %d boundary blocks, "+
		"%d UTXO changes in %s; tip %s; %d UTXOs%s\n",
		im.counts.applied, seeded, im.counts.skipped, lc.boundaries, im.counts.changes,
		time.Since(start).Round(time.Millisecond), final.Tip, final.UtxoCount, im.counts.windowsSummary())

	var sig *interrupted
	if errors.As(err, &sig) {
		fmt.Fprintf(e.stderr, "utxo-cache import-cardano: stopped by %s after the blocks in flight; the store was closed cleanly\n", sig.name())
		if closeErr != nil {
			fmt.Fprintf(e.stderr, "utxo-cache import-cardano: %v\n", closeErr)
		}
		return &exitError{code: sig.exitCode()}
	}
	return errors.Join(err, closeErr)
}

// cardanoFile is one file of blocks: a chunk (with its secondary index
// when there is one) or a single block.
type cardanoFile struct {
	path, secondary string
	chunk           bool
}

var chunkName = regexp.MustCompile(`^([0-9]+)\.chunk$`)

// cardanoFiles expands the FILE arguments: a directory into its chunks, in
// numeric order.
func cardanoFiles(args []string) ([]cardanoFile, error) {
	var files []cardanoFile
	for _, a := range args {
		fi, err := os.Stat(a)
		if err != nil {
			return nil, err
		}
		if !fi.IsDir() {
			files = append(files, cardanoFileOf(a))
			continue
		}
		entries, err := os.ReadDir(a)
		if err != nil {
			return nil, err
		}
		type numbered struct {
			n    uint64
			path string
		}
		var chunks []numbered
		for _, en := range entries {
			m := chunkName.FindStringSubmatch(en.Name())
			if m == nil || en.IsDir() {
				continue
			}
			n, err := strconv.ParseUint(m[1], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%s: chunk number %s: %w", a, m[1], err)
			}
			chunks = append(chunks, numbered{n, filepath.Join(a, en.Name())})
		}
		if len(chunks) == 0 {
			return nil, fmt.Errorf("%s: a directory with no NNNNN.chunk files (want an ImmutableDB directory)", a)
		}
		slices.SortFunc(chunks, func(x, y numbered) int { return cmp.Compare(x.n, y.n) })
		for _, c := range chunks {
			files = append(files, cardanoFileOf(c.path))
		}
	}
	return files, nil
}

func cardanoFileOf(path string) cardanoFile {
	if filepath.Ext(path) != ".chunk" {
		return cardanoFile{path: path}
	}
	f := cardanoFile{path: path, chunk: true}
	if sec := path[:len(path)-len(".chunk")] + ".secondary"; fileExists(sec) {
		f.secondary = sec
	}
	return f
}

func fileExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

// readGenesis reads the genesis files given (none: nil); an error names
// the file.
func readGenesis(byronPath, shelleyPath string) ([][]chain.Tx, error) {
	var out [][]chain.Tx
	for _, g := range []struct {
		path  string
		parse func(r *os.File) ([]chain.Tx, error)
	}{
		{byronPath, func(r *os.File) ([]chain.Tx, error) { return cardano.ByronGenesisTxs(r) }},
		{shelleyPath, func(r *os.File) ([]chain.Tx, error) { return cardano.ShelleyGenesisTxs(r) }},
	} {
		if g.path == "" {
			continue
		}
		f, err := os.Open(g.path)
		if err != nil {
			return nil, err
		}
		txs, err := g.parse(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", g.path, err)
		}
		out = append(out, txs)
	}
	return out, nil
}

// cardanoBlock is one block to apply and where it came from.
type cardanoBlock struct {
	b     *chain.Block
	where string // "FILE offset N", or "FILE" for a single block file
	slot  uint64
}

// cardanoChain is the linked chain of the FILEs, ready to apply.
type cardanoChain struct {
	blocks     []cardanoBlock
	boundaries int
	// origin is the parent of the chain's start when the FILEs begin at
	// the chain's start (the epoch-0 boundary block, or block 1): the
	// Byron genesis hash; else nil.
	origin  *chain.Hash
	genesis *chain.Block // the genesis block, first of blocks, once seeded
}

// loadCardanoChain reads, converts and links every block of files. Any
// error names the file and offset of the block; nothing is applied.
func loadCardanoChain(e *env, adapter *cardano.Adapter, files []cardanoFile, limits chain.Limits) (*cardanoChain, error) {
	lc := &cardanoChain{}
	link := cardano.NewLinker(chain.Tip{Empty: true})
	first := true
	add := func(where string, tagged []byte) error {
		blk, err := adapter.Convert(tagged)
		if err != nil {
			return fmt.Errorf("%s: %w (nothing was imported)", where, err)
		}
		if first {
			first = false
			switch {
			case blk.Boundary && blk.Chain.Height == 0:
				h := blk.Chain.PrevHash
				lc.origin = &h
			case !blk.Boundary && blk.Chain.Height == 1 && blk.Era == cardano.EraByron:
				h := blk.Chain.PrevHash
				lc.origin = &h
			}
		}
		out, apply, err := link.Next(blk)
		if err != nil {
			return fmt.Errorf("%s: %w (nothing was imported)", where, err)
		}
		if !apply {
			lc.boundaries++
			return nil
		}
		if err := chain.CheckBlockMemory(&out, limits); err != nil {
			return fmt.Errorf("%s: block %s: %w (nothing was imported)", where, blk.Name(), err)
		}
		lc.blocks = append(lc.blocks, cardanoBlock{b: &out, where: where, slot: blk.Slot})
		return nil
	}
	for _, f := range files {
		data, err := os.ReadFile(f.path)
		if err != nil {
			return nil, err
		}
		if !f.chunk {
			tagged := data
			if isHexText(data) {
				if tagged, err = cardano.DecodeHex(data); err != nil {
					return nil, fmt.Errorf("%s: %w (nothing was imported)", f.path, err)
				}
			}
			if err := add(f.path, tagged); err != nil {
				return nil, err
			}
			continue
		}
		var secondary []byte
		if f.secondary != "" {
			if secondary, err = os.ReadFile(f.secondary); err != nil {
				return nil, err
			}
		}
		c, err := cardano.SplitChunk(data, secondary)
		if err != nil {
			return nil, fmt.Errorf("%s: %w (nothing was imported)", f.path, err)
		}
		if c.Truncated {
			fmt.Fprintf(e.stderr, "utxo-cache import-cardano: warning: %s ends inside a block: importing its %d complete blocks, "+
				"the %d bytes after offset %d are left out\n", f.path, len(c.Blocks), c.TrailingBytes, len(data)-c.TrailingBytes)
		}
		if !c.Truncated && c.Listed > len(c.Blocks) {
			fmt.Fprintf(e.stderr, "utxo-cache import-cardano: note: %s holds %d blocks, its index lists %d (a copy cut short at a block's end)\n",
				f.path, len(c.Blocks), c.Listed)
		}
		for i, blk := range c.Blocks {
			if err := add(fmt.Sprintf("%s offset %d", f.path, c.Offsets[i]), blk); err != nil {
				return nil, err
			}
		}
	}
	return lc, nil
}

// isHexText reports whether a block file is hex text rather than binary
// CBOR (an era-tagged block starts with 0x82, not a hex digit).
func isHexText(data []byte) bool {
	n := 0
	for _, c := range data {
		switch {
		case c >= '0' && c <= '9', c >= 'a' && c <= 'f', c >= 'A' && c <= 'F':
			n++
		case c == ' ' || c == '\n' || c == '\r' || c == '\t':
		default:
			return false
		}
	}
	return n > 0
}

// seed puts the genesis block of txs before the chain: only when the FILEs
// start at the chain's start, whose parent is the Byron genesis hash.
func (lc *cardanoChain) seed(txs [][]chain.Tx) error {
	if lc.origin == nil {
		if len(lc.blocks) > 0 && lc.blocks[0].b.Height == 0 {
			return usagef("%s: the chain starts with block %s at height 0, after no Byron blocks: there is no room "+
				"for a genesis block before it, and seeding such a chain is not supported (docs/cardano.md); "+
				"import it without --byron-genesis and --shelley-genesis", lc.blocks[0].where, lc.blocks[0].b.Hash)
		}
		what := "no blocks"
		if len(lc.blocks) > 0 {
			what = fmt.Sprintf("block %s at height %d (%s)", lc.blocks[0].b.Hash, lc.blocks[0].b.Height, lc.blocks[0].where)
		}
		return usagef("--byron-genesis and --shelley-genesis seed the chain's start, but the files begin with %s: "+
			"give the chain's first blocks (the epoch-0 boundary block or block 1), or no genesis", what)
	}
	g, err := cardano.GenesisBlock(*lc.origin, txs...)
	if err != nil {
		return err
	}
	lc.genesis = g
	lc.blocks = append([]cardanoBlock{{b: g, where: "the genesis files"}}, lc.blocks...)
	return nil
}

// unplaced is the refusal of a chain that starts mid-chain (or at the
// start, without its genesis) into an empty store.
func (lc *cardanoChain) unplaced() error {
	b := lc.blocks[0]
	genesis := ""
	if lc.origin != nil {
		genesis = " or --byron-genesis (it spends the genesis outputs)"
	}
	return usagef("%s: the first block %s (height %d) has parent %s, which is not in the store (empty or missing): "+
		"give --skip-unknown-inputs (the store lacks the outputs of the blocks before it)%s",
		b.where, b.b.Hash, b.b.Height, b.b.PrevHash, genesis)
}

// place checks the chain against the store and returns the index of the
// first block to apply: the blocks before it are in the store already (same
// height and hash). The first new block must follow the store's tip.
func (lc *cardanoChain) place(store *disk.Store, skipUnknown bool) (int, error) {
	if len(lc.blocks) == 0 {
		return 0, nil
	}
	tip := store.State().Tip
	if tip.Empty {
		if lc.genesis == nil && !skipUnknown {
			return 0, lc.unplaced()
		}
		return 0, nil
	}
	i := 0
	for ; i < len(lc.blocks) && lc.blocks[i].b.Height <= tip.Height; i++ {
		cb := lc.blocks[i]
		have, found, err := store.HashAt(cb.b.Height)
		switch {
		case err != nil:
			return 0, err
		case found && have == cb.b.Hash:
			continue
		case !found && cb.b != lc.genesis:
			continue // below the first block of a store that started mid-chain
		case !found:
			return 0, fmt.Errorf("the store does not start at a genesis block (it started mid-chain): " +
				"--byron-genesis and --shelley-genesis go only into an empty store; nothing was imported")
		case cb.b == lc.genesis:
			return 0, fmt.Errorf("the store's block at height 0 is %s, not the genesis %s of these files: "+
				"another chain; nothing was imported", have, cb.b.Hash)
		}
		return 0, fmt.Errorf("%s: block %s at height %d is not the store's %s there (below its tip %s): "+
			"another chain or branch; roll the store back below it first, or use another --data-dir; nothing was imported",
			cb.where, cb.b.Hash, cb.b.Height, have, tip)
	}
	if i < len(lc.blocks) {
		cb := lc.blocks[i]
		if cb.b.Height != tip.Height+1 || cb.b.PrevHash != tip.Hash {
			return 0, fmt.Errorf("%s: block %s (height %d, parent %s) does not follow the store's tip %s: "+
				"import the blocks in between first, or use another --data-dir; nothing was imported",
				cb.where, cb.b.Hash, cb.b.Height, cb.b.PrevHash, tip)
		}
	}
	return i, nil
}

// cardanoImporter applies a placed chain. It runs on the command's
// goroutine.
type cardanoImporter struct {
	w        *writer.Writer
	store    *disk.Store
	sigs     <-chan os.Signal
	progress *progress
	counts   ingestCounts
}

// importFrom applies lc.blocks[from:] in batches through ApplyBlocks,
// heading to the last block's height (catch-up windows far from it).
func (im *cardanoImporter) importFrom(lc *cardanoChain, from int) error {
	if from >= len(lc.blocks) {
		return nil
	}
	target := lc.blocks[len(lc.blocks)-1].b.Height
	for i := from; i < len(lc.blocks); {
		select {
		case sig := <-im.sigs:
			return &interrupted{sig: sig}
		default:
		}
		end := min(i+importBatch, len(lc.blocks))
		batch := make([]*chain.Block, 0, end-i)
		for _, cb := range lc.blocks[i:end] {
			batch = append(batch, cb.b)
		}
		res, err := im.w.ApplyBlocks(context.Background(), batch, target)
		im.counts.add(res)
		if err != nil {
			cb := lc.blocks[i+res.Done]
			hint := ""
			if errors.Is(err, chain.ErrUnknownInput) {
				hint = " (a store that starts mid-chain needs --skip-unknown-inputs; a chain's start, --byron-genesis)"
			}
			return fmt.Errorf("%s: height %d block %s (slot %d): %w%s (nothing of it applied; the tip stays %s)",
				cb.where, cb.b.Height, cb.b.Hash, cb.slot, err, hint, im.store.State().Tip)
		}
		mode := "live"
		if res.Windows > 0 {
			mode = "catch-up"
		}
		im.progress.update(time.Now(), im.counts, res.Tip, mode)
		i = end
	}
	return nil
}

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/utxo-cache/utxo-cache/bitcoin"
	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/node"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
	"github.com/utxo-cache/utxo-cache/writer"
)

const importBitcoinAbout = `
Apply the Bitcoin blocks of each FILE to the store in --data-dir (created
when missing). A FILE is a Bitcoin Core blk*.dat file (records of network
magic, length, block) or one raw serialized block, either possibly
bzip2-compressed (.bz2). Bitcoin Core 28+ obfuscates its block files: copy
them with the node stopped and -blocksxor=0, or de-obfuscate them first.

The blocks of all FILEs, in any order, are arranged into one chain by their
parent links (blk*.dat files are not in height order); blocks of side
branches are skipped and counted. The chain's first block is at
--start-height when given, else at height 0 if it is the genesis block, else
right above its parent in the store (so the next batch of files continues a
store). A block that carries its height in its coinbase (BIP34: mainnet from
height 227931, testnet from 21111, signet and regtest from 1) is refused at
any other --start-height, before the store is touched. Each block is converted (display-order hashes, addresses as the
bitcoin package documents, unspendable outputs left out) and applied
through the single writer: far from the chain's last block in catch-up
windows (many blocks in one synced batch, outputs created and spent inside
a window never written; each block still one change of the commit sequence),
the last few blocks alone.

Every applied window and block is durable when the next one starts, so the
import is resumable: run it again on the same files and the blocks already
applied are skipped. All blocks of the FILEs are held in memory (about twice their
uncompressed size): import a node's files a few at a time.

A block the writer rejects stops the import with exit status 1 and a message
naming its height, hash and the reason; nothing of it is applied, the blocks
before it stay applied. SIGINT or SIGTERM stops after the batch of blocks in
flight (exit status 130 or 143). On a terminal a progress line goes to stderr; a
summary line always goes to stdout.`

func runImportBitcoin(e *env, args []string) error {
	cl := newCommandLine("import-bitcoin", "import-bitcoin [flags] FILE...", importBitcoinAbout)
	dataDir := dataDirFlag(cl.fs)
	networkName := cl.fs.String("network", "mainnet", "Bitcoin `NETWORK` of the blocks: mainnet, testnet, signet or regtest")
	startHeight := cl.fs.String("start-height", "",
		"`HEIGHT` of the chain's first block; when unset: 0 for the genesis block,\n"+
			"else one above its parent's height in the store")
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
	network, err := bitcoin.ParseNetwork(*networkName)
	if err != nil {
		return usagef("--network %q: want mainnet, testnet, signet or regtest", *networkName)
	}
	if err := checkBlocks(cl, "prune-depth", *pruneDepth); err != nil {
		return err
	}
	if err := checkBlocks(cl, "rollback-window", *window); err != nil {
		return err
	}
	if _, _, err := node.ParseIndexes(*indexes); err != nil {
		return usagef("--indexes: %v", err)
	}
	var firstHeight *uint64
	if *startHeight != "" {
		h, err := strconv.ParseUint(*startHeight, 10, 64)
		if err != nil {
			return usagef("--start-height %q: not a block height", *startHeight)
		}
		firstHeight = &h
	}
	files := cl.fs.Args()
	if len(files) == 0 {
		return usagef("no FILE to import")
	}
	for _, f := range files {
		if _, err := os.Stat(f); err != nil {
			return err // before the store is touched
		}
	}
	adapter, err := bitcoin.NewAdapter(bitcoin.Options{Network: network})
	if err != nil {
		return err
	}

	start := time.Now()
	ord, err := readBitcoinFiles(files, network)
	if err != nil {
		return err
	}
	if firstHeight != nil {
		// A block that carries its height (BIP34) is not placed elsewhere:
		// checked before the store is opened, so nothing is created.
		if err := adapter.CheckHeight(ord.Blocks[0], *firstHeight); err != nil {
			return fmt.Errorf("--start-height %d does not fit the first block: %w; nothing was imported", *firstHeight, err)
		}
	}

	opts, err := node.WithIndexes(disk.Options{
		PruneDepth:     storeDepth(cl, "prune-depth", *pruneDepth),
		RollbackWindow: storeDepth(cl, "rollback-window", *window),
		CacheBytes:     cacheBytes,
		LogRetention:   *retention,
		Chain:          chainBitcoin,
	}, *indexes, chainBitcoin)
	if err != nil {
		return usagef("--indexes: %v", err)
	}
	pl := placement{e: e, dataDir: *dataDir, opts: opts,
		adapter: adapter, skipUnknown: *skipUnknown}
	store, err := pl.openAndPlace(ord, firstHeight)
	if err != nil {
		return chainRefused("import-bitcoin", *dataDir, "", err)
	}
	space, reserve := writerSpace(*dataDir, reserveBytes)
	w := writer.New(store, writer.Options{SkipUnknownInputs: *skipUnknown, Space: space, Reserve: reserve, WindowBytes: windowBytes})

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)

	im := &bitcoinImporter{
		w:          w,
		store:      store,
		adapter:    adapter,
		sigs:       sigs,
		progress:   newProgress(e.stderr, e.stderrIsTerminal),
		dataDir:    *dataDir,
		window:     *window,
		startGiven: firstHeight != nil,
		limits:     chain.Limits{MaxBlockMemory: blockMemory},
	}
	runErr := im.importChain(ord)

	w.Close()
	final := store.State()
	closeErr := store.Close()
	im.progress.clear()
	fmt.Fprintf(e.stdout, "import-bitcoin: applied %d blocks, skipped %d already applied, %d stale (off the main chain), "+
		"%d UTXO changes in %s; tip %s; %d UTXOs%s\n",
		im.counts.applied, im.counts.skipped, len(ord.Stale), im.counts.changes,
		time.Since(start).Round(time.Millisecond), final.Tip, final.UtxoCount, im.counts.windowsSummary())

	var sig *interrupted
	if errors.As(runErr, &sig) {
		fmt.Fprintf(e.stderr, "utxo-cache import-bitcoin: stopped by %v after the block in flight; the store was closed cleanly\n", sig.sig)
		if closeErr != nil {
			fmt.Fprintf(e.stderr, "utxo-cache import-bitcoin: %v\n", closeErr)
		}
		return &exitError{code: sig.exitCode()}
	}
	return errors.Join(runErr, closeErr)
}

// readBitcoinFiles reads every block of files and orders them into one
// chain (its StartHeight is set later, by placeChain).
func readBitcoinFiles(files []string, network bitcoin.Network) (*bitcoin.Ordered, error) {
	blocks, err := bitcoin.LoadBlockFile(files[0], network)
	if err != nil {
		return nil, err // names the file
	}
	for _, f := range files[1:] {
		more, err := bitcoin.LoadBlockFile(f, network)
		if err != nil {
			return nil, err
		}
		blocks = append(blocks, more...)
	}
	if len(blocks) == 0 {
		return nil, fmt.Errorf("no blocks in %v", files)
	}
	ord, err := bitcoin.OrderByParent(blocks, bitcoin.OrderOptions{})
	if err != nil {
		return nil, fmt.Errorf("order the blocks of %v: %w", files, err)
	}
	return ord, nil
}

// bitcoinImporter applies an ordered chain of Bitcoin blocks. It runs on the
// command's goroutine.
type bitcoinImporter struct {
	w          *writer.Writer
	store      *disk.Store
	adapter    *bitcoin.Adapter
	sigs       <-chan os.Signal
	progress   *progress
	counts     ingestCounts
	dataDir    string
	window     uint64
	startGiven bool         // --start-height placed the chain
	limits     chain.Limits // --max-block-memory: checked as each block is converted
}

// placement decides where the chain's first block goes and opens the store
// for it, creating the store only when the import can start: a refusal
// leaves no new store directory behind.
type placement struct {
	e           *env
	dataDir     string
	opts        disk.Options
	adapter     *bitcoin.Adapter
	skipUnknown bool
}

// openAndPlace sets the height of the chain's first block (given, 0 for a
// genesis block, else one above its parent in the store) and returns the
// open store.
func (pl placement) openAndPlace(ord *bitcoin.Ordered, start *uint64) (*disk.Store, error) {
	first, parent := bitcoin.BlockHashes(ord.Blocks[0])
	switch {
	case start != nil:
		ord.StartHeight = *start
		return openStore(pl.e, pl.dataDir, pl.opts, false)
	case parent.IsZero():
		ord.StartHeight = 0
		return openStore(pl.e, pl.dataDir, pl.opts, false)
	}
	// The parent's height is in the store, if anywhere: do not create one
	// to look.
	if !storeExists(pl.dataDir) {
		return nil, pl.unplaced(ord, first, parent)
	}
	store, err := openStore(pl.e, pl.dataDir, pl.opts, true)
	if err != nil {
		return nil, err
	}
	h, found, err := store.HeightOfHash(parent)
	switch {
	case err != nil:
		return nil, errors.Join(err, store.Close())
	case found:
		ord.StartHeight = h + 1
		return store, nil
	}
	tip := store.State().Tip
	if err := store.Close(); err != nil {
		return nil, err
	}
	if tip.Empty {
		return nil, pl.unplaced(ord, first, parent)
	}
	// --start-height would not help: the first block must extend the tip.
	return nil, fmt.Errorf("the first block %s has parent %s, which is not in the store (tip %s): "+
		"the files do not continue the store's chain; import the blocks in between first, "+
		"or import these into a new store (another --data-dir)", first, parent, tip)
}

// unplaced is the usage error of a chain that starts mid-chain with
// nothing in the store to place it: it names the flags that make the import
// work, and the first block's height when its coinbase carries it (BIP34),
// which --start-height then accepts.
func (pl placement) unplaced(ord *bitcoin.Ordered, first, parent chain.Hash) error {
	height := "its height"
	if h, ok := pl.adapter.CoinbaseHeight(ord.Blocks[0]); ok {
		height = fmt.Sprintf("%d (the height its coinbase carries)", h)
	}
	skip := ""
	if !pl.skipUnknown {
		skip = ", and --skip-unknown-inputs (the store lacks the outputs of the blocks before it)"
	}
	return usagef("the first block %s has parent %s, which is not in the store (empty or missing): "+
		"give --start-height %s%s", first, parent, height, skip)
}

// importBatch is how many converted blocks one ApplyBlocks call takes: the
// writer cuts them into catch-up windows by its memory bound.
const importBatch = 10_000

// importChain converts and applies the chain in batches through
// ApplyBlocks, heading to the chain's last height: far from it, blocks go in
// catch-up windows (one synced batch per window, each block still one change
// of the commit sequence); the last few go alone.
func (im *bitcoinImporter) importChain(ord *bitcoin.Ordered) error {
	target := ord.Height(len(ord.Blocks) - 1)
	for i := 0; i < len(ord.Blocks); {
		select {
		case sig := <-im.sigs:
			return &interrupted{sig: sig}
		default:
		}
		var batch []*chain.Block
		var convErr func(tip chain.Tip) error // a block that does not convert ends the batch
		for ; i < len(ord.Blocks) && len(batch) < importBatch; i++ {
			blk := ord.Blocks[i]
			height := ord.Height(i)
			b, err := im.adapter.Convert(blk, height)
			if err == nil {
				err = chain.CheckBlockMemory(b, im.limits)
			}
			if err != nil {
				hash, _ := bitcoin.BlockHashes(blk)
				convErr = func(tip chain.Tip) error {
					return fmt.Errorf("height %d block %s: %w (nothing of it applied; the tip stays %s)", height, hash, err, tip)
				}
				break
			}
			batch = append(batch, b)
		}
		res, err := im.w.ApplyBlocks(context.Background(), batch, target)
		im.counts.add(res)
		if err != nil {
			return im.rejected(batch[res.Done], err)
		}
		if convErr != nil {
			return convErr(im.store.State().Tip)
		}
		mode := "live"
		if res.Windows > 0 {
			mode = "catch-up"
		}
		im.progress.update(time.Now(), im.counts, res.Tip, mode)
	}
	return nil
}

// rejected reports a block the writer refused: nothing of it changed.
func (im *bitcoinImporter) rejected(b *chain.Block, err error) error {
	tip := im.store.State().Tip
	if errors.Is(err, chain.ErrNotNextBlock) && !tip.Empty && b.Height <= tip.Height {
		if have, found, herr := im.store.HashAt(b.Height); herr == nil && found {
			hint := forkHint(im.store, im.dataDir, im.window, b.Height)
			if im.startGiven {
				hint = "check --start-height; if it is right, " + hint
			}
			err = fmt.Errorf("the store has block %s at height %d (below its tip %s), another chain or "+
				"branch: %s: %w", have, b.Height, tip, hint, err)
		}
	}
	return fmt.Errorf("height %d block %s: %w (nothing of it applied; the tip stays %s)", b.Height, b.Hash, err, tip)
}

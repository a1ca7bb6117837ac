package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/internal/diskspace"
	"github.com/utxo-cache/utxo-cache/node"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
	"github.com/utxo-cache/utxo-cache/writer"
)

const ingestAbout = `
Apply the blocks of each FILE, in order, to the store in --data-dir (created
when missing), in order through the single writer. A FILE is JSON
lines (.jsonl, .json) or an RFC 8742 CBOR sequence (.cbor) of docs/blocks.md
blocks; - reads standard input and needs --format.

The blocks already decoded when the writer is free (a backlog, up to 64) go
to it together: runs of them commit as catch-up windows (several blocks in
one synced batch, each block still one change of the commit sequence, every
window boundary exactly the state those blocks give one by one).

Every applied block is durable when the next batch starts (docs/consistency.md), so
ingest is resumable: run it again on the same files after an interruption
and the blocks already applied (same height and hash) are skipped. A block
below the store's tip that is not on the store's chain is an error.

A block that is rejected (undecodable, not the next block, an unknown input,
a double spend, a duplicate outpoint) stops ingest with exit status 1 and a
message naming the file, the record number, the block height and the
reason; nothing of that block is applied, the blocks before it stay applied.
SIGINT or SIGTERM stops after the blocks in flight and closes the store
cleanly (exit status 130 or 143). On a terminal a progress line goes to
stderr; a summary line always goes to stdout.`

// source is one FILE argument with the format to read it in.
type source struct {
	path   string // as given; "-" is standard input
	format chain.Format
}

func (s source) name() string {
	if s.path == "-" {
		return "stdin"
	}
	return s.path
}

func runIngest(e *env, args []string) error {
	cl := newCommandLine("ingest", "ingest [flags] FILE...", ingestAbout)
	dataDir := dataDirFlag(cl.fs)
	formatName := cl.fs.String("format", "",
		"block `FORMAT` of every FILE: json (JSON lines) or cbor (CBOR sequence);\n"+
			"when unset, each FILE's extension decides (.jsonl, .json: json; .cbor: cbor);\n"+
			"required to read - (standard input)")
	catchUp := catchUpBytesFlag(cl.fs)
	retention := importRetentionFlag(cl.fs)
	var blockCache string
	blockCacheFlag(cl.fs, &blockCache)
	var maxBlockMemory string
	maxBlockMemoryFlag(cl.fs, &maxBlockMemory)
	skipUnknown := cl.fs.Bool("skip-unknown-inputs", false,
		"skip (and count) inputs that are not live unspent outputs instead of rejecting\n"+
			"the block, for a store that starts mid-chain")
	progressEvery := cl.fs.Duration("progress-every", 0,
		"also print a progress line with running totals to standard error at most every `DURATION`,\n"+
			"terminal or not, for logs (0: only the redrawn line, on a terminal)")
	pruneDepth := pruneDepthFlag(cl.fs)
	window := rollbackWindowFlag(cl.fs)
	indexes := indexesFlag(cl.fs)
	var bf bulkFlags
	bf.register(cl.fs)
	var df diskFlags
	df.registerReserve(cl.fs)
	if err := cl.parse(e, args); err != nil {
		return err
	}
	if *progressEvery < 0 {
		return usagef("--progress-every %s: want a duration of 0 or more", *progressEvery)
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
	if _, _, err := node.ParseIndexes(*indexes); err != nil {
		return usagef("--indexes: %v", err)
	}
	sources, err := ingestSources(cl.fs.Args(), *formatName)
	if err != nil {
		return err
	}
	bulkOpts, bulk, err := bf.options(sources, *skipUnknown)
	if err != nil {
		return err
	}
	for _, s := range sources {
		if s.path != "-" {
			if _, err := os.Stat(s.path); err != nil {
				return err // before the store is touched
			}
		}
	}

	// Signals are caught before the store opens: one that arrives during a
	// slow open stops the ingest before its first block, with the store
	// closed cleanly, instead of killing the process.
	// Only the first signal is ours: once it is delivered, a second one
	// kills the process (an operator who insists need not wait for a slow
	// open or the block in flight; Pebble recovers from that).
	caught := make(chan os.Signal, 1)
	defer close(caught) // after signal.Stop (deferred calls run last first): ends the relay
	signal.Notify(caught, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(caught)
	sigs := make(chan os.Signal, 1)
	go func() {
		if sig, ok := <-caught; ok {
			signal.Stop(caught)
			sigs <- sig
		}
	}()

	opts, err := node.WithIndexes(disk.Options{
		PruneDepth:     storeDepth(cl, "prune-depth", *pruneDepth),
		RollbackWindow: storeDepth(cl, "rollback-window", *window),
		CacheBytes:     cacheBytes,
		LogRetention:   *retention,
		Chain:          chainGeneric,
	}, *indexes, chainGeneric)
	if err != nil {
		return usagef("--indexes: %v", err)
	}
	store, err := openStore(e, *dataDir, opts, false)
	if err != nil {
		return chainRefused("ingest", *dataDir, "", err)
	}
	prog := newProgress(e.stderr, e.stderrIsTerminal)
	prog.logEvery = *progressEvery
	g := &ingester{
		e:        e,
		store:    store,
		sigs:     sigs,
		progress: prog,
		dataDir:  *dataDir,
		window:   *window,
		limits:   chain.Limits{MaxBlockMemory: blockMemory},
	}
	start := time.Now()
	// A bulk load runs before the writer starts: it fills the store
	// alone.
	from, at, runErr := 0, (*sourcePos)(nil), error(nil)
	if bulk {
		// The load keeps --disk-reserve-bytes free where it writes.
		if reserveBytes > 0 {
			bulkOpts.Space, bulkOpts.Reserve = diskspace.Dir(cmp.Or(bulkOpts.TempDir, *dataDir)), reserveBytes
		}
		from, at, runErr = g.bulkIngest(sources, bulkOpts)
	}
	space, reserve := writerSpace(*dataDir, reserveBytes)
	w := writer.New(store, writer.Options{SkipUnknownInputs: *skipUnknown, Space: space, Reserve: reserve, WindowBytes: windowBytes})
	g.w = w
	if runErr == nil {
		runErr = g.ingest(sources, from, at)
	}

	// Stop the writer, then close the store: every acknowledged block is
	// already synced, this only makes the next open cheap.
	w.Close()
	final := store.State()
	closeErr := store.Close()
	g.progress.clear()
	fmt.Fprintf(e.stdout, "ingest: applied %d blocks, skipped %d already applied, %d UTXO changes in %s; tip %s; %d UTXOs%s\n",
		g.counts.applied, g.counts.skipped, g.counts.changes, time.Since(start).Round(time.Millisecond),
		final.Tip, final.UtxoCount, g.counts.windowsSummary())

	var sig *interrupted
	if errors.As(runErr, &sig) {
		fmt.Fprintf(e.stderr, "utxo-cache ingest: stopped by %s after the block in flight; the store was closed cleanly\n", sig.name())
		if closeErr != nil {
			fmt.Fprintf(e.stderr, "utxo-cache ingest: %v\n", closeErr)
		}
		return &exitError{code: sig.exitCode()}
	}
	return errors.Join(runErr, closeErr)
}

// ingestSources pairs each FILE with its format.
func ingestSources(args []string, formatName string) ([]source, error) {
	if len(args) == 0 {
		return nil, usagef("no FILE to ingest (use - for standard input)")
	}
	var forced chain.Format
	if formatName != "" {
		f, err := chain.ParseFormat(formatName)
		if err != nil {
			return nil, usagef("--format %q: want json or cbor", formatName)
		}
		forced = f
	}
	sources := make([]source, 0, len(args))
	stdin := 0
	for _, p := range args {
		s := source{path: p, format: forced}
		switch {
		case p == "-":
			stdin++
			if forced == 0 {
				return nil, usagef("reading - (standard input) needs --format json or --format cbor")
			}
		case forced == 0:
			f, err := chain.FormatFromPath(p)
			if err != nil {
				return nil, usagef("cannot tell the block format of %s from its extension (want .jsonl, .json or .cbor): set --format", p)
			}
			s.format = f
		}
		sources = append(sources, s)
	}
	if stdin > 1 {
		return nil, usagef("- (standard input) given %d times", stdin)
	}
	return sources, nil
}

// interrupted is the error of an ingest stopped by a signal.
type interrupted struct{ sig os.Signal }

func (i *interrupted) Error() string { return "interrupted by " + i.name() }

func (i *interrupted) name() string {
	switch i.sig {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return i.sig.String()
}

// exitCode is the shell's convention, 128 + the signal number.
func (i *interrupted) exitCode() int {
	if s, ok := i.sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return 1
}

// ingester applies the blocks of a list of sources. It runs on the command's
// goroutine; only the block readers run beside it (readRecords).
type ingester struct {
	e        *env
	w        *writer.Writer
	store    *disk.Store
	sigs     <-chan os.Signal
	progress *progress
	counts   ingestCounts
	tip      chain.Tip
	dataDir  string // for hints
	window   uint64
	limits   chain.Limits // the blocks are decoded with
}

// ingestCounts are the figures of the progress and summary lines.
type ingestCounts struct {
	applied uint64 // blocks applied
	skipped uint64 // blocks already applied (same height and hash)
	changes uint64 // live outputs created plus spent
	// windows counts the catch-up windows committed, windowBlocks the
	// blocks they applied, bulkBlocks the blocks a bulk load applied (the
	// rest of applied went alone).
	windows, windowBlocks, bulkBlocks uint64
}

// add counts the outcome of one ApplyBlocks.
func (c *ingestCounts) add(res writer.BatchResult) {
	c.applied += uint64(res.Applied)
	c.skipped += uint64(res.Skipped)
	c.changes += uint64(res.Created + res.Spent)
	c.windows += uint64(res.Windows)
	c.windowBlocks += uint64(res.WindowBlocks)
}

// windowsSummary ends a summary line: how many blocks went in catch-up
// windows.
func (c *ingestCounts) windowsSummary() string {
	bulk := ""
	if c.bulkBlocks > 0 {
		bulk = fmt.Sprintf("; %d blocks bulk loaded", c.bulkBlocks)
	}
	return fmt.Sprintf("%s; %d blocks in %d catch-up windows", bulk, c.windowBlocks, c.windows)
}

// ingest applies the blocks of sources, from source from at at (nil: the
// start of the first).
func (g *ingester) ingest(sources []source, from int, at *sourcePos) error {
	g.tip = g.store.State().Tip
	for i := from; i < len(sources); i++ {
		if err := g.ingestSource(sources[i], at); err != nil {
			return err
		}
		at = nil
	}
	return nil
}

// blockReader is what ingest needs of chain's stream readers.
type blockReader interface {
	Next() (*chain.Block, error)
	// Position is where the next Next reads: the lines (JSON) or records
	// (CBOR) consumed, and the byte offset. ResumeAt starts a reader of
	// the rest of a stream there.
	Position() (int, int64)
	ResumeAt(int, int64)
}

// record is one block read from a source, or the error that ends it.
type record struct {
	n     int // 1-based position in the source
	block *chain.Block
	err   error
	at    sourcePos // where the record starts
}

// sourcePos is a place in a source to start reading again at: the n-th
// record (1-based), after lines lines (JSON) or records (CBOR), at byte
// offset.
type sourcePos struct {
	n      int
	lines  int
	offset int64
}

// readRecords decodes blocks on its own goroutine, so that decoding the next
// block overlaps applying this one and a signal is seen even while a pipe
// has nothing to read. It stops at the end of the source, after sending an
// error, or when stop is closed. first is the number of the first record.
func readRecords(r blockReader, first int, out chan<- record, stop <-chan struct{}) {
	defer close(out)
	for n := first; ; n++ {
		lines, off := r.Position()
		at := sourcePos{n: n, lines: lines, offset: off}
		b, err := r.Next()
		if err == io.EOF {
			return
		}
		select {
		case out <- record{n: n, block: b, err: err, at: at}:
		case <-stop:
			return
		}
		if err != nil {
			return
		}
	}
}

// openSource opens s to read its records from at (nil: from the start);
// close the returned closer once done (closing also unblocks a reader
// goroutine mid-read).
func (g *ingester) openSource(s source, at *sourcePos) (blockReader, io.Closer, error) {
	var in io.Reader = g.e.stdin
	var closer io.Closer = io.NopCloser(nil)
	if s.path != "-" {
		f, err := os.Open(s.path)
		if err != nil {
			return nil, nil, err
		}
		if at != nil {
			if _, err := f.Seek(at.offset, io.SeekStart); err != nil {
				f.Close()
				return nil, nil, err
			}
		}
		in, closer = f, f
	}
	var r blockReader
	switch s.format {
	case chain.FormatCBOR:
		r = chain.NewCBORSeqReader(in, g.limits)
	default:
		r = chain.NewJSONLReader(in, g.limits)
	}
	if at != nil {
		r.ResumeAt(at.lines, at.offset)
	}
	return r, closer, nil
}

// ingestSource applies the blocks of s, from at (nil: from the start).
func (g *ingester) ingestSource(s source, at *sourcePos) error {
	r, closer, err := g.openSource(s, at)
	if err != nil {
		return err
	}
	defer closer.Close()
	first := 1
	if at != nil {
		first = at.n
	}
	records := make(chan record, ingestBacklog)
	stop := make(chan struct{})
	defer close(stop)
	go readRecords(r, first, records, stop)

	for {
		// A pending signal wins over a decoded block: stop between blocks.
		select {
		case sig := <-g.sigs:
			return &interrupted{sig: sig}
		default:
		}
		var rec record
		var ok bool
		select {
		case sig := <-g.sigs:
			return &interrupted{sig: sig}
		case rec, ok = <-records:
		}
		if !ok {
			return nil
		}
		if rec.err != nil {
			return g.undecodable(s, rec)
		}
		// A backlog: the blocks already decoded go together.
		recs := []record{rec}
		var bad *record
	backlog:
		for len(recs) < ingestBacklog {
			select {
			case more, ok := <-records:
				if !ok {
					break backlog
				}
				if more.err != nil {
					bad = &more
					break backlog
				}
				recs = append(recs, more)
			default:
				break backlog
			}
		}
		if err := g.apply(s, recs); err != nil {
			return err
		}
		if bad != nil {
			return g.undecodable(s, *bad)
		}
	}
}

// ingestBacklog bounds the decoded blocks waiting to be applied, and so the
// blocks one ApplyBlocks takes.
const ingestBacklog = 64

// ingestTarget is the target height ingest gives ApplyBlocks: above every
// block. The writer sends the blocks within its live margin of the target
// alone, so that a node's newest blocks are published one by one; a file is
// not a live feed, and with the backlog's last block as the target the last
// six blocks of every backlog went alone, each a synced batch that rewrote
// every balance row it touched (measured: a seventh of an import's CPU).
const ingestTarget = math.MaxUint64 >> 1

// apply applies a backlog of decoded blocks through ApplyBlocks: the writer
// puts runs of them in catch-up windows, each window boundary a state the
// blocks applied one by one also reach.
func (g *ingester) apply(s source, recs []record) error {
	blocks := make([]*chain.Block, len(recs))
	for i := range recs {
		blocks[i] = recs[i].block
	}
	res, err := g.w.ApplyBlocks(context.Background(), blocks, ingestTarget)
	g.counts.add(res)
	if err != nil {
		return g.rejected(s, recs[res.Done], err)
	}
	g.tip = res.Tip
	mode := "live"
	if res.Windows > 0 {
		mode = "catch-up"
	}
	g.progress.update(time.Now(), g.counts, g.tip, mode)
	return nil
}

// undecodable reports a record the reader could not decode. The JSON lines
// reader's error names the line; the CBOR reader's names the record and its
// offset already.
func (g *ingester) undecodable(s source, rec record) error {
	if s.format == chain.FormatCBOR {
		return fmt.Errorf("%s: %w (nothing of it applied; the tip stays %s)", s.name(), rec.err, g.tip)
	}
	return fmt.Errorf("%s: record %d: %w (nothing of it applied; the tip stays %s)", s.name(), rec.n, rec.err, g.tip)
}

// rejected reports a block the writer refused. The writer applies a block
// all or nothing, so nothing of it changed the store.
func (g *ingester) rejected(s source, rec record, err error) error {
	b := rec.block
	tip := g.store.State().Tip
	if errors.Is(err, chain.ErrNotNextBlock) && !tip.Empty && b.Height <= tip.Height {
		// The writer's message ("does not extend the tip") is right but
		// unhelpful here: say why a resumed ingest cannot skip it.
		if have, found, herr := g.store.HashAt(b.Height); herr == nil && found {
			err = fmt.Errorf("block %s is not on the store's chain, which has %s at height %d "+
				"(below its tip %s): a different chain or fork; %s: %w",
				b.Hash, have, b.Height, tip, forkHint(g.store, g.dataDir, g.window, b.Height), chain.ErrNotNextBlock)
		}
	}
	return fmt.Errorf("%s: record %d (height %d): %w (nothing of it applied; the tip stays %s)",
		s.name(), rec.n, b.Height, err, tip)
}

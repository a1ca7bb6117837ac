package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

// bulkFlags are ingest's flags of a bulk load (disk.BulkLoad).
type bulkFlags struct {
	on     *bool
	memory *string
	temp   *string
}

func (f *bulkFlags) register(fs *flag.FlagSet) {
	f.on = fs.Bool("bulk", false,
		"into an empty store, load the FILEs' blocks in bulk: sorted on disk and added to the store as\n"+
			"finished tables, the same store the writer would leave, several times faster. Reads the last\n"+
			"blocks again for the change log, so not - (standard input); not for a store that keeps address\n"+
			"counters (a Bitcoin store). A refused block, or an interruption, leaves the store empty. A store\n"+
			"that holds blocks is ingested as without it")
	f.memory = fs.String("bulk-memory", "256MiB",
		"memory of each of --bulk's two large sorts (`SIZE`: bytes, or with KiB/MiB/GiB, at least 16MiB)")
	f.temp = fs.String("bulk-temp-dir", "",
		"directory of --bulk's sorted runs and tables, about twice the finished store at the peak\n"+
			"(`DIR`; default: --data-dir, whose file system lets the tables be linked, not copied)")
}

// options checks the flags against the sources and returns the load's
// options (ok false: no bulk load).
func (f *bulkFlags) options(sources []source, skipUnknown bool) (disk.BulkOptions, bool, error) {
	if !*f.on {
		return disk.BulkOptions{}, false, nil
	}
	mem, err := parseSize(*f.memory)
	if err != nil || mem < 16<<20 {
		return disk.BulkOptions{}, false, usagef("--bulk-memory: %q: want a size of at least 16MiB", *f.memory)
	}
	for _, s := range sources {
		if s.path == "-" {
			return disk.BulkOptions{}, false, usagef("--bulk reads the last blocks again: it cannot read - (standard input)")
		}
	}
	return disk.BulkOptions{TempDir: *f.temp, MemBytes: int(mem), SkipUnknownInputs: skipUnknown}, true, nil
}

// bulkMark is where a block was read: its source and position.
type bulkMark struct {
	source int
	at     sourcePos
	height uint64
}

// bulkIngest loads every block of sources into the empty store
// (disk.BulkLoad) and returns where the writer takes over: after the last
// source (from = len(sources)) once they are loaded, or at the start (from
// 0, at nil) for a store that holds blocks, which is left to the writer
// with a note.
func (g *ingester) bulkIngest(sources []source, opts disk.BulkOptions) (from int, at *sourcePos, err error) {
	if st := g.store.State(); !st.Tip.Empty {
		fmt.Fprintf(g.e.stderr, "ingest: --bulk: the store already holds blocks (tip %s): ingesting through the writer\n", st.Tip)
		return 0, nil, nil
	}
	// The change log's records hold their blocks whole: the load reads the
	// last LogRetention blocks again, from where they were read.
	keep := g.store.Options().LogRetention
	b := &bulkReading{recent: make(map[uint64]chain.Hash, bulkRecent)}
	opts.Reread = func(h uint64, fn func(*chain.Block) error) error {
		for _, m := range b.marks {
			if m.height == h {
				return g.reread(sources, m, fn)
			}
		}
		return fmt.Errorf("--bulk: block %d is not among the last %d read", h, len(b.marks))
	}
	opts.Progress = func(p disk.BulkProgress) {
		what := "merged the outputs' events"
		if p.Phase == "rows" {
			what = "wrote the index and balance rows"
		}
		g.progress.note(time.Now(), fmt.Sprintf("bulk: %s: %d of %d", what, p.Done, p.Total))
	}
	l, err := g.store.NewBulkLoad(opts)
	if err != nil {
		return 0, nil, fmt.Errorf("--bulk: %w", err)
	}
	defer func() {
		if cerr := l.Close(); cerr != nil {
			fmt.Fprintf(g.e.stderr, "ingest: --bulk: removing its temporary files: %v\n", cerr)
		}
	}()

	// A signal stops the load, in its reading or its sorts: nothing is
	// loaded.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var caught os.Signal
	done := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case caught = <-g.sigs:
			cancel()
		case <-done:
		}
	}()
	stopWatching := func() os.Signal {
		select {
		case <-done:
		default:
			close(done)
		}
		<-watched
		return caught
	}
	defer stopWatching()

	start := time.Now()
	for i, s := range sources {
		err := g.bulkRead(ctx, l, b, i, s, func(m bulkMark) {
			if keep > 0 {
				if uint64(len(b.marks)) < keep {
					b.marks = append(b.marks, m)
				} else {
					b.marks[b.read%keep] = m
				}
			}
			b.read++
		})
		if err != nil && ctx.Err() != nil {
			if sig := stopWatching(); sig != nil {
				return 0, nil, &interrupted{sig: sig}
			}
		}
		if err != nil {
			return 0, nil, err
		}
	}
	if b.read == 0 {
		return len(sources), nil, nil
	}
	st, err := l.Finish(ctx, l.Tip().Height+1)
	sig := stopWatching()
	switch {
	case err != nil && sig != nil:
		return 0, nil, &interrupted{sig: sig}
	case errors.Is(err, disk.ErrFailed):
		return 0, nil, fmt.Errorf("bulk load of blocks %d..%d: %w", l.First(), l.Tip().Height, err)
	case err != nil:
		return 0, nil, fmt.Errorf("bulk load of blocks %d..%d: %w (nothing applied: the store is still empty)", l.First(), l.Tip().Height, err)
	}
	created, spent := l.Changes()
	g.counts.applied += b.read
	g.counts.skipped += b.skipped
	g.counts.bulkBlocks = b.read
	g.counts.changes += created + spent
	g.tip = st.Tip
	g.progress.point(time.Now(), g.counts, g.tip)
	g.progress.clear()
	fmt.Fprintf(g.e.stderr, "ingest: bulk loaded blocks %d..%d (%d UTXO changes, %d UTXOs) in %s\n",
		l.First(), st.Tip.Height, created+spent, st.UtxoCount, time.Since(start).Round(time.Millisecond))
	if sig != nil {
		// Caught once the load was in: it stands, and the command stops.
		return len(sources), nil, &interrupted{sig: sig}
	}
	return len(sources), nil, nil
}

// bulkReading is what bulkIngest keeps of the blocks it has read.
type bulkReading struct {
	read    uint64                // blocks added to the load
	skipped uint64                // blocks read again (a file repeating another's last blocks)
	marks   []bulkMark            // where the last LogRetention blocks were read, a ring
	recent  map[uint64]chain.Hash // the hashes of the last bulkRecent blocks added
}

// bulkRecent is how many of the last blocks a bulk load remembers the
// hashes of, to skip a block read again (files that overlap), as the
// writer skips a block already applied.
const bulkRecent = 1024

// note remembers the hash of block b, just added.
func (r *bulkReading) note(b *chain.Block) {
	r.recent[b.Height] = b.Hash
	if b.Height >= bulkRecent {
		delete(r.recent, b.Height-bulkRecent)
	}
}

// reread reads the blocks of sources again from m on, calling fn with
// each, until fn returns an error (which it returns) or the last source
// ends.
func (g *ingester) reread(sources []source, m bulkMark, fn func(*chain.Block) error) error {
	at := &m.at
	for i := m.source; i < len(sources); i++ {
		r, closer, err := g.openSource(sources[i], at)
		if err != nil {
			return err
		}
		for {
			b, err := r.Next()
			if err == io.EOF {
				break
			}
			if err == nil {
				err = fn(b)
			}
			if err != nil {
				closer.Close()
				return err
			}
		}
		closer.Close()
		at = nil
	}
	return nil
}

// bulkRead adds the blocks of source i to l, calling mark with each one's
// position. A block at or below the last one added, with the hash the
// load has at its height, is skipped, as the writer skips a block already
// applied. A record that does not decode, or a block that does not extend
// the last, is reported after an earlier refused block, if any (as the
// writer, applying them in order, would have reported it first).
func (g *ingester) bulkRead(ctx context.Context, l *disk.BulkLoad, b *bulkReading, i int, s source, mark func(bulkMark)) error {
	r, closer, err := g.openSource(s, nil)
	if err != nil {
		return err
	}
	defer closer.Close()
	records := make(chan record, ingestBacklog)
	stop := make(chan struct{})
	defer close(stop)
	go readRecords(r, 1, records, stop)
	earlier := func(err error) error {
		if cerr := l.Check(ctx); cerr != nil {
			if ctx.Err() != nil {
				return cerr
			}
			return fmt.Errorf("bulk load: %w (nothing applied: the store is still empty)", cerr)
		}
		return err
	}
	for {
		var rec record
		var ok bool
		select {
		case <-ctx.Done():
			return ctx.Err()
		case rec, ok = <-records:
		}
		if !ok {
			return nil
		}
		if rec.err != nil {
			return earlier(g.undecodable(s, rec))
		}
		blk := rec.block
		if tip := l.Tip(); !tip.Empty && blk.Height <= tip.Height {
			if h, ok := b.recent[blk.Height]; ok && h == blk.Hash {
				b.skipped++
				continue
			}
			var why error
			if h, ok := b.recent[blk.Height]; ok {
				why = fmt.Errorf("block %s is not on the chain loaded, which has %s at height %d: %w", blk.Hash, h, blk.Height, chain.ErrNotNextBlock)
			} else {
				why = fmt.Errorf("block %d repeats a block more than %d below the last one read (%s): %w", blk.Height, bulkRecent, tip, chain.ErrNotNextBlock)
			}
			return earlier(fmt.Errorf("%s: record %d (height %d): %w (nothing applied: the store is still empty)", s.name(), rec.n, blk.Height, why))
		}
		if err := l.Add(blk); err != nil {
			if errors.Is(err, chain.ErrNotNextBlock) || errors.Is(err, chain.ErrInvalidBlock) {
				return earlier(fmt.Errorf("%s: record %d (height %d): %w (nothing applied: the store is still empty)", s.name(), rec.n, blk.Height, err))
			}
			return fmt.Errorf("bulk load: %w (nothing applied: the store is still empty)", err)
		}
		b.note(blk)
		mark(bulkMark{source: i, at: rec.at, height: blk.Height})
		g.progress.note(time.Now(), fmt.Sprintf("bulk: read %d blocks of %s, tip %d", rec.n, s.name(), blk.Height))
	}
}

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
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
		"into an empty store, load all but the last blocks of the FILEs in bulk: sorted on disk and\n"+
			"added to the store as finished tables, then the last blocks (the deepest a rollback, a spent\n"+
			"record or the change log reaches) through the writer; several times faster from genesis.\n"+
			"Reads each FILE twice, so not - (standard input); not for a store that keeps address counters\n"+
			"(a Bitcoin store). A refused block leaves the store empty. A store that holds blocks is\n"+
			"ingested as without it")
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
			return disk.BulkOptions{}, false, usagef("--bulk reads each FILE twice: it cannot read - (standard input)")
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

// bulkIngest loads all but the last BulkDepth blocks of sources into the
// empty store (disk.BulkLoad), and returns where the writer takes over:
// the source, and the position in it, of the first block left to it. A
// store that holds blocks, or files of no more blocks than the writer
// takes at the tip, load nothing (from 0, at nil), with a note.
func (g *ingester) bulkIngest(sources []source, opts disk.BulkOptions) (from int, at *sourcePos, err error) {
	if st := g.store.State(); !st.Tip.Empty {
		fmt.Fprintf(g.e.stderr, "ingest: --bulk: the store already holds blocks (tip %s): ingesting through the writer\n", st.Tip)
		return 0, nil, nil
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
	defer l.Close()
	start := time.Now()
	depth := g.store.BulkDepth()
	ring := make([]bulkMark, depth) // the last depth blocks read
	var read uint64
	for i, s := range sources {
		err := g.bulkRead(l, i, s, func(m bulkMark) {
			ring[read%depth] = m
			read++
		})
		if err != nil {
			return 0, nil, err
		}
	}
	if read <= depth {
		fmt.Fprintf(g.e.stderr, "ingest: --bulk: %d blocks, no more than the %d the writer applies at the tip: ingesting them all through the writer\n", read, depth)
		return 0, nil, nil
	}
	mark := ring[read%depth] // the oldest of the last depth: the writer's first
	below := l.Tip().Height + 1 - depth
	if mark.height != below {
		return 0, nil, fmt.Errorf("--bulk: the block the writer starts at is at height %d, want %d", mark.height, below)
	}

	// A signal during the sorts cancels them: nothing is loaded.
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
	st, err := l.Finish(ctx, below)
	close(done)
	<-watched
	if caught != nil {
		return 0, nil, &interrupted{sig: caught}
	}
	if err != nil {
		return 0, nil, fmt.Errorf("bulk load of blocks %d..%d: %w (nothing applied: the store is still empty)", l.First(), below-1, err)
	}
	created, spent := l.Changes()
	g.counts.applied += below - l.First()
	g.counts.bulkBlocks = below - l.First()
	g.counts.changes += created + spent
	g.tip = st.Tip
	g.progress.point(time.Now(), g.counts, g.tip)
	g.progress.clear()
	fmt.Fprintf(g.e.stderr, "ingest: bulk loaded blocks %d..%d (%d UTXO changes, %d UTXOs) in %s; the writer applies the last %d\n",
		l.First(), below-1, created+spent, st.UtxoCount, time.Since(start).Round(time.Millisecond), depth)
	return mark.source, &mark.at, nil
}

// bulkRead adds the blocks of source i to l, calling mark with each one's
// position. A record that does not decode, or a block that does not
// extend the last, is reported after an earlier refused block, if any (as
// the writer, applying them in order, would have reported it first).
func (g *ingester) bulkRead(l *disk.BulkLoad, i int, s source, mark func(bulkMark)) error {
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
		if cerr := l.Check(context.Background()); cerr != nil {
			return fmt.Errorf("bulk load: %w (nothing applied: the store is still empty)", cerr)
		}
		return err
	}
	for {
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
			return earlier(g.undecodable(s, rec))
		}
		b := rec.block
		if err := l.Add(b); err != nil {
			if errors.Is(err, chain.ErrNotNextBlock) || errors.Is(err, chain.ErrInvalidBlock) {
				return earlier(fmt.Errorf("%s: record %d (height %d): %w (nothing applied: the store is still empty)", s.name(), rec.n, b.Height, err))
			}
			return fmt.Errorf("bulk load: %w (nothing applied: the store is still empty)", err)
		}
		mark(bulkMark{source: i, at: rec.at, height: b.Height})
		g.progress.note(time.Now(), fmt.Sprintf("bulk: read %d blocks of %s, tip %d", rec.n, s.name(), b.Height))
	}
}

package disk

import (
	"cmp"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/utxo-cache/utxo-cache/chain"
)

// ErrNewerSchema is returned by Open for a store written by a newer version.
var ErrNewerSchema = errors.New("disk: store written by a newer version of utxo-cache")

// ErrClosed is returned by operations on a closed store.
var ErrClosed = errors.New("disk: store closed")

// Options configure a Store. The zero value of every field means its default.
type Options struct {
	// PruneDepth is how many blocks a spent record stays visible (see
	// docs/rollback-and-retention.md). Zero: the value the store recorded, or 2160 for a new store. A
	// value that differs from the recorded one is a deliberate change: Open
	// applies it, records it and logs it.
	PruneDepth uint64
	// RollbackWindow is the deepest exact rollback, in blocks. Zero: the
	// value the store recorded, or 4320 for a new store; a different value is
	// recorded like PruneDepth's.
	RollbackWindow uint64
	// UndoMode chooses compact or self-contained undo deltas. Default compact.
	// It applies to blocks applied from now on; a store may mix both.
	UndoMode UndoMode
	// PruneBudget bounds the spent-list entries pruning examines per block
	// (each deletes at most one spent record). Default 20000,
	// several times a large block's inputs, so pruning keeps up.
	PruneBudget int
	// RecentOutputs bounds the in-memory view of young live outputs, in
	// entries (about 200 bytes each). Default 500000; negative disables it.
	RecentOutputs int
	// BalanceCache bounds the writer's cache of balance rows, in entries
	// (about 100 bytes each). Default 262144; negative disables it.
	// BalanceCacheBytes bounds the memory of its rows' assets (a row holds
	// every asset of its value: a large wallet's or an NFT collection's is
	// megabytes). Default 128 MiB.
	BalanceCache      int
	BalanceCacheBytes int64
	// PrefetchWorkers bounds the goroutines that read a block's inputs and
	// balance rows from Pebble at once (BlockTxn.Prefetch, balance updates).
	// Default GOMAXPROCS, at most 8; negative reads them on the writer
	// goroutine alone.
	PrefetchWorkers int
	// LogRetention is how many changes the change log keeps for replicas
	// (changelog.go): each applied block is one change. Zero: the rollback
	// window. NoChangeLog turns the log off (a store that no replica reads).
	LogRetention uint64
	NoChangeLog  bool
	// ReturnCorruption makes corrupt data that a read finds (a block whose
	// checksum does not match) an error of that read, matching ErrCorrupt,
	// instead of Pebble's default, a fatal error that ends the process. For
	// opening a store that came from elsewhere to verify it
	// (replication.Install): a damaged copy is refused, not a crash.
	ReturnCorruption bool
	// CacheBytes is Pebble's block cache. Default 256 MiB.
	CacheBytes int64
	// MemTableBytes is Pebble's memtable size. Default 64 MiB.
	MemTableBytes uint64
	// Chain names the chain whose blocks the caller feeds (chainname.go).
	// Empty: unset, no check. Set: a store that records another chain and
	// holds blocks refuses the Open (ErrWrongChain, before anything is
	// written); otherwise the store records it (a store created before
	// chains were recorded takes the first one given).
	Chain Chain
	// ChainIfNone is recorded, when Chain is unset, by a store that records
	// no chain and holds no blocks: the chain of a node that takes blocks
	// from any producer (a store fed only by them is that chain's) but
	// serves every chain's store (what it takes must link to the tip).
	ChainIfNone Chain
	// Dimensions lists optional index dimensions beyond DimAddress. They are
	// fixed when the store takes its first block and recorded in its schema
	// row; once it holds blocks, opening with a different set fails
	// (ErrIndexMismatch: adding an index needs a re-import into a new
	// store). Empty: the store's recorded set, or DefaultDimensions.
	Dimensions []Dimension
	// DefaultDimensions are the dimensions of Chain's stores (the chain's
	// default set), taken when Dimensions is empty by a new store, and by a
	// store that never took a block when it takes Chain now; any other
	// store keeps what it recorded.
	DefaultDimensions []Dimension
	// Derivers gives the values of the dimensions the chain adapter knows
	// (DimPaymentCredential, DimStakeCredential). A store that indexes one
	// of them opens without it, for reads, but refuses every write
	// (ErrNoDeriver).
	Derivers Derivers
	// Counters starts per-address lifetime counters (counters.go) on a
	// store that keeps none: counted from the next block it applies. A
	// store that keeps them records it and keeps counting whatever later
	// opens ask, so false never stops them.
	Counters bool
	// Logger receives Pebble's events and the store's own. Default: discard.
	Logger *slog.Logger
	// Pending bounds the pending set and sets the expiry of a post
	// (pending.go). Only the writer's decide: a replica applies the posts
	// its writer logged.
	Pending PendingOptions

	// fs replaces the file system. Tests only, through WithFS
	// (export_test.go): the power-loss and I/O fault tests run the store on
	// vfs.NewCrashableMem behind vfs/errorfs.
	fs vfs.FS
	// noCompactions turns Pebble's automatic compactions off. Tests only,
	// through WithoutCompactions (export_test.go): heap measurements that
	// background compactions would blur.
	noCompactions bool
	// onNoSpace, set by OpenContext, hears of every background error that
	// is ENOSPC (see backgroundErrors).
	onNoSpace func(err error, flush bool) bool
}

// EnsureDefaults fills zero fields with their defaults.
func (o Options) EnsureDefaults() Options {
	if o.PruneDepth == 0 {
		o.PruneDepth = 2160
	}
	if o.RollbackWindow == 0 {
		o.RollbackWindow = 4320
	}
	if o.UndoMode == 0 {
		o.UndoMode = UndoCompact
	}
	if o.PruneBudget == 0 {
		o.PruneBudget = 20000
	}
	if o.RecentOutputs == 0 {
		o.RecentOutputs = 500_000
	}
	if o.RecentOutputs < 0 {
		o.RecentOutputs = 0
	}
	if o.BalanceCache == 0 {
		o.BalanceCache = 1 << 18
	}
	if o.BalanceCache < 0 {
		o.BalanceCache = 0
	}
	if o.BalanceCacheBytes <= 0 {
		o.BalanceCacheBytes = 128 << 20
	}
	if o.PrefetchWorkers == 0 {
		o.PrefetchWorkers = min(runtime.GOMAXPROCS(0), 8)
	}
	if o.PrefetchWorkers < 0 {
		o.PrefetchWorkers = 1
	}
	if o.CacheBytes == 0 {
		o.CacheBytes = 256 << 20
	}
	if o.MemTableBytes == 0 {
		o.MemTableBytes = 64 << 20
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	o.Pending = o.Pending.EnsureDefaults()
	return o
}

// Validate reports settings that cannot work.
func (o Options) Validate() error {
	if o.UndoMode != UndoCompact && o.UndoMode != UndoSelfContained {
		return fmt.Errorf("disk: unknown undo mode %d", o.UndoMode)
	}
	if o.PruneBudget < 1 {
		return fmt.Errorf("disk: prune budget %d must be positive", o.PruneBudget)
	}
	if err := o.Pending.Validate(); err != nil {
		return err
	}
	if err := o.Chain.validate(); err != nil {
		return err
	}
	if err := o.ChainIfNone.validate(); err != nil {
		return err
	}
	for _, d := range append(slices.Clip(o.Dimensions), o.DefaultDimensions...) {
		if _, ok := dimensions[d]; !ok {
			return fmt.Errorf("disk: unknown index dimension %d", d)
		}
	}
	return nil
}

// Store is the Pebble store. Reads (View) are safe from any goroutine. All
// mutations (NewBlock, Commit, RollbackTo, Publish) must come from one
// goroutine at a time: the writer; the store does not lock them.
//
// # Committed and published state
//
// The store has two states. The committed state (State) is what the last
// synced batch left; the writer reads it. The published state (Published,
// PublishedView) is a Pebble snapshot the writer fixes with Publish once the
// caches have forgotten what the commit changed; readers see only it. So no
// reader can see a commit before its invalidation is done, and, since
// publishes only move forward in the commit sequence, no reader can see the
// published state go back (see publish.go).
type Store struct {
	db   *pebble.DB
	dir  string          // the store's directory, as opened
	po   *pebble.Options // the options db was opened with (a bulk load writes tables with them)
	opts Options
	dims []Dimension // enabled dimensions, DimAddress first
	// dimFuncs[i] gives the values of dims[i] (nil for DimAddress); see
	// dimFuncs. noDeriver, when set, is why the store takes no writes: a
	// dimension it indexes has no deriver (ErrNoDeriver).
	dimFuncs  []ValuesFunc
	noDeriver error

	// state is the committed state, stored after each commit. Only the
	// writer stores it.
	state atomic.Pointer[State]
	// published is the snapshot readers use; see publish.go.
	published atomic.Pointer[publishedSnapshot]
	// failed is the first storage failure of a write; once set, the store
	// takes no more writes (ErrFailed) and keeps serving what is published.
	failed atomic.Pointer[error]

	// secret is the store's random secret (0x01 'K'), created with the store:
	// it keys the MAC of listing cursors so they survive restarts.
	secret []byte

	// Writer-owned (see the type comment): no lock.
	recent   *recentOutputs
	balances *balanceCache
	batch    keyBatch // the writes of the commit being built (batch.go)
	// batchBuilt, when set (tests only, export_test.go), is called by each
	// commit once its Pebble batch is built, before Pebble commits it: the
	// moment a catch-up window holds the most memory.
	batchBuilt func()
	// batchLimit, when positive (tests only), lowers the sorted batches'
	// limit below keyBatchLimit.
	batchLimit int
	undoBuf    []byte           // a block's undo delta, encoded (reused)
	logBuf     []byte           // a change's log record, encoded (reused)
	changes    changes          // a block's changes; see blockChanges
	touched    pendingTouched   // the change's pending transactions; see addPendingTouched
	flushed    <-chan struct{}  // closed when afterCommit's last flush is done (tests)
	txf        *txFilter        // built by the first block; nil before
	txfRebuild *txFilterRebuild // a background rebuild of txf, or nil
	logFloor   uint64           // lowest seq the change log keeps; 0: none
	closed     bool
	// schemaVersion is the version the store's schema row holds
	// (SchemaVersion, or 1 for a store without a freeze yet: meta.go).
	schemaVersion uint32
	// count is the address counters' state (counters.go).
	count counting
	// lapses are the freezes the batch being built ends (freeze.go).
	lapses []lapse
	// leases are the committed leases and the batch's changes (lease.go).
	leases *leaseSet
	// pending is the committed pending set and the batch's changes
	// (pending.go).
	pending *pendingSet

	// bg counts background goroutines (filter rebuilds); Close sets stopping
	// and waits for them before closing Pebble.
	bg       sync.WaitGroup
	stopping atomic.Bool

	// testBeforeTxFilterBuild, set by tests only, runs on the builder
	// goroutine after its snapshot is taken and before it scans.
	testBeforeTxFilterBuild func()

	metrics storeCounters
	// bgErrors logs Pebble's background errors, rate-limited, and counts them.
	bgErrors *backgroundErrors
}

// storeCounters are cumulative counters the writer's metrics read.
type storeCounters struct {
	recentHits, recentMisses atomic.Uint64
	filterSkips              atomic.Uint64
	filterRebuilds           atomic.Uint64
	prunedRecords            atomic.Uint64
	prunedUndo               atomic.Uint64
}

// Open opens (or creates) the store in dir.
func Open(dir string, opts Options) (*Store, error) {
	given := opts
	opts = opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	cache := pebble.NewCache(opts.CacheBytes)
	defer cache.Unref()
	po := &pebble.Options{
		Cache:                       cache,
		FormatMajorVersion:          pebble.FormatNewest,
		MemTableSize:                opts.MemTableBytes,
		Logger:                      pebbleLogger{opts.Logger},
		FS:                          opts.fs,
		DisableAutomaticCompactions: opts.noCompactions,
	}
	for i := range po.Levels {
		// Bloom filters make the point lookups of apply (inputs, the duplicate
		// check of every new output) cheap when the key is absent.
		po.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	// Tables are written with Pebble's fastest compression (MinLZ on amd64,
	// Snappy where MinLZ has no assembly), rather than Snappy everywhere:
	// compressing the blocks of compactions was a ninth of an import's CPU
	// with Snappy, and a read decompresses every block it takes from the
	// file system. Tables already written keep their compression, and a
	// store whose format predates MinLZ goes on writing Snappy.
	po.ApplyCompressionSettings(func() pebble.DBCompressionSettings { return pebble.DBCompressionFastest })
	bg := &backgroundErrors{log: opts.Logger, interval: backgroundErrorInterval, onNoSpace: opts.onNoSpace, now: time.Now}
	po.EventListener = &pebble.EventListener{BackgroundError: bg.report,
		FlushEnd: func(info pebble.FlushInfo) { bg.flushEnd(info.Err) }}
	if opts.ReturnCorruption {
		// Pebble returns the corruption to the reader once the listener
		// returns; its default listener calls Fatalf.
		po.EventListener.DataCorruption = func(info pebble.DataCorruptionInfo) {
			opts.Logger.Error("corrupt data", "component", "pebble", "detail", info.String())
		}
	}
	po.EnsureDefaults()
	db, err := pebble.Open(dir, po)
	if err != nil {
		return nil, fmt.Errorf("disk: open %s: %w", dir, err)
	}
	s := &Store{db: db, dir: dir, po: po, opts: opts, bgErrors: bg, recent: newRecentOutputs(opts.RecentOutputs), balances: newBalanceCache(opts.BalanceCache, opts.BalanceCacheBytes)}
	if err := s.init(given); err != nil {
		db.Close()
		return nil, err
	}
	if err := s.loadCounting(); err != nil {
		db.Close()
		return nil, err
	}
	if s.opts.NoChangeLog {
		s.opts.LogRetention = 0
	} else if s.opts.LogRetention == 0 {
		s.opts.LogRetention = s.opts.RollbackWindow
	}
	if err := s.loadLogFloor(); err != nil {
		db.Close()
		return nil, fmt.Errorf("disk: read the change log: %w", err)
	}
	if err := s.loadLeases(); err != nil {
		db.Close()
		return nil, err
	}
	if err := s.loadPending(); err != nil {
		db.Close()
		return nil, err
	}
	if st := s.State(); st.RollingBack {
		opts.Logger.Warn("completing a rollback interrupted by a crash",
			"tip", st.Tip.String(), "target", st.RollbackTarget)
		if _, err := s.RollbackTo(st.RollbackTarget); err != nil {
			db.Close()
			return nil, fmt.Errorf("disk: complete the interrupted rollback to %d: %w", st.RollbackTarget, err)
		}
	}
	s.Publish()
	return s, nil
}

// init checks or writes the schema row, loads the state and resolves the
// recorded settings against given (the options as the caller passed them).
func (s *Store) init(given Options) error {
	asked := s.opts.Dimensions
	raw, err := s.get(keySchema)
	if errors.Is(err, pebble.ErrNotFound) && len(asked) == 0 {
		asked = s.opts.DefaultDimensions
	}
	want := schema{version: SchemaVersion, dims: normalDims(asked)}
	switch {
	case errors.Is(err, pebble.ErrNotFound):
		st := State{Tip: chain.Tip{Empty: true}}
		s.secret = make([]byte, 32)
		if _, err := rand.Read(s.secret); err != nil {
			return fmt.Errorf("disk: create secret: %w", err)
		}
		b := s.db.NewBatch()
		defer b.Close()
		_ = b.Set(keySecret, s.secret, nil)
		_ = b.Set(keySchema, appendSchema(nil, &want), nil)
		_ = b.Set(keyState, appendState(nil, &st), nil)
		_ = b.Set(keySettings, appendSettings(nil, &settings{pruneDepth: s.opts.PruneDepth, rollbackWindow: s.opts.RollbackWindow, chain: cmp.Or(s.opts.Chain, s.opts.ChainIfNone)}), nil)
		// Through s.commit, like every write: Pebble reports a failed log
		// write or sync through Logger.Fatalf, which panics, and only
		// s.commit turns that panic back into an error.
		if err := s.commit(b); err != nil {
			return fmt.Errorf("disk: initialise store: %w", err)
		}
		s.setDims(want.dims)
		s.schemaVersion = want.version
		s.state.Store(&st)
		return nil
	case err != nil:
		return fmt.Errorf("disk: read schema: %w", err)
	}
	have, err := decodeSchema(raw)
	if err != nil {
		return err
	}
	if have.version > SchemaVersion {
		return fmt.Errorf("%w: schema version %d, this binary reads up to %d; upgrade utxo-cache",
			ErrNewerSchema, have.version, SchemaVersion)
	}
	s.schemaVersion = have.version
	if s.secret, err = s.get(keySecret); err != nil || len(s.secret) != 32 {
		return fmt.Errorf("disk: read secret (%d bytes): %w", len(s.secret), errors.Join(err, ErrCorrupt))
	}
	raw, err = s.get(keyState)
	if err != nil {
		return fmt.Errorf("disk: read state: %w", err)
	}
	st, err := decodeState(raw)
	if err != nil {
		return err
	}
	s.state.Store(&st)
	if err := s.resolveDims(given, have.dims, want.dims); err != nil {
		return err
	}
	return s.resolveSettings(given)
}

// resolveDims fixes the dimensions of an existing store: the recorded ones,
// which Options.Dimensions must match once the store holds blocks. A store
// that never took a block has no index row, so its set can still change
// without a re-import: it takes the set given explicitly, or, when it takes
// its chain now (Options.Chain differs from the recorded one, see
// resolveChain), that chain's DefaultDimensions; the new set is recorded.
func (s *Store) resolveDims(given Options, have, asked []Dimension) error {
	st := s.State()
	blank := st.Tip.Empty && st.Seq == 0
	dims := have
	switch {
	case len(given.Dimensions) > 0 && !slices.Equal(have, asked) && !blank:
		return dimsMismatch(have, asked)
	case len(given.Dimensions) > 0:
		dims = asked
	case blank && given.Chain != "" && s.recordedChain() != given.Chain:
		dims = normalDims(given.DefaultDimensions)
	}
	if !slices.Equal(dims, have) {
		s.opts.Logger.Info("recording the indexes of a store that holds no block yet",
			"indexes", dimNames(dims), "was", dimNames(have))
		b := s.db.NewBatch()
		defer b.Close()
		_ = b.Set(keySchema, appendSchema(nil, &schema{version: s.schemaVersion, dims: dims}), nil)
		if err := s.commit(b); err != nil { // not db.Set: see init
			return fmt.Errorf("disk: record indexes: %w", err)
		}
	}
	s.setDims(dims)
	return nil
}

// recordedChain returns the chain the settings row records, "" when it
// records none or cannot be read (resolveSettings reports that).
func (s *Store) recordedChain() Chain {
	raw, err := s.get(keySettings)
	if err != nil {
		return ""
	}
	have, err := decodeSettings(raw)
	if err != nil {
		return ""
	}
	return have.chain
}

// ErrIndexMismatch is returned by Open when Options.Dimensions asks for
// another index set than the store recorded at its creation.
var ErrIndexMismatch = errors.New("disk: the store keeps another set of indexes")

// ErrNoDeriver is returned by every write of a store that indexes a
// dimension whose values come from the chain adapter when Options.Derivers
// lacks it: the index rows of new outputs could not be written.
var ErrNoDeriver = errors.New("disk: no deriver for an indexed dimension")

// dimsMismatch explains an Open that asks for other indexes than the store's.
func dimsMismatch(have, want []Dimension) error {
	var added, dropped []Dimension
	for _, d := range want {
		if !slices.Contains(have, d) {
			added = append(added, d)
		}
	}
	for _, d := range have {
		if !slices.Contains(want, d) {
			dropped = append(dropped, d)
		}
	}
	msg := fmt.Sprintf("the store keeps the indexes [%s], the options ask for [%s]", dimNames(have), dimNames(want))
	if len(added) > 0 {
		msg += fmt.Sprintf("; adding [%s] to an existing store needs a re-import into a new store", dimNames(added))
	}
	if len(dropped) > 0 {
		msg += fmt.Sprintf("; the store cannot drop [%s]: re-import into a new store, or open it without asking for indexes", dimNames(dropped))
	}
	return fmt.Errorf("%w: %s", ErrIndexMismatch, msg)
}

// setDims fixes the store's dimensions and resolves their functions.
func (s *Store) setDims(dims []Dimension) {
	s.dims = dims
	funcs, missing := dimFuncs(dims, s.opts.Derivers)
	s.dimFuncs = funcs
	if len(missing) > 0 {
		s.noDeriver = fmt.Errorf("%w: the store indexes [%s]; open it with its chain's derivers", ErrNoDeriver, dimNames(missing))
	}
}

// Dimensions returns the store's index dimensions, DimAddress first. The
// caller must not modify the slice.
func (s *Store) Dimensions() []Dimension { return s.dims }

// Indexes reports whether the store indexes dimension d.
func (s *Store) Indexes(d Dimension) bool { return slices.Contains(s.dims, d) }

// resolveSettings adopts the recorded settings where given leaves them zero,
// and records a deliberate change (or, for a store created before settings
// were recorded, the values in force). A chain that the store refuses
// (resolveChain) is refused before anything is written.
func (s *Store) resolveSettings(given Options) error {
	raw, err := s.get(keySettings)
	var have settings
	recorded := err == nil
	switch {
	case errors.Is(err, pebble.ErrNotFound):
	case err != nil:
		return fmt.Errorf("disk: read settings: %w", err)
	default:
		if have, err = decodeSettings(raw); err != nil {
			return err
		}
	}
	st := s.State()
	chainName, err := resolveChain(have.chain, given.Chain, given.ChainIfNone, !st.Tip.Empty || st.Seq > 0)
	if err != nil {
		return err
	}
	want := settings{pruneDepth: s.opts.PruneDepth, rollbackWindow: s.opts.RollbackWindow, chain: chainName}
	if recorded {
		if given.PruneDepth == 0 {
			want.pruneDepth = have.pruneDepth
		}
		if given.RollbackWindow == 0 {
			want.rollbackWindow = have.rollbackWindow
		}
	}
	s.opts.PruneDepth, s.opts.RollbackWindow, s.opts.Chain = want.pruneDepth, want.rollbackWindow, want.chain
	if recorded && want == have {
		return nil
	}
	switch {
	case !recorded:
		s.opts.Logger.Info("recording the store's settings",
			"prune_depth", want.pruneDepth, "rollback_window", want.rollbackWindow)
	default:
		if want.pruneDepth != have.pruneDepth {
			s.opts.Logger.Warn("prune depth changed: spent records already pruned stay pruned",
				"from", have.pruneDepth, "to", want.pruneDepth)
		}
		if want.rollbackWindow != have.rollbackWindow {
			s.opts.Logger.Warn("rollback window changed: undo data already pruned stays pruned",
				"from", have.rollbackWindow, "to", want.rollbackWindow)
		}
		if want.chain != have.chain {
			s.opts.Logger.Info("recording the store's chain", "chain", string(want.chain), "was", string(have.chain))
		}
	}
	b := s.db.NewBatch()
	defer b.Close()
	_ = b.Set(keySettings, appendSettings(nil, &want), nil)
	if err := s.commit(b); err != nil { // not db.Set: see init
		return fmt.Errorf("disk: record settings: %w", err)
	}
	return nil
}

// get returns a copy of key's value, or pebble.ErrNotFound.
func (s *Store) get(key []byte) ([]byte, error) {
	v, closer, err := s.db.Get(key)
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	return slices.Clone(v), nil
}

// State returns the committed state (tip, count, digest): the writer's view,
// which may be ahead of what readers may see. Safe from any goroutine;
// readers use Published or PublishedView.
func (s *Store) State() State { return *s.state.Load() }

// Secret returns the store's 32-byte random secret, fixed for its life.
// Callers must not modify it.
func (s *Store) Secret() []byte { return s.secret }

// Options returns the store's effective options.
func (s *Store) Options() Options { return s.opts }

// Chain returns the chain the store records ("" when it records none: a
// store only ever opened without Options.Chain).
func (s *Store) Chain() Chain { return s.opts.Chain }

// Close flushes and closes the store. The writer must have stopped.
func (s *Store) Close() error {
	if s.closed {
		return ErrClosed
	}
	s.closed = true
	s.stopping.Store(true)
	s.bg.Wait()
	s.unpublish()
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("disk: close: %w", err)
	}
	return nil
}

// pebbleLogger routes Pebble's log lines to slog.
type pebbleLogger struct{ l *slog.Logger }

func (p pebbleLogger) Infof(format string, args ...any) {
	p.l.Debug(fmt.Sprintf(format, args...), "component", "pebble")
}
func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error(fmt.Sprintf(format, args...), "component", "pebble")
}

// Fatalf panics with fatalCommit: on the committing goroutine (Pebble's
// fatal commit errors: a failed write or sync of the WAL) Store.commit, which
// every write of the store goes through, Open's included, recovers it into
// ErrFailed; anywhere else it ends the process, as Pebble requires.
func (p pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	p.l.Error(msg, "component", "pebble")
	panic(fatalCommit{msg: msg})
}

var _ io.Closer = (*Store)(nil)

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"syscall"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/internal/diskspace"
	"github.com/utxo-cache/utxo-cache/node"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

// Flags shared by the commands that open a store (docs/settings.md). Their
// defaults are the store's own, so the help never disagrees with
// disk.Options. The depth flags are passed to the store only when given
// (storeDepth): otherwise the store keeps what it recorded.
var storeDefaults = disk.Options{}.EnsureDefaults()

func dataDirFlag(fs *flag.FlagSet) *string {
	return fs.String("data-dir", "./data", "`DIR` holding the Pebble store")
}

func pruneDepthFlag(fs *flag.FlagSet) *uint64 {
	return fs.Uint64("prune-depth", storeDefaults.PruneDepth, pruneDepthUsage)
}

// maxBlockMemoryFlag registers --max-block-memory, the heap one block may
// take (chain.Limits.MaxBlockMemory).
func maxBlockMemoryFlag(fs *flag.FlagSet, p *string) {
	fs.StringVar(p, "max-block-memory", diskspace.FormatSize(uint64(chain.DefaultMaxBlockMemory)),
		"heap one block may take on its way through the node (`SIZE`: bytes, or with KiB/MiB/GiB), estimated from its\n"+
			"inputs, outputs and their bytes before any work is done; a block over it is refused as too large (413)")
}

// blockMemoryBytes turns --max-block-memory into chain.Limits.MaxBlockMemory.
func blockMemoryBytes(v string) (int, error) {
	n, err := parseSize(v)
	if err != nil || n < 1<<20 {
		return 0, usagef("--max-block-memory: %q: want a size of at least 1MiB", v)
	}
	return int(n), nil
}

// blockCacheFlag registers --block-cache-bytes, the size of the store's
// block cache (disk.Options.CacheBytes).
func blockCacheFlag(fs *flag.FlagSet, p *string) {
	fs.StringVar(p, "block-cache-bytes", diskspace.FormatSize(uint64(storeDefaults.CacheBytes)),
		"Pebble's block cache (`SIZE`: bytes, or with KiB/MiB/GiB, at least 8MiB): blocks of the store's files kept\n"+
			"decompressed in memory; larger makes reads from the store and an import's lookups cheaper once the\n"+
			"store outgrows it")
}

// blockCacheBytes turns --block-cache-bytes into disk.Options.CacheBytes.
func blockCacheBytes(v string) (int64, error) {
	n, err := parseSize(v)
	if err != nil || n < 8<<20 {
		return 0, usagef("--block-cache-bytes: %q: want a size of at least 8MiB", v)
	}
	return n, nil
}

// importRetentionFlag registers --replication-retention on the commands
// that import blocks (disk.Options.LogRetention while they run).
func importRetentionFlag(fs *flag.FlagSet) *uint64 {
	return fs.Uint64("replication-retention", 0,
		"changes the store's change log keeps for replicas while importing, in `BLOCKS` (each block is one\n"+
			"change); default: the rollback window. The log holds whole blocks: a bulk import that replicas will\n"+
			"bootstrap after anyway can set 1 and write almost none of it")
}

// catchUpBytesFlag is the memory bound of one catch-up window
// (docs/catch-up.md) of ingest and the imports.
func catchUpBytesFlag(fs *flag.FlagSet) *string {
	return fs.String("catch-up-bytes", "256MiB",
		"memory bound of one catch-up window (`SIZE`: bytes, or with KiB/MiB/GiB); 0 applies every block alone")
}

// catchUpWindowBytes turns --catch-up-bytes into writer.Options.WindowBytes.
func catchUpWindowBytes(v string) (int64, error) {
	n, err := parseSize(v)
	if err != nil {
		return 0, usagef("--catch-up-bytes: %v", err)
	}
	if n == 0 {
		return -1, nil // windows off
	}
	return n, nil
}

// indexesFlag registers --indexes, the index set of a new store (see
// node.ParseIndexes); not given, an existing store keeps its own.
func indexesFlag(fs *flag.FlagSet) *string {
	return fs.String("indexes", "", indexesUsage)
}

// indexesUsage is the help of --indexes.
var indexesUsage = "indexes the store keeps beyond addresses: `none`, or a comma-separated list of " +
	strings.Join(node.IndexNames(), ", ") + ".\n" +
	"The store records them when created; not given, an existing store keeps its own and a new one\n" +
	"takes its chain's default (all six for Cardano, none otherwise); a set that differs from the\n" +
	"recorded one is refused (adding an index needs a re-import into a new store)"

func rollbackWindowFlag(fs *flag.FlagSet) *uint64 {
	return fs.Uint64("rollback-window", storeDefaults.RollbackWindow, rollbackWindowUsage)
}

const (
	pruneDepthUsage = "`BLOCKS` a spent record stays visible to outpoint lookups (at least 1).\n" +
		"The store records it when created; not given, the recorded value applies (the default\n" +
		"below is for a new store); a different value is recorded as a deliberate change"
	rollbackWindowUsage = "deepest exact rollback, in `BLOCKS` (at least 1); the store keeps undo data for this many blocks.\n" +
		"The store records it when created; not given, the recorded value applies (the default\n" +
		"below is for a new store); a different value is recorded as a deliberate change"
)

// checkBlocks rejects 0 for a depth in blocks: disk.Options reads 0 as "the
// recorded value", so passing it through would silently mean something else
// than what the operator typed.
func checkBlocks(cl *commandLine, name string, v uint64) error {
	if v == 0 && cl.given(name) {
		return usagef("--%s must be at least 1", name)
	}
	return nil
}

// storeDepth is the value of depth flag name for disk.Options: v when the
// operator gave it (flag, environment or config file), else 0, which keeps
// the value the store recorded.
func storeDepth(cl *commandLine, name string, v uint64) uint64 {
	if cl.given(name) {
		return v
	}
	return 0
}

// openStore opens the store in dir with opts. With mustExist, a directory
// that does not exist is an error rather than a new, empty store: stats and
// rollback pointed at a mistyped path must not create one.
func openStore(e *env, dir string, opts disk.Options, mustExist bool) (*disk.Store, error) {
	return openStoreWith(e, dir, opts, mustExist, disk.Open)
}

// openStoreContext is openStore (of a store that may be new) for a process
// that exits when ctx ends: see disk.OpenContext.
func openStoreContext(ctx context.Context, e *env, dir string, opts disk.Options) (*disk.Store, error) {
	return openStoreWith(e, dir, opts, false, func(dir string, opts disk.Options) (*disk.Store, error) {
		return disk.OpenContext(ctx, dir, opts)
	})
}

func openStoreWith(e *env, dir string, opts disk.Options, mustExist bool, open func(string, disk.Options) (*disk.Store, error)) (*disk.Store, error) {
	if mustExist {
		fi, err := os.Stat(dir)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil, fmt.Errorf("no store at %s (the directory does not exist; set --data-dir)", dir)
		case err != nil:
			return nil, err
		case !fi.IsDir():
			return nil, fmt.Errorf("%s is not a directory", dir)
		}
	}
	if opts.Derivers == nil {
		// A store that keeps a credential index takes writes only with
		// them (disk.ErrNoDeriver): every command passes them.
		opts.Derivers = node.IndexDerivers()
	}
	if opts.Logger == nil {
		// Pebble's errors (and the store's warnings) reach the operator.
		opts.Logger = slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	s, err := open(dir, opts)
	if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EWOULDBLOCK) {
		// Pebble's lock on the directory: say who holds it.
		err = fmt.Errorf("%w (another process, such as a running serve, has the store open)", err)
	}
	return s, err
}

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strings"

	"github.com/utxo-cache/utxo-cache/internal/diskspace"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
	"github.com/utxo-cache/utxo-cache/writer"
)

// A full disk (docs/disk-full.md): serve keeps --disk-reserve-bytes free by
// refusing writes below it (the writer's free-space guard), keeps a ballast
// file the operator can delete for room, and refuses to start, at once and
// with one line, when the disk is too full for the store to open.

// defaultReserve is the writer's reserve for the store's default memtable.
var defaultReserve = writer.DefaultReserve(storeDefaults.MemTableBytes)

// diskFlags are the full-disk settings of serve, ingest and import-bitcoin.
type diskFlags struct {
	reserve string
	ballast string // serve and ballast only; "" when the command has none
}

func (d *diskFlags) registerReserve(fs *flag.FlagSet) {
	fs.StringVar(&d.reserve, "disk-reserve-bytes", formatSize(defaultReserve),
		"free space (`SIZE`) the writer keeps on the data directory's file system: a write that could\n"+
			"take it below this answers 507 insufficient_storage, changing nothing (docs/disk-full.md); 0 turns the guard off.\n"+
			"serve's default is twice --memtable-bytes plus 64MiB")
}

func (d *diskFlags) registerBallast(fs *flag.FlagSet) {
	fs.StringVar(&d.ballast, "ballast-bytes", "auto",
		"size (`SIZE`) of the ballast file kept in the data directory, deleted to get room on a full disk;\n"+
			"auto: 1% of the file system, at most 1GiB; 0: none")
}

// reserveBytes parses --disk-reserve-bytes.
func (d *diskFlags) reserveBytes() (uint64, error) {
	n, err := parseSize(d.reserve)
	if err != nil {
		return 0, usagef("--disk-reserve-bytes: %v", err)
	}
	return uint64(n), nil
}

// parseBallastFlag parses --ballast-bytes: auto (-1) or a size.
func parseBallastFlag(v string) (int64, error) {
	if strings.TrimSpace(v) == "auto" {
		return -1, nil
	}
	n, err := parseSize(v)
	if err != nil {
		return 0, usagef("--ballast-bytes: %v (or auto)", err)
	}
	return n, nil
}

// ballastBytes is --ballast-bytes for a store in dataDir.
func (d *diskFlags) ballastBytes(dataDir string) (uint64, error) {
	n, err := parseBallastFlag(d.ballast)
	if err != nil || n >= 0 {
		return uint64(max(n, 0)), err
	}
	u, err := diskspace.UsageOf(dataDir)
	if err != nil {
		return 0, err
	}
	return diskspace.DefaultBallastBytes(u.Total), nil
}

// keepBallast creates the ballast of serve's data directory when it is
// missing and the file system has room for it beyond the reserve. It never
// fails start-up: a missing ballast is logged, and the guard still holds.
func keepBallast(dataDir string, d diskFlags, reserve uint64, log *slog.Logger) {
	size, err := d.ballastBytes(dataDir)
	if err != nil {
		log.Warn("no ballast: its size is unknown", "err", err)
		return
	}
	b, err := diskspace.EnsureBallast(dataDir, size, reserve)
	switch {
	case err != nil:
		log.Warn("no ballast: writes are refused before the disk fills, but there is no reserve file to delete for room",
			"path", b.Path, "size", formatSize(size), "err", err)
	case b.Created:
		log.Info("ballast created: delete it to get room on a full disk (docs/disk-full.md)", "path", b.Path, "size", formatSize(b.Size))
	}
}

// writerSpace returns the writer options of the free-space guard for a
// store in dataDir: no guard for a reserve of 0.
func writerSpace(dataDir string, reserve uint64) (writer.DiskSpace, uint64) {
	if reserve == 0 {
		return nil, 0
	}
	return diskspace.Dir(dataDir), reserve
}

// startMargin is the free space serve needs to start: the size of the
// store's log, which opening it writes into sstables (flushing the
// memtables the log holds), plus half the reserve for the new log, the
// manifest and the first writes; the writer's guard then refuses writes
// until the whole reserve is met. With the default reserve (two memtables
// and 64 MiB) that is below the reserve, so a node that was refusing writes
// restarts and serves reads; only a disk too full to open the store stops
// start-up.
func startMargin(dataDir string, reserve uint64) uint64 {
	logBytes, _ := disk.LogBytes(dataDir)
	return logBytes + reserve/2
}

// errDiskFull is the start-up failure on a full disk.
var errDiskFull = errors.New("disk full")

// checkStartSpace fails when dataDir's file system has less than the start
// margin available, with what the operator can do. A file system whose
// free space cannot be read passes (Pebble's own errors follow, if any).
func checkStartSpace(dataDir string, reserve uint64, log *slog.Logger) error {
	if reserve == 0 {
		return nil
	}
	need := startMargin(dataDir, reserve)
	u, err := diskspace.UsageOf(dataDir)
	if err != nil {
		log.Warn("free space unknown: starting without the check", "err", err)
		return nil
	}
	if u.Available >= need {
		return nil
	}
	return fmt.Errorf("%w: %s has %s available, below the %s needed to open the store (its log to flush and half of --disk-reserve-bytes); %s",
		errDiskFull, dataDir, formatSize(u.Available), formatSize(need), roomAdvice(dataDir))
}

// roomAdvice tells the operator how to make room in dataDir.
func roomAdvice(dataDir string) string {
	size, err := diskspace.BallastSize(dataDir)
	if err == nil && size > 0 {
		return fmt.Sprintf("free space on that file system, or release the %s ballast: utxo-cache ballast --data-dir %s --remove",
			formatSize(size), dataDir)
	}
	return "free space on that file system (there is no ballast to release)"
}

// openServedStore opens the store of serve: it returns early when ctx ends
// (a signal during start-up) or when the disk is too full for Pebble to
// open it, instead of waiting for an open that cannot finish.
func openServedStore(ctx context.Context, e *env, dir string, opts disk.Options) (*disk.Store, error) {
	s, err := openStoreContext(ctx, e, dir, opts)
	if errors.Is(err, disk.ErrNoSpace) {
		return nil, fmt.Errorf("%w: opening the store needs room to write what its log holds: %s",
			errDiskFull, roomAdvice(dir))
	}
	return s, err
}

// formatSize renders n bytes in the largest binary unit that divides it, as
// parseSize reads it back.
func formatSize(n uint64) string {
	for _, u := range []struct {
		suffix string
		mult   uint64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.mult && n%u.mult == 0 {
			return fmt.Sprintf("%d%s", n/u.mult, u.suffix)
		}
	}
	return fmt.Sprintf("%dB", n)
}

package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"syscall"

	"github.com/utxo-cache/utxo-cache/internal/diskspace"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
	"github.com/utxo-cache/utxo-cache/writer"
)

// A full disk (docs/disk-full.md): the writer keeps Config.DiskReserve free
// by refusing writes below it (its free-space guard), keeps a ballast file
// the operator can delete for room, and refuses to start, at once and with
// one line, when the disk is too full for the store to open.

// ErrDiskFull is the start-up failure on a full disk.
var ErrDiskFull = errors.New("disk full")

// StartMargin is the free space the writer needs to start: the size of the
// store's log, which opening it writes into sstables (flushing the
// memtables the log holds), plus half the reserve for the new log, the
// manifest and the first writes; the writer's guard then refuses writes
// until the whole reserve is met. With the default reserve (two memtables
// and 64 MiB) that is below the reserve, so a node that was refusing writes
// restarts and serves reads; only a disk too full to open the store stops
// start-up.
func StartMargin(dataDir string, reserve uint64) uint64 {
	logBytes, _ := disk.LogBytes(dataDir)
	return logBytes + reserve/2
}

// checkStartSpace fails when dataDir's file system has less than the start
// margin available, with what the operator can do. A file system whose
// free space cannot be read passes (Pebble's own errors follow, if any).
func checkStartSpace(dataDir string, reserve uint64, log *slog.Logger) error {
	if reserve == 0 {
		return nil
	}
	need := StartMargin(dataDir, reserve)
	u, err := diskspace.UsageOf(dataDir)
	if err != nil {
		log.Warn("free space unknown: starting without the check", "err", err)
		return nil
	}
	if u.Available >= need {
		return nil
	}
	return fmt.Errorf("%w: %s has %s available, below the %s needed to open the store (its log to flush and half of --disk-reserve-bytes); %s",
		ErrDiskFull, dataDir, diskspace.FormatSize(u.Available), diskspace.FormatSize(need), roomAdvice(dataDir))
}

// roomAdvice tells the operator how to make room in dataDir.
func roomAdvice(dataDir string) string {
	size, err := diskspace.BallastSize(dataDir)
	if err == nil && size > 0 {
		return fmt.Sprintf("free space on that file system, or release the %s ballast: utxo-cache ballast --data-dir %s --remove",
			diskspace.FormatSize(size), dataDir)
	}
	return "free space on that file system (there is no ballast to release)"
}

// openStore opens the writer's store: it returns early when ctx ends (a
// signal during start-up) or when the disk is too full for Pebble to open
// it, instead of waiting for an open that cannot finish.
func openStore(ctx context.Context, dir string, opts disk.Options) (*disk.Store, error) {
	s, err := disk.OpenContext(ctx, dir, opts)
	switch {
	case errors.Is(err, disk.ErrNoSpace):
		return nil, fmt.Errorf("%w: opening the store needs room to write what its log holds: %s",
			ErrDiskFull, roomAdvice(dir))
	case errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EWOULDBLOCK):
		// Pebble's lock on the directory: say who holds it.
		return nil, fmt.Errorf("%w (another process, such as a running serve, has the store open)", err)
	}
	return s, err
}

// ballastBytes is the ballast's size for a store in dataDir.
func ballastBytes(dataDir string, n int64) (uint64, error) {
	if n >= 0 {
		return uint64(n), nil
	}
	u, err := diskspace.UsageOf(dataDir)
	if err != nil {
		return 0, err
	}
	return diskspace.DefaultBallastBytes(u.Total), nil
}

// keepBallast creates the ballast of the data directory when it is missing
// and the file system has room for it beyond the reserve. It never fails
// start-up: a missing ballast is logged, and the guard still holds.
func keepBallast(dataDir string, n int64, reserve uint64, log *slog.Logger) {
	size, err := ballastBytes(dataDir, n)
	if err != nil {
		log.Warn("no ballast: its size is unknown", "err", err)
		return
	}
	b, err := diskspace.EnsureBallast(dataDir, size, reserve)
	switch {
	case err != nil:
		log.Warn("no ballast: writes are refused before the disk fills, but there is no reserve file to delete for room",
			"path", b.Path, "size", diskspace.FormatSize(size), "err", err)
	case b.Created:
		log.Info("ballast created: delete it to get room on a full disk (docs/disk-full.md)", "path", b.Path, "size", diskspace.FormatSize(b.Size))
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

package main

import (
	"flag"
	"strings"

	"github.com/utxo-cache/utxo-cache/internal/diskspace"
	"github.com/utxo-cache/utxo-cache/writer"
)

// The full-disk flags (docs/disk-full.md) of serve, ingest, import-bitcoin
// and ballast; node.Config holds what serve does with them.

// defaultReserve is the writer's reserve for the store's default memtable.
var defaultReserve = writer.DefaultReserve(storeDefaults.MemTableBytes)

// diskFlags are the full-disk settings of serve, ingest and import-bitcoin.
type diskFlags struct {
	reserve string
	ballast string // serve and ballast only; "" when the command has none
}

func (d *diskFlags) registerReserve(fs *flag.FlagSet) {
	fs.StringVar(&d.reserve, "disk-reserve-bytes", diskspace.FormatSize(defaultReserve),
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

// writerSpace returns the writer options of the free-space guard for a
// store in dataDir: no guard for a reserve of 0.
func writerSpace(dataDir string, reserve uint64) (writer.DiskSpace, uint64) {
	if reserve == 0 {
		return nil, 0
	}
	return diskspace.Dir(dataDir), reserve
}

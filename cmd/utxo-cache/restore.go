package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/utxo-cache/utxo-cache/node"
	"github.com/utxo-cache/utxo-cache/replication"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

const restoreAbout = `
Restore the archive FILE (written by checkpoint, or saved from a writer's GET
/v1/replication/checkpoint; - reads standard input) into
--data-dir, which must not exist or be an empty directory
(docs/replication.md#backups-checkpoint-and-restore).

The archive is extracted beside --data-dir (DIR.installing) and verified
before it takes the name: the figures of its manifest must be those of the
store it holds (commit sequence, tip, UTXO count, digest), and a full recount
of the store's UTXO set must give the same count and digest (about a second
per million UTXOs). Only then is it renamed to --data-dir, and the restored
figures are printed. Anything else (a truncated or tampered archive, a
manifest that does not match) exits with status 1 and leaves nothing at
--data-dir; an empty --data-dir given is removed first. A restore killed
midway leaves DIR.installing, which the next restore replaces. Only the files
the manifest lists are written, and only while the file system keeps 192MiB
plus 1% of its size (at most 1GiB) free; an archive that needs more is refused and
leaves nothing.

A restored store carries its commit sequence. Before serving it with a Redis
tier that served a newer state (any restore of an older backup), empty that
Redis database or give the store its own: cached answers of the replaced
history must not be served.`

func runRestore(e *env, args []string) error {
	cl := newCommandLine("restore", "restore [flags] FILE|-", restoreAbout)
	dataDir := cl.fs.String("data-dir", "./data", "`DIR` to restore the store into; it must not exist or be empty")
	if err := cl.parse(e, args); err != nil {
		return err
	}
	if cl.fs.NArg() != 1 {
		return usagef("want one archive (a file, or - for standard input), got %d arguments", cl.fs.NArg())
	}
	src := cl.fs.Arg(0)
	dir := filepath.Clean(*dataDir)

	// Refuse before reading anything: a directory in use, or no parent.
	if err := checkRestoreTarget(dir); err != nil {
		return err
	}
	var in io.Reader = e.stdin
	if src != "-" {
		f, err := os.Open(src)
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove the empty %s: %w", dir, err)
	}
	m, err := replication.Install(bufio.NewReaderSize(in, 1<<20), dir, nil, node.MaxCheckpointBytes, disk.Options{}, nil)
	if err != nil {
		return fmt.Errorf("restore into %s: %w", dir, err)
	}
	fmt.Fprintf(e.stdout, "restore: verified and installed %s: %s\n", dir, m)
	return nil
}

// checkRestoreTarget refuses a target that holds anything, and one whose
// parent directory does not exist.
func checkRestoreTarget(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return err
	case !fi.IsDir():
		return fmt.Errorf("%s exists and is not a directory", dir)
	default:
		entries, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		if len(entries) > 0 {
			return fmt.Errorf("%s is not empty: restore into a new or empty directory", dir)
		}
	}
	parent := filepath.Dir(dir)
	if fi, err := os.Stat(parent); err != nil || !fi.IsDir() {
		return fmt.Errorf("the parent of %s, %s, is not a directory", dir, parent)
	}
	return nil
}

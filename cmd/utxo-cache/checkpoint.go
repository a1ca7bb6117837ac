package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/utxo-cache/utxo-cache/internal/durable"
	"github.com/utxo-cache/utxo-cache/node"
	"github.com/utxo-cache/utxo-cache/replication"
	"github.com/utxo-cache/utxo-cache/replication/storedir"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

const checkpointAbout = `
Write a backup of the store in --data-dir to --out: a tar archive of a
consistent checkpoint of the store, the same archive a writer serves to its
replicas (docs/replication.md#backups-checkpoint-and-restore). It holds the
manifest UTXO-CACHE-CHECKPOINT.json (the commit sequence, tip, UTXO count and
digest of the state) first, then the store's files. restore verifies it.

--out - writes the archive to standard output. A file is written under a
temporary name beside it, synced, and renamed only when complete: an
interrupted backup never has the final name (an existing file of that name
is replaced only by a complete archive). A summary line goes to standard
error.

The store must exist and no other process may have it open (stop serve
first; a running writer with --replication-token serves the same archive at
GET /v1/replication/checkpoint). The data directory of a stopped replica
works too: its CURRENT file names the store. The checkpoint is staged inside
the store's directory (checkpoints.staging/, hard links to the store's
files) and removed afterwards.`

func runCheckpoint(e *env, args []string) error {
	cl := newCommandLine("checkpoint", "checkpoint [flags] --out FILE|-", checkpointAbout)
	dataDir := dataDirFlag(cl.fs)
	out := cl.fs.String("out", "", "the archive's `FILE`, or - for standard output (required)")
	if err := cl.parse(e, args); err != nil {
		return err
	}
	if cl.fs.NArg() > 0 {
		return usagef("unexpected arguments %q", cl.fs.Args())
	}
	if *out == "" {
		return usagef("--out is required: the archive's file, or - for standard output")
	}
	if *out != "-" {
		if fi, err := os.Stat(*out); err == nil && fi.IsDir() {
			return fmt.Errorf("--out %s is a directory", *out)
		}
	}
	dir, err := storeDir(*dataDir)
	if err != nil {
		return err
	}
	store, err := openStore(e, dir, disk.Options{}, true)
	if err != nil {
		return err
	}
	// With the store open here, nobody else is staging a checkpoint of it:
	// what checkpoints.staging holds was left by a killed process.
	staging := filepath.Join(dir, node.CheckpointStaging)
	err = os.RemoveAll(staging)
	var cp *replication.Checkpoint
	if err == nil {
		cp, err = replication.TakeOffline(store, staging)
	}
	// The checkpoint is hard links of its own: the store is not needed to
	// stream it.
	if closeErr := store.Close(); err == nil && closeErr != nil {
		_ = cp.Close()
		err = closeErr
	}
	defer os.RemoveAll(staging)
	if err != nil {
		return fmt.Errorf("checkpoint of %s: %w", dir, err)
	}
	defer cp.Close()

	var n int64
	where := "standard output"
	if *out == "-" {
		n, err = streamTo(e.stdout, cp)
	} else {
		where = *out
		n, err = durable.WriteFileAtomic(*out, func(w io.Writer) (int64, error) { return streamTo(w, cp) })
	}
	if err != nil {
		return fmt.Errorf("write the archive to %s: %w", where, err)
	}
	fmt.Fprintf(e.stderr, "checkpoint: wrote %d bytes to %s: %s\n", n, where, cp.Manifest)
	return nil
}

// storeDir resolves --data-dir to the directory of a Pebble store, refusing
// one that holds none (so that no command meant for an existing store
// creates an empty one). A replica's data directory resolves to the store
// its CURRENT file names.
func storeDir(dataDir string) (string, error) {
	fi, err := os.Stat(dataDir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("no store at %s (the directory does not exist; set --data-dir)", dataDir)
	case err != nil:
		return "", err
	case !fi.IsDir():
		return "", fmt.Errorf("%s is not a directory", dataDir)
	}
	dir := dataDir
	name, err := storedir.New(storedir.OS(), dataDir).Current()
	if err != nil {
		return "", fmt.Errorf("%s: %w", dataDir, err)
	}
	if name != "" {
		dir = filepath.Join(dataDir, name)
	}
	manifests, err := filepath.Glob(filepath.Join(dir, "MANIFEST-*"))
	if err != nil {
		return "", err
	}
	if len(manifests) == 0 {
		return "", fmt.Errorf("no store at %s (the directory holds no Pebble store)", dir)
	}
	return dir, nil
}

// streamTo streams cp to w and returns the bytes written.
func streamTo(w io.Writer, cp *replication.Checkpoint) (int64, error) {
	cw := &countingWriter{w: w}
	bw := bufio.NewWriterSize(cw, 1<<20)
	if err := cp.Stream(bw); err != nil {
		return cw.n, err
	}
	err := bw.Flush()
	return cw.n, err
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

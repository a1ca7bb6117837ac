package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
)

// A replica's data directory holds its stores, one active at a time:
//
//	DATA_DIR/CURRENT            the active store's directory name, one line
//	DATA_DIR/store-<nanos>/     a verified store (Pebble)
//	DATA_DIR/store-<nanos>.installing/   a bootstrap in progress (removed at start)
//
// A store is only ever named in CURRENT after it was verified against its
// writer's checkpoint (replication.Install), and before it serves; CURRENT is
// replaced atomically (written beside, synced, renamed), and removed as soon
// as the active store is found to have diverged from the writer. So a replica
// killed at any moment restarts on a verified store that is at least as new
// as anything it served, or bootstraps when it has none.
const currentFile = "CURRENT"

func readCurrent(dataDir string) (string, error) {
	raw, err := os.ReadFile(filepath.Join(dataDir, currentFile))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	name := strings.TrimSpace(string(raw))
	if !strings.HasPrefix(name, "store-") || name != filepath.Base(name) {
		return "", fmt.Errorf("%s names %q, not a store of this replica", currentFile, name)
	}
	return name, nil
}

func writeCurrent(dataDir, name string) error {
	tmp := filepath.Join(dataDir, currentFile+".tmp")
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	_, err = f.WriteString(name + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dataDir, currentFile))
	}
	if err == nil {
		err = syncDirOf(dataDir)
	}
	return err
}

// forgetCurrent removes CURRENT: a restart bootstraps instead of reopening
// the active store.
func forgetCurrent(dataDir string) error {
	if err := os.Remove(filepath.Join(dataDir, currentFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return syncDirOf(dataDir)
}

func syncDirOf(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// removeStoresBut removes every store directory (and interrupted install)
// but keep.
func removeStoresBut(dataDir, keep string, log *slog.Logger) {
	entries, _ := os.ReadDir(dataDir)
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), "store-") && e.Name() != keep {
			if err := os.RemoveAll(filepath.Join(dataDir, e.Name())); err != nil {
				log.Warn("could not remove an old store", "dir", e.Name(), "err", err)
			}
		}
	}
}

// replicaDir is node.ReplicaDir over the CURRENT file of a replica's data
// directory.
type replicaDir struct {
	dir string
	log *slog.Logger
}

func (d replicaDir) Current() (string, error)     { return readCurrent(d.dir) }
func (d replicaDir) SetCurrent(name string) error { return writeCurrent(d.dir, name) }
func (d replicaDir) ForgetCurrent() error         { return forgetCurrent(d.dir) }
func (d replicaDir) RemoveStoresBut(keep string)  { removeStoresBut(d.dir, keep, d.log) }

package main

import (
	"fmt"
	"os"

	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

// Hints in error messages name a command or flag that then works: a hint
// that leads to the next refusal is worse than none. forkHint and
// placement.unplaced check what they suggest against the store first.

// forkHint tells how to get past a block that is not on the store's chain
// at height (below the tip): roll the store back to the block before it,
// when the store can (its undo data and rollback window reach that far),
// else start a new store.
func forkHint(store *disk.Store, dataDir string, window, height uint64) string {
	const fresh = "import into a new store (another --data-dir)"
	if height == 0 {
		return "the store starts with another block: " + fresh
	}
	target := height - 1
	if err := store.CheckRollback(target); err != nil {
		return fmt.Sprintf("the store cannot be rolled back to height %d (%v): %s", target, err, fresh)
	}
	cmd := fmt.Sprintf("utxo-cache rollback --data-dir %s --height %d", dataDir, target)
	if window != storeDefaults.RollbackWindow {
		cmd += fmt.Sprintf(" --rollback-window %d", window)
	}
	return "to replace the store's blocks from there, roll it back first: " + cmd
}

// storeExists reports whether dir holds anything: a missing or empty
// directory is no store, and a command that only looks must not make one.
func storeExists(dir string) bool {
	entries, err := os.ReadDir(dir)
	return err == nil && len(entries) > 0
}

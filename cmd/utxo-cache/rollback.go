package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
	"github.com/utxo-cache/utxo-cache/writer"
)

const rollbackAbout = `
Roll the chain of the store in --data-dir back so that it is exactly as it
was right after the block at --height (or the block with hash --hash) was
applied (docs/rollback-and-retention.md), then print the new tip. Exactly one of --height and
--hash is required. A target equal to the tip changes nothing.

The store keeps undo data for the rollback window it recorded (or the
--rollback-window given, recorded as a change). A target deeper than that,
above the tip, or a hash that is not on the store's chain is refused with
exit status 1 and nothing changed. A rollback is one change of the store's
commit sequence; it reverts one block per synced batch, and a rollback
interrupted in between is completed the next time the store is opened.`

func runRollback(e *env, args []string) error {
	cl := newCommandLine("rollback", "rollback [flags] (--height H | --hash HEX)", rollbackAbout)
	dataDir := dataDirFlag(cl.fs)
	height := cl.fs.String("height", "", "the target block `HEIGHT`")
	hash := cl.fs.String("hash", "", "the target block `HASH` (64 hex characters), a block on the store's chain")
	window := rollbackWindowFlag(cl.fs)
	if err := cl.parse(e, args); err != nil {
		return err
	}
	if cl.fs.NArg() > 0 {
		return usagef("unexpected arguments %q", cl.fs.Args())
	}
	if err := checkBlocks(cl, "rollback-window", *window); err != nil {
		return err
	}
	// The target is a pair of flags: one given on the command line overrides
	// both environment variables, as a flag wins over the environment.
	useHeight, useHash := cl.given("height"), cl.given("hash")
	switch {
	case cl.onCommandLine("height") && !cl.onCommandLine("hash"):
		useHash = false
	case cl.onCommandLine("hash") && !cl.onCommandLine("height"):
		useHeight = false
	}
	if useHeight == useHash {
		return usagef("give exactly one of --height and --hash")
	}
	var target uint64
	var targetHash chain.Hash
	if useHeight {
		h, err := strconv.ParseUint(*height, 10, 64)
		if err != nil {
			return usagef("--height %q: not a block height", *height)
		}
		target = h
	} else {
		h, err := chain.ParseHash(*hash)
		if err != nil {
			return usagef("--hash: %v", err)
		}
		targetHash = h
	}

	store, err := openStore(e, *dataDir, disk.Options{RollbackWindow: storeDepth(cl, "rollback-window", *window)}, true)
	if err != nil {
		return err
	}
	w := writer.New(store, writer.Options{})
	var res writer.Result
	if useHeight {
		res, err = w.Rollback(context.Background(), target)
	} else {
		res, err = w.RollbackToHash(context.Background(), targetHash)
	}
	w.Close()
	if closeErr := store.Close(); closeErr != nil {
		err = errors.Join(err, closeErr)
	}
	if err != nil {
		if res.Changes != nil { // some blocks were reverted before the failure
			return fmt.Errorf("%w (the store's tip is now %s)", err, res.Tip)
		}
		return err
	}
	if res.Tip.Empty {
		fmt.Fprintf(e.stdout, "new tip: empty (no block applied)\n")
	} else {
		fmt.Fprintf(e.stdout, "new tip: height %d hash %s\n", res.Tip.Height, res.Tip.Hash)
	}
	return nil
}

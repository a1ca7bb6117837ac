package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

const statsAbout = `
Print the figures of the store in --data-dir: its tip, live UTXO count and
UTXO-set digest (docs/digest.md), then the store's own figures (disk size,
Pebble's shape, retention cursors).

With --json, print exactly this one line (docs/digest.md):
  {"tip": {"height": H, "hash": "…"}, "utxo_count": N, "utxo_digest": "…"}
For a store that has applied no block, "tip" is null, utxo_count 0 and the
digest 64 zeros. Two stores with the same line hold the same UTXO set.

The store must exist and no other process may have it open (a running
server holds it).`

// statsTip and statsJSON are the answer of docs/digest.md; field order is the
// contract's.
type statsTip struct {
	Height uint64 `json:"height"`
	Hash   string `json:"hash"`
}

type statsJSON struct {
	Tip        *statsTip `json:"tip"` // null for an empty store
	UtxoCount  uint64    `json:"utxo_count"`
	UtxoDigest string    `json:"utxo_digest"`
}

func runStats(e *env, args []string) error {
	cl := newCommandLine("stats", "stats [flags]", statsAbout)
	dataDir := dataDirFlag(cl.fs)
	asJSON := cl.fs.Bool("json", false, "print only the JSON line of docs/digest.md")
	if err := cl.parse(e, args); err != nil {
		return err
	}
	if cl.fs.NArg() > 0 {
		return usagef("unexpected arguments %q", cl.fs.Args())
	}
	store, err := openStore(e, *dataDir, disk.Options{}, true)
	if err != nil {
		return err
	}
	st, health := store.State(), store.Health()
	if err := store.Close(); err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(e.stdout).Encode(contractStats(st))
	}
	printStats(e.stdout, *dataDir, st, health)
	return nil
}

func contractStats(st disk.State) statsJSON {
	out := statsJSON{UtxoCount: st.UtxoCount, UtxoDigest: st.Digest.String()}
	if !st.Tip.Empty {
		out.Tip = &statsTip{Height: st.Tip.Height, Hash: st.Tip.Hash.String()}
	}
	return out
}

func printStats(w io.Writer, dir string, st disk.State, h disk.Health) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, format string, args ...any) { fmt.Fprintf(tw, "%s\t"+format+"\n", append([]any{k}, args...)...) }
	row("store", "%s", dir)
	if st.Tip.Empty {
		row("tip", "empty (no block applied)")
	} else {
		row("tip", "height %d hash %s", st.Tip.Height, st.Tip.Hash)
	}
	row("utxo count", "%d", st.UtxoCount)
	row("utxo digest", "%s", st.Digest)
	row("skipped inputs", "%d (unknown inputs skipped with --skip-unknown-inputs)", st.SkippedInputs)
	row("highest tip ever", "%d", st.MaxHeight)
	row("undo floor", "height %d (no undo data below it)", st.UndoFloor)
	row("pruning cursor", "spent records of height %d (offset %d)", st.PruneHeight, st.PruneOffset)
	row("disk size", "%s", bytesHuman(h.DiskBytes))
	row("read amplification", "%d", h.ReadAmplification)
	row("L0 files", "%d", h.L0Files)
	row("compaction debt", "%s", bytesHuman(h.CompactionDebt))
	row("memtable", "%s", bytesHuman(h.MemTableBytes))
	tw.Flush()
}

// bytesHuman renders n in binary units, exact below 1 KiB.
func bytesHuman(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB (%d bytes)", float64(n)/float64(div), "KMGTPE"[exp], n)
}

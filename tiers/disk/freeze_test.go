package disk_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

// frozenState reads, from a fresh view, whether op is live, its record's
// mark, the freeze row's reason, and the mark on op's row in its address's
// listing ("" when not listed).
func frozenState(t *testing.T, s *disk.Store, op chain.OutPoint) string {
	t.Helper()
	v, err := s.NewView()
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	var rec string
	var address []byte
	err = v.UtxoFunc(op, func(r *disk.UtxoRef) error {
		rec = fmt.Sprintf("spent=%v frozen=%v", r.Spent, r.Frozen)
		address = bytes.Clone(r.Address)
		return nil
	})
	if errors.Is(err, chain.ErrNotFound) {
		rec = "absent"
	} else if err != nil {
		t.Fatal(err)
	}
	fi, found, err := v.Frozen(op)
	if err != nil {
		t.Fatal(err)
	}
	row := "no row"
	if found {
		row = fmt.Sprintf("row %q@%d", fi.Reason, fi.Seq)
	}
	listed := ""
	if address != nil {
		_, _, err = v.ListFunc(disk.ListQuery{Dim: disk.DimAddress, Value: address, Limit: 1000}, func(r *disk.UtxoRef) error {
			if r.OutPoint == op {
				listed = fmt.Sprintf(" listed frozen=%v", r.Frozen)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return rec + ", " + row + listed
}

// checkFigures: the state row's count and digest are the recount of the
// outpoint rows (a freeze changes neither).
func checkFigures(t *testing.T, s *disk.Store) {
	t.Helper()
	count, digest, err := s.Recount(nil)
	if err != nil {
		t.Fatal(err)
	}
	if st := s.State(); st.UtxoCount != count || st.Digest != digest {
		t.Fatalf("state %d/%s, recount %d/%s", st.UtxoCount, st.Digest, count, digest)
	}
}

// TestFreezeLifecycle follows frozen outputs through what can happen to
// them, in both undo modes: a freeze marks the record and the listing row
// and writes the freeze row, as one change (seq + 1, tip, count and digest
// as they were); a block that spends a frozen output ends the freeze (no
// row, a spent record without a mark), also inside a catch-up window; a
// rollback of that block brings the output back live and unfrozen; a
// rollback that removes a frozen output removes its row; the freeze rows
// survive a reopen.
func TestFreezeLifecycle(t *testing.T) {
	for _, mode := range []disk.UndoMode{disk.UndoCompact, disk.UndoSelfContained} {
		t.Run(fmt.Sprint("undo mode ", mode), func(t *testing.T) {
			dir := t.TempDir()
			logs := &lockedBuffer{}
			logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
			st := stOpen(t, dir, disk.Options{UndoMode: mode, RollbackWindow: 30, Logger: logger})
			blocks := stChain(1, 1, 20)
			st.apply(blocks[:5]...)
			ctx := context.Background()
			bob2 := chain.OutPoint{TxHash: blocks[1].Txs[0].Hash, Index: 1}   // never spent
			alice5 := chain.OutPoint{TxHash: blocks[4].Txs[0].Hash, Index: 0} // spent by block 6
			alice8 := chain.OutPoint{TxHash: blocks[7].Txs[0].Hash, Index: 0} // spent by block 9, in a window
			before := st.s.State()

			res, err := st.w.Freeze(ctx, chain.Freeze{OutPoints: []chain.OutPoint{bob2, alice5}, Reason: "audit"})
			if err != nil || !res.Applied || res.Seq != before.Seq+1 || res.Tip != before.Tip {
				t.Fatalf("freeze: %+v, %v", res, err)
			}
			after := st.s.State()
			if after.UtxoCount != before.UtxoCount || after.Digest != before.Digest {
				t.Fatal("a freeze changed the count or the digest")
			}
			checkFigures(t, st.s)
			want := fmt.Sprintf("spent=false frozen=true, row %q@%d listed frozen=true", "audit", res.Seq)
			for _, op := range []chain.OutPoint{bob2, alice5} {
				if got := frozenState(t, st.s, op); got != want {
					t.Fatalf("%s after the freeze: %s, want %s", op, got, want)
				}
			}
			// The same freeze again changes nothing; a new reason is a change.
			if res, err := st.w.Freeze(ctx, chain.Freeze{OutPoints: []chain.OutPoint{bob2}, Reason: "audit"}); err != nil || res.Applied {
				t.Fatalf("freeze again: %+v, %v", res, err)
			}

			st.apply(blocks[5]) // spends alice5
			if got := frozenState(t, st.s, alice5); got != "spent=true frozen=false, no row" {
				t.Fatalf("alice5 after the block that spends it: %s", got)
			}
			if l := logs.String(); !strings.Contains(l, "freeze lapses") || !strings.Contains(l, alice5.String()) ||
				!strings.Contains(l, "spent by "+blocks[5].Txs[1].Hash.String()) {
				t.Fatalf("the lapse is not logged with its outpoint and spender: %q", l)
			}
			if _, err := st.w.Rollback(ctx, 5); err != nil {
				t.Fatal(err)
			}
			if got := frozenState(t, st.s, alice5); got != "spent=false frozen=false, no row listed frozen=false" {
				t.Fatalf("alice5 after the rollback of its spender: %s", got)
			}
			checkFigures(t, st.s)

			// A catch-up window that spends a frozen output.
			st.apply(blocks[5:8]...)
			if _, err := st.w.Freeze(ctx, chain.Freeze{OutPoints: []chain.OutPoint{alice8}, Reason: "window"}); err != nil {
				t.Fatal(err)
			}
			br, err := st.w.ApplyBlocks(ctx, blocks[8:], 20)
			if err != nil || br.Done != len(blocks[8:]) {
				t.Fatalf("apply blocks: %+v, %v", br, err)
			}
			if got := frozenState(t, st.s, alice8); got != "spent=true frozen=false, no row" {
				t.Fatalf("alice8 after a window spent it: %s", got)
			}
			checkFigures(t, st.s)

			// The freeze of bob2 survives a reopen; a rollback below its
			// block removes it, and its row.
			st.close()
			if raw := stGetRaw(t, dir, []byte{0x01, 'V'}); raw[3] != byte(disk.SchemaVersion) {
				t.Fatalf("schema row %x of a store with freezes, want version %d", raw, disk.SchemaVersion)
			}
			st = stOpen(t, dir, disk.Options{UndoMode: mode})
			if got := frozenState(t, st.s, bob2); got != fmt.Sprintf("spent=false frozen=true, row %q@%d listed frozen=true", "audit", res.Seq) {
				t.Fatalf("bob2 after a reopen: %s", got)
			}
			if _, err := st.w.Rollback(ctx, 1); err != nil {
				t.Fatal(err)
			}
			if got := frozenState(t, st.s, bob2); got != "absent, no row" {
				t.Fatalf("bob2 after the rollback of its block: %s", got)
			}
			st.apply(blocks[1])
			if got := frozenState(t, st.s, bob2); got != "spent=false frozen=false, no row listed frozen=false" {
				t.Fatalf("bob2 applied again: %s", got)
			}
			checkFigures(t, st.s)
		})
	}
}

// TestFreezeRefusals: a freeze naming an output that is not live is
// refused whole, with nothing written; an unfreeze of nothing frozen is no
// change; a store before schema 2 is raised by its first freeze only.
func TestFreezeRefusals(t *testing.T) {
	dir := t.TempDir()
	st := stOpen(t, dir, disk.Options{})
	blocks := stChain(2, 1, 3)
	st.apply(blocks...)
	st.close()
	// A store written before freezes existed: schema version 1.
	stSetRaw(t, dir, []byte{0x01, 'V'}, stUnhex(t, "00000001 01 01"))
	st = stOpen(t, dir, disk.Options{})
	ctx := context.Background()
	live := chain.OutPoint{TxHash: blocks[2].Txs[0].Hash, Index: 0}
	spent := chain.OutPoint{TxHash: blocks[0].Txs[0].Hash, Index: 0}
	unknown := chain.OutPoint{TxHash: stHash(9, 9, 9)}
	before := st.s.State()
	for _, ops := range [][]chain.OutPoint{{live, spent}, {unknown, live}} {
		if _, err := st.w.Freeze(ctx, chain.Freeze{OutPoints: ops, Reason: "r"}); !errors.Is(err, chain.ErrUnknownInput) {
			t.Fatalf("freeze %v: %v, want ErrUnknownInput", ops, err)
		}
	}
	for _, f := range []chain.Freeze{{Reason: "r"}, {OutPoints: []chain.OutPoint{live, live}, Reason: "r"}, {OutPoints: []chain.OutPoint{live}}} {
		if _, err := st.w.Freeze(ctx, f); !errors.Is(err, chain.ErrInvalidArgument) {
			t.Fatalf("freeze %+v: %v, want ErrInvalidArgument", f, err)
		}
	}
	if res, err := st.w.Unfreeze(ctx, chain.Freeze{OutPoints: []chain.OutPoint{live, spent, unknown}}); err != nil || res.Applied {
		t.Fatalf("unfreeze of nothing frozen: %+v, %v", res, err)
	}
	if now := st.s.State(); now != before {
		t.Fatalf("refused writes changed the state: %+v, was %+v", now, before)
	}
	if got := frozenState(t, st.s, live); got != "spent=false frozen=false, no row listed frozen=false" {
		t.Fatalf("live after refused freezes: %s", got)
	}
	st.close()
	if raw := stGetRaw(t, dir, []byte{0x01, 'V'}); raw[3] != 1 {
		t.Fatalf("schema row %x raised without a freeze", raw)
	}
	st = stOpen(t, dir, disk.Options{})
	if _, err := st.w.Freeze(ctx, chain.Freeze{OutPoints: []chain.OutPoint{live}, Reason: "r"}); err != nil {
		t.Fatal(err)
	}
	st.close()
	if raw := stGetRaw(t, dir, []byte{0x01, 'V'}); raw[3] != 2 {
		t.Fatalf("schema row %x after the first freeze, want version 2", raw)
	}
}

// lockedBuffer is a log destination safe for Pebble's goroutines too.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

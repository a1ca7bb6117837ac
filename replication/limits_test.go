package replication

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
	"github.com/utxo-cache/utxo-cache/writer"
)

// TestReplicaTakesWritersLimits: a writer whose block memory budget is
// larger than its replica's accepts a block over the replica's; the replica
// still applies it, because the writer's changes answer announces its
// limits and the follower decodes with them (a replica refusing a block its
// writer accepted could never follow past it). A writer that announces
// nothing (or smaller limits) leaves the replica's own in force.
func TestReplicaTakesWritersLimits(t *testing.T) {
	ctx := context.Background()
	b := &chain.Block{Height: 1, Hash: chain.Hash{1}}
	for i := range 4 {
		tx := chain.Tx{Hash: chain.Hash{2, byte(i)}}
		for j := range 8 {
			tx.Outputs = append(tx.Outputs, chain.Output{Address: fmt.Sprintf("addr%d.%d", i, j), Value: 1})
		}
		b.Txs = append(b.Txs, tx)
	}
	need := int(chain.BlockMemory(b))
	writerLimits := chain.Limits{MaxBlockMemory: need}
	replicaLimits := chain.Limits{MaxBlockMemory: need / 2}

	// The writer applies the block: its figures are the change's.
	ws, err := disk.Open(t.TempDir(), disk.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	ww := writer.New(ws, writer.Options{})
	defer ww.Close()
	if _, err := ww.Apply(ctx, b); err != nil {
		t.Fatal(err)
	}
	st := ws.Published()
	rec, err := chain.AppendChangeCBOR(nil, &chain.Change{Seq: st.Seq, Kind: chain.ChangeApply, Block: b,
		After: chain.Summary{Tip: st.Tip, UtxoCount: st.UtxoCount, Digest: st.Digest}})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := chain.DecodeChangeCBOR(rec, replicaLimits.EnsureDefaults()); !errors.Is(err, chain.ErrTooLarge) {
		t.Fatalf("the block is not over the replica's own limit: %v", err)
	}

	for _, c := range []struct {
		name     string
		announce *chain.Limits
		applied  bool
	}{
		{"writer-announces-larger", &writerLimits, true},
		{"writer-announces-smaller", &chain.Limits{MaxBlockMemory: need / 4}, false},
		{"writer-announces-nothing", nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if c.announce != nil {
					WriterLimitsHeaders(w.Header(), *c.announce)
				}
				w.Header().Set("X-Commit-Seq", strconv.FormatUint(st.Seq, 10))
				w.Header().Set("X-Tip-Height", strconv.FormatUint(st.Tip.Height, 10))
				_, _ = w.Write(rec)
			}))
			defer srv.Close()
			rs, err := disk.Open(t.TempDir(), disk.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer rs.Close()
			var f *Tail
			rw := writer.New(rs, writer.Options{Verify: func(st disk.State) error { return f.Verify(st) }})
			defer rw.Close()
			f, err = NewTail(rs, rw, TailOptions{URL: srv.URL, Token: "t", BlockLimits: replicaLimits})
			if err != nil {
				t.Fatal(err)
			}
			err = f.poll(ctx)
			got := rs.Published()
			if c.applied {
				if err != nil || got.Seq != st.Seq || got.Digest != st.Digest {
					t.Fatalf("the replica did not apply the block its writer accepted: %v (at seq %d)", err, got.Seq)
				}
				return
			}
			if !errors.Is(err, chain.ErrTooLarge) && !errors.Is(err, ErrDiverged) || got.Seq != 0 {
				t.Fatalf("with its own limits the replica took the block: %v (at seq %d)", err, got.Seq)
			}
		})
	}
}

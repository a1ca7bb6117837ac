package node

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/utxo-cache/utxo-cache/chain"
)

// slotBlock is block height of the chain tag, at a slot of its own.
func slotBlock(tag string, height uint64, prev chain.Hash) *chain.Block {
	h := func(parts ...any) chain.Hash { return sha256.Sum256(fmt.Append(nil, parts...)) }
	return &chain.Block{Height: height, Hash: h(tag, "block", height), PrevHash: prev,
		Slot: 5_000_000 + 20*height + uint64(len(tag)),
		Txs:  []chain.Tx{{Hash: h(tag, "tx", height), Outputs: []chain.Output{{Address: "addr", Value: 1}}}}}
}

// TestReplicaKeepsSlots: the slots a writer keeps with its blocks reach a
// replica through its change log (blocks applied alone, in catch-up windows,
// and after a rollback), so the replica's points are the writer's.
func TestReplicaKeepsSlots(t *testing.T) {
	ctx := context.Background()
	wn, err := Start(ctx, Config{DataDir: t.TempDir(), MemTableBytes: 4 << 20, ReplicationToken: "repl"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = wn.Close(ctx) }()
	wsrv := httptest.NewServer(wn.Handler())
	defer wsrv.Close()
	var chainBlocks []*chain.Block
	prev := chain.Hash{}
	for h := range uint64(40) {
		b := slotBlock("a", h, prev)
		chainBlocks, prev = append(chainBlocks, b), b.Hash
	}
	if _, err := wn.Writer().Apply(ctx, chainBlocks[0]); err != nil {
		t.Fatal(err)
	}

	rn, err := Start(ctx, Config{DataDir: t.TempDir(), ReplicaOf: wsrv.URL, ReplicationToken: "repl", MaxWait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rn.Close(ctx) }()
	caughtUp := func(what string) {
		t.Helper()
		want := wn.Store().State()
		deadline := time.Now().Add(20 * time.Second)
		for {
			if n := rn.replica.node.Load(); n != nil && n.store.Published().Seq == want.Seq {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the replica did not reach seq %d within 20s", what, want.Seq)
			}
			time.Sleep(5 * time.Millisecond)
		}
		rs := rn.replica.node.Load().store
		for h := uint64(0); h <= want.Tip.Height+5; h++ {
			wp, wf, werr := wn.Store().PointAt(h)
			rp, rf, rerr := rs.PointAt(h)
			if werr != nil || rerr != nil || wf != rf || wp != rp {
				t.Fatalf("%s: height %d: writer %s %v %v, replica %s %v %v", what, h, wp, wf, werr, rp, rf, rerr)
			}
			if wf && wp.Slot == 0 {
				t.Fatalf("%s: height %d kept no slot", what, h)
			}
		}
	}
	caughtUp("bootstrap")

	// After the bootstrap: through the change log, alone and in windows.
	if _, err := wn.Writer().Apply(ctx, chainBlocks[1]); err != nil {
		t.Fatal(err)
	}
	if res, err := wn.Writer().ApplyBlocks(ctx, chainBlocks[2:40], 100_000); err != nil || res.Windows == 0 {
		t.Fatalf("ApplyBlocks: %+v %v", res, err)
	}
	caughtUp("blocks")

	// A rollback, and a fork at other slots.
	if _, err := wn.Writer().Rollback(ctx, 30); err != nil {
		t.Fatal(err)
	}
	prev = chainBlocks[30].Hash
	for h := uint64(31); h <= 33; h++ {
		b := slotBlock("fork", h, prev)
		if _, err := wn.Writer().Apply(ctx, b); err != nil {
			t.Fatal(err)
		}
		prev = b.Hash
	}
	caughtUp("fork")
}

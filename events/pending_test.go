package events

import (
	"fmt"
	"strings"
	"testing"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

// TestPendingNetEffects: the moves of one change are given per key as
// their net effect, which a watcher applies by removing, then adding: a
// transaction that enters and leaves in the change leaves no trace but its
// moves, one that leaves and enters again is in both lists, and a spend that
// passes from one transaction to another is unspent and spent again.
func TestPendingNetEffects(t *testing.T) {
	h := func(b byte) chain.Hash { return chain.Hash{b} }
	conf := chain.Utxo{OutPoint: chain.OutPoint{TxHash: h(1)}, Height: 3, Output: chain.Output{Address: "alice", Value: 10}}
	a := &chain.Tx{Hash: h(0xa), Inputs: []chain.OutPoint{conf.OutPoint}, Outputs: []chain.Output{{Address: "bob", Value: 9}}}
	b := &chain.Tx{Hash: h(0xb), Inputs: []chain.OutPoint{conf.OutPoint}, Outputs: []chain.Output{{Address: "carol", Value: 8}}}
	xin := chain.Utxo{OutPoint: chain.OutPoint{TxHash: h(2)}, Height: 4, Output: chain.Output{Address: "dave", Value: 5}}
	x := &chain.Tx{Hash: h(0xc), Inputs: []chain.OutPoint{xin.OutPoint}, Outputs: []chain.Output{{Address: "erin", Value: 4}}}
	c := &chain.Change{Seq: 7, Kind: chain.ChangeWallet, Pending: []chain.PendingMove{
		{Tx: a, Status: chain.PendingActive, Since: 100, Spent: []chain.Utxo{conf}},
		{Tx: x, Status: chain.PendingWithdrawn, Since: 50, Spent: []chain.Utxo{xin}},
		{Tx: a, Status: chain.PendingConflicting, Since: 100, Spent: []chain.Utxo{conf}},
		{Tx: b, Status: chain.PendingActive, Since: 101, Spent: []chain.Utxo{conf}},
		{Tx: x, Status: chain.PendingActive, Since: 102, Spent: []chain.Utxo{xin}},
	}}
	g := &digester{dims: []disk.Dimension{disk.DimAddress}, funcs: []disk.ValuesFunc{disk.ValuesOf(disk.DimAddress, nil)}}
	d, err := g.digest(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, addr := range []string{"alice", "bob", "carol", "dave", "erin"} {
		e := d.ptouched[keyID(disk.DimAddress, []byte(addr))]
		if e == nil {
			got[addr] = "-"
			continue
		}
		var b strings.Builder
		for _, o := range e.created {
			fmt.Fprintf(&b, "+%x:%d@%d ", o.u.TxHash[:1], o.u.Index, o.since)
		}
		for _, s := range e.spent {
			fmt.Fprintf(&b, "s%x>%x ", s.op.TxHash[:1], s.tx[:1])
		}
		for _, op := range e.removed {
			fmt.Fprintf(&b, "-%x ", op.TxHash[:1])
		}
		for _, op := range e.unspent {
			fmt.Fprintf(&b, "u%x ", op.TxHash[:1])
		}
		fmt.Fprintf(&b, "moves%v", e.moves)
		got[addr] = b.String()
	}
	want := map[string]string{
		"alice": "s01>0b moves[0 2 3]",      // a took it and let it go; b holds it
		"bob":   "-",                        // a's output came and went
		"carol": "+0b:0@101 moves[3]",       // b's output
		"dave":  "s02>0c u02 moves[1 4]",    // x let it go, then took it again
		"erin":  "+0c:0@102 -0c moves[1 4]", // x's output left, then came back
	}
	for addr, w := range want {
		if got[addr] != w {
			t.Errorf("%s: %q, want %q", addr, got[addr], w)
		}
	}
	// The event lists the moves of its keys only.
	keys := []*Key{NewKey(disk.DimAddress, []byte("carol"), "address", "carol")}
	ev := string(appendPendingEvent(nil, d, nil, nil, keys, []*pendEffects{d.ptouched[keyID(disk.DimAddress, []byte("carol"))]}))
	wantEv := "id: 7\nevent: pending\ndata: {\"seq\":7,\"txs\":[{\"tx_hash\":\"0b" + strings.Repeat("00", 31) + "\",\"status\":\"pending\"}],\"keys\":[{\"key\":{\"address\":\"carol\"},\"created\":["
	if !strings.HasPrefix(ev, wantEv) || !strings.Contains(ev, `"confirmed":false,"pending_since":101}],"spent":[],"removed":[],"unspent":[]}]}`+"\n\n") {
		t.Errorf("event %q", ev)
	}
}

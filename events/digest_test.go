package events

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"strings"
	"testing"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/internal/model"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

// TestDuplicateTxIDs: a block whose transactions spend an output and then
// create its outpoint again (a duplicate transaction id, allowed once the
// earlier outputs are spent), and the rollback of that block. A watcher
// that applies each event as docs/events.md says (apply: add created, then
// remove spent; rollback: remove removed, then add restored) must hold the
// model's live sets after each.
func TestDuplicateTxIDs(t *testing.T) {
	ctx := context.Background()
	n := newTestNode(t, disk.Options{}, Options{})
	h := func(s string) chain.Hash { return sha256.Sum256([]byte(s)) }
	m := model.New(100, 100)
	b0 := &chain.Block{Height: 0, Hash: h("b0"), Txs: []chain.Tx{
		{Hash: h("A"), Outputs: []chain.Output{{Address: "alice", Value: 1}}},
	}}
	a0 := chain.OutPoint{TxHash: h("A")}
	b0o := chain.OutPoint{TxHash: h("B")}
	b1 := &chain.Block{Height: 1, Hash: h("b1"), PrevHash: h("b0"), Txs: []chain.Tx{
		// B spends A:0 (live before the block) and pays bob.
		{Hash: h("B"), Inputs: []chain.OutPoint{a0}, Outputs: []chain.Output{{Address: "bob", Value: 2}}},
		// C spends B:0 (created in the block) and pays alice.
		{Hash: h("C"), Inputs: []chain.OutPoint{b0o}, Outputs: []chain.Output{{Address: "alice", Value: 3}}},
		// B again: B:0 exists again, now alice's.
		{Hash: h("B"), Outputs: []chain.Output{{Address: "alice", Value: 4}}},
		// A again: A:0 exists again, now bob's.
		{Hash: h("A"), Outputs: []chain.Output{{Address: "bob", Value: 5}}},
	}}
	snaps := map[uint64]map[string]map[string]string{}
	for seq, b := range []*chain.Block{b0, b1} {
		if _, err := m.Apply(b, false); err != nil {
			t.Fatalf("model: block %d: %v", b.Height, err)
		}
		if _, err := n.w.Apply(ctx, b); err != nil {
			t.Fatalf("block %d: %v", b.Height, err)
		}
		snaps[uint64(seq)+1] = modelSets(m)
	}
	if err := m.Rollback(0); err != nil {
		t.Fatal(err)
	}
	if _, err := n.w.Rollback(ctx, 0); err != nil {
		t.Fatal(err)
	}
	snaps[3] = modelSets(m)

	s, err := n.hub.Subscribe([]*Key{
		NewKey(disk.DimAddress, []byte("alice"), "address", "alice"),
		NewKey(disk.DimAddress, []byte("bob"), "address", "bob"),
	}, 0, true)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pr, pw := io.Pipe()
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = s.Run(cctx, pw, func() error { return nil }); pw.Close(); close(done) }()
	defer func() { cancel(); _, _ = io.Copy(io.Discard, pr); <-done }()

	live := map[string]map[string]string{"alice": {}, "bob": {}}
	br := bufio.NewReader(pr)
	var id, name string
	for seq := uint64(1); seq <= 3; {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case strings.HasPrefix(line, "id: "):
			id = strings.TrimSpace(line[4:])
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimSpace(line[7:])
		case strings.HasPrefix(line, "data: "):
			if id != fmt.Sprint(seq) {
				t.Fatalf("event %s, want %d", id, seq)
			}
			applyEvent(t, live, name, line[6:])
			if fmt.Sprint(live) != fmt.Sprint(snaps[seq]) {
				t.Fatalf("after %s %d: events give %v, the model %v\n%s", name, seq, live, snaps[seq], line)
			}
			seq++
		}
	}
}

func modelSets(m *model.Model) map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, a := range []string{"alice", "bob"} {
		out[a] = map[string]string{}
		for _, u := range m.List(a, false) {
			out[a][u.OutPoint.String()] = fmt.Sprint(u.Value)
		}
	}
	return out
}

// applyEvent applies one event's data to live as a watcher does.
func applyEvent(t *testing.T, live map[string]map[string]string, name, data string) {
	t.Helper()
	type op struct {
		TxHash string `json:"tx_hash"`
		Index  uint32 `json:"index"`
	}
	type utxo struct {
		TxHash string `json:"tx_hash"`
		Index  uint32 `json:"index"`
		Value  string `json:"value"`
	}
	var ev struct {
		Keys []struct {
			Key      map[string]string `json:"key"`
			Created  []utxo            `json:"created"`
			Spent    []op              `json:"spent"`
			Removed  []op              `json:"removed"`
			Restored []utxo            `json:"restored"`
		} `json:"keys"`
	}
	if err := json.Unmarshal([]byte(data), &ev); err != nil {
		t.Fatal(err)
	}
	name2 := func(h string, i uint32) string { return fmt.Sprintf("%s:%d", h, i) }
	for _, k := range ev.Keys {
		set := live[k.Key["address"]]
		next := maps.Clone(set)
		switch name {
		case "apply":
			for _, u := range k.Created {
				next[name2(u.TxHash, u.Index)] = u.Value
			}
			for _, o := range k.Spent {
				delete(next, name2(o.TxHash, o.Index))
			}
		case "rollback":
			for _, o := range k.Removed {
				delete(next, name2(o.TxHash, o.Index))
			}
			for _, u := range k.Restored {
				next[name2(u.TxHash, u.Index)] = u.Value
			}
		}
		live[k.Key["address"]] = next
	}
}

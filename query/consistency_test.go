package query_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/utxo-cache/utxo-cache/cache"
	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/query"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
	"github.com/utxo-cache/utxo-cache/tiers/memory"
	"github.com/utxo-cache/utxo-cache/writer"
)

func hashOf(kind byte, n uint64) chain.Hash {
	var h chain.Hash
	h[0] = kind
	for i := 0; i < 8; i++ {
		h[31-i] = byte(n >> (8 * i))
	}
	return h
}

// moveBlock is block h of a chain where the address "hot" holds exactly one
// output of value h: each block spends the previous one and pays h to "hot".
// Outpoint (tx h, 0) is created at h and spent at h+1.
func moveBlock(h uint64) *chain.Block {
	tx := chain.Tx{Hash: hashOf('t', h), Outputs: []chain.Output{{Address: "hot", Value: h}}}
	if h > 1 {
		tx.Inputs = []chain.OutPoint{{TxHash: hashOf('t', h-1)}}
	}
	b := &chain.Block{Height: h, Hash: hashOf('b', h), Txs: []chain.Tx{tx}}
	if h > 1 {
		b.PrevHash = hashOf('b', h-1)
	}
	return b
}

type answerJSON struct {
	Tip struct {
		Height uint64 `json:"height"`
	} `json:"tip"`
	Value string `json:"value"`
	Utxos []struct {
		Value string `json:"value"`
	} `json:"utxos"`
	Utxo  *struct{ Value string }  `json:"utxo"`
	Spent *struct{ Height uint64 } `json:"spent"`
	Error *struct{ Code string }   `json:"error"`
	// Results of a batch lookup.
	Results []struct {
		Utxo  *struct{ Value string }  `json:"utxo"`
		Spent *struct{ Height uint64 } `json:"spent"`
	} `json:"results"`
}

// TestReadsNeverStale runs readers against a writer that changes the same
// address every block, through the memory tier, and checks the contract's
// promises on every answer: its content is the state at the tip it claims,
// and that tip is at least the last one acknowledged before the read began.
func TestReadsNeverStale(t *testing.T) {
	store, err := disk.Open(t.TempDir(), disk.Options{PruneDepth: 1000, RollbackWindow: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	mem, err := memory.New(memory.Options{MaxBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	srv := query.New(store, query.Options{Tiers: []cache.Tier{mem}})
	defer srv.Close()
	w := writer.New(store, writer.Options{})
	defer w.Close()
	w.Subscribe(srv)

	ctx := context.Background()
	var acked atomic.Uint64
	if _, err := w.Apply(ctx, moveBlock(1)); err != nil {
		t.Fatal(err)
	}
	acked.Store(1)

	const blocks = 300
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	stop := make(chan struct{})
	report := func(err error) {
		select {
		case errs <- err:
		default:
		}
	}
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				floor := acked.Load()
				var ans query.Answer
				var err error
				switch i % 4 {
				case 0:
					ans, err = srv.Balance(ctx, "hot")
				case 1:
					ans, err = srv.AddressUtxos(ctx, "hot", r%2 == 1, 10, "")
				case 2:
					ans, err = srv.Utxo(ctx, chain.OutPoint{TxHash: hashOf('t', floor)})
				default:
					// A batch: the same outpoint, and one that never exists.
					ans, err = srv.Lookup(ctx, []chain.OutPoint{{TxHash: hashOf('t', floor)}, {TxHash: hashOf('t', 1<<40)}})
				}
				if err != nil {
					report(err)
					return
				}
				if err := checkAnswer(ans, i%4, floor); err != nil {
					report(fmt.Errorf("reader %d read %d (%s tier): %w", r, i, ans.Tier, err))
					return
				}
			}
		}(r)
	}
	for h := uint64(2); h <= blocks; h++ {
		if _, err := w.Apply(ctx, moveBlock(h)); err != nil {
			t.Fatal(err)
		}
		acked.Store(h)
		if h%50 == 0 { // a rollback and re-apply: the state goes back and forth
			if _, err := w.Rollback(ctx, h-3); err != nil {
				t.Fatal(err)
			}
			acked.Store(h - 3)
			for k := h - 2; k <= h; k++ {
				if _, err := w.Apply(ctx, moveBlock(k)); err != nil {
					t.Fatal(err)
				}
				acked.Store(k)
			}
		}
	}
	close(stop)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
}

// checkAnswer verifies one answer against the chain of moveBlock. Rollbacks
// only go back and re-apply the same blocks, so the state at height h is
// always the same: "hot" holds one output of value h.
func checkAnswer(ans query.Answer, kind int, floor uint64) error {
	var a answerJSON
	if err := json.Unmarshal(ans.AppendBody(nil), &a); err != nil {
		return fmt.Errorf("body %q: %w", ans.AppendBody(nil), err)
	}
	h := ans.Tip.Height
	if a.Tip.Height != h {
		return fmt.Errorf("body tip %d, answer tip %d", a.Tip.Height, h)
	}
	// A rollback lowers the acknowledged tip legitimately; the floor read
	// before a rollback's ack can be above the answer by at most 3.
	if h+3 < floor {
		return fmt.Errorf("answer at tip %d, but %d was acknowledged before the read", h, floor)
	}
	want := fmt.Sprint(h)
	switch kind {
	case 0:
		if a.Value != want {
			return fmt.Errorf("balance %s at tip %d, want %s", a.Value, h, want)
		}
	case 1:
		if len(a.Utxos) != 1 || a.Utxos[0].Value != want {
			return fmt.Errorf("listing %+v at tip %d, want one output of %s", a.Utxos, h, want)
		}
	case 2:
		return checkOutPoint(h, floor, ans.Status == 200, a.Spent)
	default:
		if ans.Status != 200 || len(a.Results) != 2 {
			return fmt.Errorf("batch: status %d, %d results", ans.Status, len(a.Results))
		}
		if r := a.Results[1]; r.Utxo != nil || r.Spent != nil {
			return fmt.Errorf("batch at tip %d: an outpoint that never exists answered %+v", h, r)
		}
		r := a.Results[0]
		if err := checkOutPoint(h, floor, r.Utxo != nil, r.Spent); err != nil {
			return fmt.Errorf("batch: %w", err)
		}
	}
	return nil
}

// checkOutPoint checks the answer about outpoint (t, floor), created at
// floor and spent at floor+1, at tip h: whether it was found, and its
// spent record.
func checkOutPoint(h, floor uint64, found bool, spent *struct{ Height uint64 }) error {
	switch {
	case h < floor && found:
		return fmt.Errorf("outpoint of %d visible at tip %d", floor, h)
	case h == floor && (!found || spent != nil):
		return fmt.Errorf("outpoint of %d at tip %d: found %v spent %+v, want live", floor, h, found, spent)
	case h > floor && (!found || spent == nil || spent.Height != floor+1):
		return fmt.Errorf("outpoint of %d at tip %d: found %v spent %+v, want spent at %d", floor, h, found, spent, floor+1)
	}
	return nil
}

package query

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/internal/workload"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
	"github.com/utxo-cache/utxo-cache/writer"
)

// TestPooledAnswersConcurrent: readers of a server with no cache tier, whose
// answers live in pooled buffers released after each use, read the same
// and different keys at once (so some share a disk read, whose buffer no one
// may release, and others reuse released buffers); every answer must be the
// one a lone reader gets. Run with -race: a buffer handed out while another
// reader still reads it is a race.
func TestPooledAnswersConcurrent(t *testing.T) {
	store, err := disk.Open(t.TempDir(), disk.Options{CacheBytes: 8 << 20, MemTableBytes: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	s := New(store, Options{HotAddresses: -1})
	defer s.Close()
	w := writer.New(store, writer.Options{})
	defer w.Close()
	w.Subscribe(s)
	gen, err := workload.New(workload.Options{Seed: 3, Profile: workload.Cardano, TxsPerBlock: 10, Addresses: 8})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := w.Apply(ctx, gen.NextSeed(400)); err != nil {
		t.Fatal(err)
	}
	var ops []chain.OutPoint
	for op := range gen.LiveOutPoints() {
		if len(ops) < 16 {
			ops = append(ops, op)
		}
	}
	reads := []func() (Answer, error){}
	for _, op := range ops {
		reads = append(reads, func() (Answer, error) { return s.Utxo(ctx, op) })
	}
	reads = append(reads, func() (Answer, error) { return s.Lookup(ctx, ops) })
	for _, a := range gen.HotAddresses() {
		reads = append(reads, func() (Answer, error) { return s.AddressUtxos(ctx, a, false, 100, "") })
	}
	want := make([][]byte, len(reads))
	for i, read := range reads {
		ans, err := read()
		if err != nil {
			t.Fatal(err)
		}
		want[i] = bytes.Clone(ans.Body)
		ans.Release()
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			for k := range 300 {
				i := (g*7 + k) % len(reads)
				if k%3 == 0 {
					i = 0 // every reader on one key too: shared flights
				}
				ans, err := reads[i]()
				if err == nil && !bytes.Equal(ans.Body, want[i]) {
					err = fmt.Errorf("read %d: got %d bytes %.80s…, want %.80s…", i, len(ans.Body), ans.Body, want[i])
				}
				ans.Release()
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

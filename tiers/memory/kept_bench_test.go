package memory_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/utxo-cache/utxo-cache/cache"
	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/changeset"
	"github.com/utxo-cache/utxo-cache/query"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
	"github.com/utxo-cache/utxo-cache/tiers/memory"
)

// tierOnly hides the memory tier's Peek: the server then keeps nothing.
type tierOnly struct{ cache.Tier }

// BenchmarkChangedKept measures the writer's Changed (the step before a
// change is published) for a change touching many addresses whose answers
// are not cached (a catch-up window over a cold cache), with and without a
// Peeker tier.
func BenchmarkChangedKept(b *testing.B) {
	for _, n := range []int{1000, 20000} {
		for _, peek := range []bool{false, true} {
			b.Run(fmt.Sprintf("addresses=%d/peek=%v", n, peek), func(b *testing.B) {
				store, err := disk.Open(b.TempDir(), disk.Options{})
				if err != nil {
					b.Fatal(err)
				}
				defer store.Close()
				mem, err := memory.New(memory.Options{MaxBytes: 64 << 20})
				if err != nil {
					b.Fatal(err)
				}
				defer mem.Close()
				var tier cache.Tier = mem
				if !peek {
					tier = tierOnly{mem}
				}
				srv := query.New(store, query.Options{Tiers: []cache.Tier{tier}, HotAddresses: -1})
				defer srv.Close()
				ctx := context.Background()
				for i := range 4096 { // register the four shapes readers ask for
					ans, _ := srv.AddressUtxos(ctx, "addr", i%2 == 0, 10+10*(i%4/2), "")
					ans.Release()
				}
				cs := &changeset.Set{Balances: map[string]chain.Balance{}}
				for i := range n {
					a := fmt.Sprintf("addr_test1q%08d", i)
					cs.Addresses = append(cs.Addresses, a)
					cs.Spans = append(cs.Spans, changeset.PositionSpan{Lo: chain.Position{Height: 5}, Hi: chain.Position{Height: 5}})
					cs.Balances[a] = chain.Balance{Count: 1000}
				}
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					cs.Seq = uint64(i + 1)
					srv.Changed(cs)
				}
			})
		}
	}
}

package disk_test

import (
	"context"
	"testing"

	"github.com/utxo-cache/utxo-cache/cardano/credential"
	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/internal/workload"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
	"github.com/utxo-cache/utxo-cache/writer"
)

// BenchmarkIndexCost measures what each optional index costs a Cardano
// store: the workload generator's Cardano profile (seed 1) seeds a store of
// about 200,000 live outputs, then each iteration applies one block of 300
// transactions through the writer. Reported beside ns/op: the process's CPU
// per block (cpu-ms/block, Pebble's background work and the GC included:
// on a shared machine it holds where wall time does not), blocks/s, and the
// store's compacted table bytes per live output at the end. Sub-benchmarks
// (benchstat-comparable): indexes=none, each index alone, and all four.
func BenchmarkIndexCost(b *testing.B) {
	for _, c := range []struct {
		name string
		dims []disk.Dimension
	}{
		{"none", nil},
		{"payment", []disk.Dimension{disk.DimPaymentCredential}},
		{"stake", []disk.Dimension{disk.DimStakeCredential}},
		{"policy", []disk.Dimension{disk.DimAssetPolicy}},
		{"asset", []disk.Dimension{disk.DimAsset}},
		{"all", []disk.Dimension{disk.DimPaymentCredential, disk.DimStakeCredential, disk.DimAssetPolicy, disk.DimAsset}},
	} {
		b.Run("indexes="+c.name, func(b *testing.B) { benchIndexCost(b, c.dims) })
	}
}

func benchIndexCost(b *testing.B, dims []disk.Dimension) {
	opts := disk.Options{Dimensions: dims, NoChangeLog: true,
		Derivers: disk.Derivers{disk.DimPaymentCredential: credential.PaymentValues, disk.DimStakeCredential: credential.StakeValues}}
	if len(dims) == 0 {
		opts.Dimensions = []disk.Dimension{disk.DimAddress}
	}
	s, err := disk.Open(b.TempDir(), opts)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	w := writer.New(s, writer.Options{})
	defer w.Close()
	gen, err := workload.New(workload.Options{Seed: 1, Profile: workload.Cardano})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	apply := func(blk *chain.Block) {
		if _, err := w.Apply(ctx, blk); err != nil {
			b.Fatal(err)
		}
	}
	for range 4 {
		apply(gen.NextSeed(50_000))
	}
	// The seed's compaction debt (several times larger with every index)
	// is paid before the timer starts.
	if _, err := disk.CompactedTableBytes(s); err != nil {
		b.Fatal(err)
	}
	blocks := make([]*chain.Block, b.N)
	for i := range blocks {
		blocks[i] = gen.Next()
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU(b)
	for _, blk := range blocks {
		apply(blk)
	}
	b.StopTimer()
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N)/1e6, "cpu-ms/block")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "blocks/s")
	tables, err := disk.CompactedTableBytes(s)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(tables)/float64(s.State().UtxoCount), "B/utxo")
}

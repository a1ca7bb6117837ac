package cardano

import (
	"fmt"
	"testing"
)

// BenchmarkConvert measures decoding and conversion, body hash checked, of
// the chunks' 1,782 real Babbage blocks (blocks/s) and of every single
// fixture block.
//
//	go test -run '^$' -bench Convert -benchtime 3x ./cardano/
func BenchmarkConvert(b *testing.B) {
	a := newAdapter(b)
	var chunkBlocks [][]byte
	var chunkBytes int64
	for _, lc := range loadChunks(b) {
		chunkBlocks = append(chunkBlocks, lc.chunk.Blocks...)
		chunkBytes += int64(len(lc.data))
	}
	var single [][]byte
	for _, fx := range loadFixtures(b) {
		single = append(single, fx.tagged)
	}
	for _, bc := range []struct {
		name   string
		blocks [][]byte
	}{
		{fmt.Sprintf("chunks/blocks=%d", len(chunkBlocks)), chunkBlocks},
		{fmt.Sprintf("single/blocks=%d", len(single)), single},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			var size int64
			for _, blk := range bc.blocks {
				size += int64(len(blk))
			}
			b.SetBytes(size)
			for b.Loop() {
				for _, blk := range bc.blocks {
					if _, err := a.Convert(blk); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.N*len(bc.blocks))/b.Elapsed().Seconds(), "blocks/s")
		})
	}
}

package bitcoin

import (
	"fmt"
	"testing"
)

// BenchmarkConvert converts the large modern block (3315 transactions, 7174
// outputs, 976 of them unspendable) and the 14132 early blocks.
//
//	go test -run '^$' -bench Convert -benchmem ./bitcoin/
func BenchmarkConvert(b *testing.B) {
	a := mainnetAdapter(b)
	blk := loadFixture(b, fixtureLarge)[0]
	b.Run(fmt.Sprintf("txs=%d", len(blk.Transactions)), func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := a.Convert(blk, 574200); err != nil {
				b.Fatal(err)
			}
		}
	})
	chain := loadFixture(b, fixtureChain14131)
	b.Run(fmt.Sprintf("blocks=%d", len(chain)), func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for h, blk := range chain {
				if _, err := a.Convert(blk, uint64(h)); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

// BenchmarkReadBlockFile decodes the 0..14131 fixture, bzip2 included.
func BenchmarkReadBlockFile(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := LoadBlockFile(fixturePath(fixtureChain14131), Mainnet); err != nil {
			b.Fatal(err)
		}
	}
}

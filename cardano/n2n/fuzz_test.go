package n2n

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blinklabs-io/gouroboros/cbor"

	"github.com/utxo-cache/utxo-cache/cardano"
	"github.com/utxo-cache/utxo-cache/cardano/n2n/n2ntest"
)

// FuzzDecodeHeader: an announced header of any bytes and block type gives
// an event or an error, never a panic; the fixtures' real headers decode to
// the point the adapter gives their blocks.
func FuzzDecodeHeader(f *testing.F) {
	blocks := n2ntest.ChunkBlocks(f, fixtureDir, testChunk, 3)
	for _, b := range blocks {
		var parts []cbor.RawMessage
		if _, err := cbor.Decode(b.Inner, &parts); err != nil {
			f.Fatal(err)
		}
		ev, err := decodeHeader(b.Era, parts[0])
		if err != nil || ev.point != (Point{Slot: b.Slot, Hash: b.Hash}) || ev.height != b.Height {
			f.Fatalf("fixture header: %+v %v", ev, err)
		}
		f.Add(b.Era, []byte(parts[0]))
		f.Add(b.Era-1, []byte(parts[0]))
	}
	f.Fuzz(func(t *testing.T, era uint, header []byte) {
		ev, err := decodeHeader(era, header)
		if err == nil && ev.back {
			t.Fatal("a header decoded as a roll backward")
		}
	})
}

// FuzzParsePoint: any text parses or is refused, never panics; what parses
// prints back as the same point.
func FuzzParsePoint(f *testing.F) {
	f.Add("123." + strings.Repeat("ab", 32))
	f.Add("0." + strings.Repeat("00", 32))
	f.Add("18446744073709551615." + strings.Repeat("AB", 32))
	f.Add("1.2")
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePoint(s)
		if err != nil {
			return
		}
		again, err := ParsePoint(p.String())
		if err != nil || again != p {
			t.Fatalf("%q parses to %v, which prints as %q and parses to %v, %v", s, p, p.String(), again, err)
		}
	})
}

// TestDecodeHeaderEveryEra: the header of every single-block fixture, of
// every era from Byron (boundary blocks included) to Conway, decodes to the
// point and block number the adapter gives the whole block.
func TestDecodeHeaderEveryEra(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join(fixtureDir, "*.block"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("fixtures: %v", err)
	}
	a, err := cardano.NewAdapter(cardano.Options{})
	if err != nil {
		t.Fatal(err)
	}
	eras := map[cardano.Era]bool{}
	for _, p := range paths {
		text, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		tagged, err := cardano.DecodeHex(text)
		if err != nil {
			t.Fatal(err)
		}
		b, err := a.Convert(tagged)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		var parts []cbor.RawMessage
		if _, err := cbor.Decode(tagged, &parts); err != nil || len(parts) != 2 {
			t.Fatalf("%s: %v", p, err)
		}
		var body []cbor.RawMessage
		if _, err := cbor.Decode(parts[1], &body); err != nil || len(body) == 0 {
			t.Fatalf("%s: %v", p, err)
		}
		ev, err := decodeHeader(uint(b.Era), body[0])
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if ev.point != (Point{Slot: b.Slot, Hash: b.Chain.Hash}) || ev.height != b.Chain.Height || ev.era != b.Era {
			t.Errorf("%s: header %+v, block %s height %d", filepath.Base(p), ev, b.Name(), b.Chain.Height)
		}
		eras[b.Era] = true
	}
	if len(eras) != 8 {
		t.Errorf("eras covered: %v, want all 8", eras)
	}
}

package disk

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/utxo-cache/utxo-cache/chain"
)

// TestCounterRowsGolden writes counters.go's examples field by field.
func TestCounterRowsGolden(t *testing.T) {
	c := counterFigures{tx: 2, fundedCount: 3, fundedSum: chain.U128(5000), spentCount: 1, spentSum: chain.U128(1000)}
	want, _ := hex.DecodeString("01" + "02" + "03" + "00" + "8827" + "01" + "00" + "e807")
	if got := appendCounterRow(nil, &c); !bytes.Equal(got, want) {
		t.Fatalf("counter row %x, want %x", got, want)
	}
	if got, err := decodeCounterRow(want); err != nil || got != c {
		t.Fatalf("decodes to %+v, %v", got, err)
	}
	big := counterFigures{tx: 1, fundedCount: 1, fundedSum: chain.Uint128{Hi: 1, Lo: 2}}
	wantBig, _ := hex.DecodeString("01" + "01" + "01" + "01" + "02" + "00" + "00" + "00")
	if got := appendCounterRow(nil, &big); !bytes.Equal(got, wantBig) {
		t.Fatalf("counter row %x, want %x", got, wantBig)
	}
	ds := []counterDelta{{k: DimKey{1}, counterFigures: c}, {k: DimKey{2}, counterFigures: big}}
	enc := appendCounterUndo(nil, ds)
	if got, err := decodeCounterUndo(enc); err != nil || len(got) != 2 || got[0] != ds[0] || got[1] != ds[1] {
		t.Fatalf("counter delta decodes to %+v, %v", got, err)
	}
	for _, bad := range [][]byte{
		{}, {0x02, 0, 0, 0, 0, 0, 0, 0}, {0x01, 0, 0, 0, 0, 0, 0, 0}, // version, zeros
		append(append([]byte(nil), want...), 0),                // trailing
		appendCounterUndo(nil, []counterDelta{ds[1], ds[0]}),   // out of order
		appendCounterUndo(nil, []counterDelta{{k: DimKey{1}}}), // a zero entry
		appendCounterUndo(nil, []counterDelta{ds[0], ds[0]}),   // twice
	} {
		_, err1 := decodeCounterRow(bad)
		_, err2 := decodeCounterUndo(bad)
		if !errors.Is(err1, ErrCorrupt) || !errors.Is(err2, ErrCorrupt) {
			t.Errorf("%x: %v, %v; want ErrCorrupt", bad, err1, err2)
		}
	}
	from := appendCounterFrom(nil, 0x1234)
	if h, err := decodeCounterFrom(from); err != nil || h != 0x1234 || hex.EncodeToString(from) != "010000000000001234" {
		t.Fatalf("from row %x: %d, %v", from, h, err)
	}
}

// FuzzCounterRows: the counter decoders never panic, fail with ErrCorrupt
// only, and what they accept encodes back to the same bytes.
func FuzzCounterRows(f *testing.F) {
	f.Add(byte(0), []byte{0x01, 0x02, 0x03, 0x00, 0x88, 0x27, 0x01, 0x00, 0xe8, 0x07})
	f.Add(byte(1), appendCounterUndo(nil, []counterDelta{{k: DimKey{1}, counterFigures: counterFigures{tx: 1}}}))
	f.Add(byte(2), appendCounterFrom(nil, 7))
	f.Fuzz(func(t *testing.T, kind byte, b []byte) {
		var got []byte
		var err error
		switch kind % 3 {
		case 0:
			var c counterFigures
			if c, err = decodeCounterRow(b); err == nil {
				got = appendCounterRow(nil, &c)
			}
		case 1:
			var ds []counterDelta
			if ds, err = decodeCounterUndo(b); err == nil {
				got = appendCounterUndo(nil, ds)
			}
		case 2:
			var h uint64
			if h, err = decodeCounterFrom(b); err == nil {
				got = appendCounterFrom(nil, h)
			}
		}
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("kind %d: error %v is not ErrCorrupt", kind%3, err)
			}
			return
		}
		if !bytes.Equal(got, b) {
			t.Fatalf("kind %d: %x decodes, encodes back as %x", kind%3, b, got)
		}
	})
}

package disk

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"
)

func TestBlockTimeRowGolden(t *testing.T) {
	want, _ := hex.DecodeString("01" + "00000000495fab29") // the blocktime.go example
	if got := appendBlockTimeRow(nil, 1231006505); !bytes.Equal(got, want) {
		t.Fatalf("%x, want %x", got, want)
	}
	if tm, err := decodeBlockTimeRow(0, want); err != nil || tm != 1231006505 {
		t.Fatalf("decodes to %d, %v", tm, err)
	}
	neg, _ := hex.DecodeString("01" + "ffffffffffffffff")
	if tm, err := decodeBlockTimeRow(0, neg); err != nil || tm != -1 {
		t.Fatalf("decodes to %d, %v", tm, err)
	}
	for _, bad := range []string{"", "01", "02" + "00000000495fab29", "01" + "00000000495fab2900"} {
		b, _ := hex.DecodeString(bad)
		if _, err := decodeBlockTimeRow(0, b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%q: %v, want ErrCorrupt", bad, err)
		}
	}
}

// FuzzBlockTimeRow: the block-time row's decoder never panics, fails with
// ErrCorrupt only, and what it accepts encodes back to the same bytes.
func FuzzBlockTimeRow(f *testing.F) {
	f.Add([]byte{0x01, 0, 0, 0, 0, 0x49, 0x5f, 0xab, 0x29})
	f.Add([]byte{0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		tm, err := decodeBlockTimeRow(3, b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is not ErrCorrupt", err)
			}
			return
		}
		if got := appendBlockTimeRow(nil, tm); !bytes.Equal(got, b) {
			t.Fatalf("%x decodes to %d, encodes back as %x", b, tm, got)
		}
	})
}

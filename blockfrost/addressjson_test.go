package blockfrost

import (
	"bytes"
	"testing"
)

// TestAddressJSON: the kept encoding of the last address is, item after
// item, what appendString encodes, for repeated, changing, escaped and
// longer-than-kept addresses.
func TestAddressJSON(t *testing.T) {
	long := bytes.Repeat([]byte("a"), 300)
	escaped := []byte("addr\"\\\n\x01é\xff")
	seq := [][]byte{
		[]byte("addr1short"), []byte("addr1short"), []byte("addr1other"), long, long,
		[]byte("addr1short"), escaped, escaped, bytes.Repeat([]byte{'"'}, 200), []byte("addr1short"), {},
	}
	var a addressJSON
	for i, addr := range seq {
		got := a.append([]byte("x"), addr)
		want := appendString([]byte("x"), addr)
		if !bytes.Equal(got, want) {
			t.Fatalf("item %d (%q): %q, want %q", i, addr, got, want)
		}
	}
}

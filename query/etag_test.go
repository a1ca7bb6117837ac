package query

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"testing"
)

// TestXXH64Vectors checks xxh64 against values of the reference
// implementation (xxHash's XXH64, seed 0), at lengths that take each path:
// the tail bytes, the 4-byte and 8-byte steps, and the 32-byte stripes.
func TestXXH64Vectors(t *testing.T) {
	for _, c := range []struct {
		in   string
		want uint64
	}{
		{"", 0xef46db3751d8e999},
		{"a", 0xd24ec4f1a98c6e5b},
		{"abc", 0x44bc2cf5ad770999},
		{"{}", 0x2e1472b57af294d1},
		{"The quick brown fox jumps over the lazy dog", 0x0b242d361fda71bc},
		{"0123456789abcdef0123456789abcdef0123456789", 0xa76190c3acf08a1c},
	} {
		if got := xxh64([]byte(c.in)); got != c.want {
			t.Errorf("xxh64(%q) = %016x, want %016x", c.in, got, c.want)
		}
	}
}

// TestETagFormat: W/ and 16 hex digits of the body's XXH64 in quotes, the
// documented example included; a changed byte changes the tag.
func TestETagFormat(t *testing.T) {
	if got := etagOf([]byte("{}")); got != `W/"2e1472b57af294d1"` {
		t.Fatalf("etagOf({}) = %s", got)
	}
	body := bytes.Repeat([]byte(`{"tx":"ab","index":1}`), 50)
	a := etagOf(body)
	body[len(body)/2] ^= 1
	if b := etagOf(body); a == b || len(a) != len(`W/""`)+16 {
		t.Fatalf("tags %s and %s", a, b)
	}
}

// BenchmarkETag compares the tag's hash with the SHA-256 it replaced, on
// bodies of a balance, an outpoint and a 100-item page.
func BenchmarkETag(b *testing.B) {
	for _, n := range []int{300, 700, 16 << 10} {
		body := bytes.Repeat([]byte{'x'}, n)
		b.Run(fmt.Sprintf("hash=xxh64/bytes=%d", n), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				etagOf(body)
			}
		})
		b.Run(fmt.Sprintf("hash=sha256/bytes=%d", n), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				sha256.Sum256(body)
			}
		})
	}
}

package esplora

import (
	"testing"

	"github.com/utxo-cache/utxo-cache/chain"
)

// FuzzParsers: the path and query decoders never panic, and what they
// accept is canonical: a cursor encodes back to the same string, a number
// prints back as itself, a txid and a script hash are 64 hex digits.
func FuzzParsers(f *testing.F) {
	for _, s := range []string{"1-0-1", "0-0-0", "18446744073709551615-4294967295-4294967295", "01-0-1", "1--1", "+1", "4294967296",
		"00000000839a8e6886ab5951d76f411475428afc90947ee320161bbf18eb6048"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if p, ok := parseCursor(s); ok {
			if back := string(appendCursor(nil, p)); back != s {
				t.Fatalf("cursor %q parses to %+v, which prints as %q", s, p, back)
			}
		}
		if n, ok := parseUint(s, 32); ok && (n > 1<<32-1 || s[0] == '+' || s[0] == '-') {
			t.Fatalf("parseUint(%q, 32) = %d", s, n)
		}
		if h, ok := parseTxid(s); ok {
			if len(s) != 64 || (h == chain.Hash{} && s != "0000000000000000000000000000000000000000000000000000000000000000") {
				t.Fatalf("parseTxid(%q) = %s", s, h)
			}
		}
		if b, ok := parseScriptHash(s); ok && len(b) != 32 {
			t.Fatalf("parseScriptHash(%q) = %x", s, b)
		}
		validAddress(s)
	})
}

func TestMaxAgeByDepth(t *testing.T) {
	for _, c := range []struct {
		tip, h uint64
		want   int
	}{{110, 100, MaxAgeLong}, {109, 100, MaxAgeShort}, {99, 100, MaxAgeShort}, {100, 100, MaxAgeShort}} {
		if got := maxAgeByDepth(chain.Tip{Height: c.tip}, c.h); got != c.want {
			t.Errorf("tip %d, block %d: %d, want %d", c.tip, c.h, got, c.want)
		}
	}
	if got := maxAgeByDepth(chain.Tip{Empty: true}, 0); got != MaxAgeShort {
		t.Errorf("empty tip: %d", got)
	}
}

package api

import (
	"errors"
	"testing"
	"time"

	"github.com/utxo-cache/utxo-cache/chain"
)

func TestParseWait(t *testing.T) {
	const limit = 2 * time.Second
	for _, tc := range []struct {
		in   string
		want time.Duration
	}{
		{"0", 0},
		{"0.25", 250 * time.Millisecond},
		{"1.5", 1500 * time.Millisecond},
		{"2", limit},
		{"30", limit},
		{"1000000000000000000000000000000", limit}, // would overflow a Duration
	} {
		got, err := parseWait(tc.in, limit)
		if err != nil || got != tc.want {
			t.Errorf("parseWait(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"", "-1", "+1", "1e3", "NaN", "Inf", "0x10", "1s", " 1", "1,5"} {
		if got, err := parseWait(in, limit); !errors.Is(err, chain.ErrInvalidArgument) {
			t.Errorf("parseWait(%q) = %v, %v; want invalid_argument", in, got, err)
		}
	}
}

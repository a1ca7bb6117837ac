package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/utxo-cache/utxo-cache/chain"
)

// TestProgressReportsMode: the progress line of ingest and import-bitcoin
// starts with the mode the writer applied the last blocks in.
func TestProgressReportsMode(t *testing.T) {
	var out bytes.Buffer
	p := newProgress(&out, true)
	start := p.lastAt
	p.update(start.Add(time.Second), ingestCounts{applied: 2000, changes: 5000}, chain.Tip{Height: 1999}, "catch-up")
	if line := out.String(); !strings.HasPrefix(line, "\rcatch-up: 2000 blocks/s, 5000 UTXO changes/s, tip 1999 (applied 2000, skipped 0)") {
		t.Fatalf("progress line %q", line)
	}
	out.Reset()
	p.update(start.Add(2*time.Second), ingestCounts{applied: 2001, changes: 5002}, chain.Tip{Height: 2000}, "live")
	if line := out.String(); !strings.HasPrefix(line, "\rlive: 1 blocks/s, 2 UTXO changes/s, tip 2000") {
		t.Fatalf("progress line %q", line)
	}
}

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

// TestProgressLogLines: with logEvery, a newline-terminated line with
// running totals goes out at most that often, terminal or not.
func TestProgressLogLines(t *testing.T) {
	var out bytes.Buffer
	p := newProgress(&out, false)
	p.logEvery = time.Second
	start := p.start
	p.update(start.Add(500*time.Millisecond), ingestCounts{applied: 64, changes: 1000}, chain.Tip{Height: 64}, "catch-up")
	if out.Len() != 0 {
		t.Fatalf("a line before logEvery: %q", out.String())
	}
	p.update(start.Add(1250*time.Millisecond), ingestCounts{applied: 128, changes: 2500}, chain.Tip{Height: 128}, "catch-up")
	p.update(start.Add(1500*time.Millisecond), ingestCounts{applied: 192, changes: 3000}, chain.Tip{Height: 192}, "catch-up")
	if got, want := out.String(), "ingest: progress 1.250s: applied 128 blocks, 2500 UTXO changes, tip 128\n"; got != want {
		t.Fatalf("log lines %q, want %q", got, want)
	}
}

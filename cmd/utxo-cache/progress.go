package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/utxo-cache/utxo-cache/chain"
)

// progressInterval bounds how often the progress line is redrawn.
const progressInterval = 250 * time.Millisecond

// progress draws ingest's one-line status on a terminal, rewriting it in
// place with '\r'. Disabled (not a terminal) it prints nothing, so logs and
// pipes get only the summary. Rates are measured over the time since the
// previous redraw. Not safe for concurrent use.
//
// With logEvery set (ingest's --progress-every) it also prints, whether or
// not on a terminal, a log line at most that often, newline-terminated and
// with running totals, for logs and for harnesses that time an import:
//
//	ingest: progress 12.345s: applied 640 blocks, 3407211 UTXO changes, tip 640
//
// On a terminal the redrawn line is blanked before a log line.
type progress struct {
	w       io.Writer
	enabled bool

	logEvery time.Duration
	logAt    time.Time
	start    time.Time

	lastAt    time.Time
	last      ingestCounts
	lineWidth int // of the line on screen, to blank it
}

func newProgress(w io.Writer, enabled bool) *progress {
	now := time.Now()
	return &progress{w: w, enabled: enabled, lastAt: now, start: now, logAt: now}
}

// update redraws the line if progressInterval has passed since the last one.
//
// mode is "catch-up" while blocks go in catch-up windows, "live" while they
// go one by one.
func (p *progress) update(now time.Time, c ingestCounts, tip chain.Tip, mode string) {
	if p.logEvery > 0 && now.Sub(p.logAt) >= p.logEvery {
		p.point(now, c, tip)
	}
	if !p.enabled {
		return
	}
	dt := now.Sub(p.lastAt)
	if dt < progressInterval {
		return
	}
	secs := dt.Seconds()
	line := fmt.Sprintf("%s: %.0f blocks/s, %.0f UTXO changes/s, tip %d (applied %d, skipped %d)",
		mode, float64(c.applied-p.last.applied)/secs, float64(c.changes-p.last.changes)/secs,
		tip.Height, c.applied, c.skipped)
	p.draw(line)
	p.lastAt, p.last = now, c
}

// point prints the log line of update now, with --progress-every set,
// whenever the last was: the end of a bulk load, which applies its blocks
// all at once.
func (p *progress) point(now time.Time, c ingestCounts, tip chain.Tip) {
	if p.logEvery <= 0 {
		return
	}
	p.clear()
	fmt.Fprintf(p.w, "ingest: progress %.3fs: applied %d blocks, %d UTXO changes, tip %d\n",
		now.Sub(p.start).Seconds(), c.applied, c.changes, tip.Height)
	p.logAt = now
	p.lineWidth = 0
}

// note shows line, a step of work that applies no block yet (a bulk
// load's reading and sorting): redrawn on a terminal, and with
// --progress-every logged as often as update's lines, as
//
//	ingest: bulk 3.021s: read 1200 blocks, tip 1199
func (p *progress) note(now time.Time, line string) {
	if p.logEvery > 0 && now.Sub(p.logAt) >= p.logEvery {
		p.clear()
		fmt.Fprintf(p.w, "ingest: bulk %.3fs: %s\n", now.Sub(p.start).Seconds(), line)
		p.logAt = now
		p.lineWidth = 0
	}
	if !p.enabled || now.Sub(p.lastAt) < progressInterval {
		return
	}
	p.draw(line)
	p.lastAt = now
}

// clear blanks the line so that what follows starts on a clean one.
func (p *progress) clear() {
	if p.enabled && p.lineWidth > 0 {
		p.draw("")
		fmt.Fprint(p.w, "\r")
	}
}

func (p *progress) draw(line string) {
	pad := max(0, p.lineWidth-len(line))
	fmt.Fprintf(p.w, "\r%s%s", line, strings.Repeat(" ", pad))
	p.lineWidth = len(line)
}

package api

import (
	"errors"
	"io"
	"net/http"
	"os"
	"time"
)

// DefaultStallTimeout is Options.StallTimeout's default: a reader that
// takes no part of a streamed answer for this long is dropped. Long enough
// for a replica on a slow or congested link (64 KiB per 30 s is 2 KiB/s),
// short against the time a checkpoint's staged files may be held.
const DefaultStallTimeout = 30 * time.Second

// stallChunk is the most a stallWriter hands the connection under one
// deadline: the progress a reader must make per StallTimeout.
const stallChunk = 64 << 10

// stallWriter writes a streamed answer under a progress deadline: before
// each chunk of at most stallChunk bytes it sets the connection's write
// deadline StallTimeout ahead, so a write blocked on a reader that stopped
// reading fails (os.ErrDeadlineExceeded) within StallTimeout, and the
// handler returns and frees what the answer holds. The server's own
// timeouts cannot do this: a read timeout never interrupts a blocked write,
// and a write timeout bounds a whole answer, which a checkpoint of a large
// store or a long poll may rightly outlast.
//
// The last deadline stays set when the handler returns, so net/http's final
// flush of the answer is bounded too; the server clears it before the
// connection's next request. A ResponseWriter without deadlines (a test's
// recorder) is written without one.
type stallWriter struct {
	w       io.Writer
	rc      *http.ResponseController
	timeout time.Duration
	stalled bool // a write ran into its deadline
}

func newStallWriter(w http.ResponseWriter, timeout time.Duration) *stallWriter {
	return &stallWriter{w: w, rc: http.NewResponseController(w), timeout: timeout}
}

func (s *stallWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		s.extend()
		m, err := s.w.Write(p[:min(len(p), stallChunk)])
		n += m
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				s.stalled = true
			}
			return n, err
		}
		p = p[m:]
	}
	return n, nil
}

// extend sets the write deadline StallTimeout from now. Called before every
// chunk, and once more when the answer is complete, for the final flush.
func (s *stallWriter) extend() {
	_ = s.rc.SetWriteDeadline(time.Now().Add(s.timeout)) // http.ErrNotSupported: no deadline
}

package api

import (
	"net/http"
	"strconv"
)

// headWriter answers a HEAD request (RFC 9110 §9.3.2) with what the GET of
// the same target answers, less the body: the handler runs as for a GET,
// its status and headers go out, its body is counted and dropped. The
// header is held until the handler returns (finish), so that an answer
// whose handler set no Content-Length gets the length the GET would carry,
// as net/http computes one for a short GET answer. The API drops the body
// itself rather than leaving it to the server: every http.ResponseWriter
// (a test's recorder, a proxy's) then sees a HEAD answer without one.
//
// A handler whose GET answer streams (the checkpoint) skips the streaming
// for HEAD: it would build the whole archive to be dropped. A Flush sends
// the header at once, without a Content-Length.
type headWriter struct {
	http.ResponseWriter
	status int   // set by WriteHeader or the first Write; sent by finish
	sent   bool  // the header went out
	n      int64 // body bytes the handler wrote, dropped
}

func (h *headWriter) WriteHeader(code int) {
	if h.status == 0 && !h.sent {
		h.status = code
	}
}

func (h *headWriter) Write(p []byte) (int, error) {
	if h.status == 0 {
		h.status = http.StatusOK
	}
	h.n += int64(len(p))
	return len(p), nil
}

// Flush sends the header now: the handler is streaming.
func (h *headWriter) Flush() {
	h.finish()
	if f, ok := h.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap gives http.ResponseController the server's writer (read and
// write deadlines).
func (h *headWriter) Unwrap() http.ResponseWriter { return h.ResponseWriter }

// finish sends the header, with the Content-Length of the dropped body
// when the handler set none. An empty body gets none: the GET's length is
// not known then (a stream the HEAD skipped).
func (h *headWriter) finish() {
	if h.sent {
		return
	}
	h.sent = true
	if h.status == 0 {
		h.status = http.StatusOK
	}
	hdr := h.Header()
	if h.n > 0 && bodyAllowed(h.status) && hdr.Get("Content-Length") == "" && hdr.Get("Transfer-Encoding") == "" {
		hdr.Set("Content-Length", strconv.FormatInt(h.n, 10))
	}
	h.ResponseWriter.WriteHeader(h.status)
}

// bodyAllowed reports whether an answer of status may carry a body
// (RFC 9110 §6.4.1).
func bodyAllowed(status int) bool {
	return status >= 200 && status != http.StatusNoContent && status != http.StatusNotModified
}

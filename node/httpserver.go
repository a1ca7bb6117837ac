package node

import (
	"log/slog"
	"net/http"
	"time"
)

// NewHTTPServer is the service's HTTP server for h: bounded header, read and
// idle times. There is no write timeout: a checkpoint stream or a
// change-log long poll may rightly outlast any fixed one. The read timeout
// does not help against a slow reader either: it bounds reading the
// request, and never interrupts a write blocked on a client that stopped
// reading. The streamed answers bound that themselves, with a write
// deadline renewed as they make progress (Config.StallTimeout).
func NewHTTPServer(h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

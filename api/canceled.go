package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/gin-gonic/gin"
)

// statusClientClosedRequest is nginx's 499 Client Closed Request: the client
// went away (closed the connection, gave up) before its answer was ready.
// No one reads the answer; the status is for logs and metrics, where a 5xx
// would count the client's impatience as a server fault (the 5xx alert of
// deploy/prometheus-alerts.yaml).
const statusClientClosedRequest = 499

// errClientClosed marks a request that ended because its client went away.
var errClientClosed = errors.New("api: the client closed the request")

// clientClosed returns err marked errClientClosed when err is the
// cancellation of c's request context, which net/http cancels when the
// client's connection closes. A context.Canceled that does not come from
// the request (the request is still live) stays what it is: an internal
// error.
func clientClosed(c *gin.Context, err error) error {
	if errors.Is(err, context.Canceled) && c.Request.Context().Err() != nil {
		return fmt.Errorf("%w: %w", errClientClosed, err)
	}
	return err
}

// logFailure logs a failed request at the level its class deserves: a 500
// at Error (a fault to look into), a request its client abandoned at Info
// for a write (the write may or may not have been applied: the producer
// re-posts, see docs/blocks.md) and at Debug for a read. Other errors are the
// client's mistakes, answered and not logged.
func (a *API) logFailure(c *gin.Context, status int, err error) {
	switch status {
	case http.StatusInternalServerError:
		a.opts.Logger.Error("request failed", "path", c.FullPath(), "err", err)
	case statusClientClosedRequest:
		level := slog.LevelDebug
		if isWrite(c) {
			level = slog.LevelInfo
		}
		a.opts.Logger.Log(c.Request.Context(), level, "client closed the request", "method", c.Request.Method, "path", c.FullPath())
	}
}

// isWrite reports whether c is a request to a write endpoint.
func isWrite(c *gin.Context) bool {
	p := c.FullPath()
	return c.Request.Method == http.MethodPost && (p == "/v1/blocks" || p == "/v1/rollback")
}

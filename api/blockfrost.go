package api

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/utxo-cache/utxo-cache/blockfrost"
	"github.com/utxo-cache/utxo-cache/query"
)

// blockfrostRoutes mounts the Blockfrost front end (Options.Blockfrost)
// under blockfrost.Prefix: each route a read, through the read gate, with
// the read-your-writes parameters of every read (min_seq, min_height,
// wait), its answers' ETag and tip headers, and its errors in Blockfrost's
// shape.
func (a *API) blockfrostRoutes() {
	fe := a.opts.Blockfrost
	if fe == nil {
		return
	}
	for _, r := range fe.Routes() {
		a.route(http.MethodGet, blockfrost.Prefix+r.Path, a.read(a.getBlockfrost(fe, r)))
	}
}

// blockfrostPath reports whether c's path is under the mounted front end's
// prefix (its unknown paths answer in its shape).
func (a *API) blockfrostPath(c *gin.Context) bool {
	return a.opts.Blockfrost != nil && strings.HasPrefix(c.Request.URL.Path, blockfrost.Prefix+"/")
}

func (a *API) getBlockfrost(fe *blockfrost.FrontEnd, r blockfrost.Route) gin.HandlerFunc {
	allowed := append(append([]string{}, r.Params...), readParamNames...)
	return func(c *gin.Context) {
		if fe.ChecksProjectID() {
			if err := fe.CheckProjectID(headerValue(c.Request.Header, projectIDHeader)); err != nil {
				a.failBlockfrost(c, err)
				return
			}
		}
		fr := getFrontRequest(c)
		defer fr.put()
		var err error
		if fr.q, err = parseQuery(c.Request.URL.RawQuery, allowed...); err != nil {
			a.failBlockfrost(c, err)
			return
		}
		rc, err := a.conditions(&fr.q)
		if err != nil {
			a.failBlockfrost(c, err)
			return
		}
		req := blockfrost.Request{Param: fr.param, Query: fr.lookup}
		a.serveReadAs(c, rc, true, func(ctx context.Context) (query.Answer, error) {
			return r.Serve(ctx, req)
		}, a.writeAnswer, a.failBlockfrost)
	}
}

// projectIDHeader is Blockfrost's project_id header in its canonical form
// (textproto.CanonicalMIMEHeaderKey), the key net/http stores it under: a
// lookup by it is Header.Get's without canonicalizing the name anew (an
// allocation) on every request.
const projectIDHeader = "Project_id"

// headerValue is h.Get(key) for a key already canonical.
func headerValue(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// failBlockfrost answers an error in Blockfrost's shape ({"status_code",
// "error", "message"}), with the status the error table gives it
// (blockfrost.ErrForbidden: 403) and the tip headers of every answer.
func (a *API) failBlockfrost(c *gin.Context, err error) {
	err = clientClosed(c, err)
	status, _, msg := classify(err)
	if errors.Is(err, blockfrost.ErrForbidden) {
		status, msg = http.StatusForbidden, err.Error()
	}
	a.logFailure(c, status, err)
	if status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests {
		c.Writer.Header().Set("Retry-After", "1")
	}
	a.writeBlockfrostError(c, status, msg)
}

// writeBlockfrostError writes Blockfrost's error object with the status's
// reason phrase and the published state's headers.
func (a *API) writeBlockfrostError(c *gin.Context, status int, msg string) {
	reason := http.StatusText(status)
	if reason == "" {
		reason = "Error"
	}
	p := a.r.Published()
	a.writeJSON(c, status, p.Tip, p.Seq, blockfrost.AppendError(nil, status, reason, msg))
}

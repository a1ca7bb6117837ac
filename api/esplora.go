package api

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/utxo-cache/utxo-cache/api/esplora"
	"github.com/utxo-cache/utxo-cache/query"
)

// The Esplora front end (package esplora) is mounted under /api/ when
// Options.Esplora is set: a Bitcoin store. Its routes are read endpoints
// like /v1's (the read gate, min_seq / min_height / wait, ETag with
// If-None-Match and the long poll, X-Commit-Seq and X-Tip-*), but their
// bodies, Content-Type, Cache-Control and errors are Esplora's: errors are
// text/plain with the message alone.

// esploraRoutes registers the front end's routes.
func (a *API) esploraRoutes() {
	f := a.opts.Esplora
	if f == nil {
		return
	}
	for _, rt := range esplora.Routes() {
		allowed := append(append([]string(nil), readParamNames...), rt.Params...)
		a.route(http.MethodGet, rt.Path, a.read(func(c *gin.Context) {
			fr := getFrontRequest(c)
			defer fr.put()
			var err error
			if fr.q, err = parseQuery(c.Request.URL.RawQuery, allowed...); err != nil {
				a.failEsplora(c, err)
				return
			}
			rc, err := a.conditions(&fr.q)
			if err != nil {
				a.failEsplora(c, err)
				return
			}
			req := esplora.Request{Param: fr.param, Query: fr.lookup}
			var rep esplora.Reply
			a.serveReadAs(c, rc, true, func(ctx context.Context) (query.Answer, error) {
				var err error
				rep, err = rt.Serve(f, ctx, req)
				return rep.Answer, err
			}, func(c *gin.Context, ans query.Answer, conditional bool) {
				rep.Answer = ans
				a.writeEsplora(c, &rep, conditional)
			}, a.failEsplora)
		}))
	}
}

// Header values shared between responses and never modified.
var (
	esploraJSON = []string{esplora.ContentJSON}
	esploraText = []string{esplora.ContentText}
	cacheShort  = []string{"public, max-age=" + strconv.Itoa(esplora.MaxAgeShort)}
	cacheLong   = []string{"public, max-age=" + strconv.Itoa(esplora.MaxAgeLong)}
)

// writeEsplora writes a front-end answer: its tip headers, its ETag (304
// when If-None-Match has it), Content-Type and Cache-Control, the paged
// listing's X-Next-Cursor, and the body as is. It does not release the
// answer: serveReadAs does, once it is written. (It used to release its
// copy too: the buffer went back to the pool twice, and two later answers
// were encoded into one buffer.)
func (a *API) writeEsplora(c *gin.Context, rep *esplora.Reply, conditional bool) {
	h := c.Writer.Header()
	ans := &rep.Answer
	setTipHeaders(h, ans.Tip, ans.Seq)
	switch rep.MaxAge {
	case 0:
	case esplora.MaxAgeShort:
		h["Cache-Control"] = cacheShort
	case esplora.MaxAgeLong:
		h["Cache-Control"] = cacheLong
	default:
		h["Cache-Control"] = []string{"public, max-age=" + strconv.Itoa(rep.MaxAge)}
	}
	// One allocation holds the values of X-Next-Cursor, ETag and
	// Content-Length (each header's slice is its own, capped at one).
	vals := new([3]string)
	if rep.NextCursor != "" {
		vals[0] = rep.NextCursor
		h["X-Next-Cursor"] = vals[0:1:1]
	}
	if conditional && ans.ETag != "" && ans.Status == http.StatusOK {
		vals[1] = ans.ETag
		h["Etag"] = vals[1:2:2]
		if inm := c.GetHeader("If-None-Match"); inm != "" && etagMatches(inm, ans.ETag) {
			c.Status(http.StatusNotModified)
			c.Writer.WriteHeaderNow()
			return
		}
	}
	ct := esploraText
	if rep.ContentType == esplora.ContentJSON {
		ct = esploraJSON
	}
	h["Content-Type"] = ct
	vals[2] = strconv.Itoa(len(ans.Body))
	h["Content-Length"] = vals[2:3:3]
	c.Status(ans.Status)
	_, _ = c.Writer.Write(ans.Body)
}

// failEsplora answers an error of the front end's routes as Esplora does:
// text/plain, the message alone, with the status the error table gives
// (what it does not map is a 500 revealing nothing).
func (a *API) failEsplora(c *gin.Context, err error) {
	err = clientClosed(c, err)
	status, _, msg := classify(err)
	a.logFailure(c, status, err)
	if status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests {
		c.Writer.Header().Set("Retry-After", "1")
	}
	p := a.r.Published()
	setTipHeaders(c.Writer.Header(), p.Tip, p.Seq)
	writeData(c, status, esploraText, []byte(msg))
}

// esploraPath answers a path under /api/ that is no route of the mounted
// front end as Esplora does (404, text/plain, "endpoint does not exist"
// with the path below /api quoted), and reports whether it did. Paths of
// other front ends under /api/ (/api/v0/) are left to them.
func (a *API) esploraPath(c *gin.Context) bool {
	p := c.Request.URL.Path
	if a.opts.Esplora == nil || !strings.HasPrefix(p, "/api/") || strings.HasPrefix(p, "/api/v0/") {
		return false
	}
	pr := a.r.Published()
	setTipHeaders(c.Writer.Header(), pr.Tip, pr.Seq)
	writeData(c, http.StatusNotFound, esploraText, []byte("endpoint does not exist "+strconv.Quote(strings.TrimPrefix(p, "/api"))))
	return true
}

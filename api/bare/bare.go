// Package bare is the load harness's ceiling (the loadtest module): a Gin
// handler that answers each route with prepared bytes and does nothing else.
// It is not part of the service, whose binary does not link it; it lives
// under api because Gin may be imported only there.
package bare

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"
)

// etag is the one entity tag of every bare answer, as long as the
// service's (query.etagOf: W/ and 16 hex digits in quotes).
const etag = `W/"0000000000000000"`

// The tip headers every service answer carries (docs/api.md), with values of
// a mainnet-sized state: the ceiling sends what the contract makes every
// answer send, so the service is not measured against a handler that skips
// part of the response.
var (
	tipSeq    = []string{"1000000"}
	tipHeight = []string{"900000"}
	tipHash   = []string{"00000000000000000001f3d5a1e2c2b2a7e6f3b0c4d5e6f708192a3b4c5d6e7f"}
)

// NewHandler returns the ceiling: a Gin handler with no store, no cache
// tiers and no metrics. It runs on the same router and HTTP server as the
// service and sends bodies of the sizes the service sends, so the
// requests/s the service reaches can be read as a fraction of what the
// machine's HTTP stack and the load generator can do at all.
//
// Each key of bodies is a method and a route pattern in Gin's syntax, e.g.
// "GET /v1/addresses/:address/utxos"; its value is the JSON body answered
// with 200. Every answer carries X-Commit-Seq, X-Tip-Height and X-Tip-Hash
// with fixed values of a mainnet-sized state; GET answers carry the ETag
// etag, of the service's length, and an If-None-Match with it answers 304
// with no body, so revalidations cost what they cost in the service.
// Request bodies are read and discarded. Other paths answer 404 with an
// empty body. A key that is not "METHOD /pattern" panics: the caller's bug.
// The handler is safe for concurrent use; it keeps the body slices, which
// the caller must not modify afterwards.
func NewHandler(bodies map[string][]byte) http.Handler {
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	e.UseRawPath = true
	e.UnescapePathValues = true
	e.RemoveExtraSlash = false
	for key, body := range bodies {
		method, pattern, ok := strings.Cut(key, " ")
		if !ok || method == "" || !strings.HasPrefix(pattern, "/") {
			panic(fmt.Sprintf("bare: route %q: want \"METHOD /pattern\"", key))
		}
		length := strconv.Itoa(len(body))
		get := method == http.MethodGet
		e.Handle(method, pattern, func(c *gin.Context) {
			if c.Request.Body != nil {
				_, _ = io.Copy(io.Discard, c.Request.Body)
			}
			h := c.Writer.Header()
			h["X-Commit-Seq"], h["X-Tip-Height"], h["X-Tip-Hash"] = tipSeq, tipHeight, tipHash
			if get {
				h["Etag"] = []string{etag}
				if inm := c.GetHeader("If-None-Match"); inm != "" && etagMatches(inm, etag) {
					c.Status(http.StatusNotModified)
					c.Writer.WriteHeaderNow()
					return
				}
			}
			h["Content-Type"] = []string{"application/json"}
			h["Content-Length"] = []string{length}
			c.Status(http.StatusOK)
			_, _ = c.Writer.Write(body)
		})
	}
	return e
}

// etagMatches is the service's weak comparison of If-None-Match (RFC 9110
// §13.1.2; api's etagMatches): any listed tag, or "*", equal to ours
// ignoring W/. It is repeated here so that the ceiling does the service's
// work without linking the service.
func etagMatches(header, tag string) bool {
	want := strings.TrimPrefix(tag, "W/")
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimSpace(t)
		if t == "*" || strings.TrimPrefix(t, "W/") == want {
			return true
		}
	}
	return false
}

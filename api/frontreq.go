package api

import (
	"sync"

	"github.com/gin-gonic/gin"
)

// frontRequest is what a compatibility front end's route reads of one
// request (esplora.Request, blockfrost.Request): its path parameters, from
// the Gin context, and its parsed query. It is pooled, and its two lookups
// are method values bound once, when it is made: a request that built
// them anew would allocate both closures, and the query they read, every
// time. A route's Serve reads them only while it runs (they are not
// retained), and the handler puts the frontRequest back once it has
// answered.
type frontRequest struct {
	c      *gin.Context
	q      queryParams
	param  func(name string) string
	lookup func(name string) (string, bool)
}

var frontRequests = sync.Pool{New: func() any {
	r := &frontRequest{}
	r.param = r.paramOf
	r.lookup = r.q.lookup
	return r
}}

// getFrontRequest returns a frontRequest of c (its query not yet parsed).
func getFrontRequest(c *gin.Context) *frontRequest {
	r := frontRequests.Get().(*frontRequest)
	r.c = c
	return r
}

// put clears r (it holds no request's strings in the pool) and gives it
// back.
func (r *frontRequest) put() {
	r.c = nil
	r.q = queryParams{}
	frontRequests.Put(r)
}

func (r *frontRequest) paramOf(name string) string { return r.c.Param(name) }

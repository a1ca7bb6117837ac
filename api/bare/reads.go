package bare

import (
	"context"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"
)

// Reads answers the three reads the load harness compares with a
// reference database (the loadtest module's pgref): an address's balance,
// the first page of its outputs, and one outpoint. Each method returns the
// HTTP status and the JSON body to send; the parameters are the request's
// path and query values as received, which the implementation validates.
// Implementations must be safe for concurrent use.
type Reads interface {
	Balance(ctx context.Context, address string) (status int, body []byte)
	Page(ctx context.Context, address, limit, order, cursor string) (status int, body []byte)
	Outpoint(ctx context.Context, txHash, index string) (status int, body []byte)
}

// NewReadsHandler serves r on the service's routes for those reads
// (GET /v1/addresses/:address/balance, GET /v1/addresses/:address/utxos,
// GET /v1/utxos/:tx_hash/:index) with the router and path settings the
// service uses, so that a reference behind it pays for the same HTTP layer.
// Other paths answer 404 with an empty body.
func NewReadsHandler(r Reads) http.Handler {
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	e.UseRawPath = true
	e.UnescapePathValues = true
	e.RemoveExtraSlash = false
	send := func(c *gin.Context, status int, body []byte) {
		h := c.Writer.Header()
		h["Content-Type"] = []string{"application/json"}
		h["Content-Length"] = []string{strconv.Itoa(len(body))}
		c.Status(status)
		_, _ = c.Writer.Write(body)
	}
	e.GET("/v1/addresses/:address/balance", func(c *gin.Context) {
		st, b := r.Balance(c.Request.Context(), c.Param("address"))
		send(c, st, b)
	})
	e.GET("/v1/addresses/:address/utxos", func(c *gin.Context) {
		st, b := r.Page(c.Request.Context(), c.Param("address"), c.Query("limit"), c.Query("order"), c.Query("cursor"))
		send(c, st, b)
	})
	e.GET("/v1/utxos/:tx_hash/:index", func(c *gin.Context) {
		st, b := r.Outpoint(c.Request.Context(), c.Param("tx_hash"), c.Param("index"))
		send(c, st, b)
	})
	e.NoRoute(func(c *gin.Context) {
		c.Status(http.StatusNotFound)
		c.Writer.WriteHeaderNow()
	})
	return e
}

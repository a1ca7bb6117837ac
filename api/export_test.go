package api

import (
	"net/http"

	"github.com/gin-gonic/gin"
)

// HandleWallet registers h at method and path behind the wallet-token
// middleware, as the wallet-write routes will be: for the middleware's
// tests, before any such route exists.
func (a *API) HandleWallet(method, path string, h http.HandlerFunc) {
	a.route(method, path, a.wallet(func(c *gin.Context) { h(c.Writer, c.Request) }))
}

// ProjectIDHeader is the key the Blockfrost routes read project_id under.
const ProjectIDHeader = projectIDHeader

package api

import (
	"errors"

	"github.com/gin-gonic/gin"
)

// errWalletWritesDisabled: a wallet write on a writer with no wallet token.
var errWalletWritesDisabled = errors.New("api: wallet writes are disabled: no wallet token is configured")

// authorizeWallet enforces the rules of the wallet writes (pending
// transactions, leases: docs/wallet-state.md), which take the wallet token,
// not the admin token, so that a wallet backend cannot post blocks and an
// operator's token is not spread to every wallet backend: replica → 403
// read_only, no wallet token configured → 403 wallet_writes_disabled, more
// than one Authorization header → 400, a wrong or missing bearer (the admin
// token included) → 401.
func (a *API) authorizeWallet(c *gin.Context) error {
	switch {
	case a.opts.ReadOnly || a.w == nil:
		return errReadOnly
	case a.opts.WalletToken == "":
		return errWalletWritesDisabled
	}
	return checkBearer(c, a.opts.WalletToken)
}

// wallet is the middleware of the wallet-write routes: it answers the
// request itself, with authorizeWallet's error, unless the request may
// write; h runs only for a bearer of the wallet token on the writer.
func (a *API) wallet(h gin.HandlerFunc) gin.HandlerFunc {
	return func(c *gin.Context) {
		if err := a.authorizeWallet(c); err != nil {
			a.fail(c, err)
			return
		}
		h(c)
	}
}

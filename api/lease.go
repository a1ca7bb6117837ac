package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/query"
	"github.com/utxo-cache/utxo-cache/writer"
)

// Leaser is the writer's side of leases (writer.Writer); a Writer that is
// not one answers the lease writes 403 read_only.
type Leaser interface {
	Lease(ctx context.Context, r chain.LeaseRequest) (writer.LeaseResult, error)
	Release(ctx context.Context, id string) (writer.Result, error)
}

// LeaseReader is the read side of leases (query.Server), part of Reader.
type LeaseReader interface {
	Lease(ctx context.Context, id string) (query.Answer, error)
	UtxoLeased(ctx context.Context, op chain.OutPoint, mode query.LeaseMode) (query.Answer, error)
	LookupLeased(ctx context.Context, ops []chain.OutPoint, mode query.LeaseMode) (query.Answer, error)
}

func (a *API) leaseRoutes() {
	a.route(http.MethodPost, "/v1/leases", a.wallet(a.postLease))
	a.route(http.MethodDelete, "/v1/leases/:lease_id", a.wallet(a.deleteLease))
	a.route(http.MethodGet, "/v1/leases/:lease_id", a.read(a.getLease))
}

// postLease answers POST /v1/leases: {"lease_id"?, "outpoints": [...],
// "ttl_seconds"?} → {"lease_id", "expires_at", "seq"}, all or nothing; 409
// leased lists each outpoint another lease holds, with its expiry.
func (a *API) postLease(c *gin.Context) {
	l, ok := a.w.(Leaser)
	if !ok {
		a.fail(c, errReadOnly)
		return
	}
	body, err := a.readJSONBody(c)
	if err != nil {
		a.fail(c, err)
		return
	}
	r, err := chain.DecodeLeaseJSON(body)
	if err != nil {
		a.fail(c, err)
		return
	}
	res, err := l.Lease(c.Request.Context(), r)
	var held *chain.LeasedError
	if errors.As(err, &held) {
		a.writeLeased(c, held)
		return
	}
	if err != nil {
		a.fail(c, err)
		return
	}
	out := append([]byte(nil), `{"lease_id":`...)
	out = strconv.AppendQuote(out, res.LeaseID) // [A-Za-z0-9_-]: no escapes
	out = append(out, `,"expires_at":`...)
	out = strconv.AppendUint(out, res.ExpiresAt, 10)
	out = append(out, `,"seq":`...)
	out = strconv.AppendUint(out, res.Seq, 10)
	out = append(out, `,"tip":`...)
	out = query.AppendTip(out, res.Tip)
	a.writeJSON(c, http.StatusOK, res.Tip, res.Seq, append(out, '}'))
}

// writeLeased answers 409 leased: the error object lists each outpoint
// another lease holds and until when.
func (a *API) writeLeased(c *gin.Context, e *chain.LeasedError) {
	p := a.r.Published()
	out := append([]byte(nil), `{"tip":`...)
	out = query.AppendTip(out, p.Tip)
	out = append(out, `,"error":{"code":"leased","message":`...)
	out = strconv.AppendQuote(out, fmt.Sprintf("%d of the outpoints are held by another lease: nothing was leased", len(e.Held)))
	out = append(out, `,"leased":[`...)
	for i, h := range e.Held {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, `{"tx_hash":"`...)
		out = append(out, h.OutPoint.TxHash.String()...)
		out = append(out, `","index":`...)
		out = strconv.AppendUint(out, uint64(h.OutPoint.Index), 10)
		out = append(out, `,"leased_until":`...)
		out = strconv.AppendUint(out, h.ExpiresAt, 10)
		out = append(out, '}')
	}
	out = append(out, "]}}"...)
	a.writeJSON(c, http.StatusConflict, p.Tip, p.Seq, out)
}

// deleteLease answers DELETE /v1/leases/{id}: {"lease_id", "released":
// bool, "seq"}; released is false when there was no such lease (an
// idempotent delete).
func (a *API) deleteLease(c *gin.Context) {
	l, ok := a.w.(Leaser)
	if !ok {
		a.fail(c, errReadOnly)
		return
	}
	id := c.Param("lease_id")
	if err := chain.CheckLeaseID(id); err != nil {
		a.fail(c, err)
		return
	}
	res, err := l.Release(c.Request.Context(), id)
	if err != nil {
		a.fail(c, err)
		return
	}
	out := append([]byte(nil), `{"lease_id":`...)
	out = strconv.AppendQuote(out, id)
	out = append(out, `,"released":`...)
	out = strconv.AppendBool(out, res.Applied)
	out = append(out, `,"seq":`...)
	out = strconv.AppendUint(out, res.Seq, 10)
	out = append(out, `,"tip":`...)
	out = query.AppendTip(out, res.Tip)
	a.writeJSON(c, http.StatusOK, res.Tip, res.Seq, append(out, '}'))
}

// getLease answers GET /v1/leases/{id} on any node, with the wallet token
// (a lease's outpoints are a wallet's business): {"lease_id", "outpoints",
// "expires_at"}, 404 when there is no such lease or it has expired by this
// node's clock. It honours min_seq, so a replica answers a lease its writer
// just granted.
func (a *API) getLease(c *gin.Context) {
	if a.opts.WalletToken == "" {
		a.fail(c, errWalletWritesDisabled)
		return
	}
	if err := checkBearer(c, a.opts.WalletToken); err != nil {
		a.fail(c, err)
		return
	}
	_, rc, ok := a.readQuery(c, readParamNames)
	if !ok {
		return
	}
	id := c.Param("lease_id")
	if err := chain.CheckLeaseID(id); err != nil {
		a.fail(c, err)
		return
	}
	a.serveRead(c, rc, false, func(ctx context.Context) (query.Answer, error) {
		return a.r.Lease(ctx, id)
	})
}

// leaseMode reads leased=exclude|include from q; on a bad value it answers
// 400 itself and reports false.
func (a *API) leaseMode(c *gin.Context, q *queryParams) (query.LeaseMode, bool) {
	v, given := q.lookup(paramLeased)
	if !given {
		return query.LeasedAny, true
	}
	switch v {
	case "exclude":
		return query.LeasedExclude, true
	case "include":
		return query.LeasedInclude, true
	}
	a.fail(c, fmt.Errorf("leased %q: must be include or exclude: %w", v, chain.ErrInvalidArgument))
	return query.LeasedAny, false
}

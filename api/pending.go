package api

import (
	"context"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/query"
	"github.com/utxo-cache/utxo-cache/writer"
)

// Pender is the writer's side of pending transactions (writer.Writer); a
// Writer that is not one answers the pending writes 403 read_only.
type Pender interface {
	Post(ctx context.Context, p chain.PendingPost) (writer.PendingResult, error)
	Withdraw(ctx context.Context, h chain.Hash) (writer.PendingResult, error)
}

// PendingReader is the read side of pending transactions (query.Server),
// part of Reader.
type PendingReader interface {
	PendingStatus(ctx context.Context, h chain.Hash) (query.Answer, error)
	BalancePending(ctx context.Context, address string) (query.Answer, error)
	UtxoPending(ctx context.Context, op chain.OutPoint, mode query.LeaseMode) (query.Answer, error)
	LookupPending(ctx context.Context, ops []chain.OutPoint, mode query.LeaseMode) (query.Answer, error)
}

// RawTxFunc turns a chain's own serialized transaction (Options.RawTx) into
// the block format's Tx. Errors are the caller's to classify: the API
// answers any as 400 invalid_argument.
type RawTxFunc func(raw []byte) (chain.Tx, error)

// contentTypeRaw is the media type of a chain's raw transaction.
const contentTypeRaw = "application/octet-stream"

func (a *API) pendingRoutes() {
	a.route(http.MethodPost, "/v1/pending", a.wallet(a.postPending))
	a.route(http.MethodDelete, "/v1/pending/:tx_hash", a.wallet(a.deletePending))
	a.route(http.MethodGet, "/v1/pending/:tx_hash", a.read(a.getPending))
}

// postPending answers POST /v1/pending: the block format's Tx (JSON or
// CBOR, with an optional "replace"), or the chain's raw transaction
// (application/octet-stream, "replace" as the query parameter replace=true)
// → {"tx_hash", "status": "pending", "seq"}; 409 conflict names the pending
// spender.
func (a *API) postPending(c *gin.Context) {
	p, ok := a.w.(Pender)
	if !ok {
		a.fail(c, errReadOnly)
		return
	}
	post, err := a.readPending(c)
	if err != nil {
		a.fail(c, err)
		return
	}
	res, err := p.Post(c.Request.Context(), post)
	var ce *chain.ConflictError
	if errors.As(err, &ce) {
		a.writeConflict(c, ce)
		return
	}
	if err != nil {
		a.fail(c, err)
		return
	}
	out := append([]byte(nil), `{"tx_hash":"`...)
	out = append(out, res.TxHash.String()...)
	out = append(out, `","status":"pending","seq":`...)
	out = strconv.AppendUint(out, res.Seq, 10)
	out = append(out, `,"tip":`...)
	out = query.AppendTip(out, res.Tip)
	a.writeJSON(c, http.StatusOK, res.Tip, res.Seq, append(out, '}'))
}

// readPending reads and decodes a POST /v1/pending body by its
// Content-Type. A bad body is chain.ErrInvalidArgument, an unknown type
// errUnsupportedMediaType, answered before the body is read.
func (a *API) readPending(c *gin.Context) (chain.PendingPost, error) {
	header := c.GetHeader("Content-Type")
	mt, _, err := mime.ParseMediaType(header)
	if header == "" || err != nil {
		return chain.PendingPost{}, fmt.Errorf("content type %q: send application/json, application/cbor or %s: %w", clipHeader(header), contentTypeRaw, errUnsupportedMediaType)
	}
	q, err := parseQuery(c.Request.URL.RawQuery, "replace")
	if err != nil {
		return chain.PendingPost{}, err
	}
	replaceParam, given := q.lookup("replace")
	if given && mt != contentTypeRaw {
		return chain.PendingPost{}, fmt.Errorf("replace: a query parameter for raw transactions only (the Tx carries \"replace\"): %w", chain.ErrInvalidArgument)
	}
	var decode func(b []byte) (chain.PendingPost, error)
	switch mt {
	case chain.FormatJSON.ContentType():
		decode = func(b []byte) (chain.PendingPost, error) { return chain.DecodePendingJSON(b, a.opts.BlockLimits) }
	case chain.FormatCBOR.ContentType():
		decode = func(b []byte) (chain.PendingPost, error) { return chain.DecodePendingCBOR(b, a.opts.BlockLimits) }
	case contentTypeRaw:
		if a.opts.RawTx == nil {
			return chain.PendingPost{}, fmt.Errorf("this node reads no raw transactions (no chain adapter): send the block format's Tx: %w", errUnsupportedMediaType)
		}
		var replace bool
		switch replaceParam {
		case "", "false":
		case "true":
			replace = true
		default:
			return chain.PendingPost{}, fmt.Errorf("replace %q: must be true or false: %w", replaceParam, chain.ErrInvalidArgument)
		}
		decode = func(b []byte) (chain.PendingPost, error) {
			tx, err := a.opts.RawTx(b)
			if err != nil {
				return chain.PendingPost{}, fmt.Errorf("raw transaction: %v: %w", err, chain.ErrInvalidArgument)
			}
			if err := chain.ValidateTx(&tx, a.opts.BlockLimits); err != nil {
				return chain.PendingPost{}, err
			}
			return chain.PendingPost{Tx: tx, Replace: replace}, chain.CheckPendingTx(&tx)
		}
	default:
		return chain.PendingPost{}, fmt.Errorf("content type %q: send application/json, application/cbor or %s: %w", clipHeader(mt), contentTypeRaw, errUnsupportedMediaType)
	}
	body, err := a.readBody(c, min(a.opts.MaxBlockBytes, chain.MaxPendingTxBytes))
	if err != nil {
		return chain.PendingPost{}, err
	}
	return decode(body)
}

// writeConflict answers 409 conflict, naming the pending transaction that
// already spends an input.
func (a *API) writeConflict(c *gin.Context, e *chain.ConflictError) {
	p := a.r.Published()
	out := append([]byte(nil), `{"tip":`...)
	out = query.AppendTip(out, p.Tip)
	out = append(out, `,"error":{"code":"conflict","message":`...)
	out = strconv.AppendQuote(out, e.Error()+": post it with replace to evict that transaction")
	out = append(out, `,"outpoint":{"tx_hash":"`...)
	out = append(out, e.OutPoint.TxHash.String()...)
	out = append(out, `","index":`...)
	out = strconv.AppendUint(out, uint64(e.OutPoint.Index), 10)
	out = append(out, `},"spent_by":{"tx_hash":"`...)
	out = append(out, e.Spender.String()...)
	out = append(out, `","input":`...)
	out = strconv.AppendUint(out, uint64(e.Input), 10)
	out = append(out, "}}}"...)
	a.writeJSON(c, http.StatusConflict, p.Tip, p.Seq, out)
}

// deletePending answers DELETE /v1/pending/{tx_hash}: {"tx_hash",
// "withdrawn": bool, "seq"}; withdrawn is false when it was not pending (an
// idempotent delete).
func (a *API) deletePending(c *gin.Context) {
	p, ok := a.w.(Pender)
	if !ok {
		a.fail(c, errReadOnly)
		return
	}
	h, err := chain.ParseHash(c.Param("tx_hash"))
	if err != nil {
		a.fail(c, fmt.Errorf("tx_hash: %v: %w", err, chain.ErrInvalidArgument))
		return
	}
	res, err := p.Withdraw(c.Request.Context(), h)
	if err != nil {
		a.fail(c, err)
		return
	}
	out := append([]byte(nil), `{"tx_hash":"`...)
	out = append(out, h.String()...)
	out = append(out, `","withdrawn":`...)
	out = strconv.AppendBool(out, res.Changed)
	out = append(out, `,"seq":`...)
	out = strconv.AppendUint(out, res.Seq, 10)
	out = append(out, `,"tip":`...)
	out = query.AppendTip(out, res.Tip)
	a.writeJSON(c, http.StatusOK, res.Tip, res.Seq, append(out, '}'))
}

// getPending answers GET /v1/pending/{tx_hash} on any node, without a
// token: the transaction's status at this node's state.
func (a *API) getPending(c *gin.Context) {
	_, rc, ok := a.readQuery(c, readParamNames)
	if !ok {
		return
	}
	h, err := chain.ParseHash(c.Param("tx_hash"))
	if err != nil {
		a.fail(c, fmt.Errorf("tx_hash: %v: %w", err, chain.ErrInvalidArgument))
		return
	}
	a.serveRead(c, rc, false, func(ctx context.Context) (query.Answer, error) {
		return a.r.PendingStatus(ctx, h)
	})
}

package api

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"crypto/subtle"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/query"
	"github.com/utxo-cache/utxo-cache/writer"
)

// Reader is the read side the API serves (query.Server).
type Reader interface {
	Tip() query.Answer
	AddressUtxos(ctx context.Context, address string, desc bool, limit int, cursor string) (query.Answer, error)
	Balance(ctx context.Context, address string) (query.Answer, error)
	Utxo(ctx context.Context, op chain.OutPoint) (query.Answer, error)
	Lookup(ctx context.Context, ops []chain.OutPoint) (query.Answer, error)
	Published() query.Published
}

// Writer is the write side (writer.Writer); nil on a replica.
type Writer interface {
	Apply(ctx context.Context, b *chain.Block) (writer.Result, error)
	Rollback(ctx context.Context, target uint64) (writer.Result, error)
	RollbackToHash(ctx context.Context, h chain.Hash) (writer.Result, error)
}

// Options configure the HTTP API.
type Options struct {
	// AdminToken enables the write endpoints for bearers of it. Empty: writes
	// answer 403 writes_disabled.
	AdminToken string
	// ReadOnly marks a replica: writes answer 403 read_only.
	ReadOnly bool
	// MaxBlockBytes bounds a POST /v1/blocks body. Default: BlockLimits'.
	MaxBlockBytes int64
	// MaxRequestBytes bounds other request bodies. Default 1 MiB.
	MaxRequestBytes int64
	// BlockLimits bound block decoding. Zero: chain defaults.
	BlockLimits chain.Limits
	// Ready reports readiness for /readyz. Default: always ready.
	Ready func() error
	// Registry receives the HTTP metrics; Gatherer serves /metrics. Both
	// optional (no /metrics without a Gatherer).
	Registry prometheus.Registerer
	Gatherer prometheus.Gatherer
	// OpenAPI is the document served at /openapi.yaml. Default: the embedded one.
	OpenAPI []byte
	// Logger. Default: discard.
	Logger *slog.Logger
}

// API is the HTTP handler. Create with New; it is an http.Handler.
type API struct {
	r       Reader
	w       Writer
	opts    Options
	engine  *gin.Engine
	metrics *httpMetrics
	bufs    sync.Pool
}

// New builds the routes.
func New(r Reader, w Writer, opts Options) *API {
	opts.BlockLimits = opts.BlockLimits.WithDefaults()
	if opts.MaxBlockBytes <= 0 {
		opts.MaxBlockBytes = int64(opts.BlockLimits.MaxBlockBytes)
	}
	if opts.MaxRequestBytes <= 0 {
		opts.MaxRequestBytes = 1 << 20
	}
	if opts.Ready == nil {
		opts.Ready = func() error { return nil }
	}
	if opts.OpenAPI == nil {
		opts.OpenAPI = openAPIDocument
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	// Addresses are opaque: match routes on the raw path so an escaped "/"
	// inside an address stays inside its path segment.
	e.UseRawPath = true
	e.UnescapePathValues = true
	e.RemoveExtraSlash = false
	e.HandleMethodNotAllowed = true
	a := &API{r: r, w: w, opts: opts, engine: e, metrics: newHTTPMetrics(opts.Registry)}
	a.bufs.New = func() any { b := make([]byte, 0, 4096); return &b }
	e.Use(gin.CustomRecoveryWithWriter(io.Discard, a.recovered))
	e.NoRoute(func(c *gin.Context) {
		a.writeError(c, http.StatusNotFound, "not_found", "no such endpoint")
	})
	e.NoMethod(func(c *gin.Context) {
		a.writeError(c, http.StatusMethodNotAllowed, "method_not_allowed", "method not allowed on this endpoint")
	})

	a.route(http.MethodGet, "/v1/tip", a.getTip)
	a.route(http.MethodGet, "/v1/addresses/:address/utxos", a.getAddressUtxos)
	a.route(http.MethodGet, "/v1/addresses/:address/balance", a.getBalance)
	a.route(http.MethodGet, "/v1/utxos/:tx_hash/:index", a.getUtxo)
	a.route(http.MethodPost, "/v1/utxos/lookup", a.postLookup)
	a.route(http.MethodPost, "/v1/blocks", a.postBlock)
	a.route(http.MethodPost, "/v1/rollback", a.postRollback)
	a.route(http.MethodGet, "/healthz", func(c *gin.Context) { c.Data(200, "application/json", []byte(`{"status":"ok"}`)) })
	a.route(http.MethodGet, "/readyz", a.getReady)
	a.route(http.MethodGet, "/openapi.yaml", func(c *gin.Context) { c.Data(200, "application/yaml", a.opts.OpenAPI) })
	if opts.Gatherer != nil {
		h := promhttp.HandlerFor(opts.Gatherer, promhttp.HandlerOpts{})
		a.route(http.MethodGet, "/metrics", func(c *gin.Context) { h.ServeHTTP(c.Writer, c.Request) })
	}
	return a
}

// ServeHTTP implements http.Handler.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.engine.ServeHTTP(w, r) }

// route registers a handler with its latency and status metrics, labelled by
// the route pattern (never the raw path: bounded cardinality).
func (a *API) route(method, path string, h gin.HandlerFunc) {
	obs := a.metrics.route(path)
	a.engine.Handle(method, path, func(c *gin.Context) {
		start := time.Now()
		h(c)
		obs(c.Writer.Status(), time.Since(start))
	})
}

func (a *API) recovered(c *gin.Context, rec any) {
	a.opts.Logger.Error("panic in handler", "path", c.FullPath(), "panic", fmt.Sprint(rec))
	a.writeError(c, http.StatusInternalServerError, "internal", "internal error")
	c.Abort()
}

func (a *API) getTip(c *gin.Context) { a.writeAnswer(c, a.r.Tip(), false) }

func (a *API) getAddressUtxos(c *gin.Context) {
	q := c.Request.URL.Query()
	limit := query.DefaultPageLimit
	if s := q.Get("limit"); s != "" || q.Has("limit") {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > query.MaxPageLimit {
			a.fail(c, fmt.Errorf("limit must be an integer in 1..%d: %w", query.MaxPageLimit, chain.ErrInvalidArgument))
			return
		}
		limit = n
	}
	var desc bool
	switch q.Get("order") {
	case "", "asc":
	case "desc":
		desc = true
	default:
		a.fail(c, fmt.Errorf("order must be asc or desc: %w", chain.ErrInvalidArgument))
		return
	}
	if q.Has("cursor") && q.Get("cursor") == "" {
		a.fail(c, fmt.Errorf("cursor is empty: %w", chain.ErrInvalidArgument))
		return
	}
	ans, err := a.r.AddressUtxos(c.Request.Context(), c.Param("address"), desc, limit, q.Get("cursor"))
	if err != nil {
		a.fail(c, err)
		return
	}
	a.writeAnswer(c, ans, true)
}

func (a *API) getBalance(c *gin.Context) {
	ans, err := a.r.Balance(c.Request.Context(), c.Param("address"))
	if err != nil {
		a.fail(c, err)
		return
	}
	a.writeAnswer(c, ans, true)
}

func (a *API) getUtxo(c *gin.Context) {
	h, err := chain.ParseHash(c.Param("tx_hash"))
	if err != nil {
		a.fail(c, fmt.Errorf("tx_hash: %v: %w", err, chain.ErrInvalidArgument))
		return
	}
	idx, err := parseIndex(c.Param("index"))
	if err != nil {
		a.fail(c, err)
		return
	}
	ans, err := a.r.Utxo(c.Request.Context(), chain.OutPoint{TxHash: h, Index: idx})
	if err != nil {
		a.fail(c, err)
		return
	}
	a.writeAnswer(c, ans, true)
}

// parseIndex accepts a canonical decimal uint32 (no sign, no leading zeros).
func parseIndex(s string) (uint32, error) {
	if s == "" || len(s) > 10 || (len(s) > 1 && s[0] == '0') || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("index %q is not a uint32: %w", s, chain.ErrInvalidArgument)
	}
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("index %q is not a uint32: %w", s, chain.ErrInvalidArgument)
	}
	return uint32(n), nil
}

func (a *API) postLookup(c *gin.Context) {
	body, err := a.readBody(c, a.opts.MaxRequestBytes)
	if err != nil {
		a.fail(c, err)
		return
	}
	// Strict, as every JSON body: duplicate and unknown fields are errors.
	ops, err := chain.DecodeLookupJSON(body, query.MaxLookup)
	if err != nil {
		a.fail(c, err)
		return
	}
	ans, err := a.r.Lookup(c.Request.Context(), ops)
	if err != nil {
		a.fail(c, err)
		return
	}
	a.writeAnswer(c, ans, false)
}

func (a *API) getReady(c *gin.Context) {
	if err := a.opts.Ready(); err != nil {
		a.writeError(c, http.StatusServiceUnavailable, "not_ready", err.Error())
		return
	}
	c.Data(200, "application/json", []byte(`{"status":"ready"}`))
}

// authorize enforces the write rules: replica → 403 read_only, no token
// configured → 403 writes_disabled, wrong or missing bearer → 401.
func (a *API) authorize(c *gin.Context) error {
	switch {
	case a.opts.ReadOnly || a.w == nil:
		return errReadOnly
	case a.opts.AdminToken == "":
		return errWritesDisabled
	}
	const prefix = "bearer " // the scheme is case-insensitive (RFC 9110 §11.1)
	h := c.GetHeader("Authorization")
	if len(h) < len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) ||
		subtle.ConstantTimeCompare([]byte(h[len(prefix):]), []byte(a.opts.AdminToken)) != 1 {
		return errUnauthorized
	}
	return nil
}

func (a *API) postBlock(c *gin.Context) {
	if err := a.authorize(c); err != nil {
		a.fail(c, err)
		return
	}
	format, err := blockFormat(c.GetHeader("Content-Type"))
	if err != nil {
		a.fail(c, err)
		return
	}
	body, err := a.readBody(c, a.opts.MaxBlockBytes)
	if err != nil {
		a.fail(c, err)
		return
	}
	var b *chain.Block
	if format == chain.FormatCBOR {
		b, err = chain.DecodeBlockCBOR(body, a.opts.BlockLimits)
	} else {
		b, err = chain.DecodeBlockJSON(body, a.opts.BlockLimits)
	}
	if err != nil {
		a.fail(c, err)
		return
	}
	res, err := a.w.Apply(c.Request.Context(), b)
	if err != nil {
		a.fail(c, err)
		return
	}
	out := []byte(`{"applied":` + strconv.FormatBool(res.Applied) + `,"tip":`)
	out = query.AppendTip(out, res.Tip)
	a.writeJSON(c, http.StatusOK, res.Tip, append(out, '}'))
}

func (a *API) postRollback(c *gin.Context) {
	if err := a.authorize(c); err != nil {
		a.fail(c, err)
		return
	}
	body, err := a.readBody(c, a.opts.MaxRequestBytes)
	if err != nil {
		a.fail(c, err)
		return
	}
	// Strict: {"height":14146,"height":14136} is an error, not a rollback
	// to 14136; the height is an exact uint64, not a float64.
	target, err := chain.DecodeRollbackJSON(body)
	if err != nil {
		a.fail(c, err)
		return
	}
	var res writer.Result
	if target.ByHash {
		res, err = a.w.RollbackToHash(c.Request.Context(), target.Hash)
	} else {
		res, err = a.w.Rollback(c.Request.Context(), target.Height)
	}
	if err != nil {
		a.fail(c, err)
		return
	}
	out := query.AppendTip([]byte(`{"tip":`), res.Tip)
	a.writeJSON(c, http.StatusOK, res.Tip, append(out, '}'))
}

// readBody reads at most limit bytes of the body: more is chain.ErrTooLarge.
func (a *API) readBody(c *gin.Context, limit int64) ([]byte, error) {
	if c.Request.ContentLength > limit {
		return nil, fmt.Errorf("body of %d bytes over the limit of %d: %w", c.Request.ContentLength, limit, chain.ErrTooLarge)
	}
	body, err := io.ReadAll(io.LimitReader(c.Request.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read body: %v: %w", err, chain.ErrInvalidArgument)
	}
	if int64(len(body)) > limit {
		return nil, fmt.Errorf("body over the limit of %d bytes: %w", limit, chain.ErrTooLarge)
	}
	return body, nil
}

// fail writes err's answer. A not_next_block answer carries the current tip.
func (a *API) fail(c *gin.Context, err error) {
	err = clientClosed(c, err)
	status, code, msg := classify(err)
	a.logFailure(c, status, err)
	// Every error carries the served tip; for not_next_block it is the
	// current tip the producer must extend (CONTRACT §1).
	tip := a.r.Published().Tip
	a.writeJSON(c, status, tip, query.AppendError(nil, tip, code, msg))
}

func (a *API) writeError(c *gin.Context, status int, code, msg string) {
	tip := a.r.Published().Tip
	a.writeJSON(c, status, tip, query.AppendError(nil, tip, code, msg))
}

// writeAnswer writes a read answer with its tip headers, and its ETag when
// cacheable; If-None-Match with that ETag gets 304 and no body.
func (a *API) writeAnswer(c *gin.Context, ans query.Answer, conditional bool) {
	h := c.Writer.Header()
	setTipHeaders(h, ans.Tip)
	if conditional && ans.ETag != "" {
		h.Set("ETag", ans.ETag)
		if inm := c.GetHeader("If-None-Match"); inm != "" && etagMatches(inm, ans.ETag) {
			c.Status(http.StatusNotModified)
			c.Writer.WriteHeaderNow()
			return
		}
	}
	p := a.bufs.Get().(*[]byte)
	b := ans.AppendBody((*p)[:0])
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	c.Status(ans.Status)
	_, _ = c.Writer.Write(b)
	if cap(b) <= 1<<20 { // keep the grown buffer; drop huge ones
		*p = b
		a.bufs.Put(p)
	}
}

func (a *API) writeJSON(c *gin.Context, status int, tip chain.Tip, body []byte) {
	setTipHeaders(c.Writer.Header(), tip)
	c.Data(status, "application/json", body)
}

// tipHeaders are the rendered X-Tip-* values of one tip. The last one is
// kept (lastTip) because consecutive answers almost always share a tip; the
// slices are shared between responses and never modified.
type tipHeaders struct {
	tip          chain.Tip
	height, hash []string
}

var lastTip atomic.Pointer[tipHeaders]

func setTipHeaders(h http.Header, t chain.Tip) {
	if t.Empty {
		return
	}
	th := lastTip.Load()
	if th == nil || th.tip != t {
		th = &tipHeaders{tip: t, height: []string{strconv.FormatUint(t.Height, 10)}, hash: []string{t.Hash.String()}}
		lastTip.Store(th)
	}
	h["X-Tip-Height"] = th.height
	h["X-Tip-Hash"] = th.hash
}

// etagMatches implements the weak comparison of If-None-Match (RFC 9110
// §13.1.2): any listed tag, or "*", equal to ours ignoring W/.
func etagMatches(header, etag string) bool {
	want := strings.TrimPrefix(etag, "W/")
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimSpace(t)
		if t == "*" || strings.TrimPrefix(t, "W/") == want {
			return true
		}
	}
	return false
}

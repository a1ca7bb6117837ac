package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/utxo-cache/utxo-cache/api/esplora"
	"github.com/utxo-cache/utxo-cache/blockfrost"
	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/query"
	"github.com/utxo-cache/utxo-cache/writer"
)

// Reader is the read side the API serves (query.Server). The API releases
// every answer it gets (query.Answer.Release) once it has written it, or
// when it asks again (a read-your-writes wait).
type Reader interface {
	Tip() query.Answer
	AddressUtxos(ctx context.Context, address string, desc bool, limit int, cursor string) (query.Answer, error)
	AddressUtxosFiltered(ctx context.Context, address string, desc bool, limit int, cursor string, f query.Filter) (query.Answer, error)
	Balance(ctx context.Context, address string) (query.Answer, error)
	Utxo(ctx context.Context, op chain.OutPoint) (query.Answer, error)
	Lookup(ctx context.Context, ops []chain.OutPoint) (query.Answer, error)
	LeaseReader   // lease.go
	PendingReader // pending.go
	Published() query.Published
	WaitFor(ctx context.Context, minSeq, minHeight uint64, maxWait time.Duration) (query.Published, error)
}

// Writer is the write side (writer.Writer); nil on a replica.
type Writer interface {
	Apply(ctx context.Context, b *chain.Block) (writer.Result, error)
	Rollback(ctx context.Context, target uint64) (writer.Result, error)
	RollbackToHash(ctx context.Context, h chain.Hash) (writer.Result, error)
}

// ReadGate holds new reads back (replication.ApplyGate). Wait returns when
// the read may go on; it must cost next to nothing when nothing is held.
type ReadGate interface {
	Wait(ctx context.Context)
}

// Options configure the HTTP API.
type Options struct {
	// AdminToken enables the write endpoints for bearers of it. Empty: writes
	// answer 403 writes_disabled.
	AdminToken string
	// WalletToken enables the wallet writes (pending transactions, leases)
	// for bearers of it; it is not the admin token, which does not enable
	// them. Empty: wallet writes answer 403 wallet_writes_disabled.
	WalletToken string
	// RawTx reads the chain's own serialized transaction for POST
	// /v1/pending with Content-Type application/octet-stream. Nil: such a
	// body answers 415.
	RawTx RawTxFunc
	// ReadOnly marks a replica: writes answer 403 read_only.
	ReadOnly bool
	// ReplicationToken enables the replication endpoints for bearers of it,
	// when Replication serves them (the writer). Empty: 403
	// replication_disabled.
	ReplicationToken string
	Replication      Replication
	// StallTimeout bounds how long a streamed answer (a checkpoint, a
	// change-log answer) may wait for its reader to take the next part of it
	// (at most 64 KiB): one that waits longer is dropped, and what it held
	// (its slot, a checkpoint's staged files) freed. A reader must so take
	// 64 KiB per StallTimeout. Default DefaultStallTimeout.
	StallTimeout time.Duration
	// ReplicaStatus, on a replica, gives the "replication" member of GET
	// /v1/tip. Nil on the writer.
	ReplicaStatus func() ReplicaStatus
	// MaxBlockBytes bounds a POST /v1/blocks body. Default: BlockLimits'.
	MaxBlockBytes int64
	// MaxRequestBytes bounds other request bodies. Default 1 MiB.
	MaxRequestBytes int64
	// BodyTimeout bounds how long a request body (a block, a rollback, a
	// lookup) may take to arrive, from when the handler starts reading it:
	// a slower one answers 408 request_timeout, and the connection is
	// closed. It replaces the server's read deadline (http.Server's
	// ReadTimeout) for the body, through http.ResponseController; behind a
	// writer without one (a test's recorder) only the server's applies.
	// Default 60s.
	BodyTimeout time.Duration
	// ReadGate, on a replica, holds new reads while the replica applies a
	// change (replication.ApplyGate): every read endpoint calls its Wait
	// before anything else, and a long-poll again before each new read; other endpoints (writes, replication, health,
	// readiness, metrics, the OpenAPI document) never do. Nil: no gate.
	ReadGate ReadGate
	// Blockfrost, when set, is mounted under /api/v0 (a Cardano store's
	// Blockfrost-compatible front end; docs/blockfrost.md). Nil: those
	// paths are not endpoints.
	Blockfrost *blockfrost.FrontEnd
	// Events serves the event streams (GET and POST /v1/events). Nil: they
	// answer 503 events_unavailable.
	Events Events
	// Esplora, when set, is the Esplora-compatible front end, mounted under
	// /api/ (esplora.go): a Bitcoin store's. Nil: not mounted.
	Esplora *esplora.Frontend
	// MaxWait bounds how long a read waits for its min_seq / min_height
	// and then, long-polling (If-None-Match with wait), for its answer to
	// change (a wait parameter may shorten it). Default 2s; negative: no
	// waiting.
	MaxWait time.Duration
	// BlockLimits bound block decoding. Zero: chain defaults.
	BlockLimits chain.Limits
	// Ready reports readiness for /readyz. Default: always ready.
	Ready func() error
	// WritesRefused, on the writer, says why writes are being refused
	// (writer.Writer.WritesRefused: a nearly full disk), nil while they are
	// taken. /readyz stays 200 (reads are served) and names the reason.
	// Default: none.
	WritesRefused func() error
	// Registry receives the HTTP metrics; Gatherer serves /metrics. Both
	// optional (no /metrics without a Gatherer).
	Registry prometheus.Registerer
	Gatherer prometheus.Gatherer
	// Logger. Default: discard.
	Logger *slog.Logger
}

// EnsureDefaults returns o with every unset field set to its default (a
// negative MaxWait becomes 0: no waiting).
func (o Options) EnsureDefaults() Options {
	o.BlockLimits = o.BlockLimits.EnsureDefaults()
	if o.MaxBlockBytes <= 0 {
		o.MaxBlockBytes = int64(o.BlockLimits.MaxBlockBytes)
	}
	if o.MaxRequestBytes <= 0 {
		o.MaxRequestBytes = 1 << 20
	}
	if o.BodyTimeout <= 0 {
		o.BodyTimeout = DefaultBodyTimeout
	}
	if o.MaxWait == 0 {
		o.MaxWait = 2 * time.Second
	}
	if o.MaxWait < 0 {
		o.MaxWait = 0
	}
	if o.StallTimeout <= 0 {
		o.StallTimeout = DefaultStallTimeout
	}
	if o.Ready == nil {
		o.Ready = func() error { return nil }
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// DefaultBodyTimeout is Options.BodyTimeout's default: a 64 MiB block
// arrives in it at 1.1 MB/s.
const DefaultBodyTimeout = 60 * time.Second

// API is the HTTP handler. Create with New; it is an http.Handler.
type API struct {
	r       Reader
	w       Writer
	opts    Options
	engine  *gin.Engine
	metrics *httpMetrics
	bufs    sync.Pool
	// drain is cancelled by Drain: long polls answer at once.
	drain     context.Context
	stopDrain context.CancelFunc
}

// New builds the routes.
func New(r Reader, w Writer, opts Options) *API {
	opts = opts.EnsureDefaults()
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	// Addresses are opaque: match routes on the raw path so an escaped "/"
	// inside an address stays inside its path segment.
	e.UseRawPath = true
	e.UnescapePathValues = true
	e.RemoveExtraSlash = false
	// A path with a trailing slash (or another case) is not an endpoint:
	// 404 in the JSON shape of every error, not Gin's redirect with an
	// HTML body (whose Location also follows a client's
	// X-Forwarded-Prefix). Every path has one spelling.
	e.RedirectTrailingSlash = false
	e.RedirectFixedPath = false
	e.HandleMethodNotAllowed = true
	a := &API{r: r, w: w, opts: opts, engine: e, metrics: newHTTPMetrics(opts.Registry)}
	a.drain, a.stopDrain = context.WithCancel(context.Background())
	a.bufs.New = func() any { b := make([]byte, 0, 4096); return &b }
	e.Use(gin.CustomRecoveryWithWriter(io.Discard, a.recovered))
	e.NoRoute(func(c *gin.Context) {
		if a.esploraPath(c) {
			return
		}
		msg := "no such endpoint"
		if p := c.Request.URL.Path; len(p) > 1 && strings.HasSuffix(p, "/") {
			msg = "no such endpoint (no path of this API ends in a slash)"
		}
		if a.blockfrostPath(c) {
			a.failBlockfrost(c, fmt.Errorf("%s: %w", msg+" of this service's Blockfrost front end", chain.ErrNotFound))
			return
		}
		a.writeError(c, http.StatusNotFound, "not_found", msg)
	})
	e.NoMethod(func(c *gin.Context) {
		if a.blockfrostPath(c) {
			a.writeBlockfrostError(c, http.StatusMethodNotAllowed, "method not allowed on this endpoint of the Blockfrost front end (it serves reads: GET and HEAD)")
			return
		}
		a.writeError(c, http.StatusMethodNotAllowed, "method_not_allowed", "method not allowed on this endpoint")
	})

	a.route(http.MethodGet, "/v1/tip", a.read(a.getTip))
	a.route(http.MethodGet, "/v1/addresses/:address/utxos", a.read(a.getAddressUtxos))
	a.route(http.MethodGet, "/v1/addresses/:address/balance", a.read(a.getBalance))
	a.indexRoutes()   // index.go
	a.esploraRoutes() // esplora.go
	a.route(http.MethodGet, "/v1/utxos/:tx_hash/:index", a.read(a.getUtxo))
	a.route(http.MethodPost, "/v1/utxos/lookup", a.read(a.postLookup))
	a.route(http.MethodPost, "/v1/blocks", a.postBlock)
	a.route(http.MethodPost, "/v1/rollback", a.postRollback)
	a.route(http.MethodPost, "/v1/frozen", a.postFrozen)
	a.route(http.MethodDelete, "/v1/frozen", a.deleteFrozen)
	a.leaseRoutes()   // lease.go
	a.pendingRoutes() // pending.go
	a.route(http.MethodGet, "/v1/events", a.read(a.getEvents))
	a.route(http.MethodPost, "/v1/events", a.read(a.postEvents))
	a.route(http.MethodGet, "/v1/replication/changes", a.getChanges)
	a.route(http.MethodGet, "/v1/replication/checkpoint", a.getCheckpoint)
	a.route(http.MethodGet, "/healthz", func(c *gin.Context) { writeData(c, 200, jsonContentType, []byte(`{"status":"ok"}`)) })
	a.route(http.MethodGet, "/readyz", a.getReady)
	yamlContentType := []string{"application/yaml"}
	a.blockfrostRoutes() // blockfrost.go
	a.route(http.MethodGet, "/openapi.yaml", func(c *gin.Context) { writeData(c, 200, yamlContentType, openAPIDocument) })
	if opts.Gatherer != nil {
		h := promhttp.HandlerFor(opts.Gatherer, promhttp.HandlerOpts{})
		a.route(http.MethodGet, "/metrics", func(c *gin.Context) { h.ServeHTTP(c.Writer, c.Request) })
	}
	return a
}

// ServeHTTP implements http.Handler. A HEAD request is served as its GET,
// without the body (headWriter); so are its errors (404, 405).
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodHead {
		hw := &headWriter{ResponseWriter: w}
		a.engine.ServeHTTP(hw, r)
		hw.finish()
		return
	}
	a.engine.ServeHTTP(w, r)
}

// route registers a handler with its latency and status metrics, labelled by
// the route pattern (never the raw path: bounded cardinality). A GET route
// answers HEAD too (RFC 9110 §9.3.2), with the same handler and metrics.
func (a *API) route(method, path string, h gin.HandlerFunc) {
	obs := a.metrics.route(path)
	handler := func(c *gin.Context) {
		start := time.Now()
		h(c)
		obs(c.Writer.Status(), time.Since(start))
	}
	a.engine.Handle(method, path, handler)
	if method == http.MethodGet {
		a.engine.Handle(http.MethodHead, path, handler)
	}
}

// read is the middleware of the read endpoints: it passes the request
// through the read gate (Options.ReadGate) first. The wait counts in the
// route's latency.
func (a *API) read(h gin.HandlerFunc) gin.HandlerFunc {
	g := a.opts.ReadGate
	if g == nil {
		return h
	}
	return func(c *gin.Context) {
		g.Wait(c.Request.Context())
		h(c)
	}
}

func (a *API) recovered(c *gin.Context, rec any) {
	a.opts.Logger.Error("panic in handler", "path", c.FullPath(), "panic", fmt.Sprint(rec))
	a.writeError(c, http.StatusInternalServerError, "internal", "internal error")
	c.Abort()
}

// serveRead answers a read from a published state that meets rc: it waits
// for one (WaitFor) up to rc.wait, computes the answer, and, should the
// answer's state not meet rc after all (a rollback lowered the height in
// between), waits again within the same deadline. When none comes in time it
// answers 503 behind with Retry-After.
//
// A conditional read (one whose answer carries an ETag) that names its wait
// and sends If-None-Match (other than "*") long-polls: while its answer's ETag matches, it
// releases the answer (it holds no snapshot while it waits), waits for the
// next publish (WaitFor of the answer's seq + 1) within the same deadline as
// min_seq / min_height, and reads again, each time a whole read from one
// snapshot. It answers 200 as soon as the ETag differs; when the deadline
// passes, or Drain is called, it reads once more and answers that (304 when
// still unchanged, from that read). A client that goes away ends it at once. The number
// waiting is bounded as every other request's: each holds one connection
// (the server's connection limits) for at most Options.MaxWait.
func (a *API) serveRead(c *gin.Context, rc readConditions, conditional bool, read func(ctx context.Context) (query.Answer, error)) {
	a.serveReadAs(c, rc, conditional, read, a.writeAnswer, a.fail)
}

// serveReadAs is serveRead with the answer written by write and failures
// by fail: the /v1 JSON writers, or a compatibility front end's
// (esplora.go).
func (a *API) serveReadAs(c *gin.Context, rc readConditions, conditional bool, read func(ctx context.Context) (query.Answer, error),
	write func(c *gin.Context, ans query.Answer, conditional bool), fail func(c *gin.Context, err error)) {
	ctx := c.Request.Context()
	deadline := time.Now().Add(rc.wait)
	var inm string
	if conditional && rc.waitGiven && rc.wait > 0 {
		// "*" matches every ETag: it could only wait out the whole wait.
		if inm = c.GetHeader("If-None-Match"); strings.TrimSpace(inm) == "*" {
			inm = ""
		}
	}
	for {
		if rc.minSeq > 0 || rc.minHeight > 0 {
			if p, err := a.r.WaitFor(ctx, rc.minSeq, rc.minHeight, time.Until(deadline)); err != nil {
				if errors.Is(err, query.ErrBehind) {
					err = fmt.Errorf("min_seq %d, min_height %d: not reached within %s (at seq %d, tip %s): %w",
						rc.minSeq, rc.minHeight, rc.wait, p.Seq, p.Tip, err)
				}
				fail(c, err)
				return
			}
		}
		ans, err := read(ctx)
		if err != nil {
			fail(c, err)
			return
		}
		if query.Satisfies(query.Published{Seq: ans.Seq, Tip: ans.Tip}, rc.minSeq, rc.minHeight) {
			if inm == "" || ans.ETag == "" || !etagMatches(inm, ans.ETag) ||
				!time.Now().Before(deadline) || a.drain.Err() != nil {
				write(c, ans, conditional)
				ans.Release()
				return
			}
			next := ans.Seq + 1
			ans.Release()
			if err := a.awaitPublish(ctx, next, deadline); err != nil {
				fail(c, err)
				return
			}
			if g := a.opts.ReadGate; g != nil {
				g.Wait(ctx) // each read again is a new read (Options.ReadGate)
			}
			continue
		}
		ans.Release()
		if !time.Now().Before(deadline) {
			fail(c, fmt.Errorf("answered at seq %d, tip %s: %w", ans.Seq, ans.Tip, query.ErrBehind))
			return
		}
	}
}

// awaitPublish waits, for a long-polling read, until a state of seq next or
// later is published, the deadline passes or Drain is called (all nil), or
// ctx ends (its error).
func (a *API) awaitPublish(ctx context.Context, next uint64, deadline time.Time) error {
	wctx, cancel := context.WithCancel(ctx)
	stopDrain := context.AfterFunc(a.drain, cancel)
	_, err := a.r.WaitFor(wctx, next, 0, time.Until(deadline))
	stopDrain()
	cancel()
	switch {
	case err == nil, errors.Is(err, query.ErrBehind):
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case a.drain.Err() != nil:
		return nil
	}
	return err
}

func (a *API) getTip(c *gin.Context) {
	_, rc, ok := a.readQuery(c, readParamNames)
	if !ok {
		return
	}
	a.serveRead(c, rc, false, func(context.Context) (query.Answer, error) {
		ans := a.r.Tip()
		if a.opts.ReplicaStatus != nil && len(ans.Body) > 0 {
			body := append([]byte(nil), ans.Body[:len(ans.Body)-1]...)
			body = append(body, ',')
			body = append(body, replicationMember(a.opts.ReplicaStatus())...)
			ans.Body = append(body, '}')
		}
		return ans, nil
	})
}

func (a *API) getAddressUtxos(c *gin.Context) {
	q, rc, ok := a.readQuery(c, pageParamNames)
	if !ok {
		return
	}
	desc, limit, cursor, err := pageParams(&q)
	if err != nil {
		a.fail(c, err)
		return
	}
	f, ok := a.listFilter(c, &q)
	if !ok {
		return
	}
	address := c.Param("address")
	if f != (query.Filter{}) {
		a.serveRead(c, rc, true, func(ctx context.Context) (query.Answer, error) {
			return a.r.AddressUtxosFiltered(ctx, address, desc, limit, cursor, f)
		})
		return
	}
	a.serveRead(c, rc, true, func(ctx context.Context) (query.Answer, error) {
		return a.r.AddressUtxos(ctx, address, desc, limit, cursor)
	})
}

// pageParams reads a listing's limit, order and cursor (pageParamNames).
func pageParams(q *queryParams) (desc bool, limit int, cursor string, err error) {
	limit = query.DefaultPageLimit
	if s, given := q.lookup("limit"); given {
		n, err := parseDecimalUint64(s)
		if err != nil || n < 1 || n > query.MaxPageLimit {
			return false, 0, "", fmt.Errorf("limit must be an integer in 1..%d: %w", query.MaxPageLimit, chain.ErrInvalidArgument)
		}
		limit = int(n)
	}
	if order, given := q.lookup("order"); given {
		// An empty order= is an error, as every other empty parameter.
		switch order {
		case "asc":
		case "desc":
			desc = true
		default:
			return false, 0, "", fmt.Errorf("order %q: must be asc or desc: %w", order, chain.ErrInvalidArgument)
		}
	}
	cursor, given := q.lookup("cursor")
	if given && cursor == "" {
		return false, 0, "", fmt.Errorf("cursor is empty: %w", chain.ErrInvalidArgument)
	}
	return desc, limit, cursor, nil
}

func (a *API) getBalance(c *gin.Context) {
	q, rc, ok := a.readQuery(c, balanceParamNames)
	if !ok {
		return
	}
	pending, ok := a.pendingMode(c, &q)
	if !ok {
		return
	}
	address := c.Param("address")
	a.serveRead(c, rc, true, func(ctx context.Context) (query.Answer, error) {
		if pending {
			return a.r.BalancePending(ctx, address)
		}
		return a.r.Balance(ctx, address)
	})
}

func (a *API) getUtxo(c *gin.Context) {
	q, rc, ok := a.readQuery(c, utxoParamNames)
	if !ok {
		return
	}
	mode, ok := a.leaseMode(c, &q)
	if !ok {
		return
	}
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
	op := chain.OutPoint{TxHash: h, Index: idx}
	pending, ok := a.pendingMode(c, &q)
	if !ok {
		return
	}
	if pending {
		a.serveRead(c, rc, true, func(ctx context.Context) (query.Answer, error) {
			return a.r.UtxoPending(ctx, op, mode)
		})
		return
	}
	if mode != query.LeasedAny {
		a.serveRead(c, rc, true, func(ctx context.Context) (query.Answer, error) {
			return a.r.UtxoLeased(ctx, op, mode)
		})
		return
	}
	a.serveRead(c, rc, true, func(ctx context.Context) (query.Answer, error) {
		return a.r.Utxo(ctx, op)
	})
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
	q, rc, ok := a.readQuery(c, utxoParamNames)
	if !ok {
		return
	}
	mode, ok := a.leaseMode(c, &q)
	if !ok {
		return
	}
	pending, ok := a.pendingMode(c, &q)
	if !ok {
		return
	}
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
	if pending {
		a.serveRead(c, rc, false, func(ctx context.Context) (query.Answer, error) {
			return a.r.LookupPending(ctx, ops, mode)
		})
		return
	}
	if mode != query.LeasedAny {
		a.serveRead(c, rc, false, func(ctx context.Context) (query.Answer, error) {
			return a.r.LookupLeased(ctx, ops, mode)
		})
		return
	}
	a.serveRead(c, rc, false, func(ctx context.Context) (query.Answer, error) {
		return a.r.Lookup(ctx, ops)
	})
}

func (a *API) getReady(c *gin.Context) {
	if err := a.opts.Ready(); err != nil {
		a.writeError(c, http.StatusServiceUnavailable, "not_ready", err.Error())
		return
	}
	if a.opts.WritesRefused != nil {
		if err := a.opts.WritesRefused(); err != nil {
			_, code, msg := classify(err)
			writeData(c, 200, jsonContentType, query.AppendReadyWritesRefused(nil, code, msg))
			return
		}
	}
	writeData(c, 200, jsonContentType, []byte(`{"status":"ready"}`))
}

// authorize enforces the write rules: replica → 403 read_only, no token
// configured → 403 writes_disabled, more than one Authorization header →
// 400, wrong or missing bearer → 401.
func (a *API) authorize(c *gin.Context) error {
	switch {
	case a.opts.ReadOnly || a.w == nil:
		return errReadOnly
	case a.opts.AdminToken == "":
		return errWritesDisabled
	}
	return checkBearer(c, a.opts.AdminToken)
}

// checkBearer checks that the request carries exactly one Authorization
// header and that it is the bearer of token. Two headers are refused, not
// read in order: a proxy that adds its own in front of the client's (or
// behind it) would otherwise decide, by its position, which one counts.
func checkBearer(c *gin.Context, token string) error {
	vals := c.Request.Header.Values("Authorization")
	switch {
	case len(vals) > 1:
		return fmt.Errorf("%d Authorization headers: send exactly one: %w", len(vals), chain.ErrInvalidArgument)
	case len(vals) == 0 || !bearerIs(vals[0], token):
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
	out = append(out, `,"seq":`...)
	out = strconv.AppendUint(out, res.Seq, 10)
	a.writeJSON(c, http.StatusOK, res.Tip, res.Seq, append(out, '}'))
}

func (a *API) postRollback(c *gin.Context) {
	if err := a.authorize(c); err != nil {
		a.fail(c, err)
		return
	}
	body, err := a.readJSONBody(c)
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
	out = append(out, `,"seq":`...)
	out = strconv.AppendUint(out, res.Seq, 10)
	a.writeJSON(c, http.StatusOK, res.Tip, res.Seq, append(out, '}'))
}

// readBody reads at most limit bytes of the body: more is chain.ErrTooLarge.
// The body must arrive within Options.BodyTimeout; a slower one is
// errRequestTimeout (408), and the connection closes after the answer (its
// remaining bytes are never read). Once the body is read, net/http clears
// the deadline itself, to watch the connection while the handler works.
// readJSONBody reads the body of a write that takes JSON only (jsonBody: an
// unsupported type is refused before the body is read), within
// MaxRequestBytes.
func (a *API) readJSONBody(c *gin.Context) ([]byte, error) {
	if err := jsonBody(c.GetHeader("Content-Type")); err != nil {
		return nil, err
	}
	return a.readBody(c, a.opts.MaxRequestBytes)
}

func (a *API) readBody(c *gin.Context, limit int64) ([]byte, error) {
	if c.Request.ContentLength > limit {
		return nil, fmt.Errorf("body of %d bytes over the limit of %d: %w", c.Request.ContentLength, limit, chain.ErrTooLarge)
	}
	// http.ErrNotSupported: no connection to set it on (a recorder).
	_ = http.NewResponseController(c.Writer).SetReadDeadline(time.Now().Add(a.opts.BodyTimeout))
	body, err := io.ReadAll(io.LimitReader(c.Request.Body, limit+1))
	if errors.Is(err, os.ErrDeadlineExceeded) {
		c.Writer.Header().Set("Connection", "close")
		return nil, fmt.Errorf("the request body did not arrive within %s (%d bytes came): %w",
			a.opts.BodyTimeout, len(body), errRequestTimeout)
	}
	if err != nil {
		return nil, fmt.Errorf("read body: %v: %w", err, chain.ErrInvalidArgument)
	}
	if int64(len(body)) > limit {
		return nil, fmt.Errorf("body over the limit of %d bytes: %w", limit, chain.ErrTooLarge)
	}
	return body, nil
}

// fail writes err's answer. A not_next_block answer carries the current tip;
// a behind answer asks the client to retry after a second.
func (a *API) fail(c *gin.Context, err error) {
	err = clientClosed(c, err)
	status, code, msg := classify(err)
	a.logFailure(c, status, err)
	if status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests {
		c.Writer.Header().Set("Retry-After", "1")
	}
	a.writeError(c, status, code, msg)
}

// writeError writes an error answer. Every error carries the published tip
// and seq; for not_next_block that is the tip the producer must extend
// (docs/blocks.md), for behind the state the node has reached.
func (a *API) writeError(c *gin.Context, status int, code, msg string) {
	p := a.r.Published()
	a.writeJSON(c, status, p.Tip, p.Seq, query.AppendError(nil, p.Tip, code, msg))
}

// writeAnswer writes a read answer with its tip headers, and its ETag when
// cacheable; If-None-Match with that ETag gets 304 and no body. Headers are
// set in their canonical form, straight into the map (Header.Set would
// canonicalize "ETag" into a new string on every request).
func (a *API) writeAnswer(c *gin.Context, ans query.Answer, conditional bool) {
	h := c.Writer.Header()
	setTipHeaders(h, ans.Tip, ans.Seq)
	// One allocation holds the values of ETag and Content-Length.
	vals := new([2]string)
	if conditional && ans.ETag != "" {
		vals[0] = ans.ETag
		h["Etag"] = vals[0:1:1]
		if inm := c.GetHeader("If-None-Match"); inm != "" && etagMatches(inm, ans.ETag) {
			c.Status(http.StatusNotModified)
			c.Writer.WriteHeaderNow()
			return
		}
	}
	h["Content-Type"] = jsonContentType
	if ans.Whole {
		// A front end's body is written as it is: no tip member to
		// prepend, so no copy of it.
		vals[1] = strconv.Itoa(len(ans.Body))
		h["Content-Length"] = vals[1:2:2]
		c.Status(ans.Status)
		_, _ = c.Writer.Write(ans.Body)
		return
	}
	p := a.bufs.Get().(*[]byte)
	b := ans.AppendBody((*p)[:0])
	vals[1] = strconv.Itoa(len(b))
	h["Content-Length"] = vals[1:2:2]
	c.Status(ans.Status)
	_, _ = c.Writer.Write(b)
	if cap(b) <= 1<<20 { // keep the grown buffer; drop huge ones
		*p = b
		a.bufs.Put(p)
	}
}

func (a *API) writeJSON(c *gin.Context, status int, tip chain.Tip, seq uint64, body []byte) {
	setTipHeaders(c.Writer.Header(), tip, seq)
	writeData(c, status, jsonContentType, body)
}

// writeData writes a whole answer with its Content-Length, which a GET and
// a HEAD of the same target then carry alike, whatever the body's size.
func writeData(c *gin.Context, status int, contentType []string, body []byte) {
	h := c.Writer.Header()
	h["Content-Type"] = contentType
	h["Content-Length"] = []string{strconv.Itoa(len(body))}
	c.Status(status)
	_, _ = c.Writer.Write(body)
}

// tipHeaders are the rendered X-Tip-* and X-Commit-Seq values of one state.
// The last one is kept (lastTip) because consecutive answers almost always
// share a state; the slices are shared between responses and never modified.
type tipHeaders struct {
	tip          chain.Tip
	seq          uint64
	height, hash []string
	seqValue     []string
}

var lastTip atomic.Pointer[tipHeaders]

// jsonContentType is the Content-Type value of every JSON answer, shared
// between responses and never modified.
var jsonContentType = []string{"application/json"}

// setTipHeaders sets X-Commit-Seq, and X-Tip-Height / X-Tip-Hash unless the
// store has applied no block (docs/api.md).
func setTipHeaders(h http.Header, t chain.Tip, seq uint64) {
	th := lastTip.Load()
	if th == nil || th.tip != t || th.seq != seq {
		th = &tipHeaders{tip: t, seq: seq, seqValue: []string{strconv.FormatUint(seq, 10)}}
		if !t.Empty {
			th.height, th.hash = []string{strconv.FormatUint(t.Height, 10)}, []string{t.Hash.String()}
		}
		lastTip.Store(th)
	}
	h["X-Commit-Seq"] = th.seqValue
	if !t.Empty {
		h["X-Tip-Height"] = th.height
		h["X-Tip-Hash"] = th.hash
	}
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

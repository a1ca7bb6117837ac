// Package esplora is the Esplora-compatible front end of a Bitcoin store:
// the UTXO, address, outspend and block routes of Blockstream's Esplora
// API (electrs' REST server) under /api/, answered over the same read path
// as /v1 (query.Server: one snapshot per answer, the cache tiers, the same
// invalidation guards), in Esplora's wire format (docs/esplora.md).
//
// The package knows no HTTP library: it parses the routes' parameters and
// computes each answer's status, body, Content-Type and Cache-Control;
// package api mounts its Routes beside /v1 with the read conditions
// (min_seq, min_height, wait), the read gate, ETag and X-Commit-Seq of
// every read.
//
// Every answer follows from the store's state exactly; what the store does
// not keep (an outpoint neither live nor retained, the output count of a
// transaction, a block below the store's first) is a 404 saying so, never
// an approximation: unlike Esplora, which answers {"spent":false} for an
// outpoint it has never seen, this front end cannot tell a pruned spent
// output from an unknown one, and answers neither as unspent.
package esplora

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/query"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

// Esplora's Cache-Control lifetimes (electrs' TTL_SHORT and TTL_LONG): an
// answer that a block can change lives 10 s; one about a block ConfFinal
// or more blocks below the tip, which no likely reorganisation reaches,
// lives five years.
const (
	MaxAgeShort = 10
	MaxAgeLong  = 157_784_630
	ConfFinal   = 10
)

// Content types of the answers: JSON objects and arrays, and text/plain
// for scalars (a height, a hash) and every error, as Esplora sends them.
const (
	ContentJSON = "application/json"
	ContentText = "text/plain"
)

// Reader is the read side the front end answers from (query.Server).
type Reader interface {
	FrontRead(ctx context.Context, key query.Key, guard query.Guard, fn query.Compute) (query.Answer, error)
	FrontView(fn query.Compute) (query.Answer, error)
	Published() query.Published
	Indexes(d disk.Dimension) bool
}

// Options configure the front end.
type Options struct {
	// UtxosLimit is the most outputs an unpaged UTXO listing answers
	// (--esplora-utxos-limit): an address or script hash with more answers
	// 400 text/plain, "Too many unspent transaction outputs (>N)…", as
	// Esplora's --utxos-limit does. 0: no limit. The paged variant
	// (?limit=) is never refused.
	UtxosLimit int
	// Mempool gives the pending transactions' part of the answers. Nil:
	// none (NoMempool), which is exact for a service that keeps no pending
	// transactions.
	Mempool Mempool
}

// EnsureDefaults returns o with every unset field set to its default.
func (o Options) EnsureDefaults() Options {
	if o.Mempool == nil {
		o.Mempool = NoMempool{}
	}
	return o
}

// Validate reports a setting that cannot work.
func (o Options) Validate() error {
	if o.UtxosLimit < 0 {
		return fmt.Errorf("esplora: utxos limit %d is negative", o.UtxosLimit)
	}
	return nil
}

// Frontend answers the Esplora routes. Safe for concurrent use.
type Frontend struct {
	r    Reader
	opts Options
}

// New returns the front end over r.
func New(r Reader, opts Options) (*Frontend, error) {
	opts = opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	return &Frontend{r: r, opts: opts}, nil
}

// Request is one request to a route: its path parameters and its query
// parameters (the route's own; package api has taken the read conditions).
type Request struct {
	Param func(name string) string
	Query func(name string) (string, bool)
}

// Reply is a route's answer: Answer's Body is the whole body (no /v1 tip
// prefix), with Answer's Status, Tip, Seq and ETag; ContentType and MaxAge
// (Cache-Control: public, max-age=MaxAge) are Esplora's for it. MaxAge 0:
// no Cache-Control (an error). NextCursor, when set, is the paged
// listing's X-Next-Cursor.
type Reply struct {
	Answer      query.Answer
	ContentType string
	MaxAge      int
	NextCursor  string
}

// Route is one route of the front end, a Gin-style path pattern under
// /api. Params are the query parameters it takes.
type Route struct {
	Path   string
	Params []string
	Serve  func(f *Frontend, ctx context.Context, r Request) (Reply, error)
}

// Routes lists the front end's routes.
func Routes() []Route {
	return []Route{
		{Path: "/api/address/:address/utxo", Params: pageParams, Serve: (*Frontend).addressUtxo},
		{Path: "/api/scripthash/:hash/utxo", Params: pageParams, Serve: (*Frontend).scripthashUtxo},
		{Path: "/api/address/:address", Serve: (*Frontend).addressStats},
		{Path: "/api/scripthash/:hash", Serve: (*Frontend).scripthashStats},
		{Path: "/api/tx/:txid/outspend/:vout", Serve: (*Frontend).outspend},
		{Path: "/api/tx/:txid/outspends", Serve: (*Frontend).outspends},
		{Path: "/api/blocks/tip/height", Serve: (*Frontend).tipHeight},
		{Path: "/api/blocks/tip/hash", Serve: (*Frontend).tipHash},
		{Path: "/api/block-height/:height", Serve: (*Frontend).blockHeight},
		{Path: "/api/block/:hash/status", Serve: (*Frontend).blockStatus},
	}
}

var pageParams = []string{"limit", "cursor"}

// textReply is a text/plain answer of the published state: an error
// (status >= 400, no Cache-Control) or a scalar.
func textReply(p query.Published, status int, msg string, maxAge int) Reply {
	return Reply{
		Answer:      query.Answer{Status: status, Tip: p.Tip, Seq: p.Seq, Body: []byte(msg), Tier: "memory"},
		ContentType: ContentText,
		MaxAge:      maxAge,
	}
}

// fail is the text/plain error reply status msg.
func (f *Frontend) fail(status int, msg string) Reply {
	return textReply(f.r.Published(), status, msg, 0)
}

// maxAgeByDepth is Esplora's lifetime of an answer about the block at
// height, given the tip: long once it is ConfFinal or more blocks deep.
func maxAgeByDepth(tip chain.Tip, height uint64) int {
	if !tip.Empty && tip.Height >= height && tip.Height-height >= ConfFinal {
		return MaxAgeLong
	}
	return MaxAgeShort
}

// reply turns a read's answer into a Reply: JSON (or text for a scalar)
// with maxAge when 200, text/plain with no Cache-Control otherwise.
func reply(ans query.Answer, contentType string, maxAge int) Reply {
	if ans.Status != 200 {
		return Reply{Answer: ans, ContentType: ContentText}
	}
	return Reply{Answer: ans, ContentType: contentType, MaxAge: maxAge}
}

// parseTxid reads a txid in display order, as Esplora does ("Invalid hex
// string" otherwise).
func parseTxid(s string) (chain.Hash, bool) {
	if len(s) != 2*chain.HashSize {
		return chain.Hash{}, false
	}
	h, err := chain.ParseHash(s)
	return h, err == nil
}

// parseUint reads a decimal number of at most bits bits, no sign, no
// leading '+', as Rust's str::parse of an unsigned integer does.
func parseUint(s string, bits int) (uint64, bool) {
	if s == "" || s[0] == '+' || s[0] == '-' {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, bits)
	return n, err == nil
}

// errStatus is a compute's answer with a status and a text body.
func errStatus(body []byte, status int, msg string) ([]byte, error) {
	return append(body[:0], msg...), query.Status(status)
}

var errNoTime = errors.New("esplora: a block time is not kept")

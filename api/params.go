package api

import (
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/query"
)

// Query parameters every read accepts (read-your-writes, docs/consistency.md).
const (
	paramMinSeq    = "min_seq"
	paramMinHeight = "min_height"
	paramWait      = "wait"
)

// The filters of a listing (docs/api.md, "Filters").
const (
	paramFrozen = "frozen" // include (default) or exclude
	paramMature = "mature" // all (default) or only
	paramLeased = "leased" // exclude or include; absent: leases are not looked at
	// paramPending is exclude (default) or include: unconfirmed outputs and
	// pending spends (pending.go).
	paramPending = "pending"
)

// listFilter reads a listing's filters from q; on a bad value it answers
// 400 itself and reports false.
func (a *API) listFilter(c *gin.Context, q *queryParams) (query.Filter, bool) {
	var f query.Filter
	if v, given := q.lookup(paramFrozen); given {
		switch v {
		case "include":
		case "exclude":
			f.ExcludeFrozen = true
		default:
			a.fail(c, fmt.Errorf("frozen %q: must be include or exclude: %w", v, chain.ErrInvalidArgument))
			return f, false
		}
	}
	if v, given := q.lookup(paramMature); given {
		switch v {
		case "all":
		case "only":
			f.MatureOnly = true
		default:
			a.fail(c, fmt.Errorf("mature %q: must be all or only: %w", v, chain.ErrInvalidArgument))
			return f, false
		}
	}
	var ok bool
	if f.Leased, ok = a.leaseMode(c, q); !ok {
		return f, false
	}
	if f.Pending, ok = a.pendingMode(c, q); !ok {
		return f, false
	}
	return f, true
}

// pendingMode reads pending=exclude|include from q (include: true); on a
// bad value it answers 400 itself and reports false.
func (a *API) pendingMode(c *gin.Context, q *queryParams) (bool, bool) {
	v, given := q.lookup(paramPending)
	if !given {
		return false, true
	}
	switch v {
	case "exclude":
		return false, true
	case "include":
		return true, true
	}
	a.fail(c, fmt.Errorf("pending %q: must be include or exclude: %w", v, chain.ErrInvalidArgument))
	return false, false
}

// readParamNames are the parameters of every read endpoint; pageParamNames
// those of an address's page.
var (
	readParamNames    = []string{paramMinSeq, paramMinHeight, paramWait}
	balanceParamNames = []string{paramPending, paramMinSeq, paramMinHeight, paramWait}
	utxoParamNames    = []string{paramLeased, paramPending, paramMinSeq, paramMinHeight, paramWait}
	pageParamNames    = []string{"limit", "order", "cursor", paramFrozen, paramMature, paramLeased, paramPending, paramMinSeq, paramMinHeight, paramWait}
)

// maxQueryParams bounds the names an endpoint takes (pageParamNames has the
// most): parseQuery refuses any other, and each only once.
const maxQueryParams = 10

// queryParams is a strictly parsed query string: each parameter once, every
// pair decodable, none unknown. A fixed array, not a map: a read parses one
// on every request.
type queryParams struct {
	n      int
	names  [maxQueryParams]string
	values [maxQueryParams]string
}

// lookup returns the value of name and whether it was given.
func (q *queryParams) lookup(name string) (string, bool) {
	for i := range q.n {
		if q.names[i] == name {
			return q.values[i], true
		}
	}
	return "", false
}

// parseQuery parses raw strictly against the names allowed. Go's own parser
// drops the pairs it cannot decode (`?limit=%zz` would silently mean the
// default); here an undecodable pair, an unknown name and a repeated one are
// each an error matching chain.ErrInvalidArgument. Empty pairs (`a=1&&b=2`)
// are ignored.
func parseQuery(raw string, allowed ...string) (queryParams, error) {
	if len(allowed) > maxQueryParams {
		panic(fmt.Sprintf("api: %d query parameters, more than maxQueryParams", len(allowed)))
	}
	var q queryParams
	for pair := range strings.SplitSeq(raw, "&") {
		if pair == "" {
			continue
		}
		k, v, _ := strings.Cut(pair, "=")
		name, err := url.QueryUnescape(k)
		if err != nil {
			return queryParams{}, fmt.Errorf("query parameter %q is not decodable: %w", k, chain.ErrInvalidArgument)
		}
		value, err := url.QueryUnescape(v)
		if err != nil {
			return queryParams{}, fmt.Errorf("query parameter %s: value %q is not decodable: %w", name, v, chain.ErrInvalidArgument)
		}
		known := false
		for _, a := range allowed {
			if a == name {
				known = true
				break
			}
		}
		if !known {
			return queryParams{}, fmt.Errorf("unknown query parameter %q (this endpoint takes %s): %w",
				name, strings.Join(allowed, ", "), chain.ErrInvalidArgument)
		}
		if _, twice := q.lookup(name); twice {
			return queryParams{}, fmt.Errorf("query parameter %s is given twice: %w", name, chain.ErrInvalidArgument)
		}
		q.names[q.n], q.values[q.n] = name, value
		q.n++
	}
	return q, nil
}

// readConditions are a read's min_seq, min_height and wait.
type readConditions struct {
	minSeq, minHeight uint64
	wait              time.Duration // how long to wait for them, <= Options.MaxWait
	// waitGiven: the request named its wait; only then does a read with
	// If-None-Match long-poll (serveRead).
	waitGiven bool
}

// conditions parses the read-your-writes parameters of q.
func (a *API) conditions(q *queryParams) (readConditions, error) {
	rc := readConditions{wait: a.opts.MaxWait}
	var err error
	if s, ok := q.lookup(paramMinSeq); ok {
		if rc.minSeq, err = parseDecimalUint64(s); err != nil {
			return rc, fmt.Errorf("min_seq %q is not a uint64: %w", s, chain.ErrInvalidArgument)
		}
	}
	if s, ok := q.lookup(paramMinHeight); ok {
		if rc.minHeight, err = parseDecimalUint64(s); err != nil {
			return rc, fmt.Errorf("min_height %q is not a uint64: %w", s, chain.ErrInvalidArgument)
		}
	}
	if s, ok := q.lookup(paramWait); ok {
		if rc.wait, err = parseWait(s, rc.wait); err != nil {
			return rc, err
		}
		rc.waitGiven = true
	}
	return rc, nil
}

// parseWait parses a wait parameter: decimal seconds >= 0 (digits and a
// point, no sign or exponent), capped at limit. The error says what is
// accepted: a client that sent wait=1e9 learns the format and the cap.
func parseWait(s string, limit time.Duration) (time.Duration, error) {
	secs, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(secs) || math.IsInf(secs, 0) || secs < 0 || strings.TrimLeft(s, "0123456789.") != "" {
		return 0, fmt.Errorf("wait %q: want seconds as plain decimal digits with an optional fraction "+
			"(such as 0, 0.25 or 10; no sign or exponent); waits above %s are cut to %s: %w",
			clipHeader(s), limit, limit, chain.ErrInvalidArgument)
	}
	if secs >= limit.Seconds() {
		return limit, nil
	}
	return time.Duration(secs * float64(time.Second)), nil
}

// parseDecimalUint64 parses a uint64 in plain decimal (no sign, no leading
// zero).
func parseDecimalUint64(s string) (uint64, error) {
	if s == "" || (len(s) > 1 && s[0] == '0') || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("not a plain decimal integer")
	}
	return strconv.ParseUint(s, 10, 64)
}

// readQuery parses the query string of a read endpoint, which takes the
// parameters allowed (readParamNames and its own), answering 400 itself on
// an error.
func (a *API) readQuery(c *gin.Context, allowed []string) (queryParams, readConditions, bool) {
	q, err := parseQuery(c.Request.URL.RawQuery, allowed...)
	if err != nil {
		a.fail(c, err)
		return queryParams{}, readConditions{}, false
	}
	rc, err := a.conditions(&q)
	if err != nil {
		a.fail(c, err)
		return queryParams{}, readConditions{}, false
	}
	return q, rc, true
}

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
)

// Query parameters every read accepts (read-your-writes, docs/consistency.md).
const (
	paramMinSeq    = "min_seq"
	paramMinHeight = "min_height"
	paramWait      = "wait"
)

// readParamNames are the parameters of every read endpoint.
var readParamNames = []string{paramMinSeq, paramMinHeight, paramWait}

// queryParams is a strictly parsed query string: each parameter once, every
// pair decodable, none unknown.
type queryParams map[string]string

// parseQuery parses raw strictly against the names allowed. Go's own parser
// drops the pairs it cannot decode (`?limit=%zz` would silently mean the
// default); here an undecodable pair, an unknown name and a repeated one are
// each an error matching chain.ErrInvalidArgument. Empty pairs (`a=1&&b=2`)
// are ignored.
func parseQuery(raw string, allowed ...string) (queryParams, error) {
	q := make(queryParams)
	for pair := range strings.SplitSeq(raw, "&") {
		if pair == "" {
			continue
		}
		k, v, _ := strings.Cut(pair, "=")
		name, err := url.QueryUnescape(k)
		if err != nil {
			return nil, fmt.Errorf("query parameter %q is not decodable: %w", k, chain.ErrInvalidArgument)
		}
		value, err := url.QueryUnescape(v)
		if err != nil {
			return nil, fmt.Errorf("query parameter %s: value %q is not decodable: %w", name, v, chain.ErrInvalidArgument)
		}
		known := false
		for _, a := range allowed {
			if a == name {
				known = true
				break
			}
		}
		if !known {
			return nil, fmt.Errorf("unknown query parameter %q (this endpoint takes %s): %w",
				name, strings.Join(allowed, ", "), chain.ErrInvalidArgument)
		}
		if _, twice := q[name]; twice {
			return nil, fmt.Errorf("query parameter %s is given twice: %w", name, chain.ErrInvalidArgument)
		}
		q[name] = value
	}
	return q, nil
}

// readConditions are a read's min_seq, min_height and wait.
type readConditions struct {
	minSeq, minHeight uint64
	wait              time.Duration // how long to wait for them, <= Options.MaxWait
}

// conditions parses the read-your-writes parameters of q.
func (a *API) conditions(q queryParams) (readConditions, error) {
	rc := readConditions{wait: a.opts.MaxWait}
	var err error
	if s, ok := q[paramMinSeq]; ok {
		if rc.minSeq, err = parseDecimalUint64(s); err != nil {
			return rc, fmt.Errorf("min_seq %q is not a uint64: %w", s, chain.ErrInvalidArgument)
		}
	}
	if s, ok := q[paramMinHeight]; ok {
		if rc.minHeight, err = parseDecimalUint64(s); err != nil {
			return rc, fmt.Errorf("min_height %q is not a uint64: %w", s, chain.ErrInvalidArgument)
		}
	}
	if s, ok := q[paramWait]; ok {
		if rc.wait, err = parseWait(s, rc.wait); err != nil {
			return rc, err
		}
	}
	return rc, nil
}

// parseWait parses a wait parameter: decimal seconds >= 0 (digits and a
// point, no sign or exponent), capped at limit.
func parseWait(s string, limit time.Duration) (time.Duration, error) {
	secs, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(secs) || math.IsInf(secs, 0) || secs < 0 || strings.TrimLeft(s, "0123456789.") != "" {
		return 0, fmt.Errorf("wait %q is not a number of seconds >= 0: %w", s, chain.ErrInvalidArgument)
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

// readQuery parses the query string of a read endpoint that takes the
// read-your-writes parameters and extra, answering 400 itself on an error.
func (a *API) readQuery(c *gin.Context, extra ...string) (queryParams, readConditions, bool) {
	q, err := parseQuery(c.Request.URL.RawQuery, append(extra, readParamNames...)...)
	if err != nil {
		a.fail(c, err)
		return nil, readConditions{}, false
	}
	rc, err := a.conditions(q)
	if err != nil {
		a.fail(c, err)
		return nil, readConditions{}, false
	}
	return q, rc, true
}

package query

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

// Filter selects the outputs of a listing (docs/api.md, "Filters"). The
// zero Filter keeps every output: the listing of AddressUtxos.
type Filter struct {
	// ExcludeFrozen skips frozen outputs (frozen=exclude).
	ExcludeFrozen bool
	// MatureOnly keeps the outputs the next block may spend: those with no
	// spendable_at_height (not coinbase) or one at most the tip height + 1,
	// the tip of the answer's own snapshot (mature=only).
	MatureOnly bool
	// Leased is leased=exclude or leased=include (lease.go).
	Leased LeaseMode
	// Pending adds the unconfirmed outputs and marks the confirmed outputs
	// pending transactions spend (pending=include; pending.go).
	Pending bool
}

// FilterScanFactor bounds the work of a filtered page: it reads at most
// FilterScanFactor × limit index entries (and at least FilterScanMin), so
// a page of an address whose outputs the filter mostly skips may hold
// fewer than limit outputs, even none, with a next_cursor to go on from.
const (
	FilterScanFactor = 10
	FilterScanMin    = 1000
)

// tag is the filter's part of cache keys and ETags; "" for the zero Filter.
func (f Filter) tag() string {
	tag := ""
	if f.ExcludeFrozen {
		tag += "f"
	}
	if f.MatureOnly {
		tag += "m"
	}
	switch f.Leased {
	case LeasedExclude:
		tag += "x"
	case LeasedInclude:
		tag += "l"
	}
	if f.Pending {
		tag += "p"
	}
	return tag
}

// uncached reports whether f's answers depend on more than the store's
// rows at their seq (the tip height, the clock), so they are never cached.
func (f Filter) uncached() bool { return f.MatureOnly || f.Leased != LeasedAny || f.Pending }

// keep returns the ListQuery.Keep of f over v at the clock now (nil when f
// keeps every output). A lease read that fails sets *errp and drops the
// output; the caller returns *errp.
func (f Filter) keep(v *disk.View, now uint64, errp *error) func(r *disk.UtxoRef) bool {
	if !f.ExcludeFrozen && !f.MatureOnly && f.Leased != LeasedExclude {
		return nil
	}
	tip := v.Tip()
	next := uint64(0) // the height of the next block
	if !tip.Empty {
		next = tip.Height + 1
	}
	return func(r *disk.UtxoRef) bool {
		if f.ExcludeFrozen && r.Frozen {
			return false
		}
		if f.MatureOnly && r.Coinbase() && (tip.Empty || r.Height+chain.CoinbaseMaturity > next) {
			return false
		}
		if f.Leased == LeasedExclude {
			until, err := leasedUntil(v, r.OutPoint, now)
			if err != nil {
				*errp = err
				return false
			}
			if until != 0 {
				return false
			}
		}
		return true
	}
}

// AddressUtxosFiltered answers a page of an address's live outputs that f
// keeps, paged by position as AddressUtxos is (a cursor of either resumes
// the other); the zero Filter is AddressUtxos itself.
//
// How its answers are cached: an answer with frozen=exclude alone depends on
// the address's outputs and their freezes, which every change that touches
// them invalidates (a freeze invalidates the address of each output it
// names), so it is cached as a page is, under its own key. An answer with
// mature=only depends on the tip height as well, which every block moves:
// it is read from one snapshot, never cached, so it can never be served at
// a tip it was not computed for. Either carries an ETag of its body and
// its filter: an answer whose content changes (an output that matured, a
// freeze) gets a new one, and a filtered and an unfiltered page with the
// same items do not share one.
func (s *Server) AddressUtxosFiltered(ctx context.Context, address string, desc bool, limit int, cursor string, f Filter) (Answer, error) {
	if f == (Filter{}) {
		return s.AddressUtxos(ctx, address, desc, limit, cursor)
	}
	if err := checkAddress(address); err != nil {
		return Answer{}, err
	}
	if limit < 1 || limit > MaxPageLimit {
		return Answer{}, fmt.Errorf("limit %d outside 1..%d: %w", limit, MaxPageLimit, chain.ErrInvalidArgument)
	}
	var after *chain.Position
	if cursor != "" {
		p, err := s.cursors.decode(cursor, address, desc)
		if err != nil {
			return Answer{}, err
		}
		after = &p
	}
	page := func(v *disk.View, body []byte) ([]byte, error) {
		now := s.now()
		var keepErr error
		q := disk.ListQuery{Dim: disk.DimAddress, Value: []byte(address),
			After: after, Desc: desc, Limit: limit, Keep: f.keep(v, now, &keepErr), MaxScan: max(FilterScanFactor*limit, FilterScanMin)}
		if q.Keep == nil {
			q.MaxScan = 0
		}
		if f.Pending {
			body = append(body, `"address":`...)
			body = appendString(body, address)
			body = append(body, ',')
			body, err := s.appendPendingListing(v, body, q, after, address, f.item(v, now))
			return body, errors.Join(err, keepErr)
		}
		body, err := s.appendPage(v, body, address, q, f.item(v, now))
		return body, errors.Join(err, keepErr)
	}
	tag := f.tag()
	if !f.uncached() {
		ans, err := s.read(ctx, filteredPageKey(tag, address, desc, limit, cursor), addressGuard(address), page)
		if err == nil && ans.ETag != "" {
			ans.ETag = filteredETag(tag, ans.ETag)
		}
		return ans, err
	}
	return s.readUncached(tag, page)
}

// readUncached answers page, a filtered listing that depends on the tip
// height (mature=only) or the clock (leased=…), from one snapshot, outside the cache tiers, with the
// ETag of its body and filter tag.
func (s *Server) readUncached(tag string, page func(v *disk.View, body []byte) ([]byte, error)) (Answer, error) {
	ans, err := s.readOnce(page)
	if err == nil {
		ans.ETag = filteredETag(tag, ans.ETag)
	}
	return ans, err
}

// filteredPageKey is the cache key of a filtered page: its own keyspace
// ("P|", where an unfiltered page's is "p|"), the filter's tag before the
// address (which may hold any character, so it comes last).
func filteredPageKey(tag, address string, desc bool, limit int, cursor string) string {
	order := "a"
	if desc {
		order = "d"
	}
	return "P|" + tag + "|" + order + "|" + strconv.Itoa(limit) + "|" + cursor + "|" + address
}

// filteredETag is the ETag of a filtered answer whose body has ETag etag
// (etagOf): a hash of the filter's tag and that ETag, which changes with
// either, and costs a short hash on a cache hit rather than one of the body.
func filteredETag(tag, etag string) string {
	return etagOf([]byte(tag + "|" + etag))
}

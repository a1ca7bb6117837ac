package query

import (
	"context"
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
	switch {
	case f.ExcludeFrozen && f.MatureOnly:
		return "fm"
	case f.ExcludeFrozen:
		return "f"
	case f.MatureOnly:
		return "m"
	}
	return ""
}

// keep returns the ListQuery.Keep of f at tip (nil for the zero Filter).
func (f Filter) keep(tip chain.Tip) func(r *disk.UtxoRef) bool {
	if f == (Filter{}) {
		return nil
	}
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
		return s.appendPage(v, body, address, disk.ListQuery{Dim: disk.DimAddress, Value: []byte(address),
			After: after, Desc: desc, Limit: limit, Keep: f.keep(v.Tip()), MaxScan: max(FilterScanFactor*limit, FilterScanMin)})
	}
	tag := f.tag()
	if !f.MatureOnly {
		ans, err := s.read(ctx, filteredPageKey(tag, address, desc, limit, cursor), addressGuard(address), page)
		if err == nil && ans.ETag != "" {
			ans.ETag = filteredETag(tag, ans.ETag)
		}
		return ans, err
	}
	return s.readUncached(tag, page)
}

// readUncached answers page, a filtered listing that depends on the tip
// height (mature=only), from one snapshot, outside the cache tiers, with the
// ETag of its body and filter tag.
func (s *Server) readUncached(tag string, page func(v *disk.View, body []byte) ([]byte, error)) (Answer, error) {
	v, err := s.store.PublishedView()
	if err != nil {
		return Answer{}, err
	}
	defer v.Close()
	s.m.diskRead()
	buf := getAnswerBuf()
	body, err := page(v, *buf)
	*buf = body
	if err != nil {
		putAnswerBuf(buf)
		return Answer{}, err
	}
	return Answer{Status: 200, Tip: v.Tip(), Seq: v.State().Seq, ETag: filteredETag(tag, etagOf(body)), Body: body, Tier: "disk", buf: buf}, nil
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

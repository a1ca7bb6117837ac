package query

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/changeset"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

// ErrNotIndexed is returned by the index reads (IndexUtxos, IndexBalance)
// for a dimension the store does not keep: a store fixes its indexes when it
// is created (disk.Options.Dimensions).
var ErrNotIndexed = errors.New("index not kept")

// IndexKey names one value of an index dimension other than the address (a
// payment or stake credential, an asset policy, an asset) for a read.
//
// # Cache keys and guards
//
// The answers of a value are cached under the guard "i|" + hex of its disk
// key (disk.MakeDimKey: a hash of the dimension and the value), which is
// what a change set names (changeset.Set.IndexKeys): Changed raises exactly
// the guards of the values a change touched, in every owned tier, before the
// change is published, as it does for addresses. Two strings that name one
// value (a stake credential as "stake1…" or "stake_vkh1…") share the guard;
// their answers echo the string the reader sent, so each has its own cache
// key, both invalidated together.
type IndexKey struct {
	Dim disk.Dimension
	// Value is the dimension's value as the store indexes it (for a
	// credential, cardano/credential's index value).
	Value []byte
	// Field and Label are the answer's echo of the value: the JSON member
	// Field ("payment_credential", "stake_credential", "policy", "asset")
	// with the string Label as the reader named it.
	Field, Label string
}

// guard returns the value's guard.
func (k IndexKey) guard() string {
	return indexGuard(disk.MakeDimKey(k.Dim, k.Value))
}

func indexGuard(dk disk.DimKey) string {
	var b [2 + 2*len(disk.DimKey{})]byte
	g := append(b[:0], "i|"...)
	return string(hex.AppendEncode(g, dk[:]))
}

// cursorSubject is what a cursor of the value's listing is bound to: 0xff
// (never the first byte of an address, which is valid UTF-8), the dimension
// and the value, so a cursor of one listing is refused by any other.
func (k IndexKey) cursorSubject() string {
	return "\xff" + string([]byte{byte(k.Dim)}) + string(k.Value)
}

// checkIndexKey refuses a key the store cannot answer: an unknown or address
// dimension (chain.ErrInvalidArgument), or one the store does not keep
// (ErrNotIndexed).
func (s *Server) checkIndexKey(k IndexKey) error {
	switch {
	case k.Dim == disk.DimAddress:
		return fmt.Errorf("the address index is read by address: %w", chain.ErrInvalidArgument)
	case k.Field == "" || len(k.Label) > MaxAddressLen:
		return fmt.Errorf("index value of %d bytes: %w", len(k.Label), chain.ErrInvalidArgument)
	case !s.store.Indexes(k.Dim):
		return fmt.Errorf("this store does not keep the %s index (a store's indexes are chosen when it is created; adding one needs a re-import): %w", k.Dim, ErrNotIndexed)
	}
	return nil
}

// IndexUtxos answers a page of the live outputs listed under one value of an
// index dimension, in chain order (reverse when desc), exactly as
// AddressUtxos answers an address's: keyset cursors bound to the value and
// order, one snapshot per answer, through the cache tiers. An invalid
// cursor or limit is an error matching chain.ErrInvalidArgument; a dimension
// the store does not keep, ErrNotIndexed.
func (s *Server) IndexUtxos(ctx context.Context, k IndexKey, desc bool, limit int, cursor string) (Answer, error) {
	return s.IndexUtxosFiltered(ctx, k, desc, limit, cursor, Filter{})
}

// IndexUtxosFiltered is IndexUtxos with the outputs that f keeps, paged
// and cached as AddressUtxosFiltered pages and caches an address's: a
// frozen=exclude page under its own key, invalidated by the value's guard
// (a freeze invalidates every index value of the outputs it names); a
// mature=only page from one snapshot, never cached.
func (s *Server) IndexUtxosFiltered(ctx context.Context, k IndexKey, desc bool, limit int, cursor string, f Filter) (Answer, error) {
	if err := s.checkIndexKey(k); err != nil {
		return Answer{}, err
	}
	if limit < 1 || limit > MaxPageLimit {
		return Answer{}, fmt.Errorf("limit %d outside 1..%d: %w", limit, MaxPageLimit, chain.ErrInvalidArgument)
	}
	subject := k.cursorSubject()
	var after *chain.Position
	if cursor != "" {
		p, err := s.cursors.decode(cursor, subject, desc)
		if err != nil {
			return Answer{}, err
		}
		after = &p
	}
	page := func(v *disk.View, body []byte) ([]byte, error) {
		body = append(body, '"')
		body = append(body, k.Field...)
		body = append(body, `":`...)
		body = appendString(body, k.Label)
		q := disk.ListQuery{Dim: k.Dim, Value: k.Value, After: after, Desc: desc, Limit: limit}
		now := s.now()
		var keepErr error
		if f != (Filter{}) {
			q.Keep, q.MaxScan = f.keep(v, now, &keepErr), max(FilterScanFactor*limit, FilterScanMin)
		}
		item := f.item(v, now)
		if f.Pending {
			body = append(body, ',')
			body, err := s.appendPendingListing(v, body, q, after, subject, item)
			return body, errors.Join(err, keepErr)
		}
		body = append(body, `,"utxos":[`...)
		n := 0
		next, more, err := v.ListFunc(q, func(r *disk.UtxoRef) error {
			if n > 0 {
				body = append(body, ',')
			}
			var err error
			body, err = item(body, r)
			n++
			return err
		})
		if err = errors.Join(err, keepErr); err != nil {
			return body, err
		}
		body = append(body, `],"next_cursor":`...)
		if !more {
			body = append(body, "null"...)
		} else {
			body = append(body, '"')
			body = s.cursors.append(body, subject, desc, next)
			body = append(body, '"')
		}
		return append(body, '}'), nil
	}
	if f == (Filter{}) {
		return s.read(ctx, indexPageKey(k, desc, limit, cursor), k.guard(), page)
	}
	tag := f.tag()
	if !f.uncached() {
		ans, err := s.read(ctx, "iP|"+tag+"|"+indexPageKey(k, desc, limit, cursor), k.guard(), page)
		if err == nil && ans.ETag != "" {
			ans.ETag = filteredETag(tag, ans.ETag)
		}
		return ans, err
	}
	return s.readUncached(tag, page)
}

// indexPageKey is the cache key of a page of an index value: distinct from
// every address page key ("p|…") and balance key ("b|…").
func indexPageKey(k IndexKey, desc bool, limit int, cursor string) string {
	order := "a"
	if desc {
		order = "d"
	}
	return "ip|" + strconv.Itoa(int(k.Dim)) + "|" + order + "|" + strconv.Itoa(limit) + "|" + cursor + "|" + k.Label
}

// IndexBalance answers the balance of the outputs listed under one value of
// an index dimension: their count and the sum of their values, and the sums
// of their assets (for a policy, that policy's assets only; for an asset,
// that asset only: the store's balance rows, see disk's appendDimKeys). A
// dimension the store does not keep is ErrNotIndexed.
func (s *Server) IndexBalance(ctx context.Context, k IndexKey) (Answer, error) {
	if err := s.checkIndexKey(k); err != nil {
		return Answer{}, err
	}
	key := "ib|" + strconv.Itoa(int(k.Dim)) + "|" + k.Label
	return s.read(ctx, key, k.guard(), func(v *disk.View, body []byte) ([]byte, error) {
		b, err := v.Balance(k.Dim, k.Value)
		if err != nil {
			return body, err
		}
		body = append(body, '"')
		body = append(body, k.Field...)
		body = append(body, `":`...)
		body = appendString(body, k.Label)
		body = append(body, ',')
		return appendBalanceFields(body, &b), nil
	})
}

// indexGuards appends the guards of the index values cs touched.
func indexGuards(guards []string, cs *changeset.Set) []string {
	for _, k := range cs.IndexKeys {
		guards = append(guards, indexGuard(k))
	}
	return guards
}

// The index dimensions the API serves, as query names them (the api
// package reads no store type).
const (
	DimAddress           = disk.DimAddress
	DimPaymentCredential = disk.DimPaymentCredential
	DimStakeCredential   = disk.DimStakeCredential
	DimAssetPolicy       = disk.DimAssetPolicy
	DimAsset             = disk.DimAsset
	DimScriptHash        = disk.DimScriptHash
)

// AssetValue returns the asset index's value of (policy, name).
func AssetValue(policy, name []byte) []byte { return disk.AppendAssetValue(nil, policy, name) }

// Package blockfrost is a Blockfrost-compatible front end over the store
// (docs/blockfrost.md): the UTXO, address, account, transaction-output,
// latest-block, script and datum reads that Blockfrost's own clients
// (blockfrost-js, Lucid's and Mesh's Blockfrost providers) make, answered in
// Blockfrost's shapes, errors included, from the same read path as the
// contract's (query.Server: one published snapshot per answer, the cache
// tiers, min_seq, read replicas).
//
// It knows no HTTP framework: each Route is a function from a request's
// path and query parameters to a query.Answer; the api package mounts the
// routes under /api/v0 and writes the answers and errors. Every answer
// follows from the store's state exactly; what the store does not keep
// (the inputs of a transaction, a datum that no live output carries, a
// pruned output) is refused with a message that says so, never
// approximated.
//
// # Offset pages over a keyset store
//
// Blockfrost pages by offset (page, count); the store lists a value's
// outputs in chain order by index key. Page N is read by stepping over the
// (N-1)·count index keys before it by key alone, values unread
// (disk.ListQuery.Skip), then reading count entries: its cost grows with
// the keys skipped, never with the values. Each page is one snapshot; two
// pages are two snapshots, so a block between them shifts later pages, as
// Blockfrost's do.
package blockfrost

import (
	"context"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/utxo-cache/utxo-cache/cardano/credential"
	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/query"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

// Prefix is where the front end is mounted, Blockfrost's base path.
const Prefix = "/api/v0"

// ErrForbidden is a request whose project_id header does not match the
// configured token (Options.ProjectID): 403, as Blockfrost answers an
// invalid project.
var ErrForbidden = errors.New("blockfrost: missing or wrong project_id")

// Reader is the read side the front end serves (query.Server).
type Reader interface {
	FrontRead(ctx context.Context, key query.Key, guard query.Guard, fn query.Compute) (query.Answer, error)
	FrontView(fn query.Compute) (query.Answer, error)
	Indexes(d disk.Dimension) bool
}

// Options configure the front end.
type Options struct {
	// ProjectID, when set, is the token every request must carry in its
	// project_id header (Blockfrost's); a request without it, or with
	// another, answers 403. Empty: the header is accepted and not checked.
	ProjectID string
}

// FrontEnd serves the Blockfrost routes. Safe for concurrent use.
type FrontEnd struct {
	r    Reader
	opts Options
}

// New returns the front end over r.
func New(r Reader, opts Options) *FrontEnd { return &FrontEnd{r: r, opts: opts} }

// Request is what a route reads of a request: its path parameters (by
// their name in Route.Path) and its query parameters (those of
// Route.Params; the api package refuses any other).
type Request struct {
	Param func(name string) string
	Query Lookup
}

// Route is one endpoint of the front end.
type Route struct {
	// Path below Prefix, with ":name" path parameters.
	Path string
	// Params are the query parameters the route takes, beyond the
	// read-your-writes ones every read takes.
	Params []string
	// Serve answers a request.
	Serve func(ctx context.Context, req Request) (query.Answer, error)
}

// ChecksProjectID reports whether a project_id is configured (and so
// checked by CheckProjectID): without one the header need not be read.
func (f *FrontEnd) ChecksProjectID() bool { return f.opts.ProjectID != "" }

// CheckProjectID checks a request's project_id header against
// Options.ProjectID: ErrForbidden when one is configured and id differs.
func (f *FrontEnd) CheckProjectID(id string) error {
	if f.opts.ProjectID == "" {
		return nil
	}
	if subtle.ConstantTimeCompare([]byte(id), []byte(f.opts.ProjectID)) != 1 {
		return fmt.Errorf("%w: this service's Blockfrost front end takes requests with its configured project_id header", ErrForbidden)
	}
	return nil
}

// Routes lists the endpoints.
func (f *FrontEnd) Routes() []Route {
	return []Route{
		{Path: "/addresses/:address", Serve: f.address},
		{Path: "/addresses/:address/utxos", Params: PageParams, Serve: f.addressUtxos},
		{Path: "/addresses/:address/utxos/:unit", Params: PageParams, Serve: f.addressUtxos},
		{Path: "/accounts/:stake_address/utxos", Params: PageParams, Serve: f.accountUtxos},
		{Path: "/txs/:hash/utxos", Serve: f.txUtxos},
		{Path: "/blocks/latest", Serve: f.latestBlock},
		{Path: "/scripts/:hash", Serve: f.scriptInfo},
		{Path: "/scripts/:hash/cbor", Serve: f.scriptCBOR},
		{Path: "/scripts/:hash/json", Serve: f.scriptJSON},
		{Path: "/scripts/datum/:hash/cbor", Serve: f.datumCBOR},
	}
}

// notFound appends Blockfrost's 404 body with message and returns
// query.Status(404): the body is the answer.
func notFound(body []byte, message string) ([]byte, error) {
	return AppendError(body, 404, "Not Found", message), query.Status(404)
}

// indexKept refuses a read of a dimension the store does not keep: 400,
// not 404, which Blockfrost's clients read as "nothing there" (Lucid's
// answers an empty list) where the truth is "not known here".
func (f *FrontEnd) indexKept(d disk.Dimension, what string) error {
	if f.r.Indexes(d) {
		return nil
	}
	return fmt.Errorf("this store does not keep the %s index, which %s needs (a store's indexes are chosen when it is created: --indexes; adding one needs a re-import): %w",
		d, what, chain.ErrInvalidArgument)
}

// listPage appends, to body, the JSON array of page p of the outputs listed
// under (d, value), each with appendAddressUtxo; keep, when set, filters
// them, and the page then counts only the outputs keep takes (so every
// skipped one is read, up to maxFilterScan entries: beyond, an error).
func listPage(v *disk.View, body []byte, d disk.Dimension, value []byte, p Page, keep func(r *disk.UtxoRef) bool) ([]byte, error) {
	blocks := &blockHashes{v: v}
	txs := &txHashes{}
	addrs := &addressJSON{}
	body = append(body, '[')
	n := 0
	item := func(r *disk.UtxoRef) error {
		if n > 0 {
			body = append(body, ',')
		}
		n++
		var err error
		body, err = appendAddressUtxo(body, r, addrs, blocks, txs)
		return err
	}
	if keep == nil {
		_, _, err := v.ListFunc(disk.ListQuery{Dim: d, Value: value, Desc: p.Desc, Limit: p.Count, Skip: p.skip()}, item)
		if err != nil {
			return body, err
		}
		return append(body, ']'), nil
	}
	skip := p.skip()
	seen := 0
	_, more, err := v.ListFunc(disk.ListQuery{Dim: d, Value: value, Desc: p.Desc, Limit: maxFilterScan, Keep: keep, MaxScan: maxFilterScan},
		func(r *disk.UtxoRef) error {
			seen++
			if seen <= skip {
				return nil
			}
			if err := item(r); err != nil {
				return err
			}
			if n == p.Count {
				return errPageFull
			}
			return nil
		})
	switch {
	case errors.Is(err, errPageFull):
	case err != nil:
		return body, err
	case more:
		return body, fmt.Errorf("the address has more than %d outputs to filter by unit: list the unit's outputs (/v1/assets/{unit}/utxos) instead: %w",
			maxFilterScan, chain.ErrInvalidArgument)
	}
	return append(body, ']'), nil
}

// maxFilterScan bounds the index entries a unit-filtered page reads.
const maxFilterScan = 1_000_000

// errPageFull stops a filtered listing once its page is full.
var errPageFull = errors.New("blockfrost: page full")

// unitFilter returns the filter of /utxos/{unit}: nil for "lovelace"
// (every output carries lovelace), else the outputs carrying the asset
// named by the unit (policy hex, 56 digits, then the name's hex).
func unitFilter(unit string) (func(r *disk.UtxoRef) bool, string, error) {
	if unit == "lovelace" {
		return nil, "", nil
	}
	b, err := hex.DecodeString(unit)
	if err != nil || len(b) < credential.HashLen || len(b) > credential.HashLen+chain.MaxAssetNameLen {
		return nil, "", fmt.Errorf("unit %q: lovelace, or the hex of a 28-byte policy id then of an asset name of 0..%d bytes: %w",
			clip(unit), chain.MaxAssetNameLen, chain.ErrInvalidArgument)
	}
	policy, name := b[:credential.HashLen], b[credential.HashLen:]
	return func(r *disk.UtxoRef) bool {
		it := r.Assets()
		for {
			p, n, _, ok := it.Next()
			if !ok {
				return false
			}
			if string(p) == string(policy) && string(n) == string(name) {
				return true
			}
		}
	}, hex.EncodeToString(b), nil
}

// errOtherKind, from a credential's cached read, says the credential's
// outputs are not listed under the kind its prefix named: the read goes on
// uncached, over both kinds.
var errOtherKind = errors.New("blockfrost: credential listed under the other kind")

func (f *FrontEnd) addressUtxos(ctx context.Context, req Request) (query.Answer, error) {
	p, err := ParsePage(req.Query)
	if err != nil {
		return query.Answer{}, err
	}
	a, u := req.Param("address"), req.Param("unit")
	if u == "" && shelleyForm(a) {
		// A Shelley address's listing, the wallets' polling: its answer is
		// cached under the address as given, and only a valid address's
		// answer is ever cached (an invalid one fails the read, in
		// compute), so a cached answer is served without decoding the
		// address; a miss decodes it first. The key is the one below
		// (unit "").
		var kb [256]byte
		k := append(append(p.appendKey(append(kb[:0], "u|"...)), "||"...), a...)
		return f.r.FrontRead(ctx, query.FrontKey(k), query.AddressGuard(a), func(v *disk.View, body []byte) ([]byte, error) {
			if _, err := ParseSubject(a); err != nil {
				return body, err
			}
			return listPage(v, body, disk.DimAddress, []byte(a), p, nil)
		})
	}
	s, err := ParseSubject(a)
	if err != nil {
		return query.Answer{}, err
	}
	keep, unit := (func(*disk.UtxoRef) bool)(nil), ""
	if u != "" {
		if keep, unit, err = unitFilter(u); err != nil {
			return query.Answer{}, err
		}
	}
	key := append(append(append(p.appendKey([]byte("u|")), '|'), unit...), '|')
	if s.Hash == nil {
		return f.r.FrontRead(ctx, query.FrontKey(append(key, s.Address...)), query.AddressGuard(s.Address), func(v *disk.View, body []byte) ([]byte, error) {
			return listPage(v, body, disk.DimAddress, []byte(s.Address), p, keep)
		})
	}
	if err := f.indexKept(disk.DimPaymentCredential, "listing by payment credential"); err != nil {
		return query.Answer{}, err
	}
	// A credential's hash names a key or a script; the prefix does not say
	// which reliably (Lucid sends a script hash as addr_vkh1…). A 28-byte
	// hash that is both would be a blake2b-224 collision: the outputs are
	// listed under one kind at most. The read tries the prefix's kind,
	// cached under its guard; when that kind lists nothing, the answer
	// depends on the other kind too, whose changes do not raise that guard:
	// it is read uncached, from whichever kind lists outputs.
	named := credential.AppendValue(nil, s.Kind, s.Hash)
	other := credential.AppendValue(nil, s.Kind^1, s.Hash)
	ans, err := f.r.FrontRead(ctx, query.FrontKey(hex.AppendEncode(key, named)), query.IndexGuard(disk.DimPaymentCredential, named), func(v *disk.View, body []byte) ([]byte, error) {
		if b, err := v.Balance(disk.DimPaymentCredential, named); err != nil || b.Count == 0 {
			return body, errors.Join(err, errOtherKind)
		}
		return listPage(v, body, disk.DimPaymentCredential, named, p, keep)
	})
	if !errors.Is(err, errOtherKind) {
		return ans, err
	}
	return f.r.FrontView(func(v *disk.View, body []byte) ([]byte, error) {
		value := named
		if b, err := v.Balance(disk.DimPaymentCredential, named); err != nil {
			return body, err
		} else if b.Count == 0 {
			value = other
		}
		return listPage(v, body, disk.DimPaymentCredential, value, p, keep)
	})
}

func (f *FrontEnd) accountUtxos(ctx context.Context, req Request) (query.Answer, error) {
	p, err := ParsePage(req.Query)
	if err != nil {
		return query.Answer{}, err
	}
	s := req.Param("stake_address")
	value, err := credential.ParseStake(s)
	if err != nil {
		return query.Answer{}, fmt.Errorf("stake address %q: %v: %w", clip(s), err, chain.ErrInvalidArgument)
	}
	if err := f.indexKept(disk.DimStakeCredential, "listing an account's outputs"); err != nil {
		return query.Answer{}, err
	}
	return f.r.FrontRead(ctx, query.FrontKey(hex.AppendEncode(append(p.appendKey([]byte("s|")), '|'), value)), query.IndexGuard(disk.DimStakeCredential, value), func(v *disk.View, body []byte) ([]byte, error) {
		return listPage(v, body, disk.DimStakeCredential, value, p, nil)
	})
}

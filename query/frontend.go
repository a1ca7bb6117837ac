package query

import (
	"context"
	"errors"

	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

// Reads for the compatibility front ends (another API's shapes over this
// store, such as Blockfrost's): the same path as the contract's reads, one
// published snapshot per answer, through the cache tiers, tagged with the
// answer's seq and tip, with the front end's own encoding. An answer's
// Whole is set: its Body is the whole response body.

// ErrNotFoundAnswer, returned by a front end's render function with the
// body it appended, makes that body the answer with status 404 (cached as
// any answer: it holds until the guard's value changes).
var ErrNotFoundAnswer = errNotFoundAnswer

// Render appends the body of a front end's answer, read from v, to body.
type Render func(v *disk.View, body []byte) ([]byte, error)

// frontKeyPrefix starts every front end's cache key: no key of the
// contract's reads starts with it.
const frontKeyPrefix = "f|"

// ReadWhole answers a front end's read through the tiers: key is the
// front end's own cache key (made distinct from the contract's here), and
// guard the value whose change invalidates it (AddressGuard, IndexGuard,
// OutPointGuard). The render function must be a pure function of the
// snapshot and the request: its answer is cached until guard changes.
func (s *Server) ReadWhole(ctx context.Context, key, guard string, fn Render) (Answer, error) {
	ans, err := s.read(ctx, frontKeyPrefix+key, guard, compute(fn))
	ans.Whole = true
	return ans, err
}

// ReadWholeUncached answers a front end's read from one published snapshot,
// outside the cache tiers: for an answer no single guard covers (the tip,
// every output of a transaction). ErrNotFoundAnswer works as in ReadWhole.
func (s *Server) ReadWholeUncached(fn Render) (Answer, error) {
	v, err := s.store.PublishedView()
	if err != nil {
		return Answer{}, err
	}
	defer v.Close()
	s.m.diskRead()
	buf := getAnswerBuf()
	body, err := fn(v, *buf)
	*buf = body
	status := 200
	if errors.Is(err, errNotFoundAnswer) {
		status, err = 404, nil
	}
	if err != nil {
		putAnswerBuf(buf)
		return Answer{}, err
	}
	return Answer{Status: status, Tip: v.Tip(), Seq: v.State().Seq, ETag: etagOf(body), Body: body, Tier: "disk", Whole: true, buf: buf}, nil
}

// AddressGuard is the guard of an address's answers: every change to the
// address's live outputs raises it.
func AddressGuard(address string) string { return addressGuard(address) }

// IndexGuard is the guard of the answers of one value of an index
// dimension: every change to the value's live outputs raises it.
func IndexGuard(d disk.Dimension, value []byte) string { return indexGuard(disk.MakeDimKey(d, value)) }

// Indexes reports whether the store keeps the index dimension d.
func (s *Server) Indexes(d disk.Dimension) bool { return s.store.Indexes(d) }

// The dimensions the Blockfrost front end reads, as query names them.
const (
	DimReferenceScriptHash = disk.DimReferenceScriptHash
	DimDatumHash           = disk.DimDatumHash
)

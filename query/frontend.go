package query

import (
	"context"
	"errors"
	"strconv"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

// The read path of the compatibility front ends (Esplora's API, Blockfrost's):
// answers in another wire format, computed by the front end from one published
// snapshot, cached in the same tiers under the same guards as the /v1
// answers of the same data, so the same invalidation keeps them exact.
//
// A front end's cache keys live in a keyspace of their own ("f|" + the
// front end's key), which no /v1 key starts with.

// Guard names the data a cached front-end answer depends on: every change
// of that data raises the guard's floor in every owned tier before it is
// published (Server.Changed), as for the /v1 answers.
type Guard string

// AddressGuard is the guard of what the store holds for an address: its
// live outputs (and their freezes) and its balance.
func AddressGuard(address string) Guard { return Guard(addressGuard(address)) }

// IndexGuard is the guard of one value of an index dimension other than
// the address.
func IndexGuard(d disk.Dimension, value []byte) Guard {
	return Guard(indexGuard(disk.MakeDimKey(d, value)))
}

// OutPointGuard is the guard of one outpoint's record: live, spent (and
// whether the spent record is still shown), or absent.
func OutPointGuard(op chain.OutPoint) Guard { return Guard(outPointGuard(op)) }

// Status is an error a front end's compute returns to make its body the
// answer with that status (a 404 or a 400 that follows from the data, such
// as a listing over a limit): the answer is cached as a 200 would be.
type Status int

func (s Status) Error() string { return "query: the answer has status " + strconv.Itoa(int(s)) }

// Compute appends a front end's answer, read from v, to body. Returning a
// Status makes body the answer with that status; any other error fails the
// read.
type Compute func(v *disk.View, body []byte) ([]byte, error)

// Key is a front end's cache key as the tiers hold it: "f|" then the front
// end's own key (FrontKey).
type Key string

// FrontKey is the cache key of a front end's own key b, made in one
// allocation; b is not retained (a front end builds it on its stack).
func FrontKey(b []byte) Key { return Key(frontKeyspace + string(b)) }

// frontKeyspace starts every front-end cache key.
const frontKeyspace = "f|"

// FrontRead answers key through the cache tiers, computing it with fn from
// one published View on a miss. The answer's Body is the front end's body
// as fn wrote it, and Whole is set (Answer.AppendBody adds no tip member).
// guard must name every piece of data the body depends on that a change
// can alter; a body that depends on the tip height itself (a depth, a count
// of confirmations) must not be cached: use FrontView.
func (s *Server) FrontRead(ctx context.Context, key Key, guard Guard, fn Compute) (Answer, error) {
	// fn is a compute as it is: compute turns a Status it returns into the
	// answer's status.
	ans, err := s.read(ctx, string(key), string(guard), compute(fn))
	ans.Whole = true
	return ans, err
}

// FrontView answers fn from one published View, outside the cache tiers,
// with the ETag of its body (readOnce).
func (s *Server) FrontView(fn Compute) (Answer, error) {
	ans, err := s.readOnce(fn)
	ans.Whole = true
	return ans, err
}

// readOnce answers fn from one published View, outside the cache tiers: for
// an answer no single guard covers, or one that depends on the tip height or
// the clock. A Status from fn is the answer's status; the ETag is of the
// body.
func (s *Server) readOnce(fn Compute) (Answer, error) {
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
	var st Status
	if errors.As(err, &st) {
		status, err = int(st), nil
	}
	if err != nil {
		putAnswerBuf(buf)
		return Answer{}, err
	}
	return Answer{Status: status, Tip: v.Tip(), Seq: v.State().Seq, ETag: etagOf(body), Body: body, Tier: "disk", buf: buf}, nil
}

// Indexes reports whether the store keeps index dimension d.
func (s *Server) Indexes(d disk.Dimension) bool { return s.store.Indexes(d) }

package query

import (
	"context"
	"errors"
	"strconv"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

// # Reads with leased=…
//
// A lease holds an output until an absolute expiry (unix seconds). Whether
// it still holds is decided at read time, against this node's clock
// (Options.Now): an expired lease is never shown as held, even before the
// writer's sweep removes its rows. So an answer with leased=… depends on the
// clock as well as the rows at its seq: it is read from one snapshot and
// never cached (as mature=only), and its ETag hashes its body and filter.
// Answers without the parameter read nothing of leases: their cache
// entries and ETags are untouched by lease changes, which invalidate
// nothing.

// LeaseMode is what a read does with leased outputs.
type LeaseMode uint8

const (
	// LeasedAny is the default: leases are not looked at.
	LeasedAny LeaseMode = iota
	// LeasedExclude skips leased outputs (leased=exclude).
	LeasedExclude
	// LeasedInclude shows "leased_until" on leased outputs (leased=include).
	LeasedInclude
)

// now is the node's clock in unix seconds.
func (s *Server) now() uint64 {
	t := s.clock().Unix()
	if t < 0 {
		return 0
	}
	return uint64(t)
}

// leasedUntil returns the expiry of the lease that holds op in v at the
// clock now, 0 when none does (no lease, or an expired one).
func leasedUntil(v *disk.View, op chain.OutPoint, now uint64) (uint64, error) {
	until, found, err := v.LeasedUntil(op)
	if err != nil || !found || until <= now {
		return 0, err
	}
	return until, nil
}

// itemFunc appends one output of a listing.
type itemFunc func(body []byte, r *disk.UtxoRef) ([]byte, error)

func plainItem(body []byte, r *disk.UtxoRef) ([]byte, error) { return appendUtxo(body, r), nil }

// item returns how f's listings append an output read from v at now.
func (f Filter) item(v *disk.View, now uint64) itemFunc {
	if f.Leased != LeasedInclude {
		return plainItem
	}
	return func(body []byte, r *disk.UtxoRef) ([]byte, error) {
		return appendLeasedUtxo(body, v, r, now)
	}
}

// appendLeasedUtxo appends r's UTXO object with "leased_until" when a lease
// holds it at now.
func appendLeasedUtxo(body []byte, v *disk.View, r *disk.UtxoRef, now uint64) ([]byte, error) {
	body = appendUtxo(body, r)
	if r.Spent {
		return body, nil
	}
	until, err := leasedUntil(v, r.OutPoint, now)
	if err != nil || until == 0 {
		return body, err
	}
	body = append(body[:len(body)-1], `,"leased_until":`...)
	body = strconv.AppendUint(body, until, 10)
	return append(body, '}'), nil
}

// UtxoLeased answers one outpoint as Utxo does, with leases looked at (mode
// not LeasedAny): LeasedInclude adds "leased_until" to a leased output;
// LeasedExclude answers a leased output as absent (404 not_found). Read
// from one snapshot, never cached.
func (s *Server) UtxoLeased(ctx context.Context, op chain.OutPoint, mode LeaseMode) (Answer, error) {
	if mode == LeasedAny {
		return s.Utxo(ctx, op)
	}
	v, err := s.store.PublishedView()
	if err != nil {
		return Answer{}, err
	}
	defer v.Close()
	s.m.diskRead()
	now := s.now()
	buf := getAnswerBuf()
	body := *buf
	status := 200
	found := false
	err = v.UtxoFunc(op, func(r *disk.UtxoRef) error {
		found = true
		var until uint64
		if !r.Spent {
			var err error
			if until, err = leasedUntil(v, op, now); err != nil {
				return err
			}
		}
		if mode == LeasedExclude && until != 0 {
			status = 404
			body = appendErrorBody(body, "not_found", "outpoint "+op.String()+" is leased (leased=exclude)")
			return nil
		}
		body = append(body, `"utxo":`...)
		if body, err = appendLeasedUtxo(body, v, r, now); err != nil {
			return err
		}
		body = append(body, `,"spent":`...)
		body = appendSpent(body, r)
		body = append(body, '}')
		return nil
	})
	if errors.Is(err, chain.ErrNotFound) || (err == nil && !found) {
		err, status = nil, 404
		body = appendErrorBody(body, "not_found", "outpoint "+op.String()+" is not known at this tip")
	}
	*buf = body
	if err != nil {
		putAnswerBuf(buf)
		return Answer{}, err
	}
	tag := "x"
	if mode == LeasedInclude {
		tag = "l"
	}
	return Answer{Status: status, Tip: v.Tip(), Seq: v.State().Seq, ETag: filteredETag(tag, etagOf(body)), Body: body, Tier: "disk", buf: buf}, nil
}

// LookupLeased answers a batch of outpoints as Lookup does, with leases
// looked at: LeasedInclude adds "leased_until" to each leased output;
// LeasedExclude answers a leased output as absent ("utxo": null, "spent":
// null).
func (s *Server) LookupLeased(ctx context.Context, ops []chain.OutPoint, mode LeaseMode) (Answer, error) {
	if mode == LeasedAny {
		return s.Lookup(ctx, ops)
	}
	now := s.now()
	var absent func(v *disk.View, op chain.OutPoint, r *disk.UtxoRef) (bool, error)
	if mode == LeasedExclude {
		absent = func(v *disk.View, op chain.OutPoint, r *disk.UtxoRef) (bool, error) {
			if r.Spent {
				return false, nil
			}
			until, err := leasedUntil(v, op, now)
			return until != 0, err
		}
	}
	return s.lookup(ops, absent, func(body []byte, v *disk.View, r *disk.UtxoRef) ([]byte, error) {
		return appendLeasedUtxo(body, v, r, now)
	})
}

// Lease answers GET /v1/leases/{id}: {"lease_id", "outpoints": [{"tx_hash",
// "index"}…], "expires_at"}, or 404 not_found when there is no such lease
// or it has expired by this node's clock. Read from one snapshot, never
// cached.
func (s *Server) Lease(ctx context.Context, id string) (Answer, error) {
	if err := chain.CheckLeaseID(id); err != nil {
		return Answer{}, err
	}
	v, err := s.store.PublishedView()
	if err != nil {
		return Answer{}, err
	}
	defer v.Close()
	s.m.diskRead()
	li, found, err := v.Lease(id)
	if err != nil {
		return Answer{}, err
	}
	buf := getAnswerBuf()
	body := *buf
	status := 200
	if !found || li.ExpiresAt <= s.now() {
		status = 404
		body = appendErrorBody(body, "not_found", "no lease "+id+" at this seq (never granted, released or expired)")
	} else {
		body = append(body, `"lease_id":`...)
		body = appendString(body, id)
		body = append(body, `,"outpoints":[`...)
		for i, op := range li.OutPoints {
			if i > 0 {
				body = append(body, ',')
			}
			body = appendOutPointHead(body, op)
			body = append(body, '}')
		}
		body = append(body, `],"expires_at":`...)
		body = strconv.AppendUint(body, li.ExpiresAt, 10)
		body = append(body, '}')
	}
	*buf = body
	return Answer{Status: status, Tip: v.Tip(), Seq: v.State().Seq, Body: body, Tier: "disk", buf: buf}, nil
}

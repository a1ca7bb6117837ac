package model

import (
	"fmt"
	"slices"

	"github.com/utxo-cache/utxo-cache/chain"
)

// Leases (docs/wallet-state.md), modelled from their rules alone: a lease
// holds live outputs until an absolute expiry (unix seconds); whether it
// holds at a moment is its expiry against a clock given to each call.

type lease struct {
	expires uint64
	ops     []chain.OutPoint // ascending
}

// holder returns the lease that holds op, expired or not.
func (m *Model) holder(op chain.OutPoint) (string, *lease) {
	for id, l := range m.leases {
		if slices.Contains(l.ops, op) {
			return id, l
		}
	}
	return "", nil
}

// lapse takes op out of the lease that holds it: it was spent or removed.
func (m *Model) lapse(op chain.OutPoint) {
	if _, l := m.holder(op); l != nil {
		l.ops = slices.DeleteFunc(l.ops, func(o chain.OutPoint) bool { return o == op })
	}
}

// Lease grants, renews or extends lease id at the clock now, for ttl
// seconds (0: 600), and returns its expiry. All or nothing, in request
// order: an outpoint that is not live fails with chain.ErrUnknownInput, a
// frozen one with chain.ErrFrozen; then, when other unexpired leases hold
// some, a *chain.LeasedError lists them in request order. A renewal (id
// unexpired) keeps its outpoints and adds the new ones, up to 1000.
func (m *Model) Lease(id string, ops []chain.OutPoint, ttl uint32, now uint64) (uint64, error) {
	r := chain.LeaseRequest{ID: id, OutPoints: ops, TTL: ttl}
	if err := r.Validate(); err != nil {
		return 0, err
	}
	var held []chain.HeldOutPoint
	for _, op := range ops {
		if !m.spendable(op) { // live, or an output of a pending transaction
			return 0, fmt.Errorf("%s: %w", op, chain.ErrUnknownInput)
		}
		if _, ok := m.frozen[op]; ok {
			return 0, fmt.Errorf("%s: %w", op, chain.ErrFrozen)
		}
		if h, l := m.holder(op); l != nil && h != id && l.expires > now {
			held = append(held, chain.HeldOutPoint{OutPoint: op, ExpiresAt: l.expires})
		}
	}
	if len(held) > 0 {
		return 0, &chain.LeasedError{Held: held}
	}
	set := slices.Clone(ops)
	if prev := m.leases[id]; prev != nil && prev.expires > now {
		for _, o := range prev.ops {
			if !slices.Contains(set, o) {
				set = append(set, o)
			}
		}
		if len(set) > chain.MaxLeaseOutPoints {
			return 0, fmt.Errorf("%d outpoints: %w", len(set), chain.ErrInvalidArgument)
		}
	}
	for _, op := range set {
		if h, l := m.holder(op); l != nil && h != id {
			l.ops = slices.DeleteFunc(l.ops, func(o chain.OutPoint) bool { return o == op })
		}
	}
	slices.SortFunc(set, CompareOutPoints)
	if ttl == 0 {
		ttl = 600
	}
	if m.leases == nil {
		m.leases = map[string]*lease{}
	}
	m.leases[id] = &lease{expires: now + uint64(ttl), ops: set}
	return now + uint64(ttl), nil
}

// Release ends lease id; false when there is none (expired or not).
func (m *Model) Release(id string) bool {
	_, ok := m.leases[id]
	delete(m.leases, id)
	return ok
}

// Expire ends every lease whose expiry is at or before now, and returns
// how many it ended.
func (m *Model) Expire(now uint64) int {
	n := 0
	for id, l := range m.leases {
		if l.expires <= now {
			delete(m.leases, id)
			n++
		}
	}
	return n
}

// LeasedUntil returns the expiry of the unexpired lease that holds op at
// now, or 0.
func (m *Model) LeasedUntil(op chain.OutPoint, now uint64) uint64 {
	if _, l := m.holder(op); l != nil && l.expires > now {
		return l.expires
	}
	return 0
}

// LeaseOf returns lease id's outpoints (ascending) and expiry at now; false
// when there is no such lease or it has expired.
func (m *Model) LeaseOf(id string, now uint64) ([]chain.OutPoint, uint64, bool) {
	l := m.leases[id]
	if l == nil || l.expires <= now {
		return nil, 0, false
	}
	return slices.Clone(l.ops), l.expires, true
}

// LeaseIDs returns the ids of every lease, expired or not, sorted.
func (m *Model) LeaseIDs() []string {
	var ids []string
	for id := range m.leases {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

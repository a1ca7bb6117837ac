package disk

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/cockroachdb/pebble/v2"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/changeset"
)

// # Leases
//
// A lease holds live outputs for a wallet backend until an absolute expiry
// (unix seconds). Lease writes are wallet changes (chain.ChangeWallet): one
// synced batch holding the rows, the change-log record that lists the
// operations as the writer decided them, and the state row with Seq raised;
// tip, count and digest stay as they are. Two rows per lease:
//
//	prefix  key                      value
//	0x10    tx_hash[32] index[4]     version 0x01, expires_at uint64, uvarint length, lease id
//	0x11    lease id, zero-padded    version 0x01, expires_at uint64, uvarint count,
//	        to 64 bytes              outpoints (tx_hash[32] index[4] each, ascending)
//
// Example: outpoint held by lease "w1" until 1764300000:
//
//	01 00000000692914e0 02 7731
//
// A 0x10 row exists exactly while its outpoint is live and held by the lease
// its 0x11 row names. A block that spends a held output (or a rollback that
// removes it) deletes its 0x10 row and takes it out of its lease's 0x11 row
// in the block's own batch, so a rollback that restores the output does not
// restore the lease. A lease whose outputs all lapsed keeps its 0x11 row,
// with no outpoints, until it expires or is released.
//
// Expiry. Rows are removed only by changes (release, and the writer's
// expiry sweep, an "expire" operation), so every node holds the same rows
// at the same seq. Whether a lease holds its outputs at a given moment is
// decided by comparing expires_at with a clock: the writer's when it
// decides a grant (an expired lease does not hold; its outputs may be
// leased again at once), the reading node's when it answers a read (an
// expired lease is never shown as held, even before the sweep removes it).
// Operations carry their decisions (the lease's outpoints and expiry), so
// applying them needs no clock and a replica derives the writer's rows.
//
// The writer goroutine keeps every lease in memory (leaseSet, loaded when
// the store opens), so a block checks each output it spends with a map
// probe and no read.

const (
	prefixLeaseHeld byte = 0x10
	prefixLease     byte = 0x11
	leaseRowVersion byte = 0x01
)

// LeaseInfo is a lease as the store keeps it.
type LeaseInfo struct {
	ID        string
	ExpiresAt uint64           // unix seconds
	OutPoints []chain.OutPoint // ascending; empty once every output lapsed
}

// leaseEntry is a lease in memory; immutable once stored in a leaseSet (a
// change replaces it).
type leaseEntry struct {
	expires uint64
	ops     []chain.OutPoint // ascending
}

// leaseSet is every lease of the committed state, and the batch being
// built's changes over it. Writer goroutine only.
type leaseSet struct {
	held map[chain.OutPoint]string
	byID map[string]*leaseEntry
	// The batch's changes: "" / nil marks a deletion.
	heldNew map[chain.OutPoint]string
	byIDNew map[string]*leaseEntry
}

func newLeaseSet() *leaseSet {
	return &leaseSet{held: map[chain.OutPoint]string{}, byID: map[string]*leaseEntry{},
		heldNew: map[chain.OutPoint]string{}, byIDNew: map[string]*leaseEntry{}}
}

func (l *leaseSet) holder(op chain.OutPoint) string {
	if id, ok := l.heldNew[op]; ok {
		return id
	}
	return l.held[op]
}

func (l *leaseSet) get(id string) *leaseEntry {
	if e, ok := l.byIDNew[id]; ok {
		return e
	}
	return l.byID[id]
}

// commit makes the batch's changes the committed state; reset forgets them.
func (l *leaseSet) commit() {
	for op, id := range l.heldNew {
		if id == "" {
			delete(l.held, op)
		} else {
			l.held[op] = id
		}
	}
	for id, e := range l.byIDNew {
		if e == nil {
			delete(l.byID, id)
		} else {
			l.byID[id] = e
		}
	}
	l.reset()
}

func (l *leaseSet) reset() {
	clear(l.heldNew)
	clear(l.byIDNew)
}

func appendLeaseHeldKey(dst []byte, op chain.OutPoint) []byte {
	dst = append(dst, prefixLeaseHeld)
	dst = append(dst, op.TxHash[:]...)
	return binary.BigEndian.AppendUint32(dst, op.Index)
}

func appendLeaseKey(dst []byte, id string) []byte {
	dst = append(dst, prefixLease)
	dst = append(dst, id...)
	for range chain.MaxLeaseIDLen - len(id) {
		dst = append(dst, 0)
	}
	return dst
}

func appendLeaseHeldRow(dst []byte, id string, expires uint64) []byte {
	dst = append(dst, leaseRowVersion)
	dst = binary.BigEndian.AppendUint64(dst, expires)
	return appendLenBytes(dst, []byte(id))
}

func decodeLeaseHeldRow(b []byte) (id string, expires uint64, err error) {
	d := decbuf{b: b, ctx: "lease held row"}
	if v := d.byte1(); d.err() == nil && v != leaseRowVersion {
		d.fail("unknown version")
	}
	expires = d.u64()
	id = string(d.lenBytes(chain.MaxLeaseIDLen))
	return id, expires, d.done()
}

func appendLeaseRow(dst []byte, e *leaseEntry) []byte {
	dst = append(dst, leaseRowVersion)
	dst = binary.BigEndian.AppendUint64(dst, e.expires)
	dst = binary.AppendUvarint(dst, uint64(len(e.ops)))
	for _, op := range e.ops {
		dst = append(dst, op.TxHash[:]...)
		dst = binary.BigEndian.AppendUint32(dst, op.Index)
	}
	return dst
}

func decodeLeaseRow(b []byte) (leaseEntry, error) {
	d := decbuf{b: b, ctx: "lease row"}
	var e leaseEntry
	if v := d.byte1(); d.err() == nil && v != leaseRowVersion {
		d.fail("unknown version")
	}
	e.expires = d.u64()
	n := d.count(36)
	if d.err() == nil && n > chain.MaxLeaseOutPoints {
		d.fail("too many outpoints")
	}
	if d.err() == nil {
		e.ops = make([]chain.OutPoint, n)
		for i := range e.ops {
			copy(e.ops[i].TxHash[:], d.fixed(32))
			e.ops[i].Index = d.u32()
		}
	}
	return e, d.done()
}

// leaseIDOfKey returns the id a 0x11 key names.
func leaseIDOfKey(k []byte) string {
	id := k[1:]
	if i := slices.Index(id, 0); i >= 0 {
		id = id[:i]
	}
	return string(id)
}

// loadLeases reads every lease row into the writer's leaseSet. Open calls
// it once.
func (s *Store) loadLeases() error {
	l := newLeaseSet()
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixLease}, UpperBound: []byte{prefixLease + 1}})
	if err != nil {
		return fmt.Errorf("disk: read leases: %w", err)
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		id := leaseIDOfKey(it.Key())
		e, err := decodeLeaseRow(it.Value())
		if err != nil {
			return fmt.Errorf("disk: lease %q: %w", id, errors.Join(err, ErrCorrupt))
		}
		l.byID[id] = &e
		for _, op := range e.ops {
			l.held[op] = id
		}
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("disk: read leases: %w", err)
	}
	s.leases = l
	return nil
}

// putLease writes e as lease id's row in b (nil: deletes it).
func (s *Store) putLease(b *keyBatch, id string, e *leaseEntry) {
	key := appendLeaseKey(nil, id)
	if e == nil {
		_ = b.Delete(key, nil)
	} else {
		_ = b.Set(key, appendLeaseRow(nil, e), nil)
	}
	s.leases.byIDNew[id] = e
}

// putHeld writes op's held row in b: held by id until expires ("" deletes).
func (s *Store) putHeld(b *keyBatch, op chain.OutPoint, id string, expires uint64) {
	key := appendLeaseHeldKey(nil, op)
	if id == "" {
		_ = b.Delete(key, nil)
	} else {
		_ = b.Set(key, appendLeaseHeldRow(nil, id, expires), nil)
	}
	s.leases.heldNew[op] = id
}

// dropFromLease takes op out of lease id's row in b.
func (s *Store) dropFromLease(b *keyBatch, id string, op chain.OutPoint) {
	e := s.leases.get(id)
	if e == nil {
		return
	}
	ops := slices.DeleteFunc(slices.Clone(e.ops), func(o chain.OutPoint) bool { return o == op })
	s.putLease(b, id, &leaseEntry{expires: e.expires, ops: ops})
}

// lapseLease ends the lease of op, an output that leaves the live set in
// the batch b is building (a block spends it, a rollback removes it), if a
// lease holds it. Writer goroutine only.
func (s *Store) lapseLease(b *keyBatch, op chain.OutPoint) {
	id := s.leases.holder(op)
	if id == "" {
		return
	}
	s.putHeld(b, op, "", 0)
	s.dropFromLease(b, id, op)
}

// applyOp adds op, the i-th operation of the change that leaves st, to b.
func (s *Store) applyOp(b *keyBatch, op *chain.WalletOp, st *State, i int) error {
	if op.IsPending() {
		return s.applyPendingOp(b, op, st, i)
	}
	return s.applyWalletOp(b, op)
}

// applyWalletOp adds op, decided by the writer, to b. It reads no clock:
// a replica applying the same op to the same state writes the same rows.
func (s *Store) applyWalletOp(b *keyBatch, op *chain.WalletOp) error {
	prev := s.leases.get(op.LeaseID)
	switch op.Kind {
	case chain.WalletLease:
		ops := slices.Clone(op.OutPoints)
		slices.SortFunc(ops, chain.CompareOutPoints)
		if prev != nil {
			for _, o := range prev.ops {
				if _, found := slices.BinarySearchFunc(ops, o, chain.CompareOutPoints); !found {
					s.putHeld(b, o, "", 0)
				}
			}
		}
		for _, o := range ops {
			if h := s.leases.holder(o); h != "" && h != op.LeaseID {
				s.dropFromLease(b, h, o) // the writer found h expired
			}
			s.putHeld(b, o, op.LeaseID, op.ExpiresAt)
		}
		s.putLease(b, op.LeaseID, &leaseEntry{expires: op.ExpiresAt, ops: ops})
	case chain.WalletRelease, chain.WalletExpire:
		if prev == nil {
			return fmt.Errorf("disk: %s of lease %q, which does not exist: %w", op.Kind, op.LeaseID, chain.ErrInvalidArgument)
		}
		for _, o := range prev.ops {
			s.putHeld(b, o, "", 0)
		}
		s.putLease(b, op.LeaseID, nil)
	default:
		return fmt.Errorf("disk: wallet operation of kind %d: %w", op.Kind, chain.ErrInvalidArgument)
	}
	return nil
}

// WalletRequest is one wallet request for Store.Wallet: exactly one of
// Lease, Release, Expire, Post and Withdraw.
type WalletRequest struct {
	Lease   *chain.LeaseRequest
	Release string // a lease id
	// Expire ends every lease and every pending transaction whose expiry is
	// at or before now.
	Expire bool
	// Post adds a pending transaction (pending.go).
	Post *chain.PendingPost
	// Withdraw withdraws a pending transaction and its descendants.
	Withdraw *chain.Hash
}

// WalletOutcome answers one WalletRequest.
type WalletOutcome struct {
	// Err refuses the request (nothing of it changed): chain.ErrUnknownInput,
	// chain.ErrFrozen, chain.ErrLeased (a *chain.LeasedError),
	// chain.ErrInvalidArgument.
	Err error
	// LeaseID and ExpiresAt answer a granted lease.
	LeaseID   string
	ExpiresAt uint64
	// Changed is false for a post of a transaction already pending, or a
	// withdrawal of one that is not: no operation.
	Changed bool
}

// WalletResult says what a Wallet call did.
type WalletResult struct {
	Outcomes []WalletOutcome // one per request, in order
	// Changes is nil when no request changed anything: no change was
	// committed.
	Changes *changeset.Set
	// Ops are the operations the change logged.
	Ops []chain.WalletOp
}

// Wallet decides reqs one by one, in order, against the committed state and
// the operations already decided for the requests before it, at the
// writer's clock now (unix seconds), and commits every accepted one as one
// wallet change. A refused request changes nothing and is answered in its
// outcome; the error is for storage failures (nothing committed). Writer
// goroutine only; nothing is published (see Publish).
func (s *Store) Wallet(reqs []WalletRequest, now uint64) (WalletResult, error) {
	res := WalletResult{Outcomes: make([]WalletOutcome, len(reqs))}
	if err := s.canWrite(); err != nil {
		return res, err
	}
	if s.State().RollingBack {
		return res, fmt.Errorf("disk: a rollback is in progress: %w", ErrFailed)
	}
	b := s.writeBatch()
	defer s.releaseScratch()
	s.dropLapses()
	next := s.State()
	next.Seq++
	for i, r := range reqs {
		var ops []chain.WalletOp
		var err error
		switch {
		case r.Lease != nil:
			var op chain.WalletOp
			op, err = s.decideLease(r.Lease, now)
			if err == nil {
				ops = []chain.WalletOp{op}
				res.Outcomes[i].LeaseID, res.Outcomes[i].ExpiresAt = op.LeaseID, op.ExpiresAt
			}
		case r.Release != "":
			if err = chain.CheckLeaseID(r.Release); err == nil && s.leases.get(r.Release) != nil {
				ops = []chain.WalletOp{{Kind: chain.WalletRelease, LeaseID: r.Release}}
			}
		case r.Expire:
			ops = append(s.expired(now), s.expiredPending(now)...)
			// Leave a place for each request after this one (each makes
			// one operation at most): the next sweep takes the rest.
			if room := chain.MaxWalletOps - len(res.Ops) - (len(reqs) - i - 1); len(ops) > room {
				ops = ops[:max(room, 0)]
			}
		case r.Post != nil:
			var op *chain.WalletOp
			if op, err = s.decidePost(r.Post, now); err == nil && op != nil {
				ops = []chain.WalletOp{*op}
			}
		case r.Withdraw != nil:
			if s.pending.get(*r.Withdraw) != nil {
				ops = []chain.WalletOp{{Kind: chain.WalletWithdraw, TxHash: *r.Withdraw, Since: now}}
			}
		}
		if err != nil {
			res.Outcomes[i].Err = err
			continue
		}
		for j := range ops {
			if len(res.Ops) == chain.MaxWalletOps {
				break // the next sweep takes the rest
			}
			if ops[j].Kind == chain.WalletExpire && ops[j].LeaseID == "" && s.pending.get(ops[j].TxHash) == nil {
				continue // expired with an ancestor just before
			}
			// Decided against the batch just before: only a storage
			// failure fails here.
			if err := s.applyOp(b, &ops[j], &next, len(res.Ops)); err != nil {
				return res, err
			}
			res.Ops = append(res.Ops, ops[j])
			res.Outcomes[i].Changed = true
		}
	}
	if len(res.Ops) == 0 {
		s.dropLapses()
		return res, nil
	}
	cs, err := s.commitWallet(b, res.Ops)
	if err != nil {
		return res, err
	}
	res.Changes = cs
	return res, nil
}

// ApplyWallet applies ops, a wallet change the writer logged, as one change:
// a replica's way to the writer's rows. Writer goroutine only.
func (s *Store) ApplyWallet(ops []chain.WalletOp) (*changeset.Set, error) {
	if err := s.canWrite(); err != nil {
		return nil, err
	}
	if len(ops) == 0 || len(ops) > chain.MaxWalletOps {
		return nil, fmt.Errorf("disk: wallet change of %d operations: %w", len(ops), chain.ErrInvalidArgument)
	}
	b := s.writeBatch()
	defer s.releaseScratch()
	s.dropLapses()
	next := s.State()
	next.Seq++
	for i := range ops {
		if err := ops[i].Validate(); err != nil {
			s.dropLapses()
			return nil, err
		}
		if err := s.applyOp(b, &ops[i], &next, i); err != nil {
			s.dropLapses()
			return nil, err
		}
	}
	return s.commitWallet(b, ops)
}

func (s *Store) commitWallet(b *keyBatch, ops []chain.WalletOp) (*changeset.Set, error) {
	prev := s.State()
	st := prev
	st.Seq++
	logFloor, err := s.logChange(b, &st, &chain.Change{Kind: chain.ChangeWallet, Wallet: ops, Pending: s.pendingMoves(0)})
	if err != nil {
		s.dropLapses()
		return nil, err
	}
	_ = b.Set(keyState, appendState(nil, &st), nil)
	if err := s.commitKeys(b); err != nil {
		s.dropLapses()
		return nil, fmt.Errorf("disk: commit wallet change %d: %w", st.Seq, err)
	}
	s.afterCommit(b)
	s.reportLapses()
	s.logFloor = logFloor
	s.state.Store(&st)
	// Answers that do not ask about leases or pending transactions do not
	// change, and answers that ask about leases are never cached; the
	// answers that include pending transactions and are cached (the
	// Esplora front end's) are invalidated by what the change's pending
	// transactions touched.
	ch := newChanges(prev.Tip, 0)
	s.addPendingTouched(ch, false)
	ch.cs.NewTip, ch.cs.Seq = st.Tip, st.Seq
	return &ch.cs, nil
}

// decideLease decides r at now: the operation that grants it, or why not.
func (s *Store) decideLease(r *chain.LeaseRequest, now uint64) (chain.WalletOp, error) {
	if err := r.Validate(); err != nil {
		return chain.WalletOp{}, err
	}
	id := r.ID
	if id == "" {
		id = chain.NewLeaseID()
	}
	ttl := uint64(r.TTL)
	if ttl == 0 {
		ttl = chain.DefaultLeaseTTL
	}
	var held []chain.HeldOutPoint
	for _, op := range r.OutPoints {
		rec, found, err := s.readRecord(op)
		if err != nil {
			return chain.WalletOp{}, err
		}
		if !found || rec.Spent != nil {
			// An output of a pending transaction may be leased too.
			if e := s.pending.get(op.TxHash); e == nil {
				return chain.WalletOp{}, fmt.Errorf("%s is not a live output: %w", op, chain.ErrUnknownInput)
			} else if _, ok := pendingOutput(e, op); !ok {
				return chain.WalletOp{}, fmt.Errorf("%s is not a live output: %w", op, chain.ErrUnknownInput)
			}
		}
		if rec.Frozen {
			return chain.WalletOp{}, fmt.Errorf("%s is frozen: %w", op, chain.ErrFrozen)
		}
		if h := s.leases.holder(op); h != "" && h != id {
			if e := s.leases.get(h); e != nil && e.expires > now {
				held = append(held, chain.HeldOutPoint{OutPoint: op, ExpiresAt: e.expires})
			}
		}
	}
	if len(held) > 0 {
		return chain.WalletOp{}, &chain.LeasedError{Held: held}
	}
	ops := slices.Clone(r.OutPoints)
	if prev := s.leases.get(id); prev != nil && prev.expires > now {
		// A renewal keeps what the lease holds.
		for _, o := range prev.ops {
			if !slices.Contains(ops, o) {
				ops = append(ops, o)
			}
		}
		if len(ops) > chain.MaxLeaseOutPoints {
			return chain.WalletOp{}, fmt.Errorf("lease %s would hold %d outpoints, at most %d: %w", id, len(ops), chain.MaxLeaseOutPoints, chain.ErrInvalidArgument)
		}
	}
	slices.SortFunc(ops, chain.CompareOutPoints)
	return chain.WalletOp{Kind: chain.WalletLease, LeaseID: id, OutPoints: ops, ExpiresAt: now + ttl}, nil
}

// expired returns the expire operations of the leases whose expiry is at or
// before now, in id order.
func (s *Store) expired(now uint64) []chain.WalletOp {
	var ids []string
	for id, e := range s.leases.byID {
		if _, touched := s.leases.byIDNew[id]; !touched && e.expires <= now {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	ops := make([]chain.WalletOp, len(ids))
	for i, id := range ids {
		ops[i] = chain.WalletOp{Kind: chain.WalletExpire, LeaseID: id}
	}
	return ops
}

// LeaseCount returns how many leases the committed state holds (expired
// ones not yet swept included). Writer goroutine only.
func (s *Store) LeaseCount() int { return len(s.leases.byID) }

// NextLeaseExpiry returns the earliest expiry of the committed leases, and
// false when there are none. Writer goroutine only.
func (s *Store) NextLeaseExpiry() (uint64, bool) {
	var m uint64
	for _, e := range s.leases.byID {
		if m == 0 || e.expires < m {
			m = e.expires
		}
	}
	return m, m != 0
}

// LeasedUntil returns the expiry of the lease that holds op at this view's
// state, and false when none does. It does not look at a clock: the caller
// compares the expiry with its own (an expired lease holds nothing).
func (v *View) LeasedUntil(op chain.OutPoint) (uint64, bool, error) {
	raw, closer, err := v.snap.Get(appendLeaseHeldKey(nil, op))
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("disk: read lease of %s: %w", op, err)
	}
	defer closer.Close()
	_, exp, err := decodeLeaseHeldRow(raw)
	if err != nil {
		return 0, false, errors.Join(err, ErrCorrupt)
	}
	return exp, true, nil
}

// Lease returns lease id at this view's state; found is false when there is
// no such lease (never granted, released, or swept after its expiry).
func (v *View) Lease(id string) (li LeaseInfo, found bool, err error) {
	raw, closer, err := v.snap.Get(appendLeaseKey(nil, id))
	if errors.Is(err, pebble.ErrNotFound) {
		return li, false, nil
	}
	if err != nil {
		return li, false, fmt.Errorf("disk: read lease %q: %w", id, err)
	}
	defer closer.Close()
	e, err := decodeLeaseRow(raw)
	if err != nil {
		return li, false, errors.Join(err, ErrCorrupt)
	}
	return LeaseInfo{ID: id, ExpiresAt: e.expires, OutPoints: e.ops}, true, nil
}

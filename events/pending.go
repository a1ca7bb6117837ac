package events

import (
	"slices"
	"strconv"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/query"
)

// Pending effects (docs/events.md#pending-transactions). A change record
// names the pending transactions that entered or left the pending set in
// the change (chain.Change.Pending), each with its transaction and the
// outputs its inputs spend, so a change's effects on every watched value's
// pending view are derived from its record alone, on the writer and on
// every replica, without the state before it.
//
// The pending view of a value is two sets: its unconfirmed outputs (those
// pending transactions create under it) and its outputs (confirmed or
// unconfirmed) that pending transactions spend, each with its spender.
// One change's effect on them is given net: an outpoint that left a set is
// in removed (unspent), one that entered it in created (spent), one that
// left and entered again (with another spender, or posted again) in both.
// A watcher removes first, then adds.

// pendOut is an unconfirmed output entering a value's view.
type pendOut struct {
	u     *chain.Utxo
	since uint64
}

// pendEffects is what one change did to one value's pending view.
type pendEffects struct {
	created []pendOut
	spent   []spend
	removed []chain.OutPoint // unconfirmed outputs that left the view
	unspent []chain.OutPoint // outpoints no pending transaction spends now
	moves   []int            // the change's moves that touched the value, ascending
	frag    []byte           // the encoded effects; dispatcher's goroutine only

	// While a change is digested: each outpoint's first and last move.
	outs   map[chain.OutPoint]*netOut
	spends map[chain.OutPoint]*netSpend
	order  []chain.OutPoint // outs, in first-move order
	sorder []chain.OutPoint // spends, in first-move order
}

type netOut struct {
	wasIn bool     // it was in the view before the change
	last  *pendOut // nil: not in the view after it
}

type netSpend struct {
	wasIn bool
	last  *spend
}

func (e *pendEffects) move(i int) {
	if n := len(e.moves); n == 0 || e.moves[n-1] != i {
		e.moves = append(e.moves, i)
	}
}

// out records an unconfirmed output entering (o non-nil) or leaving (op)
// the view.
func (e *pendEffects) out(op chain.OutPoint, o *pendOut) {
	if e.outs == nil {
		e.outs = map[chain.OutPoint]*netOut{}
	}
	n := e.outs[op]
	if n == nil {
		n = &netOut{wasIn: o == nil}
		e.outs[op] = n
		e.order = append(e.order, op)
	}
	n.last = o
}

// spendOf records an outpoint's pending spend entering (s non-nil) or
// leaving the view.
func (e *pendEffects) spendOf(op chain.OutPoint, s *spend) {
	if e.spends == nil {
		e.spends = map[chain.OutPoint]*netSpend{}
	}
	n := e.spends[op]
	if n == nil {
		n = &netSpend{wasIn: s == nil}
		e.spends[op] = n
		e.sorder = append(e.sorder, op)
	}
	n.last = s
}

// settle turns the first and last moves of each outpoint into the net
// lists.
func (e *pendEffects) settle() {
	for _, op := range e.order {
		n := e.outs[op]
		if n.wasIn {
			e.removed = append(e.removed, op)
		}
		if n.last != nil {
			e.created = append(e.created, *n.last)
		}
	}
	for _, op := range e.sorder {
		n := e.spends[op]
		if n.wasIn {
			e.unspent = append(e.unspent, op)
		}
		if n.last != nil {
			e.spent = append(e.spent, *n.last)
		}
	}
	e.outs, e.spends, e.order, e.sorder = nil, nil, nil, nil
}

// empty reports whether the change left no trace on the view: every
// outpoint it moved entered and left again.
func (e *pendEffects) empty() bool {
	return len(e.created) == 0 && len(e.spent) == 0 && len(e.removed) == 0 && len(e.unspent) == 0
}

// pendingEffects digests the pending moves of c into d.
func (g *digester) pendingEffects(c *chain.Change, d *digest) {
	if len(c.Pending) == 0 {
		return
	}
	d.moves = c.Pending
	d.ptouched = map[string]*pendEffects{}
	at := func(u *chain.Utxo, fn func(e *pendEffects)) {
		for i, dim := range g.dims {
			g.funcs[i](u, func(v []byte) {
				id := keyID(dim, v)
				e := d.ptouched[id]
				if e == nil {
					e = &pendEffects{}
					d.ptouched[id] = e
				}
				fn(e)
			})
		}
	}
	for i := range c.Pending {
		mv := &c.Pending[i]
		enter := mv.Status == chain.PendingActive
		for j := range mv.Spent {
			u := &mv.Spent[j]
			var s *spend
			if enter {
				s = &spend{op: u.OutPoint, tx: mv.Tx.Hash, input: uint32(j)}
			}
			at(u, func(e *pendEffects) { e.move(i); e.spendOf(u.OutPoint, s) })
		}
		mv.Tx.Creates(func(index uint32, out *chain.Output, _ bool) {
			u := &chain.Utxo{OutPoint: chain.OutPoint{TxHash: mv.Tx.Hash, Index: index}, Output: *out}
			var o *pendOut
			if enter {
				o = &pendOut{u: u, since: mv.Since}
			}
			at(u, func(e *pendEffects) { e.move(i); e.out(u.OutPoint, o) })
		})
	}
	for id, e := range d.ptouched {
		e.settle()
		if e.empty() {
			delete(d.ptouched, id) // entered and left again: no effect
		}
	}
}

// appendPendingFragment appends the members of e after "key":
// `"created":[Utxo…],"spent":[…],"removed":[…],"unspent":[…]}`.
func appendPendingFragment(dst []byte, e *pendEffects) []byte {
	dst = append(dst, `"created":[`...)
	for i, o := range e.created {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = query.AppendPendingUtxo(dst, o.u, o.since)
	}
	dst = append(dst, `],"spent":[`...)
	dst = appendSpends(dst, e.spent)
	dst = append(dst, `],"removed":[`...)
	dst = appendOutPoints(dst, e.removed)
	dst = append(dst, `],"unspent":[`...)
	dst = appendOutPoints(dst, e.unspent)
	return append(dst, `]}`...)
}

func appendOutPoints(dst []byte, ops []chain.OutPoint) []byte {
	for i, op := range ops {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendOutPoint(dst, op)
	}
	return dst
}

// appendPendingPart appends `"txs":[…],"keys":[…]` of the pending effects
// effs of keys: the moves that touched any of them, in the change's order,
// then each key's effects.
func appendPendingPart(dst []byte, d *digest, keys []*Key, effs []*pendEffects) []byte {
	var moves []int
	for _, e := range effs {
		moves = append(moves, e.moves...)
	}
	slices.Sort(moves)
	moves = slices.Compact(moves)
	dst = append(dst, `"txs":[`...)
	for i, m := range moves {
		if i > 0 {
			dst = append(dst, ',')
		}
		mv := &d.moves[m]
		dst = append(dst, `{"tx_hash":`...)
		dst = query.AppendHexString(dst, mv.Tx.Hash[:])
		dst = append(dst, `,"status":"`...)
		dst = append(dst, mv.Status.String()...)
		dst = append(dst, `"}`...)
	}
	dst = append(dst, `],"keys":[`...)
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"key":`...)
		dst = append(dst, k.json...)
		dst = append(dst, ',')
		e := effs[i]
		if e.frag == nil {
			e.frag = appendPendingFragment(nil, e)
		}
		dst = append(dst, e.frag...)
	}
	return append(dst, ']')
}

// appendPendingEvent appends the event of d for a stream that asked for
// pending transactions: keys and effs are its keys the confirmed part
// touched, pkeys and peffs those the pending part touched (each in the
// stream's order). A wallet change is `event: pending`; an apply or a
// rollback is its event as without pending, with a "pending" member when
// the pending part touched the stream's keys.
func appendPendingEvent(dst []byte, d *digest, keys []*Key, effs []*effects, pkeys []*Key, peffs []*pendEffects) []byte {
	if d.kind != chain.ChangeApply && d.kind != chain.ChangeRollback {
		dst = appendEventHead(dst, d.seq, "pending")
		dst = append(dst, ',')
		dst = appendPendingPart(dst, d, pkeys, peffs)
		return append(dst, "}\n\n"...)
	}
	dst = appendEvent(dst, d, keys, effs)
	if len(pkeys) == 0 {
		return dst
	}
	dst = dst[:len(dst)-len("}\n\n")]
	dst = append(dst, `,"pending":{`...)
	dst = appendPendingPart(dst, d, pkeys, peffs)
	return append(dst, "}}\n\n"...)
}

// appendSpends appends spends as `{"tx_hash","index","by":{…}}`, comma
// separated.
func appendSpends(dst []byte, ss []spend) []byte {
	for i, s := range ss {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendOutPoint(dst, s.op)
		dst = append(dst[:len(dst)-1], `,"by":{"tx_hash":`...)
		dst = query.AppendHexString(dst, s.tx[:])
		dst = append(dst, `,"input":`...)
		dst = strconv.AppendUint(dst, uint64(s.input), 10)
		dst = append(dst, `}}`...)
	}
	return dst
}

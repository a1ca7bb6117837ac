package query

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

// # Pending transactions
//
// The pending set lives in the store beside the confirmed state and changes
// only through the commit sequence (docs/wallet-state.md): every read of it
// comes from one published snapshot, so a node answers its writer's
// pending set at its own seq. Answers about pending transactions are read
// from the snapshot each time and never cached: answers that do not ask
// about them read nothing of them, so their cache entries and ETags are
// untouched by wallet changes.
//
// Front ends that serve pending data in their own shapes (Esplora's
// mempool stats, Blockfrost) call PendingOf with a published view: the
// unconfirmed outputs of a key, the outputs of the key that pending
// transactions spend, and their sums.

// PendingStatus answers GET /v1/pending/{tx_hash}: {"tx_hash", "status",
// "height"? (confirmed), "conflicts_with"? (conflicting), "since"}, or 404
// not_found when this node's state knows nothing of it (never posted, or
// forgotten). Read from one snapshot, never cached.
func (s *Server) PendingStatus(ctx context.Context, h chain.Hash) (Answer, error) {
	v, err := s.store.PublishedView()
	if err != nil {
		return Answer{}, err
	}
	defer v.Close()
	s.m.diskRead()
	info, found, err := v.PendingStatus(h)
	if err != nil {
		return Answer{}, err
	}
	buf := getAnswerBuf()
	body := *buf
	status := 200
	if !found {
		status = 404
		body = appendErrorBody(body, "not_found", "transaction "+h.String()+" is not known to the pending set at this seq (never posted, or forgotten)")
	} else {
		body = AppendPendingInfo(body, &info)
		body = append(body, '}')
	}
	*buf = body
	return Answer{Status: status, Tip: v.Tip(), Seq: v.State().Seq, Body: body, Tier: "disk", buf: buf}, nil
}

// AppendPendingInfo appends the members of a pending status object
// (without braces): "tx_hash", "status", "height"?, "conflicts_with"?,
// "since".
func AppendPendingInfo(body []byte, info *chain.PendingInfo) []byte {
	body = append(body, `"tx_hash":`...)
	body = appendHexString(body, info.TxHash[:])
	body = append(body, `,"status":"`...)
	body = append(body, info.Status.String()...)
	body = append(body, '"')
	if info.Status == chain.PendingConfirmed {
		body = append(body, `,"height":`...)
		body = strconv.AppendUint(body, info.Height, 10)
	}
	if info.Status == chain.PendingConflicting && !info.ConflictsWith.IsZero() {
		body = append(body, `,"conflicts_with":`...)
		body = appendHexString(body, info.ConflictsWith[:])
	}
	body = append(body, `,"since":`...)
	return strconv.AppendUint(body, info.Since, 10)
}

// PendingOfKey is what the pending set says of one index key at one
// snapshot.
type PendingOfKey struct {
	// Funded are the unconfirmed outputs pending transactions pay to the
	// key, in posting order, each with when its transaction was posted;
	// those another pending transaction spends included (Spent names them).
	Funded []disk.PendingOutput
	// Spent are the key's outputs, confirmed or unconfirmed, that pending
	// transactions spend, in outpoint order.
	Spent []disk.PendingSpentOutput
	// Sums are Esplora's mempool_stats: funded over Funded, spent over
	// Spent (assets filtered as the key's balance filters them: none is
	// filtered for an address or a credential).
	FundedSum, SpentSum chain.Balance
}

// PendingOf reads what the pending set says of value in dimension dim from
// v (a published view: the caller's snapshot, so the answer is consistent
// with its confirmed part). Safe for concurrent use; v stays the caller's.
func PendingOf(v *disk.View, dim disk.Dimension, value []byte) (PendingOfKey, error) {
	var p PendingOfKey
	err := v.PendingOutputs(dim, value, false, func(o *disk.PendingOutput) error {
		p.Funded = append(p.Funded, *o)
		p.FundedSum = addToBalance(p.FundedSum, &o.Utxo)
		return nil
	})
	if err != nil {
		return p, err
	}
	err = v.PendingSpentOf(dim, value, func(o *disk.PendingSpentOutput) error {
		p.Spent = append(p.Spent, *o)
		p.SpentSum = addToBalance(p.SpentSum, &o.Utxo)
		return nil
	})
	for _, b := range []*chain.Balance{&p.FundedSum, &p.SpentSum} {
		slices.SortFunc(b.Assets, func(x, y chain.AssetSum) int {
			if c := bytes.Compare(x.Policy, y.Policy); c != 0 {
				return c
			}
			return bytes.Compare(x.Name, y.Name)
		})
	}
	return p, err
}

// addToBalance adds u (its value and every asset) to b.
func addToBalance(b chain.Balance, u *chain.Utxo) chain.Balance {
	b.Count++
	b.Value = b.Value.AddU64(u.Value)
	for _, a := range u.Assets {
		found := false
		for i := range b.Assets {
			if string(b.Assets[i].Policy) == string(a.Policy) && string(b.Assets[i].Name) == string(a.Name) {
				b.Assets[i].Quantity = b.Assets[i].Quantity.AddU64(a.Quantity)
				found = true
				break
			}
		}
		if !found {
			b.Assets = append(b.Assets, chain.AssetSum{Policy: a.Policy, Name: a.Name, Quantity: chain.Uint128{}.AddU64(a.Quantity)})
		}
	}
	return b
}

// pendingCursorBit marks a cursor position in the unconfirmed part of a
// listing with pending=include: its Height holds the bit and the posting
// order, its Index the output index. No block height reaches 2^63.
const pendingCursorBit = 1 << 63

func pendingPosOf(p *chain.Position) (*disk.PendingPos, bool) {
	if p == nil || p.Height&pendingCursorBit == 0 {
		return nil, false
	}
	return &disk.PendingPos{Order: p.Height &^ pendingCursorBit, Index: p.Index}, true
}

func pendingCursorPos(p disk.PendingPos) chain.Position {
	return chain.Position{Height: pendingCursorBit | p.Order, Index: p.Index}
}

// pendingItem wraps item: a confirmed output that a pending transaction
// spends (as spenders looks it up) gets "pending_spent_by": {"tx_hash",
// "input"}. When no pending transaction spends anything, item is all there
// is to do.
func pendingItem(spenders *disk.PendingSpenders, item itemFunc) itemFunc {
	if spenders.None() {
		return item
	}
	return func(body []byte, r *disk.UtxoRef) ([]byte, error) {
		body, err := item(body, r)
		if err != nil || r.Spent {
			return body, err
		}
		sp, found, err := spenders.Of(r.OutPoint)
		if err != nil || !found {
			return body, err
		}
		// appendPendingSpend's bytes, in fewer appends.
		body = append(body[:len(body)-1], `,"pending_spent_by":{"tx_hash":"`...)
		body = hex.AppendEncode(body, sp.TxHash[:])
		body = append(body, `","input":`...)
		body = strconv.AppendUint(body, uint64(sp.Input), 10)
		return append(body, "}}"...), nil
	}
}

func appendPendingSpend(body []byte, sp disk.PendingSpend) []byte {
	body = append(body, `{"tx_hash":`...)
	body = appendHexString(body, sp.TxHash[:])
	body = append(body, `,"input":`...)
	body = strconv.AppendUint(body, uint64(sp.Input), 10)
	return append(body, '}')
}

// appendPendingUtxo appends the Utxo object of an unconfirmed output: the
// members of a confirmed one (appendChainUtxo) without "height", with
// "confirmed": false and "pending_since".
func appendPendingUtxo(dst []byte, u *chain.Utxo, since uint64) []byte {
	start := len(dst)
	dst = appendChainUtxo(dst, u)
	// appendChainUtxo ends `,"height":H}` (a pending output is no coinbase
	// and no collateral return): cut the height.
	if i := lastIndex(dst[start:], `,"height":`); i >= 0 {
		dst = dst[:start+i]
	}
	dst = append(dst, `,"confirmed":false,"pending_since":`...)
	dst = strconv.AppendUint(dst, since, 10)
	return append(dst, '}')
}

// appendPendingUtxoRef appends the Utxo object of an unconfirmed output
// read in place (disk.PendingOutputRefs): the bytes appendPendingUtxo
// appends for the output's chain.Utxo, with no chain.Utxo built
// (TestChainUtxoEncodingMatchesStored and FuzzUtxoEncoding hold the two
// byte for byte).
func appendPendingUtxoRef(dst []byte, r *disk.UtxoRef, since uint64) []byte {
	dst = appendUtxoHead(dst, r)
	dst = append(dst, `,"confirmed":false,"pending_since":`...)
	dst = strconv.AppendUint(dst, since, 10)
	return append(dst, '}')
}

func lastIndex(b []byte, sep string) int {
	for i := len(b) - len(sep); i >= 0; i-- {
		if string(b[i:i+len(sep)]) == sep {
			return i
		}
	}
	return -1
}

// appendPendingListing appends the items and the next cursor of a listing
// with pending=include (`"utxos":[…],"next_cursor":…}`): the confirmed
// outputs as q lists them (q.After unset: after decides), each marked when
// a pending transaction spends it, and the unconfirmed outputs of the
// value that no pending transaction spends, after the confirmed ones
// ascending and before them descending, in posting order (reversed
// descending). A page holds q.Limit items at most; its cursor names a
// position in either part (pendingCursorBit).
func (s *Server) appendPendingListing(v *disk.View, body []byte, q disk.ListQuery, after *chain.Position, subject string, item itemFunc) ([]byte, error) {
	body = append(body, `"utxos":[`...)
	spenders := v.PendingSpenders()
	item = pendingItem(&spenders, item)
	n, limit := 0, q.Limit
	sep := func() {
		if n > 0 {
			body = append(body, ',')
		}
	}
	// confirmed lists up to limit confirmed outputs after after: the
	// position to resume from when more remain, and the last one listed.
	var lastConfirmed chain.Position
	confirmed := func(after *chain.Position, limit int) (next chain.Position, more bool, last *chain.Position, err error) {
		q.After, q.Limit = after, limit
		listed := false
		next, more, err = v.ListFunc(q, func(r *disk.UtxoRef) error {
			sep()
			var err error
			body, err = item(body, r)
			n++
			lastConfirmed, listed = chain.Position{Height: r.Height, TxPos: r.TxPos, Index: r.OutPoint.Index}, true
			return err
		})
		if listed {
			last = &lastConfirmed
		}
		return next, more, last, err
	}
	// unconfirmed lists up to limit unconfirmed outputs after pafter:
	// whether more remain, and the last one listed.
	var lastPending disk.PendingPos
	unconfirmed := func(pafter *disk.PendingPos, limit int) (more bool, last *disk.PendingPos, err error) {
		err = v.PendingOutputRefs(q.Dim, q.Value, pafter, q.Desc, func(o *disk.PendingOutputRef) error {
			if _, spent, err := spenders.Of(o.Ref.OutPoint); err != nil || spent {
				return err
			}
			if limit == 0 {
				more = true
				return disk.ErrStop
			}
			limit--
			sep()
			body = appendPendingUtxoRef(body, &o.Ref, o.Since)
			n++
			lastPending = disk.PendingPos{Order: o.Order, Index: o.Ref.OutPoint.Index}
			last = &lastPending
			return nil
		})
		return more, last, err
	}
	pendingCursor := func(p *disk.PendingPos) *chain.Position {
		c := pendingCursorPos(*p)
		return &c
	}
	pafter, inPending := pendingPosOf(after)
	var cursor *chain.Position
	switch {
	case !q.Desc && !inPending:
		next, more, last, err := confirmed(after, limit)
		if err != nil {
			return body, err
		}
		if more {
			cursor = &next
			break
		}
		rest := limit - n
		pmore, plast, err := unconfirmed(nil, rest)
		if err != nil {
			return body, err
		}
		switch {
		case pmore && rest == 0:
			cursor = last // a page full of confirmed outputs, then the others
		case pmore:
			cursor = pendingCursor(plast)
		}
	case !q.Desc || after == nil || inPending:
		pmore, plast, err := unconfirmed(pafter, limit)
		if err != nil {
			return body, err
		}
		if pmore {
			cursor = pendingCursor(plast)
			break
		}
		if !q.Desc {
			break
		}
		rest := limit - n
		if rest == 0 {
			if any, err := confirmedAny(v, q); err != nil {
				return body, err
			} else if any {
				cursor = pendingCursor(plast)
			}
			break
		}
		next, more, _, err := confirmed(nil, rest)
		if err != nil {
			return body, err
		}
		if more {
			cursor = &next
		}
	default: // descending, in the confirmed part
		next, more, _, err := confirmed(after, limit)
		if err != nil {
			return body, err
		}
		if more {
			cursor = &next
		}
	}
	body = append(body, `],"next_cursor":`...)
	if cursor == nil {
		body = append(body, "null"...)
	} else {
		body = append(body, '"')
		body = s.cursors.append(body, subject, q.Desc, *cursor)
		body = append(body, '"')
	}
	return append(body, '}'), nil
}

// confirmedAny reports whether q's confirmed listing may hold an item (one
// it keeps, or more to scan).
func confirmedAny(v *disk.View, q disk.ListQuery) (bool, error) {
	q.After, q.Limit = nil, 1
	found := false
	_, more, err := v.ListFunc(q, func(*disk.UtxoRef) error { found = true; return nil })
	return found || more, err
}

// appendPendingSums appends `,"pending":{"funded","spent","assets_funded",
// "assets_spent"}` for p.
func appendPendingSums(body []byte, p *PendingOfKey) []byte {
	body = append(body, `,"pending":{"funded":"`...)
	body = append(body, p.FundedSum.Value.String()...)
	body = append(body, `","spent":"`...)
	body = append(body, p.SpentSum.Value.String()...)
	body = append(body, `","assets_funded":`...)
	body = appendAssetSums(body, p.FundedSum.Assets)
	body = append(body, `,"assets_spent":`...)
	body = appendAssetSums(body, p.SpentSum.Assets)
	return append(body, '}')
}

func appendAssetSums(body []byte, assets []chain.AssetSum) []byte {
	body = append(body, '[')
	for i, a := range assets {
		if i > 0 {
			body = append(body, ',')
		}
		body = append(body, `{"policy":`...)
		body = appendHexString(body, a.Policy)
		body = append(body, `,"name":`...)
		body = appendHexString(body, a.Name)
		body = append(body, `,"quantity":"`...)
		body = append(body, a.Quantity.String()...)
		body = append(body, `"}`...)
	}
	return append(body, ']')
}

// BalancePending answers an address's balance with pending=include: the
// confirmed figures as Balance answers them, and "pending": the sums of
// what pending transactions pay to it and spend of it. Read from one
// snapshot, never cached.
func (s *Server) BalancePending(ctx context.Context, address string) (Answer, error) {
	if err := checkAddress(address); err != nil {
		return Answer{}, err
	}
	return s.readUncached("p", func(v *disk.View, body []byte) ([]byte, error) {
		b, err := v.Balance(disk.DimAddress, []byte(address))
		if err != nil {
			return body, err
		}
		p, err := PendingOf(v, disk.DimAddress, []byte(address))
		if err != nil {
			return body, err
		}
		body = appendBalanceBody(body, address, &b)
		return append(appendPendingSums(body[:len(body)-1], &p), '}'), nil
	})
}

// IndexBalancePending is IndexBalance with pending=include (BalancePending).
func (s *Server) IndexBalancePending(ctx context.Context, k IndexKey) (Answer, error) {
	if err := s.checkIndexKey(k); err != nil {
		return Answer{}, err
	}
	return s.readUncached("p", func(v *disk.View, body []byte) ([]byte, error) {
		b, err := v.Balance(k.Dim, k.Value)
		if err != nil {
			return body, err
		}
		p, err := PendingOf(v, k.Dim, k.Value)
		if err != nil {
			return body, err
		}
		body = append(body, '"')
		body = append(body, k.Field...)
		body = append(body, `":`...)
		body = appendString(body, k.Label)
		body = append(body, ',')
		body = appendBalanceFields(body, &b)
		return append(appendPendingSums(body[:len(body)-1], &p), '}'), nil
	})
}

// appendOutPointPending appends the members of one outpoint's answer with
// pending=include (`"utxo":…,"spent":…,"pending_spent":…`, no braces): a
// confirmed output as mode shows it, or an unconfirmed one; found is false
// when v holds neither (or mode excludes it as leased).
func appendOutPointPending(body []byte, v *disk.View, op chain.OutPoint, mode LeaseMode, now uint64) (_ []byte, found bool, err error) {
	err = v.UtxoFunc(op, func(r *disk.UtxoRef) error {
		var until uint64
		if !r.Spent && mode != LeasedAny {
			var err error
			if until, err = leasedUntil(v, op, now); err != nil {
				return err
			}
		}
		if mode == LeasedExclude && until != 0 {
			return nil
		}
		found = true
		body = append(body, `"utxo":`...)
		if mode == LeasedInclude {
			var err error
			if body, err = appendLeasedUtxo(body, v, r, now); err != nil {
				return err
			}
		} else {
			body = appendUtxo(body, r)
		}
		body = append(body, `,"spent":`...)
		body = appendSpent(body, r)
		return nil
	})
	if errors.Is(err, chain.ErrNotFound) {
		err = nil
	}
	if err != nil {
		return body, false, err
	}
	if !found {
		tx, info, pending, err := v.PendingTxOf(op.TxHash)
		if err != nil || !pending || int(op.Index) >= len(tx.Outputs) || tx.Outputs[op.Index].Unspendable {
			return body, false, err
		}
		found = true
		u := chain.Utxo{OutPoint: op, Output: tx.Outputs[op.Index]}
		body = append(body, `"utxo":`...)
		body = appendPendingUtxo(body, &u, info.Since)
		body = append(body, `,"spent":null`...)
	}
	body = append(body, `,"pending_spent":`...)
	sp, spent, err := v.PendingSpender(op)
	if err != nil {
		return body, false, err
	}
	if spent {
		body = appendPendingSpend(body, sp)
	} else {
		body = append(body, "null"...)
	}
	return body, true, nil
}

// UtxoPending answers one outpoint with pending=include: as Utxo (or
// UtxoLeased with mode), with "pending_spent", and an unconfirmed output
// answered too ("confirmed": false). Read from one snapshot, never cached.
func (s *Server) UtxoPending(ctx context.Context, op chain.OutPoint, mode LeaseMode) (Answer, error) {
	v, err := s.store.PublishedView()
	if err != nil {
		return Answer{}, err
	}
	defer v.Close()
	s.m.diskRead()
	buf := getAnswerBuf()
	body, found, err := appendOutPointPending(*buf, v, op, mode, s.now())
	status := 200
	if err == nil && !found {
		status = 404
		body = appendErrorBody(body[:len(*buf)], "not_found", "outpoint "+op.String()+" is neither known nor pending at this seq")
	} else if err == nil {
		body = append(body, '}')
	}
	*buf = body
	if err != nil {
		putAnswerBuf(buf)
		return Answer{}, err
	}
	return Answer{Status: status, Tip: v.Tip(), Seq: v.State().Seq, ETag: filteredETag("p", etagOf(body)), Body: body, Tier: "disk", buf: buf}, nil
}

// LookupPending answers a batch of outpoints with pending=include, each as
// UtxoPending answers it ("utxo": null, "spent": null, "pending_spent":
// null for one v holds neither confirmed nor pending). One snapshot.
func (s *Server) LookupPending(ctx context.Context, ops []chain.OutPoint, mode LeaseMode) (Answer, error) {
	if len(ops) < 1 || len(ops) > MaxLookup {
		return Answer{}, errTooManyOutPoints(len(ops))
	}
	v, err := s.store.PublishedView()
	if err != nil {
		return Answer{}, err
	}
	defer v.Close()
	s.m.diskRead()
	now := s.now()
	buf := getAnswerBuf()
	body := append(*buf, `"results":[`...)
	for i, op := range ops {
		if i > 0 {
			body = append(body, ',')
		}
		body = appendOutPointHead(body, op)
		body = append(body, ',')
		mark := len(body)
		var found bool
		if body, found, err = appendOutPointPending(body, v, op, mode, now); err != nil {
			*buf = body
			putAnswerBuf(buf)
			return Answer{}, err
		}
		if !found {
			body = append(body[:mark], `"utxo":null,"spent":null,"pending_spent":null`...)
		}
		body = append(body, '}')
	}
	body = append(body, "]}"...)
	*buf = body
	return Answer{Status: 200, Tip: v.Tip(), Seq: v.State().Seq, Body: body, Tier: "disk", buf: buf}, nil
}

func errTooManyOutPoints(n int) error {
	return fmt.Errorf("%d outpoints outside 1..%d: %w", n, MaxLookup, chain.ErrInvalidArgument)
}

// AppendPendingUtxo appends the Utxo object of an unconfirmed output posted
// at since (unix seconds), as listings with pending=include show it.
func AppendPendingUtxo(dst []byte, u *chain.Utxo, since uint64) []byte {
	return appendPendingUtxo(dst, u, since)
}

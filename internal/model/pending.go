package model

import (
	"fmt"
	"slices"

	"github.com/utxo-cache/utxo-cache/chain"
)

// Pending transactions (docs/wallet-state.md), modelled from their rules
// alone: the pending set in posting order, each transaction's inputs live
// confirmed outputs or outputs of other pending transactions, at most one
// pending spender per outpoint; blocks confirm and conflict them, rollbacks
// return them.

type pendingTx struct {
	tx             chain.Tx
	order          uint64
	since, expires uint64
}

type pendingState struct {
	txs    []*pendingTx // posting order
	status map[chain.Hash]chain.PendingInfo
	// byBlock is what each block of the current chain did to the pending
	// set: the transactions it confirmed or made conflicting, as they were.
	byBlock   map[uint64][]*pendingTx
	nextOrder uint64
	maxHeight uint64
	forgetAt  map[chain.Hash]uint64
}

func (m *Model) pend() *pendingState {
	if m.pending == nil {
		m.pending = &pendingState{status: map[chain.Hash]chain.PendingInfo{}, byBlock: map[uint64][]*pendingTx{}, forgetAt: map[chain.Hash]uint64{}}
	}
	return m.pending
}

func (m *Model) pendingOf(h chain.Hash) *pendingTx {
	for _, p := range m.pend().txs {
		if p.tx.Hash == h {
			return p
		}
	}
	return nil
}

// PendingSpender returns the pending transaction that spends op and the
// input, and false when none does.
func (m *Model) PendingSpender(op chain.OutPoint) (chain.Hash, uint32, bool) {
	for _, p := range m.pend().txs {
		for i, in := range p.tx.Inputs {
			if in == op {
				return p.tx.Hash, uint32(i), true
			}
		}
	}
	return chain.Hash{}, 0, false
}

// pendingOutput returns output op of a pending transaction.
func (m *Model) pendingOutput(op chain.OutPoint) (*pendingTx, bool) {
	p := m.pendingOf(op.TxHash)
	return p, p != nil && int(op.Index) < len(p.tx.Outputs)
}

func (m *Model) spendable(op chain.OutPoint) bool {
	if _, ok := m.pendingOutput(op); ok {
		return true
	}
	return m.IsLive(op)
}

// descendants returns p and the pending transactions that spend its
// outputs, and theirs, in posting order.
func (m *Model) descendants(h chain.Hash) []*pendingTx {
	in := map[chain.Hash]bool{h: true}
	var out []*pendingTx
	for _, p := range m.pend().txs { // posting order: parents first
		if in[p.tx.Hash] && p.tx.Hash == h {
			out = append(out, p)
			continue
		}
		for _, op := range p.tx.Inputs {
			if in[op.TxHash] {
				in[p.tx.Hash] = true
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// leave takes ps out of the pending set with status info (TxHash and Order
// filled per transaction).
func (m *Model) leave(ps []*pendingTx, info chain.PendingInfo, sinceOwn bool) {
	st := m.pend()
	for _, p := range ps {
		st.txs = slices.DeleteFunc(st.txs, func(x *pendingTx) bool { return x == p })
		i := info
		i.TxHash, i.Order = p.tx.Hash, p.order
		if sinceOwn {
			i.Since = p.since
		}
		st.status[p.tx.Hash] = i
		st.forgetAt[p.tx.Hash] = st.maxHeight
		if info.Status != chain.PendingConfirmed {
			for j := range p.tx.Outputs { // its outputs are gone: their leases lapse
				m.lapse(chain.OutPoint{TxHash: p.tx.Hash, Index: uint32(j)})
			}
		}
	}
}

func (m *Model) insert(p *pendingTx) {
	st := m.pend()
	i, _ := slices.BinarySearchFunc(st.txs, p.order, func(x *pendingTx, o uint64) int {
		switch {
		case x.order < o:
			return -1
		case x.order > o:
			return 1
		}
		return 0
	})
	st.txs = slices.Insert(st.txs, i, p)
	for _, op := range p.tx.Inputs {
		m.lapse(op)
	}
	delete(st.status, p.tx.Hash)
	st.status[p.tx.Hash] = chain.PendingInfo{TxHash: p.tx.Hash, Status: chain.PendingActive, Since: p.since, Order: p.order}
}

// Post adds tx to the pending set at the clock now with a ttl (seconds),
// within maxTxs. It returns changed false for a transaction already
// pending. Errors: chain.ErrInvalidArgument, chain.ErrUnknownInput,
// *chain.ConflictError (without replace), chain.ErrInsufficientStorage.
func (m *Model) Post(tx chain.Tx, replace bool, now, ttl uint64, maxTxs int) (changed bool, err error) {
	if err := chain.CheckPendingTx(&tx); err != nil {
		return false, err
	}
	if m.pendingOf(tx.Hash) != nil {
		return false, nil
	}
	evict := map[chain.Hash]bool{}
	var evicted []*pendingTx
	for _, op := range tx.Inputs {
		if !m.spendable(op) {
			return false, fmt.Errorf("%s: %w", op, chain.ErrUnknownInput)
		}
		h, i, ok := m.PendingSpender(op)
		if !ok {
			continue
		}
		if !replace {
			return false, &chain.ConflictError{OutPoint: op, Spender: h, Input: i}
		}
		for _, d := range m.descendants(h) {
			if !evict[d.tx.Hash] {
				evict[d.tx.Hash] = true
				evicted = append(evicted, d)
			}
		}
	}
	for _, op := range tx.Inputs {
		if evict[op.TxHash] {
			return false, fmt.Errorf("%s is an output of a replaced transaction: %w", op, chain.ErrUnknownInput)
		}
	}
	if len(m.pend().txs)+1-len(evicted) > maxTxs {
		return false, chain.ErrInsufficientStorage
	}
	slices.SortFunc(evicted, func(a, b *pendingTx) int { return cmpOrder(a.order, b.order) })
	m.leave(evicted, chain.PendingInfo{Status: chain.PendingConflicting, ConflictsWith: tx.Hash, Since: now}, false)
	st := m.pend()
	st.nextOrder++
	m.insert(&pendingTx{tx: cloneTx(tx), order: st.nextOrder, since: now, expires: now + ttl})
	return true, nil
}

func cloneTx(tx chain.Tx) chain.Tx {
	c := tx
	c.Inputs = slices.Clone(tx.Inputs)
	c.Outputs = make([]chain.Output, len(tx.Outputs))
	for i := range tx.Outputs {
		c.Outputs[i] = cloneOutput(&tx.Outputs[i])
	}
	return c
}

// Withdraw withdraws pending transaction h and its descendants at now;
// false when h is not pending.
func (m *Model) Withdraw(h chain.Hash, now uint64) bool {
	if m.pendingOf(h) == nil {
		return false
	}
	m.leave(m.descendants(h), chain.PendingInfo{Status: chain.PendingWithdrawn, Since: now}, false)
	return true
}

// ExpirePending expires, in posting order, the pending transactions whose
// expiry is at or before now, each with its descendants; it returns how
// many left.
func (m *Model) ExpirePending(now uint64) int {
	n := 0
	for {
		var p *pendingTx
		for _, x := range m.pend().txs {
			if x.expires <= now {
				p = x
				break
			}
		}
		if p == nil {
			return n
		}
		d := m.descendants(p.tx.Hash)
		n += len(d)
		m.leave(d, chain.PendingInfo{Status: chain.PendingExpired, Since: p.expires}, false)
	}
}

// pendingBlock is what applying b does to the pending set: in block order,
// each transaction that is pending is confirmed, then each outpoint it
// spends that a pending transaction spends makes that one and its
// descendants conflicting.
func (m *Model) pendingBlock(b *chain.Block) {
	st := m.pend()
	st.maxHeight = max(st.maxHeight, b.Height)
	since := uint64(max(b.Time, 0))
	var did []*pendingTx
	for i := range b.Txs {
		tx := &b.Txs[i]
		if p := m.pendingOf(tx.Hash); p != nil {
			did = append(did, p)
			m.leave([]*pendingTx{p}, chain.PendingInfo{Status: chain.PendingConfirmed, Height: b.Height, Since: since}, false)
		}
		for _, op := range tx.Spends() {
			if h, _, ok := m.PendingSpender(op); ok {
				d := m.descendants(h)
				did = append(did, d...)
				m.leave(d, chain.PendingInfo{Status: chain.PendingConflicting, ConflictsWith: tx.Hash, Since: since}, false)
			}
		}
	}
	slices.SortStableFunc(did, func(a, b *pendingTx) int { return cmpOrder(a.order, b.order) })
	if len(did) > 0 {
		st.byBlock[b.Height] = did
	}
}

func cmpOrder(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// pendingRollback is what rolling back the block at height does once its
// rows are restored: the pending transactions spending an output the
// rollback replaced by another on the same outpoint, and their
// descendants, are withdrawn; what the block confirmed or made conflicting
// returns to the pending set in posting order, or is withdrawn (an input no
// longer live, or already spent by a pending transaction); then the
// pending transactions spending an output the rollback removed, and their
// descendants, are withdrawn.
func (m *Model) pendingRollback(height uint64, removed, replaced []chain.OutPoint) {
	st := m.pend()
	did := st.byBlock[height]
	delete(st.byBlock, height)
	for _, op := range replaced {
		if h, _, ok := m.PendingSpender(op); ok {
			m.leave(m.descendants(h), chain.PendingInfo{Status: chain.PendingWithdrawn}, true)
		}
	}
	for _, p := range did {
		if m.pendingOf(p.tx.Hash) != nil {
			continue
		}
		ok := true
		for _, op := range p.tx.Inputs {
			if _, _, taken := m.PendingSpender(op); taken || !m.spendable(op) {
				ok = false
				break
			}
		}
		if ok {
			m.insert(p)
			continue
		}
		st.status[p.tx.Hash] = chain.PendingInfo{TxHash: p.tx.Hash, Status: chain.PendingWithdrawn, Since: p.since, Order: p.order}
		st.forgetAt[p.tx.Hash] = st.maxHeight
	}
	for _, op := range removed {
		h, _, ok := m.PendingSpender(op)
		if !ok || m.pendingOf(op.TxHash) != nil {
			continue
		}
		m.leave(m.descendants(h), chain.PendingInfo{Status: chain.PendingWithdrawn}, true)
	}
}

// PendingStatus returns what the model knows of transaction h; found
// false when nothing. forgettable reports a status a store may already
// have forgotten (its transaction left the pending set more than the
// rollback window below the highest height the chain reached).
func (m *Model) PendingStatus(h chain.Hash) (info chain.PendingInfo, found, forgettable bool) {
	st := m.pend()
	info, found = st.status[h]
	if found && info.Status != chain.PendingActive {
		forgettable = st.forgetAt[h]+m.rollbackWindow < st.maxHeight
	}
	return info, found, forgettable
}

// PendingOutput is an unconfirmed output and when its transaction was
// posted.
type PendingOutput struct {
	Utxo  chain.Utxo
	Since uint64
}

// PendingOutputs returns the unconfirmed outputs paying to address that no
// pending transaction spends, in posting order then output index.
func (m *Model) PendingOutputs(address string) []PendingOutput {
	var out []PendingOutput
	for _, p := range m.pend().txs {
		for i, o := range p.tx.Outputs {
			op := chain.OutPoint{TxHash: p.tx.Hash, Index: uint32(i)}
			if o.Address != address {
				continue
			}
			if _, _, spent := m.PendingSpender(op); spent {
				continue
			}
			out = append(out, PendingOutput{Utxo: chain.Utxo{OutPoint: op, Output: o}, Since: p.since})
		}
	}
	return out
}

// PendingUtxo returns unconfirmed output op, and false when no pending
// transaction creates it.
func (m *Model) PendingUtxo(op chain.OutPoint) (PendingOutput, bool) {
	p, ok := m.pendingOutput(op)
	if !ok {
		return PendingOutput{}, false
	}
	return PendingOutput{Utxo: chain.Utxo{OutPoint: op, Output: p.tx.Outputs[op.Index]}, Since: p.since}, true
}

// PendingSums returns Esplora's mempool sums of address: funded over every
// output pending transactions pay to it, spent over every output of it
// (confirmed or unconfirmed) that pending transactions spend.
func (m *Model) PendingSums(address string) (funded, spent chain.Uint128) {
	for _, p := range m.pend().txs {
		for _, o := range p.tx.Outputs {
			if o.Address == address {
				funded = funded.AddU64(o.Value)
			}
		}
		for _, op := range p.tx.Inputs {
			if u, err := m.outputOf(op); err == nil && u.Address == address {
				spent = spent.AddU64(u.Value)
			}
		}
	}
	return funded, spent
}

// outputOf returns the output op names, confirmed (live) or pending.
func (m *Model) outputOf(op chain.OutPoint) (chain.Output, error) {
	if p, ok := m.pendingOutput(op); ok {
		return p.tx.Outputs[op.Index], nil
	}
	if r, ok := m.rows[op]; ok && r.spent == nil {
		return r.utxo.Output, nil
	}
	return chain.Output{}, chain.ErrNotFound
}

// PendingTxs returns the pending transactions in posting order.
func (m *Model) PendingTxs() []chain.Tx {
	var out []chain.Tx
	for _, p := range m.pend().txs {
		out = append(out, p.tx)
	}
	return out
}

// PendingCount returns how many transactions are pending.
func (m *Model) PendingCount() int { return len(m.pend().txs) }

// clone returns an independent copy (pendingTx values are never mutated).
func (st *pendingState) clone() *pendingState {
	if st == nil {
		return nil
	}
	c := *st
	c.txs = slices.Clone(st.txs)
	c.status = make(map[chain.Hash]chain.PendingInfo, len(st.status))
	for h, i := range st.status {
		c.status[h] = i
	}
	c.byBlock = make(map[uint64][]*pendingTx, len(st.byBlock))
	for h, d := range st.byBlock {
		c.byBlock[h] = slices.Clone(d)
	}
	c.forgetAt = make(map[chain.Hash]uint64, len(st.forgetAt))
	for h, f := range st.forgetAt {
		c.forgetAt[h] = f
	}
	return &c
}

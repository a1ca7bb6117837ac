// Package model is a small in-memory reference implementation of the
// contract's block, rollback and read semantics (docs/blocks.md, docs/rollback-and-retention.md, docs/api.md and the
// digest of docs/digest.md). Tests apply the same blocks and rollbacks to the real store and
// to a Model and compare every answer.
//
// The model is written to be obviously right rather than fast: plain maps,
// answers recomputed from scratch on every query (the digest, balances and
// listings are never maintained incrementally), and a per-block list of
// before-images for rollback. It shares nothing with tiers/disk or writer;
// from package chain it uses the domain types, Digest.Add (the digest term),
// the asset order, Uint128 and the bounds of a freeze (Freeze.Validate). It
// also models frozen outputs (docs/wallet-state.md) and coinbase maturity,
// with the maturity of 100 blocks written out, not taken from chain.
package model

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/utxo-cache/utxo-cache/chain"
)

// Model is the reference state: every outpoint row (live, or spent and still
// remembered), the block hashes of the current chain and the undo history of
// every block on it. A Model is not safe for concurrent use.
//
// # Rollback window
//
// The model can roll back any number of blocks (it keeps the whole history),
// and refuses exactly what docs/rollback-and-retention.md refuses: a target below
// tip - rollbackWindow (chain.ErrRollbackTooDeep), above the tip or on an
// empty model (chain.ErrInvalidArgument). A rollback that passes the first
// block of the chain (the block applied to an empty model) leaves the model
// empty: that is the state "right after" any height below the chain's start.
//
// Read literally, the contract's window cannot be implemented with bounded storage: after a
// rollback of W blocks a second rollback of W needs 2W blocks of history, a
// third 3W, and so on. A store keeps the history of the blocks above
// max(applied tip) - W instead. RollbackFloor says where that bounded reading
// stops guaranteeing success: a store may refuse a target below the floor
// with chain.ErrRollbackTooDeep, and must succeed at or above it.
type Model struct {
	pruneDepth     uint64
	rollbackWindow uint64

	tip    chain.Tip
	first  uint64                    // height of the first block of the current chain
	floor  uint64                    // max over applies since the model was last empty of height - window
	rows   map[chain.OutPoint]row    // live and spent records, never pruned
	hashes map[uint64]chain.Hash     // block hash by height, current chain only
	undo   []blockUndo               // one per block of the current chain, newest last
	frozen map[chain.OutPoint]string // frozen live outputs and their reasons
	leases map[string]*lease         // lease.go
	// pending is the pending set (pending.go); nil until first used.
	pending *pendingState
}

// row is one outpoint as the model knows it. Rows are values: a change
// replaces the whole row, so before-images never alias the current state.
type row struct {
	utxo  chain.Utxo
	spent *chain.Spent // nil while live; the pointee is never mutated
}

// blockUndo is what rolling back one block needs.
type blockUndo struct {
	height  uint64
	prevTip chain.Tip
	before  []beforeImage
}

type beforeImage struct {
	op     chain.OutPoint
	exists bool
	row    row
}

// New returns an empty model with the given retention settings (the store's
// PruneDepth and RollbackWindow, in blocks).
func New(pruneDepth, rollbackWindow uint64) *Model {
	return &Model{
		pruneDepth:     pruneDepth,
		rollbackWindow: rollbackWindow,
		tip:            chain.Tip{Empty: true},
		rows:           make(map[chain.OutPoint]row),
		hashes:         make(map[uint64]chain.Hash),
	}
}

// Clone returns an independent copy of m.
func (m *Model) Clone() *Model {
	c := *m
	c.rows = make(map[chain.OutPoint]row, len(m.rows))
	for op, r := range m.rows {
		c.rows[op] = r
	}
	c.hashes = make(map[uint64]chain.Hash, len(m.hashes))
	for h, x := range m.hashes {
		c.hashes[h] = x
	}
	c.undo = slices.Clone(m.undo) // entries are never mutated
	c.frozen = make(map[chain.OutPoint]string, len(m.frozen))
	for op, r := range m.frozen {
		c.frozen[op] = r
	}
	c.pending = m.pending.clone()
	c.leases = make(map[string]*lease, len(m.leases))
	for id, l := range m.leases {
		c.leases[id] = &lease{expires: l.expires, ops: slices.Clone(l.ops)}
	}
	return &c
}

// PruneDepth returns the model's prune depth.
func (m *Model) PruneDepth() uint64 { return m.pruneDepth }

// RollbackWindow returns the model's rollback window.
func (m *Model) RollbackWindow() uint64 { return m.rollbackWindow }

// Apply applies b as docs/blocks.md says. It returns applied == false and no
// error when b is the block already at its height on the current chain (same
// hash). A rejected block leaves the model unchanged; the error wraps
// chain.ErrNotNextBlock, chain.ErrUnknownInput, chain.ErrDoubleSpend or
// chain.ErrDuplicateOutpoint. With skipUnknown, inputs that are not live
// unspent outputs are ignored instead of rejected.
//
// Checks run in block order: linkage first, then transaction by transaction,
// each transaction's spends (in order) before its creations, and for each
// spend the in-block double spend before liveness.
func (m *Model) Apply(b *chain.Block, skipUnknown bool) (applied bool, err error) {
	if !m.tip.Empty && b.Height <= m.tip.Height {
		if h, ok := m.hashes[b.Height]; ok && h == b.Hash {
			return false, nil
		}
	}
	if !m.tip.Empty {
		if b.Height != m.tip.Height+1 {
			return false, fmt.Errorf("model: block %d, tip %s: %w", b.Height, m.tip, chain.ErrNotNextBlock)
		}
		if b.PrevHash.IsZero() { // required but for the first block of an empty store
			return false, fmt.Errorf("model: block %d without prev_hash: %w", b.Height, chain.ErrInvalidBlock)
		}
		if b.PrevHash != m.tip.Hash {
			return false, fmt.Errorf("model: block %d prev %s, tip %s: %w", b.Height, b.PrevHash, m.tip, chain.ErrNotNextBlock)
		}
	}

	// staged holds every row the block changes, as the block has left it so
	// far; nothing touches m.rows until the whole block has passed.
	type slot struct {
		exists bool
		row    row
	}
	staged := make(map[chain.OutPoint]slot)
	var order []chain.OutPoint
	lookup := func(op chain.OutPoint) slot {
		if s, ok := staged[op]; ok {
			return s
		}
		r, ok := m.rows[op]
		return slot{exists: ok, row: r}
	}
	store := func(op chain.OutPoint, s slot) {
		if _, ok := staged[op]; !ok {
			order = append(order, op)
		}
		staged[op] = s
	}
	spentHere := make(map[chain.OutPoint]bool)

	for pos := range b.Txs {
		tx := &b.Txs[pos]
		spends := tx.Inputs
		if tx.Invalid {
			spends = tx.CollateralInputs
		}
		for _, in := range spends {
			if spentHere[in] {
				return false, fmt.Errorf("model: block %d tx %d spends %s twice: %w", b.Height, pos, in, chain.ErrDoubleSpend)
			}
			s := lookup(in)
			if !s.exists || s.row.spent != nil {
				if skipUnknown {
					continue
				}
				return false, fmt.Errorf("model: block %d tx %d input %s: %w", b.Height, pos, in, chain.ErrUnknownInput)
			}
			spentHere[in] = true
			s.row.spent = &chain.Spent{TxHash: tx.Hash, Height: b.Height}
			store(in, s)
		}

		type creation struct {
			index      uint32
			out        *chain.Output
			collateral bool
		}
		var creates []creation
		if tx.Invalid {
			if tx.CollateralReturn != nil {
				creates = append(creates, creation{uint32(len(tx.Outputs)), tx.CollateralReturn, true})
			}
		} else {
			for i := range tx.Outputs {
				creates = append(creates, creation{uint32(i), &tx.Outputs[i], false})
			}
		}
		for _, c := range creates {
			op := chain.OutPoint{TxHash: tx.Hash, Index: c.index}
			if s := lookup(op); s.exists && s.row.spent == nil {
				return false, fmt.Errorf("model: block %d tx %d output %s: %w", b.Height, pos, op, chain.ErrDuplicateOutpoint)
			}
			u := chain.Utxo{OutPoint: op, Output: cloneOutput(c.out), Height: b.Height, TxPos: uint32(pos)}
			if tx.Coinbase {
				u.Flags |= chain.FlagCoinbase
			}
			if c.collateral {
				u.Flags |= chain.FlagCollateralReturn
			}
			store(op, slot{exists: true, row: row{utxo: u}})
		}
	}

	u := blockUndo{height: b.Height, prevTip: m.tip, before: make([]beforeImage, 0, len(order))}
	for _, op := range order {
		old, ok := m.rows[op]
		u.before = append(u.before, beforeImage{op: op, exists: ok, row: old})
		m.rows[op] = staged[op].row // staged rows always exist
	}
	m.undo = append(m.undo, u)
	if m.tip.Empty {
		m.first = b.Height
	}
	m.floor = max(m.floor, b.Height-min(b.Height, m.rollbackWindow))
	m.hashes[b.Height] = b.Hash
	m.tip = chain.Tip{Height: b.Height, Hash: b.Hash}
	for op := range spentHere {
		delete(m.frozen, op) // the block spent it: the freeze lapses
		m.lapse(op)          // and so does its lease
	}
	m.pendingBlock(b)
	return true, nil
}

// cloneOutput deep-copies out (so the model never aliases a caller's block)
// and sorts its assets by (policy, name), as stored UTXOs have them.
func cloneOutput(out *chain.Output) chain.Output {
	c := chain.Output{
		Address:   out.Address,
		Value:     out.Value,
		Datum:     slices.Clone(out.Datum),
		ScriptRef: slices.Clone(out.ScriptRef),
	}
	if out.DatumHash != nil {
		h := *out.DatumHash
		c.DatumHash = &h
	}
	for _, a := range out.Assets {
		c.Assets = append(c.Assets, chain.Asset{Policy: slices.Clone(a.Policy), Name: slices.Clone(a.Name), Quantity: a.Quantity})
	}
	chain.SortAssets(c.Assets)
	return c
}

// Rollback makes every answer what it was right after block target was
// applied (docs/rollback-and-retention.md). It fails with chain.ErrInvalidArgument when the
// model is empty or target is above the tip, and with
// chain.ErrRollbackTooDeep when tip - target exceeds the window; on failure
// nothing changes. A target equal to the tip is a no-op.
func (m *Model) Rollback(target uint64) error {
	if err := m.CheckRollback(target); err != nil {
		return err
	}
	for !m.tip.Empty && m.tip.Height > target {
		u := m.undo[len(m.undo)-1]
		m.undo = m.undo[:len(m.undo)-1]
		// removed: live now and not after the undo; replaced: live now and
		// after, so the block spent the earlier output and created this one
		// (a hash used again): the undo brings back another output.
		var removed, replaced []chain.OutPoint
		for _, bi := range u.before {
			r, ok := m.rows[bi.op]
			switch {
			case !ok || r.spent != nil:
			case bi.exists && bi.row.spent == nil:
				replaced = append(replaced, bi.op)
			default:
				removed = append(removed, bi.op)
			}
		}
		for i := len(u.before) - 1; i >= 0; i-- {
			bi := u.before[i]
			// Created by the block (removed now) or spent by it (its
			// freeze lapsed then): either way not frozen after.
			delete(m.frozen, bi.op)
			m.lapse(bi.op) // the same for a lease: never brought back
			if bi.exists {
				m.rows[bi.op] = bi.row
			} else {
				delete(m.rows, bi.op)
			}
		}
		delete(m.hashes, u.height)
		m.tip = u.prevTip
		m.pendingRollback(u.height, removed, replaced)
	}
	if m.tip.Empty {
		m.floor, m.first = 0, 0
	}
	return nil
}

// CheckRollback returns the error Rollback(target) would return, changing
// nothing.
func (m *Model) CheckRollback(target uint64) error {
	if m.tip.Empty || target > m.tip.Height {
		return fmt.Errorf("model: rollback to %d, tip %s: %w", target, m.tip, chain.ErrInvalidArgument)
	}
	if m.tip.Height-target > m.rollbackWindow {
		return fmt.Errorf("model: rollback to %d, tip %s, window %d: %w", target, m.tip, m.rollbackWindow, chain.ErrRollbackTooDeep)
	}
	return nil
}

// RollbackFloor returns the lowest rollback target that the bounded reading
// of the window (see the type comment) guarantees: the highest
// height - rollbackWindow over every block applied since the model was last
// empty. A store may refuse targets below it as too deep.
func (m *Model) RollbackFloor() uint64 { return m.floor }

// FirstHeight returns the height of the first block of the current chain
// (the block applied to the empty model), and false when the model is empty.
func (m *Model) FirstHeight() (uint64, bool) { return m.first, !m.tip.Empty }

// Tip returns the tip: the newest applied block, or the empty tip.
func (m *Model) Tip() chain.Tip { return m.tip }

// HashAt returns the hash of the block at height on the current chain.
func (m *Model) HashAt(height uint64) (chain.Hash, bool) {
	h, ok := m.hashes[height]
	return h, ok
}

// HeightOf returns the height of the block with hash h on the current chain.
func (m *Model) HeightOf(h chain.Hash) (uint64, bool) {
	for height, x := range m.hashes {
		if x == h {
			return height, true
		}
	}
	return 0, false
}

// Count returns the number of live outputs.
func (m *Model) Count() uint64 {
	var n uint64
	for _, r := range m.rows {
		if r.spent == nil {
			n++
		}
	}
	return n
}

// Digest recomputes the digest (docs/digest.md) of the live set from scratch.
func (m *Model) Digest() chain.Digest {
	var d chain.Digest
	for _, r := range m.rows {
		if r.spent == nil {
			u := r.utxo
			d.Add(&u)
		}
	}
	return d
}

// Utxo answers an outpoint lookup: the output and, when spent, who spent it.
// A spent record is visible while tip - spent height <= prune depth; an
// outpoint that never existed, or whose spent record is older, answers
// chain.ErrNotFound.
func (m *Model) Utxo(op chain.OutPoint) (chain.Utxo, *chain.Spent, error) {
	r, ok := m.rows[op]
	if !ok {
		return chain.Utxo{}, nil, chain.ErrNotFound
	}
	if r.spent != nil {
		if m.tip.Height-r.spent.Height > m.pruneDepth {
			return chain.Utxo{}, nil, chain.ErrNotFound
		}
		s := *r.spent
		return r.utxo, &s, nil
	}
	return r.utxo, nil, nil
}

// Live returns every live output in chain order (height, tx position, output
// index): a deterministic order, whatever the map iteration order.
func (m *Model) Live() []chain.Utxo {
	var out []chain.Utxo
	for _, r := range m.rows {
		if r.spent == nil {
			out = append(out, r.utxo)
		}
	}
	slices.SortFunc(out, CompareChainOrder)
	return out
}

// Spent returns the outpoints of every spent record the model remembers
// (visible or not), sorted by outpoint: deterministic.
func (m *Model) Spent() []chain.OutPoint {
	var out []chain.OutPoint
	for op, r := range m.rows {
		if r.spent != nil {
			out = append(out, op)
		}
	}
	slices.SortFunc(out, CompareOutPoints)
	return out
}

// IsLive reports whether op is a live unspent output.
func (m *Model) IsLive(op chain.OutPoint) bool {
	r, ok := m.rows[op]
	return ok && r.spent == nil
}

// List returns every live output of address in chain order, or in reverse
// chain order when desc.
func (m *Model) List(address string, desc bool) []chain.Utxo {
	var out []chain.Utxo
	for _, r := range m.rows {
		if r.spent == nil && r.utxo.Address == address {
			out = append(out, r.utxo)
		}
	}
	slices.SortFunc(out, CompareChainOrder)
	if desc {
		slices.Reverse(out)
	}
	return out
}

// Balance sums the live outputs of address: value, per-asset quantities in
// (policy, name) order, and the count. Zero outputs give the zero Balance.
func (m *Model) Balance(address string) chain.Balance {
	var b chain.Balance
	sums := make(map[[2]string]chain.Uint128)
	for _, r := range m.rows {
		if r.spent != nil || r.utxo.Address != address {
			continue
		}
		b.Count++
		b.Value = b.Value.AddU64(r.utxo.Value)
		for _, a := range r.utxo.Assets {
			k := [2]string{string(a.Policy), string(a.Name)}
			sums[k] = sums[k].AddU64(a.Quantity)
		}
	}
	for k, q := range sums {
		b.Assets = append(b.Assets, chain.AssetSum{Policy: []byte(k[0]), Name: []byte(k[1]), Quantity: q})
	}
	slices.SortFunc(b.Assets, func(x, y chain.AssetSum) int {
		return chain.CompareAssets(chain.Asset{Policy: x.Policy, Name: x.Name}, chain.Asset{Policy: y.Policy, Name: y.Name})
	})
	return b
}

// CompareChainOrder orders UTXOs by (created height, tx position, output
// index), the contract's chain order.
func CompareChainOrder(a, b chain.Utxo) int {
	return cmp.Or(cmp.Compare(a.Height, b.Height), cmp.Compare(a.TxPos, b.TxPos), cmp.Compare(a.Index, b.Index))
}

// CompareOutPoints orders outpoints by tx hash bytes, then index.
func CompareOutPoints(a, b chain.OutPoint) int {
	for i := range a.TxHash {
		if c := cmp.Compare(a.TxHash[i], b.TxHash[i]); c != 0 {
			return c
		}
	}
	return cmp.Compare(a.Index, b.Index)
}

// # Frozen outputs
//
// A freeze marks live outputs frozen with a reason (docs/wallet-state.md).
// It is not chain state: it changes no row, count, digest or balance, and a
// rollback does not undo it. It ends when an unfreeze clears it, when a
// block spends the output, or when a rollback removes the output (undoes the
// block that created it); a rollback that brings a spent output back brings
// it back unfrozen.

// Freeze freezes the outputs f names with f's reason. Each must be live
// (chain.ErrUnknownInput otherwise, nothing changed). It returns the
// outpoints whose freeze it set (not those already frozen for that reason),
// in f's order; none means nothing changed.
func (m *Model) Freeze(f chain.Freeze) ([]chain.OutPoint, error) {
	if err := f.Validate(true); err != nil {
		return nil, err
	}
	for _, op := range f.OutPoints {
		if !m.IsLive(op) {
			return nil, fmt.Errorf("model: freeze %s: %w", op, chain.ErrUnknownInput)
		}
	}
	var changed []chain.OutPoint
	for _, op := range f.OutPoints {
		if r, ok := m.frozen[op]; ok && r == f.Reason {
			continue
		}
		if m.frozen == nil {
			m.frozen = make(map[chain.OutPoint]string)
		}
		m.frozen[op] = f.Reason
		changed = append(changed, op)
	}
	return changed, nil
}

// Unfreeze clears the freeze of each outpoint of f that is frozen and
// returns those, in f's order; the others are left alone.
func (m *Model) Unfreeze(f chain.Freeze) ([]chain.OutPoint, error) {
	if err := f.Validate(false); err != nil {
		return nil, err
	}
	var changed []chain.OutPoint
	for _, op := range f.OutPoints {
		if _, ok := m.frozen[op]; ok {
			delete(m.frozen, op)
			changed = append(changed, op)
		}
	}
	return changed, nil
}

// Frozen reports whether op is frozen, and why.
func (m *Model) Frozen(op chain.OutPoint) (reason string, frozen bool) {
	reason, frozen = m.frozen[op]
	return reason, frozen
}

// FrozenCount is how many outputs are frozen.
func (m *Model) FrozenCount() int { return len(m.frozen) }

// Mature reports whether the next block may spend u at the model's tip: u
// is not a coinbase output, or its height + 100 (Bitcoin's maturity) is at
// most the tip's height + 1.
func (m *Model) Mature(u *chain.Utxo) bool {
	if u.Flags&chain.FlagCoinbase == 0 {
		return true
	}
	return !m.tip.Empty && u.Height+100 <= m.tip.Height+1
}

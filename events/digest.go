package events

import (
	"errors"
	"fmt"
	"slices"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

// ErrLogTruncated is returned when a change an event needs is no longer in
// the change log: a resume point older than the log, or a rollback whose
// undone blocks the log no longer holds. The client re-reads the state.
var ErrLogTruncated = errors.New("events: change log truncated")

// keyID names one watched value: the dimension's byte, then the value as the
// store indexes it.
func keyID(d disk.Dimension, value []byte) string {
	b := make([]byte, 0, 1+len(value))
	return string(append(append(b, byte(d)), value...))
}

// spend is one outpoint an apply spent, with its spender.
type spend struct {
	op    chain.OutPoint
	tx    chain.Hash
	input uint32
	dead  bool // cancelled by a later creation of op (effects.create)
}

// effects is what one change did to one watched value.
type effects struct {
	created  []*chain.Utxo
	spent    []spend
	removed  []chain.OutPoint
	restored []*chain.Utxo
	// frag caches the encoded effects (encode.go), filled by the first
	// stream that sends them; the dispatcher's goroutine only.
	frag []byte

	// While an apply is digested: where each outpoint's latest creation and
	// spend under this value are in created and spent (see create).
	createdAt, spentAt map[chain.OutPoint]int
}

// spend lists s, the spend of an output under this value.
func (e *effects) spend(s spend) {
	if e.spentAt == nil {
		e.spentAt = map[chain.OutPoint]int{}
	}
	e.spentAt[s.op] = len(e.spent)
	e.spent = append(e.spent, s)
}

// create lists u, created under this value. An outpoint created again in
// the block it was spent in (a duplicate transaction id, once its earlier
// outputs are spent) cancels that earlier spend and, when the earlier
// output was created in the block too, that creation: a watcher that adds
// created, then removes spent, ends with the output the block left.
func (e *effects) create(u *chain.Utxo) {
	if i, ok := e.spentAt[u.OutPoint]; ok {
		e.spent[i].dead = true
		delete(e.spentAt, u.OutPoint)
		if j, ok := e.createdAt[u.OutPoint]; ok {
			e.created[j] = nil
		}
	}
	if e.createdAt == nil {
		e.createdAt = map[chain.OutPoint]int{}
	}
	e.createdAt[u.OutPoint] = len(e.created)
	e.created = append(e.created, u)
}

// settle drops what create cancelled and the bookkeeping.
func (e *effects) settle() {
	e.created = slices.DeleteFunc(e.created, func(u *chain.Utxo) bool { return u == nil })
	e.spent = slices.DeleteFunc(e.spent, func(s spend) bool { return s.dead })
	e.createdAt, e.spentAt = nil, nil
}

// digest is one change of the commit sequence as event streams see it: the
// effects of the change on every value (of the streamed dimensions) it
// touched. A freeze or unfreeze touches none: it does not change which
// outputs are live (see doc.go).
type digest struct {
	seq     uint64
	kind    chain.ChangeKind
	point   chain.Tip // the applied block, or the rollback's target
	touched map[string]*effects
	// For streams that asked for pending transactions (pending.go): the
	// change's pending moves, and their effects on every value they
	// touched. Empty when the pending set did not change.
	moves    []chain.PendingMove
	ptouched map[string]*pendEffects
}

// digester turns change records into digests, listing each output under the
// values of dims.
type digester struct {
	dims  []disk.Dimension
	funcs []disk.ValuesFunc
	lim   chain.Limits
}

func (g *digester) at(m map[string]*effects, u *chain.Utxo, fn func(e *effects)) {
	for i, d := range g.dims {
		g.funcs[i](u, func(v []byte) {
			id := keyID(d, v)
			e := m[id]
			if e == nil {
				e = &effects{}
				m[id] = e
			}
			fn(e)
		})
	}
}

// records reads change records of one view by seq.
type records interface {
	ChangeRecord(seq uint64) ([]byte, error)
}

// decode decodes one record, checking its seq.
func (g *digester) decode(rec []byte, seq uint64) (*chain.Change, error) {
	c, rest, err := chain.DecodeChangeCBOR(rec, g.lim)
	if err != nil {
		return nil, fmt.Errorf("events: change %d: %w", seq, err)
	}
	if len(rest) != 0 || c.Seq != seq {
		return nil, fmt.Errorf("events: change record %d holds change %d: %w", seq, c.Seq, chain.ErrInvalidChange)
	}
	return c, nil
}

// get reads and decodes change seq from log.
func (g *digester) get(log records, seq uint64) (*chain.Change, error) {
	rec, err := log.ChangeRecord(seq)
	if errors.Is(err, disk.ErrLogTruncated) {
		return nil, fmt.Errorf("%w: %w", err, ErrLogTruncated)
	}
	if err != nil {
		return nil, err
	}
	return g.decode(rec, seq)
}

// digest digests change c; a rollback reads the applies it undid from log.
func (g *digester) digest(c *chain.Change, log records) (*digest, error) {
	d := &digest{seq: c.Seq, kind: c.Kind, touched: map[string]*effects{}}
	switch c.Kind {
	case chain.ChangeApply:
		if !c.SpentKnown {
			return nil, fmt.Errorf("change %d was logged before the log carried spent outputs: %w", c.Seq, ErrLogTruncated)
		}
		d.point = chain.Tip{Height: c.Block.Height, Hash: c.Block.Hash}
		// The block's transactions in order, as the writer applied them:
		// a spend takes the output live at that point, created earlier in
		// the block or live before it.
		before := make(map[chain.OutPoint]*chain.Utxo, len(c.Spent))
		for i := range c.Spent {
			before[c.Spent[i].OutPoint] = &c.Spent[i]
		}
		inBlock := map[chain.OutPoint]*chain.Utxo{}
		for i := range c.Block.Txs {
			tx := &c.Block.Txs[i]
			for j, op := range tx.Spends() {
				u := inBlock[op]
				if u != nil {
					delete(inBlock, op)
				} else if u = before[op]; u != nil {
					delete(before, op)
				} else {
					continue // an unknown input the writer skipped
				}
				s := spend{op: op, tx: tx.Hash, input: uint32(j)}
				g.at(d.touched, u, func(e *effects) { e.spend(s) })
			}
			txCreates(c.Block, i, func(u *chain.Utxo) {
				inBlock[u.OutPoint] = u
				g.at(d.touched, u, func(e *effects) { e.create(u) })
			})
		}
		for _, e := range d.touched {
			e.settle()
		}
	case chain.ChangeRollback:
		d.point = c.Target
		removed, restored, err := g.undone(c, log)
		if err != nil {
			return nil, err
		}
		for _, u := range removed {
			g.at(d.touched, u, func(e *effects) { e.removed = append(e.removed, u.OutPoint) })
		}
		for _, u := range restored {
			g.at(d.touched, u, func(e *effects) { e.restored = append(e.restored, u) })
		}
	}
	g.pendingEffects(c, d)
	return d, nil
}

// txCreates calls fn with every output transaction i of b creates, as the
// store holds it.
func txCreates(b *chain.Block, i int, fn func(u *chain.Utxo)) {
	tx := &b.Txs[i]
	tx.Creates(func(index uint32, out *chain.Output, cr bool) {
		u := &chain.Utxo{OutPoint: chain.OutPoint{TxHash: tx.Hash, Index: index}, Output: *out, Height: b.Height, TxPos: uint32(i)}
		if tx.Coinbase {
			u.Flags |= chain.FlagCoinbase
		}
		if cr {
			u.Flags |= chain.FlagCollateralReturn
		}
		fn(u)
	})
}

// undone returns what rollback c removed (outputs the undone blocks created
// that were live before it) and restored (outputs live before the undone
// blocks that they spent), in block order. The undone blocks are the applies
// of the chain c's previous state held above c's target: walking the log
// back from c, the first apply met at each height, from the tip down (an
// apply above the height sought is one a later rollback already undid).
func (g *digester) undone(c *chain.Change, log records) (removed, restored []*chain.Utxo, err error) {
	if c.Seq < 2 {
		return nil, nil, nil
	}
	prev, err := g.get(log, c.Seq-1)
	if err != nil {
		return nil, nil, err
	}
	tip := prev.After.Tip
	if tip.Empty || (!c.Target.Empty && tip.Height <= c.Target.Height) {
		return nil, nil, nil
	}
	need := tip.Height
	var blocks []*chain.Change // newest first
	for q, cur := c.Seq-1, prev; ; {
		if cur.Kind == chain.ChangeApply {
			switch h := cur.Block.Height; {
			case h == need:
				if !cur.SpentKnown {
					return nil, nil, fmt.Errorf("change %d was logged before the log carried spent outputs: %w", cur.Seq, ErrLogTruncated)
				}
				blocks = append(blocks, cur)
				if !c.Target.Empty && need == c.Target.Height+1 {
					return undoneSets(blocks)
				}
				if need == 0 {
					return undoneSets(blocks)
				}
				need--
			case h < need:
				return nil, nil, fmt.Errorf("events: rollback %d: change %d applied height %d below the chain's %d: %w",
					c.Seq, cur.Seq, h, need, chain.ErrInvalidChange)
			}
		}
		if q == 1 {
			if c.Target.Empty {
				return undoneSets(blocks)
			}
			return nil, nil, fmt.Errorf("events: rollback %d: the log starts before its undone blocks: %w", c.Seq, chain.ErrInvalidChange)
		}
		q--
		if cur, err = g.get(log, q); err != nil {
			return nil, nil, fmt.Errorf("rollback %d: %w", c.Seq, err)
		}
		if c.Target.Empty && cur.After.Tip.Empty && len(blocks) > 0 && blocks[len(blocks)-1].Seq == q+1 {
			return undoneSets(blocks) // the store was empty before its oldest block
		}
	}
}

// undoneSets computes removed and restored of undone blocks (newest
// first), replaying them oldest first, each in transaction order: removed
// are the outputs they created that were live after them, restored the
// outputs live before them that they spent, each in the order they met it.
// An outpoint may be in both (spent, then created again by a duplicate
// transaction id): a watcher removes, then restores.
func undoneSets(blocks []*chain.Change) (removed, restored []*chain.Utxo, err error) {
	type made struct {
		u    *chain.Utxo
		live bool
	}
	var created []*made
	live := map[chain.OutPoint]*made{} // created by the undone blocks, live
	taken := map[chain.OutPoint]bool{} // live before them, spent by them
	for i := len(blocks) - 1; i >= 0; i-- {
		b := blocks[i]
		before := make(map[chain.OutPoint]*chain.Utxo, len(b.Spent))
		for j := range b.Spent {
			before[b.Spent[j].OutPoint] = &b.Spent[j]
		}
		for t := range b.Block.Txs {
			for _, op := range b.Block.Txs[t].Spends() {
				if m := live[op]; m != nil {
					m.live = false
					delete(live, op)
				} else if u := before[op]; u != nil && !taken[op] {
					taken[op] = true
					restored = append(restored, u)
				}
			}
			txCreates(b.Block, t, func(u *chain.Utxo) {
				m := &made{u: u, live: true}
				live[u.OutPoint] = m
				created = append(created, m)
			})
		}
	}
	for _, m := range created {
		if m.live {
			removed = append(removed, m.u)
		}
	}
	return removed, restored, nil
}

package events

import (
	"errors"
	"fmt"

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
		created, before := applied(c)
		for _, u := range created {
			g.at(d.touched, u, func(e *effects) { e.created = append(e.created, u) })
		}
		forSpends(c.Block, func(s spend) {
			u := before[s.op]
			if u == nil {
				if u = created[s.op]; u == nil {
					return // an unknown input the writer skipped
				}
			}
			g.at(d.touched, u, func(e *effects) { e.spent = append(e.spent, s) })
		})
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
	return d, nil
}

// applied returns, for an apply, the outputs its block created and the
// outputs live before it that it spent, each by outpoint. The created map
// iterates in no order: callers that need one use the block (forCreated).
func applied(c *chain.Change) (created, before map[chain.OutPoint]*chain.Utxo) {
	created = map[chain.OutPoint]*chain.Utxo{}
	forCreated(c.Block, func(u *chain.Utxo) { created[u.OutPoint] = u })
	before = make(map[chain.OutPoint]*chain.Utxo, len(c.Spent))
	for i := range c.Spent {
		before[c.Spent[i].OutPoint] = &c.Spent[i]
	}
	return created, before
}

// forCreated calls fn with every output b creates, in block order, as the
// store holds it.
func forCreated(b *chain.Block, fn func(u *chain.Utxo)) {
	for i := range b.Txs {
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
}

// forSpends calls fn with every outpoint b spends, in block order.
func forSpends(b *chain.Block, fn func(s spend)) {
	for i := range b.Txs {
		tx := &b.Txs[i]
		for j, op := range tx.Spends() {
			fn(spend{op: op, tx: tx.Hash, input: uint32(j)})
		}
	}
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

// undoneSets computes removed and restored of undone blocks (newest first).
func undoneSets(blocks []*chain.Change) (removed, restored []*chain.Utxo, err error) {
	createdIn := map[chain.OutPoint]bool{}
	spentIn := map[chain.OutPoint]bool{}
	for _, b := range blocks {
		forCreated(b.Block, func(u *chain.Utxo) { createdIn[u.OutPoint] = true })
		forSpends(b.Block, func(s spend) { spentIn[s.op] = true })
	}
	for i := len(blocks) - 1; i >= 0; i-- { // oldest first: block order
		b := blocks[i]
		forCreated(b.Block, func(u *chain.Utxo) {
			if !spentIn[u.OutPoint] {
				removed = append(removed, u)
			}
		})
		for j := range b.Spent {
			if u := &b.Spent[j]; !createdIn[u.OutPoint] {
				restored = append(restored, u)
			}
		}
	}
	return removed, restored, nil
}

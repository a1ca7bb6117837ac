package disk

import (
	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/changeset"
)

// changes accumulates a changeset.Set without duplicates.
type changes struct {
	addrs map[string]int // address -> its index in cs.Addresses
	ops   map[chain.OutPoint]struct{}
	cs    changeset.Set
	// merged is set once an address came without a position (merge): Spans
	// is then nil for good.
	merged bool
	// addrKeys[i] is the DimAddress key of cs.Addresses[i] while every
	// address came through addressKey (derived, which has the key at hand);
	// merge leaves it short, and setBalances then hashes the addresses.
	addrKeys []DimKey
	// idx holds cs.IndexKeys, for their deduplication.
	idx map[DimKey]struct{}
}

// blockChanges is newChanges for a single block's commit, reusing the
// store's dedup maps (emptied) from block to block; the change set's slices
// are new. The caller returns a copy of ch.cs, never &ch.cs. Writer
// goroutine only, one commit at a time.
func (s *Store) blockChanges(old chain.Tip, n int) *changes {
	c := &s.changes
	if c.addrs == nil {
		c.addrs = make(map[string]int, n)
		c.ops = make(map[chain.OutPoint]struct{}, n)
	} else {
		clear(c.addrs)
		clear(c.ops)
	}
	c.addrKeys = c.addrKeys[:0]
	c.merged = false
	clear(c.idx)
	c.cs = changeset.Set{OldTip: old, Addresses: make([]string, 0, n), OutPoints: make([]chain.OutPoint, 0, n),
		Spans: make([]changeset.PositionSpan, 0, n), Outputs: make([]changeset.AddressOutput, 0, n)}
	return c
}

// newChanges starts the changes of a commit from tip old that changes about
// n outpoint rows (a size hint: each row names an outpoint and an address).
func newChanges(old chain.Tip, n int) *changes {
	return &changes{
		addrs: make(map[string]int, n),
		ops:   make(map[chain.OutPoint]struct{}, n),
		cs: changeset.Set{OldTip: old, Addresses: make([]string, 0, n), OutPoints: make([]chain.OutPoint, 0, n),
			Spans: make([]changeset.PositionSpan, 0, n), Outputs: make([]changeset.AddressOutput, 0, n)},
	}
}

// address adds a, changed at positions not known here (merge): the change
// set then has no Spans and no Outputs.
func (c *changes) address(a string) {
	c.merged, c.cs.Spans, c.cs.Outputs = true, nil, nil
	if _, ok := c.addrs[a]; !ok {
		c.addrs[a] = len(c.cs.Addresses)
		c.cs.Addresses = append(c.cs.Addresses, a)
	}
}

// output adds the address of u, whose DimAddress key k and position p the
// caller has computed already, as changed by adding u to its listing
// (added) or removing u from it.
func (c *changes) output(u *chain.Utxo, k DimKey, p chain.Position, added bool) {
	a := u.Address
	i, ok := c.addrs[a]
	if !ok {
		i = len(c.cs.Addresses)
		c.addrs[a] = i
		c.cs.Addresses = append(c.cs.Addresses, a)
		c.addrKeys = append(c.addrKeys, k)
	}
	if c.merged {
		return
	}
	c.cs.Outputs = append(c.cs.Outputs, changeset.AddressOutput{Address: int32(i), Added: added, Utxo: u})
	if !ok {
		c.cs.Spans = append(c.cs.Spans, changeset.PositionSpan{Lo: p, Hi: p})
		return
	}
	sp := &c.cs.Spans[i]
	if chain.ComparePositions(p, sp.Lo) < 0 {
		sp.Lo = p
	}
	if chain.ComparePositions(p, sp.Hi) > 0 {
		sp.Hi = p
	}
}

// indexKeys adds the keys of dimension values other than addresses whose
// listing and balance changed. A store that indexes only addresses passes
// none and pays nothing.
func (c *changes) indexKeys(ks []DimKey) {
	for _, k := range ks {
		if c.idx == nil {
			c.idx = make(map[DimKey]struct{})
		}
		if _, ok := c.idx[k]; !ok {
			c.idx[k] = struct{}{}
			c.cs.IndexKeys = append(c.cs.IndexKeys, k)
		}
	}
}

func (c *changes) outPoint(op chain.OutPoint) {
	if _, ok := c.ops[op]; !ok {
		c.ops[op] = struct{}{}
		c.cs.OutPoints = append(c.cs.OutPoints, op)
	}
}

// setBalances fills cs.Balances from the balance rows d wrote
// (flushBalances) whose every asset it knows: an address whose assets are
// in asset rows the change did not all read is left out, as unknown
// (readers of cs.Balances then read it from the store). Call it once the
// change's batch has committed.
func (c *changes) setBalances(d *derived) {
	rows := make(map[DimKey]*chain.Balance, len(d.written))
	for i := range d.written {
		if d.written[i].known {
			rows[d.written[i].k] = &d.written[i].b
		}
	}
	c.cs.Balances = make(map[string]chain.Balance, len(c.cs.Addresses))
	keyed := len(c.addrKeys) == len(c.cs.Addresses)
	for i, a := range c.cs.Addresses {
		var k DimKey
		if keyed {
			k = c.addrKeys[i]
		} else {
			k = MakeDimKey(DimAddress, []byte(a))
		}
		b := rows[k]
		switch {
		case b == nil:
		case b.Count == 0:
			c.cs.Balances[a] = chain.Balance{} // the row was deleted
		default:
			c.cs.Balances[a] = *b
		}
	}
}

// merge adds the later change cs to c (a rollback of several blocks, one
// batch each): its addresses and outpoints, and its balances, which replace
// the earlier ones; an address cs changed without a balance loses the one
// an earlier batch gave it.
func (c *changes) merge(cs *changeset.Set) {
	for _, a := range cs.Addresses {
		c.address(a)
		if c.cs.Balances == nil {
			c.cs.Balances = make(map[string]chain.Balance)
		}
		if b, ok := cs.Balances[a]; ok {
			c.cs.Balances[a] = b
		} else {
			delete(c.cs.Balances, a)
		}
	}
	for _, op := range cs.OutPoints {
		c.outPoint(op)
	}
	for _, k := range cs.IndexKeys {
		c.indexKeys([]DimKey{k})
	}
	c.cs.Created += cs.Created
	c.cs.Spent += cs.Spent
}

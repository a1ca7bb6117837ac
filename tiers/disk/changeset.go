package disk

import (
	"github.com/utxo-cache/utxo-cache/chain"
)

// ChangeSet says what a commit or rollback changed, for the cache tiers to
// invalidate: every address whose listing or balance changed and every
// outpoint whose lookup answer changed (created, spent, restored, or whose
// spent record just passed or came back within PruneDepth).
type ChangeSet struct {
	OldTip, NewTip chain.Tip
	Seq            uint64 // State.Seq after the change
	Rollback       bool
	Addresses      []string
	OutPoints      []chain.OutPoint
	Created, Spent int // live outputs added and removed
	Skipped        int // unknown inputs skipped (apply only)
	// Balances holds the balance of addresses of Addresses after the
	// change: the balance row the change itself wrote, so exactly what
	// View.Balance(DimAddress, address) answers at Seq (the zero Balance
	// when no output is left). An address of Addresses missing from it has
	// no balance known here. Read-only: its values share memory with the
	// store's balance cache.
	Balances map[string]chain.Balance
	// Spans[i] holds the lowest and highest index positions among the
	// outputs the change added to or removed from Addresses[i] (their live
	// rows: an output created and spent inside the change is in neither).
	// Nil when not known (a rollback: its batches are merged): a reader must
	// then take every position of those addresses as changed.
	Spans []PositionSpan
	// Outputs lists, when Spans is set, every output the change added to or
	// removed from the listing of an address of Addresses (Outputs[j].Address
	// indexes Addresses), in no particular order. Read-only: the Utxos are
	// the writer's.
	Outputs []AddressOutput
}

// AddressOutput is one output a change added to an address's listing, or
// removed from it.
type AddressOutput struct {
	Address int32 // index in ChangeSet.Addresses
	Added   bool
	Utxo    *chain.Utxo
}

// PositionSpan is the closed range [Lo, Hi] of index positions a change
// touched in one address's chain order.
type PositionSpan struct{ Lo, Hi chain.Position }

// changes accumulates a ChangeSet without duplicates.
type changes struct {
	addrs map[string]int // address -> its index in cs.Addresses
	ops   map[chain.OutPoint]struct{}
	cs    ChangeSet
	// merged is set once an address came without a position (merge): Spans
	// is then nil for good.
	merged bool
	// addrKeys[i] is the DimAddress key of cs.Addresses[i] while every
	// address came through addressKey (derived, which has the key at hand);
	// merge leaves it short, and setBalances then hashes the addresses.
	addrKeys []DimKey
}

// blockChanges is newChanges for a single block's commit, reusing the
// store's dedup maps (emptied) from block to block; the ChangeSet's slices
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
	c.cs = ChangeSet{OldTip: old, Addresses: make([]string, 0, n), OutPoints: make([]chain.OutPoint, 0, n),
		Spans: make([]PositionSpan, 0, n), Outputs: make([]AddressOutput, 0, n)}
	return c
}

// newChanges starts the changes of a commit from tip old that changes about
// n outpoint rows (a size hint: each row names an outpoint and an address).
func newChanges(old chain.Tip, n int) *changes {
	return &changes{
		addrs: make(map[string]int, n),
		ops:   make(map[chain.OutPoint]struct{}, n),
		cs: ChangeSet{OldTip: old, Addresses: make([]string, 0, n), OutPoints: make([]chain.OutPoint, 0, n),
			Spans: make([]PositionSpan, 0, n), Outputs: make([]AddressOutput, 0, n)},
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
	c.cs.Outputs = append(c.cs.Outputs, AddressOutput{Address: int32(i), Added: added, Utxo: u})
	if !ok {
		c.cs.Spans = append(c.cs.Spans, PositionSpan{Lo: p, Hi: p})
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

func (c *changes) outPoint(op chain.OutPoint) {
	if _, ok := c.ops[op]; !ok {
		c.ops[op] = struct{}{}
		c.cs.OutPoints = append(c.cs.OutPoints, op)
	}
}

// setBalances fills cs.Balances from the balance rows d wrote
// (flushBalances): call it once the change's batch has committed.
func (c *changes) setBalances(d *derived) {
	rows := make(map[DimKey]*chain.Balance, len(d.written))
	for i := range d.written {
		rows[d.written[i].k] = &d.written[i].b
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
func (c *changes) merge(cs *ChangeSet) {
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
	c.cs.Created += cs.Created
	c.cs.Spent += cs.Spent
}

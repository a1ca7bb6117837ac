package disk

import "github.com/utxo-cache/utxo-cache/chain"

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
}

// changes accumulates a ChangeSet without duplicates.
type changes struct {
	addrs map[string]struct{}
	ops   map[chain.OutPoint]struct{}
	cs    ChangeSet
}

// blockChanges is newChanges for a single block's commit, reusing the
// store's dedup maps (emptied) from block to block; the ChangeSet's slices
// are new. The caller returns a copy of ch.cs, never &ch.cs. Writer
// goroutine only, one commit at a time.
func (s *Store) blockChanges(old chain.Tip, n int) *changes {
	c := &s.changes
	if c.addrs == nil {
		c.addrs = make(map[string]struct{}, n)
		c.ops = make(map[chain.OutPoint]struct{}, n)
	} else {
		clear(c.addrs)
		clear(c.ops)
	}
	c.cs = ChangeSet{OldTip: old, Addresses: make([]string, 0, n), OutPoints: make([]chain.OutPoint, 0, n)}
	return c
}

// newChanges starts the changes of a commit from tip old that changes about
// n outpoint rows (a size hint: each row names an outpoint and an address).
func newChanges(old chain.Tip, n int) *changes {
	return &changes{
		addrs: make(map[string]struct{}, n),
		ops:   make(map[chain.OutPoint]struct{}, n),
		cs:    ChangeSet{OldTip: old, Addresses: make([]string, 0, n), OutPoints: make([]chain.OutPoint, 0, n)},
	}
}

func (c *changes) address(a string) {
	if _, ok := c.addrs[a]; !ok {
		c.addrs[a] = struct{}{}
		c.cs.Addresses = append(c.cs.Addresses, a)
	}
}

func (c *changes) outPoint(op chain.OutPoint) {
	if _, ok := c.ops[op]; !ok {
		c.ops[op] = struct{}{}
		c.cs.OutPoints = append(c.cs.OutPoints, op)
	}
}

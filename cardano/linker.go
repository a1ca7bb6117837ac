package cardano

import (
	"fmt"

	"github.com/utxo-cache/utxo-cache/chain"
)

// Linker turns converted blocks, in chain order, into the blocks a store
// applies, and checks that each one links to the one before.
//
// # Boundary blocks
//
// A Byron epoch boundary block (EBB) has no transactions and carries its
// parent's block number; the next main block names the EBB as its parent and
// has the number after. The store's heights rise by one per block and our
// height is the block number, so an EBB cannot be a store block. The Linker
// holds it back and gives the next block the EBB's parent as PrevHash:
//
//	block  number  header parent    applied as
//	M      99      L                height 99, prev L
//	EBB    99      M                (held back: Next reports apply=false)
//	N      100     EBB              height 100, prev M
//
// Mainnet's epoch-0 EBB (number 0, parent the Byron genesis hash) is held
// back the same way: a store that starts at the chain's beginning gets the
// first main block first, with the genesis hash as its prev_hash.
//
// A Linker is not safe for concurrent use: one follower or importer owns it.
type Linker struct {
	tip      chain.Tip
	boundary struct {
		hash, parent chain.Hash
		pending      bool
	}
}

// NewLinker returns a Linker whose next block must follow tip (any first block
// when tip.Empty). Starting mid-chain just after an EBB, feed the EBB first:
// otherwise the next block's parent is a hash no store holds.
func NewLinker(tip chain.Tip) *Linker { return &Linker{tip: tip} }

// Tip returns the last block Next returned for applying.
func (l *Linker) Tip() chain.Tip { return l.tip }

// Next checks that b follows what came before and returns the block to apply,
// with apply false for a boundary block (nothing to apply). The returned
// block shares b.Chain's transactions. On ErrNotLinked nothing changes.
func (l *Linker) Next(b *Block) (out chain.Block, apply bool, err error) {
	if b.Boundary {
		if !l.tip.Empty && (b.Chain.PrevHash != l.tip.Hash || b.Chain.Height != l.tip.Height) {
			return out, false, fmt.Errorf("%w: boundary block %s (number %d, parent %s) after tip %s", ErrNotLinked, b.Name(), b.Chain.Height, b.Chain.PrevHash, l.tip)
		}
		l.boundary.hash, l.boundary.parent, l.boundary.pending = b.Chain.Hash, b.Chain.PrevHash, true
		return out, false, nil
	}
	out = b.Chain
	viaBoundary := l.boundary.pending && out.PrevHash == l.boundary.hash
	if viaBoundary {
		out.PrevHash = l.boundary.parent
	}
	if !l.tip.Empty && (out.PrevHash != l.tip.Hash || out.Height != l.tip.Height+1) {
		return chain.Block{}, false, fmt.Errorf("%w: block %s (height %d, parent %s) after tip %s", ErrNotLinked, b.Name(), b.Chain.Height, b.Chain.PrevHash, l.tip)
	}
	l.boundary.pending = false
	l.tip = chain.Tip{Height: out.Height, Hash: out.Hash}
	return out, true, nil
}

package bitcoin

import (
	"fmt"
	"math/big"

	"github.com/btcsuite/btcd/chaincfg/chainhash"
	"github.com/btcsuite/btcd/wire"
)

// OrderOptions configure OrderByParent.
type OrderOptions struct {
	// StartHeight is the height of the first block of the chain: the one
	// block whose parent is not in the set. 0 (the default) for a set that
	// starts with the genesis block; 1 for a file that starts with block 1
	// (such as blocks1-256); in general the height of the file's first block.
	StartHeight uint64
}

// Ordered is a set of blocks arranged into one chain.
type Ordered struct {
	// Blocks is the main chain, parent before child: Blocks[i] is at height
	// StartHeight+i.
	Blocks      []*wire.MsgBlock
	StartHeight uint64
	// Stale holds the blocks of side branches, not on the main chain, in
	// input order. A caller applying Blocks in order skips them.
	Stale []*wire.MsgBlock
}

// Height returns the height of Blocks[i].
func (o *Ordered) Height(i int) uint64 { return o.StartHeight + uint64(i) }

// OrderByParent arranges blocks, given in any order, into a chain by their
// parent links. The blocks must form one tree: exactly one block (the root,
// at opts.StartHeight) has a parent outside the set; a second such block
// fails with ErrNotConnected. Where the tree branches, the main chain ends at
// the tip with the most cumulative proof of work (the longest branch, when
// difficulty is constant), ties going to the tip that comes first in the
// input, as a node keeps the first branch it saw; blocks off the main chain
// are returned in Stale. A block given twice (same hash) counts once.
//
// Everything is held in memory: the blocks themselves plus a few words and
// one big.Int per block, so it suits a set of block files, not a whole chain
// (about 900,000 blocks on mainnet).
func OrderByParent(blocks []*wire.MsgBlock, opts OrderOptions) (*Ordered, error) {
	ord := &Ordered{StartHeight: opts.StartHeight}
	if len(blocks) == 0 {
		return ord, nil
	}

	type node struct {
		blk      *wire.MsgBlock
		hash     chainhash.Hash
		parent   int // index in nodes, -1 for the root
		children []int
		work     *big.Int // cumulative, root included
	}
	nodes := make([]node, 0, len(blocks))
	byHash := make(map[chainhash.Hash]int, len(blocks))
	for _, blk := range blocks {
		h := blk.BlockHash()
		if _, dup := byHash[h]; dup {
			continue
		}
		byHash[h] = len(nodes)
		nodes = append(nodes, node{blk: blk, hash: h, parent: -1})
	}

	var roots []int
	for i := range nodes {
		p, ok := byHash[nodes[i].blk.Header.PrevBlock]
		if !ok {
			roots = append(roots, i)
			continue
		}
		nodes[i].parent = p
		nodes[p].children = append(nodes[p].children, i)
	}
	if len(roots) != 1 {
		// A finite set of hash-linked blocks always has a root, so this
		// is two or more chains that do not meet.
		var hashes []string
		for _, r := range roots {
			if len(hashes) == 4 {
				hashes = append(hashes, "…")
				break
			}
			hashes = append(hashes, fmt.Sprintf("%s (parent %s)", nodes[r].hash, nodes[r].blk.Header.PrevBlock))
		}
		return nil, fmt.Errorf("%w: %d blocks have a parent outside the set: %v", ErrNotConnected, len(roots), hashes)
	}

	// Walk the tree from the root, parents before children, accumulating work.
	best := roots[0]
	stack := []int{roots[0]}
	for len(stack) > 0 {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		n := &nodes[i]
		n.work = blockWork(n.blk.Header.Bits)
		if n.parent >= 0 {
			n.work.Add(n.work, nodes[n.parent].work)
		}
		if c := n.work.Cmp(nodes[best].work); c > 0 || (c == 0 && i < best) {
			best = i
		}
		stack = append(stack, n.children...)
	}

	onMain := make([]bool, len(nodes))
	var chainLen int
	for i := best; i >= 0; i = nodes[i].parent {
		onMain[i] = true
		chainLen++
	}
	ord.Blocks = make([]*wire.MsgBlock, chainLen)
	for i, k := best, chainLen-1; i >= 0; i, k = nodes[i].parent, k-1 {
		ord.Blocks[k] = nodes[i].blk
	}
	for i := range nodes {
		if !onMain[i] {
			ord.Stale = append(ord.Stale, nodes[i].blk)
		}
	}
	return ord, nil
}

// blockWork is the expected number of hashes for a block with this compact
// target: 2^256 / (target + 1), or 0 for a target that is not positive.
func blockWork(bits uint32) *big.Int {
	mantissa := int64(bits & 0x007fffff)
	exponent := uint(bits >> 24)
	target := big.NewInt(mantissa)
	if exponent <= 3 {
		target.Rsh(target, 8*(3-exponent))
	} else {
		target.Lsh(target, 8*(exponent-3))
	}
	if bits&0x00800000 != 0 || target.Sign() <= 0 {
		return new(big.Int)
	}
	num := new(big.Int).Lsh(big.NewInt(1), 256)
	return num.Div(num, target.Add(target, big.NewInt(1)))
}

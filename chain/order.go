package chain

import "cmp"

// Position is a place in chain order: (created height, tx position, output
// index). Every listing of outputs (an address's, in the API contract) is in
// this order; the store's index keys end with it and a listing cursor
// encodes it.
type Position struct {
	Height uint64
	TxPos  uint32
	Index  uint32
}

// Position is u's place in chain order.
func (u *Utxo) Position() Position {
	return Position{Height: u.Height, TxPos: u.TxPos, Index: u.OutPoint.Index}
}

// ComparePositions orders positions in chain order: by height, then position
// in the block, then output index.
func ComparePositions(a, b Position) int {
	if c := cmp.Compare(a.Height, b.Height); c != 0 {
		return c
	}
	if c := cmp.Compare(a.TxPos, b.TxPos); c != 0 {
		return c
	}
	return cmp.Compare(a.Index, b.Index)
}

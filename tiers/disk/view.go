package disk

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/utxo-cache/utxo-cache/chain"
)

// View is a consistent read of the store at one tip: every answer from one
// View reflects the same committed block (a Pebble snapshot). A View is safe
// for concurrent use; Close it once when done (an open View pins old data).
type View struct {
	s     *Store
	snap  *pebble.Snapshot
	state State
	ref   *publishedSnapshot // the shared snapshot of PublishedView; nil: snap is the view's own
}

// NewView opens a view of the latest committed state, which may not be
// published yet: for the writer's side and offline tools. Readers that
// answer clients use PublishedView.
func (s *Store) NewView() (*View, error) {
	snap := s.db.NewSnapshot()
	v, closer, err := snap.Get(keyState)
	if err != nil {
		snap.Close()
		return nil, fmt.Errorf("disk: read state: %w", err)
	}
	st, err := decodeState(v)
	closer.Close()
	if err != nil {
		snap.Close()
		return nil, err
	}
	return &View{s: s, snap: snap, state: st}, nil
}

// Close releases the snapshot (for a published view, its reference to it).
func (v *View) Close() error {
	if v.ref != nil {
		v.ref.release()
		return nil
	}
	return v.snap.Close()
}

// State returns the state (tip, count, digest) the view reflects.
func (v *View) State() State { return v.state }

// Tip returns the tip the view reflects.
func (v *View) Tip() chain.Tip { return v.state.Tip }

// Utxo returns the output at op and, when it is spent, who spent it. It
// answers chain.ErrNotFound when op never existed at this tip or its spent
// record is older than PruneDepth blocks (docs/rollback-and-retention.md).
func (v *View) Utxo(op chain.OutPoint) (chain.Utxo, *chain.Spent, error) {
	var kb [outPointKeyLen]byte
	raw, closer, err := v.snap.Get(appendOutPointKey(kb[:0], op))
	if errors.Is(err, pebble.ErrNotFound) {
		return chain.Utxo{}, nil, chain.ErrNotFound
	}
	if err != nil {
		return chain.Utxo{}, nil, fmt.Errorf("disk: read %s: %w", op, err)
	}
	r, err := decodeRecord(op, raw)
	closer.Close()
	if err != nil {
		return chain.Utxo{}, nil, err
	}
	if r.Spent != nil && v.state.Tip.Height-r.Spent.Height > v.s.opts.PruneDepth {
		return chain.Utxo{}, nil, chain.ErrNotFound
	}
	return r.Utxo, r.Spent, nil
}

// Balance returns the balance of a dimension value (an address for
// DimAddress); a value with nothing live has the zero Balance.
func (v *View) Balance(dim Dimension, value []byte) (chain.Balance, error) {
	if err := v.s.checkDim(dim); err != nil {
		return chain.Balance{}, err
	}
	var kb [1 + dimKeySize]byte
	raw, closer, err := v.snap.Get(appendBalanceKey(kb[:0], MakeDimKey(dim, value)))
	if errors.Is(err, pebble.ErrNotFound) {
		return chain.Balance{}, nil
	}
	if err != nil {
		return chain.Balance{}, fmt.Errorf("disk: read balance: %w", err)
	}
	defer closer.Close()
	return decodeBalance(raw)
}

// ListQuery selects a page of a dimension value's live outputs.
type ListQuery struct {
	Dim   Dimension
	Value []byte
	// After, when set, resumes after this position (exclusive) in the
	// listing's direction; nil starts at the first (or, Desc, the last) item.
	After *Position
	Desc  bool
	Limit int // items per page, >= 1
}

// List returns up to q.Limit live outputs of q.Value in chain order (reverse
// when q.Desc), and the position to resume from, nil when the listing is
// complete. It reads at most q.Limit+1 index entries: O(page), whatever the
// number of outputs the value has. Positions are stable across new blocks, so
// a resumed listing neither repeats nor skips an output live all along.
func (v *View) List(q ListQuery) ([]chain.Utxo, *Position, error) {
	if err := v.s.checkDim(q.Dim); err != nil {
		return nil, nil, err
	}
	if q.Limit < 1 {
		return nil, nil, fmt.Errorf("disk: list limit %d: %w", q.Limit, chain.ErrInvalidArgument)
	}
	dk := MakeDimKey(q.Dim, q.Value)
	lo, hi := indexBounds(dk)
	if q.After != nil {
		if q.Desc {
			hi = appendIndexKey(nil, dk, *q.After) // exclusive upper bound
		} else {
			lo = successor(appendIndexKey(nil, dk, *q.After))
		}
	}
	it, err := v.snap.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return nil, nil, fmt.Errorf("disk: list: %w", err)
	}
	defer it.Close()
	first, next := it.First, it.Next
	if q.Desc {
		first, next = it.Last, it.Prev
	}
	out := make([]chain.Utxo, 0, min(q.Limit, 1024))
	var more bool
	for valid := first(); valid; valid = next() {
		if len(out) == q.Limit {
			more = true
			break
		}
		pos, ok := decodeIndexPosition(it.Key())
		if !ok {
			return nil, nil, fmt.Errorf("disk: index key %x: %w", it.Key(), ErrCorrupt)
		}
		u, err := decodeIndexValue(pos.Index, it.Value())
		if err != nil {
			return nil, nil, err
		}
		out = append(out, u)
	}
	if err := it.Error(); err != nil {
		return nil, nil, fmt.Errorf("disk: list: %w", err)
	}
	if !more {
		return out, nil, nil
	}
	last := positionOf(&out[len(out)-1])
	return out, &last, nil
}

// successor returns the smallest key greater than k.
func successor(k []byte) []byte { return append(k, 0) }

func (s *Store) checkDim(dim Dimension) error {
	for _, d := range s.dims {
		if d == dim {
			return nil
		}
	}
	return fmt.Errorf("disk: dimension %d is not indexed by this store: %w", dim, chain.ErrInvalidArgument)
}

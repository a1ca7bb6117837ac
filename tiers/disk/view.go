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
	var rec Record
	err := v.UtxoFunc(op, func(r *UtxoRef) error {
		rec = r.record()
		return nil
	})
	return rec.Utxo, rec.Spent, err
}

// UtxoFunc reads the output at op in place, with one Pebble Get and no
// iterator, and calls fn with it: fn must not keep r or its slices (see
// UtxoRef). It answers chain.ErrNotFound, without calling fn, when Utxo
// would; otherwise fn's error.
func (v *View) UtxoFunc(op chain.OutPoint, fn func(r *UtxoRef) error) error {
	var r UtxoRef
	return v.withUtxo(op, &r, fn)
}

// UtxosFunc reads the outputs at ops in place, one Get each, in order, and
// calls fn with each: r is nil where Utxo would answer chain.ErrNotFound. fn
// must not keep r or its slices (see UtxoRef); its error stops the reads and
// is returned.
func (v *View) UtxosFunc(ops []chain.OutPoint, fn func(i int, r *UtxoRef) error) error {
	var r UtxoRef // one for the batch: the pointer handed to fn escapes
	for i, op := range ops {
		err := v.withUtxo(op, &r, func(r *UtxoRef) error { return fn(i, r) })
		if errors.Is(err, chain.ErrNotFound) {
			err = fn(i, nil)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// withUtxo reads the record at op into r and calls fn with it while Pebble's
// value buffer is pinned; chain.ErrNotFound (fn not called) where Utxo would
// answer it.
func (v *View) withUtxo(op chain.OutPoint, r *UtxoRef, fn func(r *UtxoRef) error) error {
	raw, closer, err := v.snap.Get(appendOutPointKey(r.key[:0], op))
	if errors.Is(err, pebble.ErrNotFound) {
		return chain.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("disk: read %s: %w", op, err)
	}
	defer closer.Close()
	if err := parseRecordValue(op, raw, r); err != nil {
		return err
	}
	if r.Spent && v.state.Tip.Height-r.SpentHeight > v.s.opts.PruneDepth {
		return chain.ErrNotFound
	}
	return fn(r)
}

// Balance returns the balance of a dimension value (an address for
// DimAddress); a value with nothing live has the zero Balance.
func (v *View) Balance(dim Dimension, value []byte) (chain.Balance, error) {
	if err := v.s.checkDim(dim); err != nil {
		return chain.Balance{}, err
	}
	dk := MakeDimKey(dim, value)
	var kb [1 + dimKeySize]byte
	raw, closer, err := v.snap.Get(appendBalanceKey(kb[:0], dk))
	if errors.Is(err, pebble.ErrNotFound) {
		return chain.Balance{}, nil
	}
	if err != nil {
		return chain.Balance{}, fmt.Errorf("disk: read balance: %w", err)
	}
	r, err := decodeBalanceRow(raw)
	closer.Close()
	if err != nil || r.assetRows == 0 {
		return r.bal, err
	}
	r.bal.Assets, err = readAssetRows(v.snap, dk, r.assetRows)
	return r.bal, err
}

// ListQuery selects a page of a dimension value's live outputs.
type ListQuery struct {
	Dim   Dimension
	Value []byte
	// After, when set, resumes after this position (exclusive) in the
	// listing's direction; nil starts at the first (or, Desc, the last) item.
	After *chain.Position
	Desc  bool
	Limit int // items per page, >= 1
	// Keep, when set, filters the page: outputs it refuses are skipped
	// (not handed to fn, not counted in Limit) but still move the resume
	// position, so a filtered listing pages by position as an unfiltered
	// one does. It must not keep r. A filtered page reads at most MaxScan
	// index entries (when positive), and may so hold fewer than Limit
	// outputs, even none, and still have more to read.
	Keep    func(r *UtxoRef) bool
	MaxScan int
	// Skip, when positive, passes over that many index entries first (after
	// After, in the listing's direction) before the page starts: an offset
	// page. The entries skipped are stepped over by key alone, their values
	// never read nor decoded, and Keep does not see them: page N of an
	// offset listing costs the (N-1)·Limit key steps and one page's reads.
	Skip int
}

// List returns up to q.Limit live outputs of q.Value in chain order (reverse
// when q.Desc), and the position to resume from, nil when the listing is
// complete. It reads at most q.Limit+1 index entries: O(page), whatever the
// number of outputs the value has. Positions are stable across new blocks, so
// a resumed listing neither repeats nor skips an output live all along.
func (v *View) List(q ListQuery) ([]chain.Utxo, *chain.Position, error) {
	if q.Limit < 1 {
		return nil, nil, fmt.Errorf("disk: list limit %d: %w", q.Limit, chain.ErrInvalidArgument)
	}
	out := make([]chain.Utxo, 0, min(q.Limit, 1024))
	next, more, err := v.ListFunc(q, func(r *UtxoRef) error {
		out = append(out, r.record().Utxo)
		return nil
	})
	if err != nil || !more {
		return out, nil, err
	}
	return out, &next, nil
}

// ListFunc is List read in place: it calls fn with each output of the page,
// in order (fn must not keep r or its slices, see UtxoRef), and returns the
// position to resume from, with more false when the listing is complete.
// One iterator serves the page, bounded by the value's index keys (and the
// resume position); it reads q.Limit+1 keys at most, decoding only the key of
// the last, after the q.Skip keys it steps over. fn's error stops the listing and is returned.
func (v *View) ListFunc(q ListQuery, fn func(r *UtxoRef) error) (next chain.Position, more bool, err error) {
	if err := v.s.checkDim(q.Dim); err != nil {
		return chain.Position{}, false, err
	}
	if q.Limit < 1 {
		return chain.Position{}, false, fmt.Errorf("disk: list limit %d: %w", q.Limit, chain.ErrInvalidArgument)
	}
	lo, hi := listBounds(MakeDimKey(q.Dim, q.Value), q.After, q.Desc)
	it, err := v.snap.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return chain.Position{}, false, fmt.Errorf("disk: list: %w", err)
	}
	defer it.Close()
	first, step := it.First, it.Next
	if q.Desc {
		first, step = it.Last, it.Prev
	}
	var r UtxoRef
	n, scanned := 0, 0
	valid := first()
	for i := 0; valid && i < q.Skip; i++ {
		valid = step()
	}
	for ; valid; valid = step() {
		if n == q.Limit || (q.Keep != nil && q.MaxScan > 0 && scanned == q.MaxScan) {
			more = true
			break
		}
		pos, ok := decodeIndexPosition(it.Key())
		if !ok {
			return chain.Position{}, false, fmt.Errorf("disk: index key %x: %w", it.Key(), ErrCorrupt)
		}
		val, err := it.ValueAndErr()
		if err != nil {
			return chain.Position{}, false, fmt.Errorf("disk: list: %w", err)
		}
		if err := parseIndexValue(pos.Index, val, &r); err != nil {
			return chain.Position{}, false, err
		}
		if q.Keep != nil {
			scanned++
			if !q.Keep(&r) {
				next = pos
				continue
			}
		}
		if err := fn(&r); err != nil {
			return chain.Position{}, false, err
		}
		next = pos
		n++
	}
	if err := it.Error(); err != nil {
		return chain.Position{}, false, fmt.Errorf("disk: list: %w", err)
	}
	if !more {
		return chain.Position{}, false, nil
	}
	return next, true, nil
}

// listBounds returns the iterator bounds [lo, hi) of a page of dk's index
// keys resuming after pos (nil: from the first, or the last when desc), in
// one allocation: Pebble keeps the bounds for the iterator's life.
func listBounds(dk DimKey, after *chain.Position, desc bool) (lo, hi []byte) {
	buf := make([]byte, 0, 2*indexKeyLen+1)
	lo, hi = indexBounds(buf, dk)
	if after != nil {
		at := appendIndexKey(hi[len(hi):len(hi)], dk, *after)
		if desc {
			hi = at // exclusive upper bound
		} else {
			lo = successor(at)
		}
	}
	return lo, hi
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

package disk

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/cockroachdb/pebble/v2"

	"github.com/utxo-cache/utxo-cache/chain"
)

// derived accumulates what a set of row changes does to the data derived from
// live rows: index entries, balances, the live count and the digest. Apply
// and rollback both describe a block as "this live UTXO appeared" and "this
// live UTXO disappeared", so they share it.
type derived struct {
	dims     []Dimension
	funcs    []ValuesFunc // dimFuncs of dims
	b        *keyBatch
	balances map[DimKey]*balanceDelta
	order    []DimKey
	state    *State
	ch       *changes
	written  []writtenBalance // rows as flushBalances wrote them
	// countersSub says that the counter deltas (balanceDelta.ctr, set
	// before flushBalances) are subtracted from the rows: a rollback.
	countersSub bool
	// noFigures leaves the count and digest alone: a catch-up window keeps
	// them block by block itself (window.go).
	noFigures bool
	keyBuf    []byte
	valBuf    []byte
	dimKeys   []DimKey
	filters   []assetFilter // the balance filter of each of dimKeys
}

// newDerived starts the derived changes of a commit of about n outpoint rows
// (a size hint) into b.
func newDerived(dims []Dimension, funcs []ValuesFunc, b *keyBatch, st *State, ch *changes, n int) *derived {
	return &derived{dims: dims, funcs: funcs, b: b, balances: make(map[DimKey]*balanceDelta, n), state: st, ch: ch}
}

func (d *derived) delta(k DimKey) *balanceDelta {
	bd := d.balances[k]
	if bd == nil {
		bd = &balanceDelta{}
		d.balances[k] = bd
		d.order = append(d.order, k)
	}
	return bd
}

// add records that u became live.
func (d *derived) add(u *chain.Utxo) {
	pos := u.Position()
	d.valBuf = appendIndexValue(d.valBuf[:0], u)
	d.dimKeys, d.filters = appendDimKeys(d.dimKeys[:0], d.filters[:0], d.dims, d.funcs, u)
	for i, k := range d.dimKeys {
		d.keyBuf = appendIndexKey(d.keyBuf[:0], k, pos)
		_ = d.b.Set(d.keyBuf, d.valBuf, nil)
		d.delta(k).apply(u, +1, &d.filters[i])
	}
	d.ch.indexKeys(d.dimKeys[1:])
	if !d.noFigures {
		d.state.UtxoCount++
		d.state.Digest.Add(u)
	}
	d.ch.output(u, d.dimKeys[0], pos, true) // DimAddress comes first (appendDimKeys)
	d.ch.cs.Created++
}

// remove records that u stopped being live.
func (d *derived) remove(u *chain.Utxo) {
	pos := u.Position()
	d.dimKeys, d.filters = appendDimKeys(d.dimKeys[:0], d.filters[:0], d.dims, d.funcs, u)
	for i, k := range d.dimKeys {
		d.keyBuf = appendIndexKey(d.keyBuf[:0], k, pos)
		_ = d.b.Delete(d.keyBuf, nil)
		d.delta(k).apply(u, -1, &d.filters[i])
	}
	d.ch.indexKeys(d.dimKeys[1:])
	if !d.noFigures {
		d.state.UtxoCount--
		d.state.Digest.Sub(u)
	}
	d.ch.output(u, d.dimKeys[0], pos, false) // DimAddress comes first (appendDimKeys)
	d.ch.cs.Spent++
}

type writtenBalance struct {
	k   DimKey
	b   chain.Balance
	ctr counterFigures
}

// setCounters gives the counter deltas (keys distinct) the batch adds to
// the balance rows, or subtracts when sub is set (a rollback): a key no
// output of the batch touched is read and rewritten for its counters
// alone. Call it before flushBalances.
func (d *derived) setCounters(ds []counterDelta, sub bool) {
	if len(ds) == 0 {
		return
	}
	d.countersSub = sub
	for i := range ds {
		d.delta(ds[i].k).ctr = &ds[i].counterFigures
	}
}

// flushBalances reads each touched balance row (from cache, else Pebble, on
// up to workers goroutines at once), applies its delta and its counter
// delta (setCounters) and writes it back, or deletes it when it reaches
// zero outputs and all-zero counters.
func (d *derived) flushBalances(db *pebble.DB, cache *balanceCache, workers int) error {
	cur := make([]balanceRow, len(d.order))
	d.written = slices.Grow(d.written, len(d.order))
	var misses []int // indexes into d.order of rows not in cache
	for i, k := range d.order {
		var cached bool
		if cur[i], cached = cache.get(k); !cached {
			misses = append(misses, i)
		}
	}
	slices.SortFunc(misses, func(i, j int) int { return bytes.Compare(d.order[i][:], d.order[j][:]) }) // see Prefetch
	if err := readSorted(db, len(misses), workers,
		func(j int, dst []byte) []byte { return appendBalanceKey(dst, d.order[misses[j]]) },
		func(j int, v []byte) (err error) {
			cur[misses[j]], err = decodeBalanceRow(v)
			return err
		}); err != nil {
		return fmt.Errorf("read balances: %w", err)
	}
	for i, k := range d.order {
		d.keyBuf = appendBalanceKey(d.keyBuf[:0], k)
		bd := d.balances[k]
		next, err := bd.applyTo(cur[i].bal)
		if err != nil {
			return fmt.Errorf("balance %x: %w", k, err)
		}
		ctr := cur[i].ctr
		if c := bd.ctr; c != nil {
			if d.countersSub {
				if err := ctr.sub(c); err != nil {
					return fmt.Errorf("counters %x: %w", k, err)
				}
			} else {
				ctr.add(c)
			}
		}
		d.written = append(d.written, writtenBalance{k, next, ctr})
		if next.Count == 0 {
			if !next.Value.IsZero() || len(next.Assets) != 0 {
				return fmt.Errorf("balance %x: no outputs but a value left: %w", k, ErrCorrupt)
			}
			if ctr.zero() {
				_ = d.b.Delete(d.keyBuf, nil)
				continue
			}
		}
		d.valBuf = appendBalanceRow(d.valBuf[:0], &next, &ctr)
		_ = d.b.Set(d.keyBuf, d.valBuf, nil)
	}
	return nil
}

// readSorted looks up n keys, in ascending key order (key(i, dst) appends
// key i to dst), and calls fn(i, value) for each one present; value is
// valid during the call only. Each of up to workers goroutines (one when n
// is small) walks a contiguous share of the keys with one Pebble iterator:
// in key order a seek continues from where the last one left the memtable
// and table iterators, where each Get would start over. Nothing may write
// to db meanwhile (the writer's reads before its commit). fn may run on
// several goroutines at once, never twice for one i.
func readSorted(db *pebble.DB, n, workers int, key func(i int, dst []byte) []byte, fn func(i int, v []byte) error) error {
	workers = max(1, min(workers, n/parallelMin))
	share := func(w int) error {
		it, err := db.NewIter(nil)
		if err != nil {
			return err
		}
		var kb []byte
		for i := w * n / workers; i < (w+1)*n/workers; i++ {
			kb = key(i, kb[:0])
			if !it.SeekPrefixGE(kb) {
				// Absent, or a read error: the next seek clears the
				// iterator's error, so check it before going on.
				if err := it.Error(); err != nil {
					return errors.Join(fmt.Errorf("read %x: %w", kb, err), it.Close())
				}
				continue
			}
			if !bytes.Equal(it.Key(), kb) {
				continue
			}
			v, err := it.ValueAndErr()
			if err == nil {
				err = fn(i, v)
			}
			if err != nil {
				return errors.Join(err, it.Close())
			}
		}
		return errors.Join(it.Error(), it.Close())
	}
	if workers == 1 {
		return share(0)
	}
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() { errs[w] = share(w) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// parallelMin is the fewest Pebble reads worth spreading over goroutines.
const parallelMin = 32

// commitBalances records in cache the rows flushBalances wrote; call it only
// after the batch has committed.
func (d *derived) commitBalances(cache *balanceCache) {
	for _, w := range d.written {
		if w.b.Count == 0 {
			w.b = chain.Balance{} // no balance (the row deleted, or counters alone)
		}
		cache.put(w.k, balanceRow{bal: w.b, ctr: w.ctr})
	}
}

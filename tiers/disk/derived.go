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
	// them block by block itself (window.go). It also leaves out the
	// reading of whole address balances (fullAddressAssets), which only the
	// changes of single blocks and rollbacks give their readers.
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
		bd := d.delta(k)
		bd.apply(u, +1, &d.filters[i])
		bd.address = bd.address || i == 0 // DimAddress comes first
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
		bd := d.delta(k)
		bd.apply(u, -1, &d.filters[i])
		bd.address = bd.address || i == 0 // DimAddress comes first
	}
	d.ch.indexKeys(d.dimKeys[1:])
	if !d.noFigures {
		d.state.UtxoCount--
		d.state.Digest.Sub(u)
	}
	d.ch.output(u, d.dimKeys[0], pos, false) // DimAddress comes first (appendDimKeys)
	d.ch.cs.Spent++
}

// writtenBalance is a balance row as flushBalances wrote it: b holds its
// count and value, and its assets only when known (every asset of the
// value is in b.Assets: a value with no asset rows, or one whose list was
// just split into them); assetRows counts its asset rows.
type writtenBalance struct {
	k         DimKey
	b         chain.Balance
	ctr       counterFigures
	assetRows uint64
	known     bool
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
// zero outputs and all-zero counters. Of a value's assets it reads and
// writes only the asset rows (balanceasset.go) its delta changes; a row
// that still lists its assets (written before asset rows) is split into
// them.
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
	// The asset rows the deltas change, of the values that have asset rows
	// (a value without any has none to read).
	var reads []*assetDelta
	for i, k := range d.order {
		if cur[i].assetRows == 0 {
			continue
		}
		for _, ad := range d.balances[k].assets {
			ad.key = appendAssetKey(nil, k, ad.policy, ad.name)
			reads = append(reads, ad)
		}
	}
	slices.SortFunc(reads, func(x, y *assetDelta) int { return bytes.Compare(x.key, y.key) })
	if err := readSorted(db, len(reads), workers,
		func(j int, dst []byte) []byte { return append(dst, reads[j].key...) },
		func(j int, v []byte) (err error) {
			reads[j].cur, err = decodeAssetQuantity(v)
			reads[j].found = true
			return err
		}); err != nil {
		return fmt.Errorf("read asset rows: %w", err)
	}
	for i, k := range d.order {
		bd := d.balances[k]
		row := cur[i]
		if c := bd.ctr; c != nil {
			if d.countersSub {
				if err := row.ctr.sub(c); err != nil {
					return fmt.Errorf("counters %x: %w", k, err)
				}
			} else {
				row.ctr.add(c)
			}
		}
		w := writtenBalance{k: k, ctr: row.ctr}
		var err error
		if row.assetRows == 0 {
			// Every asset of the value is known: none, or the list of a row
			// written before asset rows, split into them now.
			if w.b, err = bd.applyTo(row.bal); err != nil {
				return fmt.Errorf("balance %x: %w", k, err)
			}
			for j := range w.b.Assets {
				a := &w.b.Assets[j]
				d.keyBuf = appendAssetKey(d.keyBuf[:0], k, a.Policy, a.Name)
				d.valBuf = appendAssetQuantity(d.valBuf[:0], a.Quantity)
				_ = d.b.Set(d.keyBuf, d.valBuf, nil)
			}
			w.assetRows, w.known = uint64(len(w.b.Assets)), true
		} else {
			if w.b, err = bd.applyFigures(row.bal); err != nil {
				return fmt.Errorf("balance %x: %w", k, err)
			}
			if w.assetRows, err = d.writeAssetRows(bd, row.assetRows); err != nil {
				return fmt.Errorf("balance %x: %w", k, err)
			}
			w.known = w.assetRows == 0
			if !w.known && bd.address && !d.noFigures && row.assetRows <= fullAddressAssets {
				// The whole balance of an address of a few assets, for
				// the change's readers (changes.setBalances).
				full := row.bal
				if full.Assets, err = readAssetRows(db, k, row.assetRows); err != nil {
					return err
				}
				if w.b, err = bd.applyTo(full); err != nil {
					return fmt.Errorf("balance %x: %w", k, err)
				}
				if uint64(len(w.b.Assets)) != w.assetRows {
					return fmt.Errorf("balance %x: %d assets, %d asset rows: %w", k, len(w.b.Assets), w.assetRows, ErrCorrupt)
				}
				w.known = true
			}
		}
		d.written = append(d.written, w)
		d.keyBuf = appendBalanceKey(d.keyBuf[:0], k)
		if w.b.Count == 0 {
			if !w.b.Value.IsZero() || w.assetRows != 0 {
				return fmt.Errorf("balance %x: no outputs but a value left: %w", k, ErrCorrupt)
			}
			if w.ctr.zero() {
				_ = d.b.Delete(d.keyBuf, nil)
				continue
			}
		}
		main := balanceRow{bal: chain.Balance{Count: w.b.Count, Value: w.b.Value}, ctr: w.ctr, assetRows: w.assetRows}
		if w.assetRows == 0 {
			main.bal.Assets = w.b.Assets // none
		}
		d.valBuf = appendRow(d.valBuf[:0], &main)
		_ = d.b.Set(d.keyBuf, d.valBuf, nil)
	}
	return nil
}

// fullAddressAssets is the most asset rows of an address whose whole
// balance a block's commit reads, so that its change gives it (a wallet's
// address: one short scan); an address holding more is left to the
// change's readers to read (changeset.Set.Balances).
const fullAddressAssets = 64

// writeAssetRows applies bd's asset changes to its value's asset rows, n
// of them before (the keys and quantities read into bd's assetDeltas), and
// returns how many there are after.
func (d *derived) writeAssetRows(bd *balanceDelta, n uint64) (uint64, error) {
	for _, ad := range bd.assets {
		q, ok := ad.cur.Add(ad.add).Sub(ad.sub)
		if !ok {
			return 0, fmt.Errorf("asset quantity below zero: %w", ErrCorrupt)
		}
		switch {
		case q.IsZero() && !ad.found: // absent, and still nothing
		case q.IsZero():
			if n == 0 {
				return 0, fmt.Errorf("more asset rows than its row counts: %w", ErrCorrupt)
			}
			n--
			_ = d.b.Delete(ad.key, nil)
		default:
			if !ad.found {
				n++
			}
			d.valBuf = appendAssetQuantity(d.valBuf[:0], q)
			_ = d.b.Set(ad.key, d.valBuf, nil)
		}
	}
	return n, nil
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
		row := balanceRow{ctr: w.ctr, assetRows: w.assetRows}
		if w.b.Count > 0 { // else no balance (the row deleted, or counters alone)
			row.bal = chain.Balance{Count: w.b.Count, Value: w.b.Value}
			if w.assetRows == 0 {
				row.bal.Assets = w.b.Assets // none
			}
		}
		cache.put(w.k, row)
	}
}

package disk

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/utxo-cache/utxo-cache/chain"
)

// derived accumulates what a set of row changes does to the data derived from
// live rows: index entries, balances, the live count and the digest. Apply
// and rollback both describe a block as "this live UTXO appeared" and "this
// live UTXO disappeared", so they share it.
type derived struct {
	dims     []Dimension
	b        *pebble.Batch
	balances map[DimKey]*balanceDelta
	order    []DimKey
	state    *State
	ch       *changes
	written  []writtenBalance // rows as flushBalances wrote them
	keyBuf   []byte
	valBuf   []byte
}

func newDerived(dims []Dimension, b *pebble.Batch, st *State, ch *changes) *derived {
	return &derived{dims: dims, b: b, balances: make(map[DimKey]*balanceDelta), state: st, ch: ch}
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
	pos := positionOf(u)
	d.valBuf = appendIndexValue(d.valBuf[:0], u)
	forEachDimKey(d.dims, u, func(k DimKey) {
		d.keyBuf = appendIndexKey(d.keyBuf[:0], k, pos)
		_ = d.b.Set(d.keyBuf, d.valBuf, nil)
		d.delta(k).apply(u, +1)
	})
	d.state.UtxoCount++
	d.state.Digest.Add(u)
	d.ch.address(u.Address)
	d.ch.cs.Created++
}

// remove records that u stopped being live.
func (d *derived) remove(u *chain.Utxo) {
	pos := positionOf(u)
	forEachDimKey(d.dims, u, func(k DimKey) {
		d.keyBuf = appendIndexKey(d.keyBuf[:0], k, pos)
		_ = d.b.Delete(d.keyBuf, nil)
		d.delta(k).apply(u, -1)
	})
	d.state.UtxoCount--
	d.state.Digest.Sub(u)
	d.ch.address(u.Address)
	d.ch.cs.Spent++
}

type writtenBalance struct {
	k DimKey
	b chain.Balance
}

// flushBalances reads each touched balance row (from cache, else Pebble),
// applies its delta and writes it back, or deletes it when it reaches zero
// outputs.
func (d *derived) flushBalances(db *pebble.DB, cache *balanceCache) error {
	for _, k := range d.order {
		d.keyBuf = appendBalanceKey(d.keyBuf[:0], k)
		cur, cached := cache.get(k)
		if !cached {
			v, closer, err := db.Get(d.keyBuf)
			switch {
			case errors.Is(err, pebble.ErrNotFound):
			case err != nil:
				return fmt.Errorf("read balance: %w", err)
			default:
				cur, err = decodeBalance(v)
				closer.Close()
				if err != nil {
					return err
				}
			}
		}
		next, err := d.balances[k].applyTo(cur)
		if err != nil {
			return fmt.Errorf("balance %x: %w", k, err)
		}
		d.written = append(d.written, writtenBalance{k, next})
		if next.Count == 0 {
			if !next.Value.IsZero() || len(next.Assets) != 0 {
				return fmt.Errorf("balance %x: no outputs but a value left: %w", k, ErrCorrupt)
			}
			_ = d.b.Delete(d.keyBuf, nil)
			continue
		}
		d.valBuf = appendBalance(d.valBuf[:0], &next)
		_ = d.b.Set(d.keyBuf, d.valBuf, nil)
	}
	return nil
}

// commitBalances records in cache the rows flushBalances wrote; call it only
// after the batch has committed.
func (d *derived) commitBalances(cache *balanceCache) {
	for _, w := range d.written {
		if w.b.Count == 0 {
			w.b = chain.Balance{} // the row was deleted
		}
		cache.put(w.k, w.b)
	}
}

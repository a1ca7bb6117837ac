package disk

import "github.com/utxo-cache/utxo-cache/chain"

// balanceCache holds the committed balance rows of recently touched
// dimension values (an absent row as the zero Balance), so that a block's
// balance updates read Pebble only for values it has not seen lately.
//
// Invariant: an entry equals the committed row. Entries are written only
// after the batch that wrote the row has committed; nothing else writes
// balance rows. Only the writer goroutine touches it: no lock. When full, an
// arbitrary eighth of it is dropped (Go map iteration order), which keeps the
// popular values, touched every block, mostly present.
type balanceCache struct {
	capacity int
	m        map[DimKey]chain.Balance
}

func newBalanceCache(capacity int) *balanceCache {
	return &balanceCache{capacity: capacity, m: make(map[DimKey]chain.Balance)}
}

func (c *balanceCache) get(k DimKey) (chain.Balance, bool) {
	b, ok := c.m[k]
	return b, ok
}

func (c *balanceCache) put(k DimKey, b chain.Balance) {
	if c.capacity == 0 {
		return
	}
	if _, ok := c.m[k]; !ok && len(c.m) >= c.capacity {
		drop := c.capacity / 8
		for key := range c.m {
			if drop == 0 {
				break
			}
			delete(c.m, key)
			drop--
		}
	}
	c.m[k] = b
}

package disk

// balanceCache holds the committed balance rows of recently touched
// dimension values (an absent row as the zero balanceRow: its balance and
// its counters), so that a block's
// balance updates read Pebble only for values it has not seen lately.
//
// Invariant: an entry equals the committed row. Entries are written only
// after the batch that wrote the row has committed; nothing else writes
// balance rows. Only the writer goroutine touches it: no lock. When full, an
// arbitrary eighth of it is dropped (Go map iteration order), which keeps the
// popular values, touched every block, mostly present.
type balanceCache struct {
	capacity int
	m        map[DimKey]balanceRow
}

func newBalanceCache(capacity int) *balanceCache {
	return &balanceCache{capacity: capacity, m: make(map[DimKey]balanceRow)}
}

func (c *balanceCache) get(k DimKey) (balanceRow, bool) {
	b, ok := c.m[k]
	return b, ok
}

func (c *balanceCache) put(k DimKey, b balanceRow) {
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

package disk

// balanceCache holds the committed balance rows of recently touched
// dimension values (an absent row as the zero balanceRow: its balance and
// its counters), so that a block's
// balance updates read Pebble only for values it has not seen lately.
//
// Invariant: an entry equals the committed row. Entries are written only
// after the batch that wrote the row has committed; nothing else writes
// balance rows. Only the writer goroutine touches it: no lock.
//
// It is bounded twice: by entries (capacity) and by the memory its rows'
// assets take (maxBytes, estimated by rowMemory). The rows flushBalances
// writes, the only ones it caches, list no asset (a value's assets have
// rows of their own, which are not cached), so today the bound by entries
// is the one that acts. The bound by bytes stays as a guard should a row
// that lists assets ever be put: in a store written before asset rows, one
// could be megabytes (an exchange's address, an NFT collection's policy).
// A row over a sixteenth of maxBytes is never cached (its next update reads
// it from Pebble). When full, an arbitrary
// eighth of the entries is dropped (Go map iteration order), repeatedly
// until the new row fits, which keeps the popular values, touched every
// block, mostly present.
type balanceCache struct {
	capacity int
	maxBytes int64
	bytes    int64 // sum of rowMemory over the entries
	m        map[DimKey]balanceRow
}

func newBalanceCache(capacity int, maxBytes int64) *balanceCache {
	return &balanceCache{capacity: capacity, maxBytes: maxBytes, m: make(map[DimKey]balanceRow)}
}

// rowMemory estimates the heap a cached row holds: the map entry and, per
// asset, its AssetSum and its policy and name bytes.
func rowMemory(b *balanceRow) int64 {
	n := int64(len(DimKey{})) + 160 // key, row, map overhead
	for i := range b.bal.Assets {
		a := &b.bal.Assets[i]
		n += 64 + int64(len(a.Policy)+len(a.Name))
	}
	return n
}

func (c *balanceCache) get(k DimKey) (balanceRow, bool) {
	b, ok := c.m[k]
	return b, ok
}

func (c *balanceCache) put(k DimKey, b balanceRow) {
	if c.capacity == 0 {
		return
	}
	if old, ok := c.m[k]; ok {
		c.bytes -= rowMemory(&old)
		delete(c.m, k)
	}
	size := rowMemory(&b)
	if size > c.maxBytes/16 {
		return // too large to keep: the entry just removed was stale
	}
	for len(c.m) > 0 && (len(c.m) >= c.capacity || c.bytes+size > c.maxBytes) {
		drop := max(len(c.m)/8, 1)
		for key, row := range c.m {
			if drop == 0 {
				break
			}
			c.bytes -= rowMemory(&row)
			delete(c.m, key)
			drop--
		}
	}
	c.m[k] = b
	c.bytes += size
}

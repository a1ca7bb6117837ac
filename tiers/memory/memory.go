package memory

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/dgraph-io/ristretto/v2"

	"github.com/utxo-cache/utxo-cache/cache"
)

// Tier is the in-process cache tier. It is safe for concurrent use, except
// Close, which must come after all other use.
//
// # Storage
//
// Entries live in a Ristretto cache (TinyLFU admission, sampled-LFU eviction)
// under the query key, as a *stored: the entry and its guard. Ristretto keeps
// only a 128-bit hash of the key, not the key; the guard is kept so that Get
// can check the floor of the guard the entry was stored under, and treat a
// key found under another guard as a miss.
//
// An entry costs its Body, ETag and guard as allocated, plus entryOverhead
// (entryCost): bytes of heap, against
// a budget of Options.MaxBytes. IgnoreInternalCost is set because that cost
// already counts Ristretto's bookkeeping (in entryOverhead); with Ristretto's
// internal cost (its storeItem size) added again, the budget is miscounted:
// on the TestHitRatioZipf workload the cache then holds 2166 entries where
// the budget means 2299. The same setting is the cure for the trap of unit
// costs (cost 1 per entry, MaxCost = entries): with the internal cost added
// each entry costs 1+itemSize, the cache held 40 entries where 2299 were
// meant, and the hit ratio fell from about 0.84 to 0.41 (TestCostModelTrap).
// Ristretto's own Metrics are off: they add striped atomics and admission
// timestamps to every operation and would count hits before our floor check;
// the tier counts for itself (Stats).
//
// Entries whose cost exceeds Options.MaxEntryBytes are not stored, so one
// very large address page cannot evict thousands of small hot answers.
//
// # Why a stale fill is never served
//
// Each guard has a floor (see floors): Invalidate(seq, guards) raises the
// floor of each guard to seq, with a CAS loop, before it returns. Get loads
// the entry and then its guard's floor; an entry whose Seq is below the floor
// is deleted and reported as a miss. A Get that begins after Invalidate
// returned loads a floor of at least seq (the floors are atomics), so it can
// never return an entry computed before the invalidated change, whenever that
// entry was stored. That is cache.Tier's guard invariant, and it rests on the
// check in Get alone, so nothing Ristretto does can break it: a Set is
// applied asynchronously and may land after the Invalidate that made it
// stale, or be dropped; a Del racing a fill may lose. Set's own floor check
// only spares the store of an entry Get would discard.
//
// Worked example, one address X:
//
//	reader A   reads the disk at seq 7: X's answer a7
//	writer     commits seq 8, which changes X
//	writer     Invalidate(8, [X]): floor(X) = 8; returns
//	reader A   Set(k, X, {Seq 7, a7}): 7 < 8, refused. (Had A checked the
//	           floor just before the raise, Ristretto stores {7, a7}.)
//	reader B   Get(k, X): finds nothing, or {7, a7} with 7 < 8: deleted,
//	           miss; B reads the disk at seq >= 8 and fills a8.
//
// Under one key an entry never replaces a stored one of the same guard with a
// higher Seq (Ristretto's ShouldUpdate), so a slow fill does not push out a
// fresher one.
//
// # Ownership
//
// Set keeps e.Body without copying: the caller must not modify it after.
// Get returns an Entry whose Body is shared with the cache and with other
// readers: it is read-only.
type Tier struct {
	cache    *ristretto.Cache[string, *stored]
	floors   *floors
	global   atomic.Uint64 // Fence's floor, under every guard's
	maxEntry int64         // Options.MaxEntryBytes

	counters counters
	closing  atomic.Bool // set by Close, so its clearing is not counted as evictions
}

var _ cache.Tier = (*Tier)(nil)

// stored is a cached value. It is immutable once handed to Ristretto.
type stored struct {
	guard string
	entry cache.Entry
}

// entryOverhead is what an entry holds beyond its strings: the stored value
// (112 B), Ristretto's store item in its shard's map and the policy's
// key-cost pair in its map, with the maps' empty slots. Measured
// (TestEntryCostHoldsHeap): 280 to 350 bytes; it was 160, and a tier of
// 200-byte answers held about 1.5 times its budget (40-byte ones 1.6,
// 4,000-byte ones 1.06).
const entryOverhead = 384

// entryCost is what e under guard costs the budget: its strings as the Go
// allocator sizes them (allocSize), and entryOverhead.
func entryCost(guard string, e *cache.Entry) int64 {
	return costOf(len(e.Body), len(e.ETag), len(guard))
}

// costOf is entryCost of a body, an ETag and a guard of these lengths.
func costOf(body, etag, guard int) int64 {
	return allocSize(body) + allocSize(etag) + allocSize(guard) + entryOverhead
}

// allocClasses are the Go allocator's size classes up to 32 KiB
// (runtime/sizeclasses.go): an allocation of n bytes takes the first class
// of at least n. Without them the cost of a 2,305-byte body, which takes
// 2,688, is 16% short.
var allocClasses = [...]int64{
	0, 8, 16, 24, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240, 256,
	288, 320, 352, 384, 416, 448, 480, 512, 576, 640, 704, 768, 896, 1024, 1152, 1280,
	1408, 1536, 1792, 2048, 2304, 2688, 3072, 3200, 3456, 4096, 4864, 5376, 6144, 6528,
	6784, 6912, 8192, 9472, 9728, 10240, 10880, 12288, 13568, 14336, 16384, 18432, 19072,
	20480, 21760, 24576, 27264, 28672, 32768,
}

// allocSize is the heap an allocation of n bytes takes: its size class, or
// above 32 KiB whole 8 KiB pages.
func allocSize(n int) int64 {
	if n > 32768 {
		return (int64(n) + 8191) &^ 8191
	}
	i, _ := slices.BinarySearch(allocClasses[:], int64(n))
	return allocClasses[i]
}

// keepNewer is Ristretto's ShouldUpdate: cur replaces prev unless both hold
// the same guard and prev was computed from a later snapshot.
func keepNewer(cur, prev *stored) bool {
	return cur.guard != prev.guard || cur.entry.Seq >= prev.entry.Seq
}

// New returns an empty tier. Close it when done: it runs Ristretto's
// goroutines.
func New(opts Options) (*Tier, error) {
	opts = opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	t := &Tier{floors: newFloors(opts.FloorSlots), maxEntry: opts.MaxEntryBytes}
	cache, err := ristretto.NewCache(&ristretto.Config[string, *stored]{
		NumCounters:        opts.numCounters(),
		MaxCost:            opts.MaxBytes,
		BufferItems:        64,
		IgnoreInternalCost: true,
		ShouldUpdate:       keepNewer,
		OnEvict: func(*ristretto.Item[*stored]) {
			if !t.closing.Load() {
				t.counters.evictions.Add(1)
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("memory: new cache: %w", err)
	}
	t.cache = cache
	if opts.Metrics != nil {
		if err := t.register(opts.Metrics); err != nil {
			cache.Close()
			return nil, err
		}
	}
	return t, nil
}

// Name is "memory".
func (t *Tier) Name() string { return "memory" }

// Get returns the entry stored under key for guard, unless it is below the
// guard's floor (then it is deleted) or was stored under another guard.
func (t *Tier) Get(_ context.Context, key, guard string) (cache.Entry, bool) {
	s, ok := t.cache.Get(key)
	if !ok || s.guard != guard {
		t.counters.misses.inc()
		return cache.Entry{}, false
	}
	if s.entry.Seq < max(t.floors.slot(t.floors.hash(guard)).Load(), t.global.Load()) {
		// The Del may also remove a fresh entry stored since the Get: a miss.
		t.cache.Del(key)
		t.counters.staleDiscards.inc()
		t.counters.misses.inc()
		return cache.Entry{}, false
	}
	t.counters.hits.inc()
	return s.entry, true
}

// Peek returns what Get would, without counting a hit or miss and without
// deleting a stale entry (query.Peeker): the query server looks, on the
// writer goroutine, for answers a change leaves as they are.
func (t *Tier) Peek(key, guard string) (cache.Entry, bool) {
	s, ok := t.cache.Get(key)
	if !ok || s.guard != guard || s.entry.Seq < max(t.floors.slot(t.floors.hash(guard)).Load(), t.global.Load()) {
		return cache.Entry{}, false
	}
	return s.entry, true
}

// Set stores e under key, guarded by guard, unless e.Seq is below the guard's
// floor or the entry is larger than Options.MaxEntryBytes. The store is
// asynchronous and Ristretto may decline it.
func (t *Tier) Set(_ context.Context, key, guard string, e cache.Entry) {
	cost := entryCost(guard, &e)
	if cost > t.maxEntry {
		t.counters.tooLarge.Add(1)
		return
	}
	if e.Seq < max(t.floors.slot(t.floors.hash(guard)).Load(), t.global.Load()) {
		t.counters.refusedStale.Add(1)
		return
	}
	if t.cache.Set(key, &stored{guard: guard, entry: e}, cost) {
		t.counters.fills.Add(1)
	} else {
		t.counters.dropped.Add(1)
	}
}

// Invalidate raises the floor of every guard to seq. It never fails: from
// its return, Get serves no entry of those guards with Seq below seq.
func (t *Tier) Invalidate(_ context.Context, seq uint64, guards []string) error {
	for _, g := range guards {
		t.floors.raise(t.floors.hash(g), seq)
	}
	t.counters.invalidations.Add(uint64(len(guards)))
	return nil
}

// Fence raises a floor under every guard to seq: from its return, Get serves
// no entry with Seq below seq, and Set stores none. A replica fences when it
// replaces its store, so nothing computed from the old one is served.
func (t *Tier) Fence(seq uint64) {
	for {
		cur := t.global.Load()
		if cur >= seq || t.global.CompareAndSwap(cur, seq) {
			return
		}
	}
}

// Wait blocks until Ristretto has applied every Set and Del made before it.
// It exists for tests that want a Set visible to the next Get; correctness
// never depends on it, since any Set may be dropped and Get checks the floor
// on every hit.
func (t *Tier) Wait() { t.cache.Wait() }

// Stats returns the tier's counters.
func (t *Tier) Stats() Stats { return t.counters.stats() }

// Close stops Ristretto's goroutines and drops every entry. It must not run
// concurrently with other methods; after it, Get misses and Set does nothing.
func (t *Tier) Close() {
	t.closing.Store(true)
	t.cache.Close()
}

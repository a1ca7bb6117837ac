package memory

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Options configure a Tier. The zero value of every field means its default.
type Options struct {
	// MaxBytes is the cost budget: the heap the entries hold, each its
	// strings as allocated plus a measured per-entry overhead (see
	// entryCost). Default 256 MiB. The tier's fixed structures come on top:
	// the floors (FloorSlots) and Ristretto's admission sketch and buffers,
	// 20 MiB in all at the defaults.
	MaxBytes int64
	// MaxEntryBytes is the largest entry cost that is cached; larger entries
	// are not stored, so that one very large address page cannot evict
	// thousands of small hot answers. Default MaxBytes/64.
	MaxEntryBytes int64
	// FloorSlots is the number of guard floor slots, a power of two. Guards
	// that share a slot share a floor: more slots mean fewer needless misses
	// after an invalidation, at 8 bytes each. Default 1<<20 (8 MiB).
	FloorSlots int
	// Metrics, if set, receives the tier's counters (utxo_cache_memory_*).
	// Use a registry of the caller's; New fails if the names are taken.
	Metrics prometheus.Registerer
}

// EnsureDefaults fills zero fields with their defaults.
func (o Options) EnsureDefaults() Options {
	if o.MaxBytes == 0 {
		o.MaxBytes = 256 << 20
	}
	if o.MaxEntryBytes == 0 {
		o.MaxEntryBytes = max(o.MaxBytes/64, 1)
	}
	if o.FloorSlots == 0 {
		o.FloorSlots = 1 << 20
	}
	return o
}

// Validate reports settings that cannot work.
func (o Options) Validate() error {
	if o.MaxBytes <= 0 {
		return fmt.Errorf("memory: max bytes %d must be positive", o.MaxBytes)
	}
	if o.MaxEntryBytes <= 0 || o.MaxEntryBytes > o.MaxBytes {
		return fmt.Errorf("memory: max entry bytes %d must be in [1, max bytes %d]", o.MaxEntryBytes, o.MaxBytes)
	}
	if o.FloorSlots <= 0 || o.FloorSlots&(o.FloorSlots-1) != 0 {
		return fmt.Errorf("memory: floor slots %d must be a positive power of two", o.FloorSlots)
	}
	return nil
}

// numCounters sizes Ristretto's TinyLFU frequency sketch: about ten counters
// per entry the cache can hold (Ristretto's own advice), assuming entries of
// about 1 KiB, and at least 1e5 so that small test caches still admit well.
// Each counter costs about 3 bytes, so this adds ~3% to MaxBytes.
func (o Options) numCounters() int64 {
	return max(10*(o.MaxBytes/1024), 100_000)
}

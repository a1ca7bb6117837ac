// Package cache defines what the cache tiers hold and the contract they
// keep: Entry, a prepared answer, and Tier, a cache of entries in front of
// the disk with its guard invariant. The query server fills and reads the
// tiers; tiers/memory and tiers/redis implement them. It is a leaf (it names
// only chain types), so a tier depends on this contract and not on the
// query server or the store behind it.
package cache

import (
	"context"

	"github.com/utxo-cache/utxo-cache/chain"
)

// Entry is a prepared answer as the cache tiers hold it: the bytes to write,
// computed once from one disk snapshot, and the commit sequence of that
// snapshot.
//
// The body omits the tip: the server splices in the tip current at serve time
// (see query.Server), which is correct because an entry is only served while
// no change after Seq touched its guard, so its content is also the answer at
// the current tip.
type Entry struct {
	// Seq is disk.State.Seq of the snapshot the answer was computed from.
	Seq uint64
	// Tip is the tip of that snapshot. It is served when the entry is newer
	// than the published state (filled between a commit and its
	// invalidation), so the answer never claims a tip its content is not
	// consistent with.
	Tip chain.Tip
	// Status is the HTTP status of the answer (200, or 404 for a known absence).
	Status int
	// ETag is the weak entity tag of Body, quoted (W/"…").
	ETag string
	// Body is the JSON answer without its opening brace and tip member:
	// the server writes `{"tip":{…},` then Body (error answers too: they
	// carry the tip beside "error").
	Body []byte
}

// Tier is a cache of entries in front of the disk (the memory and Redis
// tiers). It is declared here rather than by its consumer, the query
// server, because it is a contract with two sides: the server relies on the
// guard invariant below, and each tier holds it and is tested for it.
//
// Guard invariant: every entry is stored with a guard (the address or
// outpoint its answer depends on). Invalidate(seq, guards) raises each
// guard's floor to seq; from the moment Invalidate returns, Get never
// returns an entry of that guard whose Seq is below its floor, whenever
// that entry was (or will be) stored. This is what keeps a slow reader that
// read the disk before a commit from re-filling the old answer after the
// commit's invalidation: its entry carries the old Seq and is discarded.
//
// Implementations are safe for concurrent use. Get and Set are best effort
// (a tier may drop a Set or miss); Invalidate must either hold the invariant
// or make the tier serve nothing it stored before the failure until it can
// again (a down Redis).
type Tier interface {
	// Name identifies the tier in metrics and logs ("memory", "redis").
	Name() string
	// Get returns the entry under key whose guard is guard, if the tier has
	// one that is not below the guard's floor.
	Get(ctx context.Context, key, guard string) (Entry, bool)
	// Set stores e under key, guarded by guard, unless e.Seq is below the
	// guard's floor.
	Set(ctx context.Context, key, guard string, e Entry)
	// Invalidate raises the floor of every guard to seq.
	Invalidate(ctx context.Context, seq uint64, guards []string) error
}

// AsyncSetter is a Tier whose fills can leave the read path: SetAsync queues
// what Set stores, and returns at once. The query server fills through it
// when a tier offers it. The guard invariant must hold for a fill stored
// late exactly as for a Set (the tier compares the entry's Seq with the
// floors when it stores, not when it queues).
type AsyncSetter interface {
	SetAsync(key, guard string, e Entry)
}

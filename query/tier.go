package query

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/utxo-cache/utxo-cache/chain"
)

// Entry is a prepared answer as the cache tiers hold it: the bytes to write,
// computed once from one disk snapshot, and the commit sequence of that
// snapshot.
//
// The body omits the tip: the server splices in the tip current at serve time
// (see Server), which is correct because an entry is only served while no
// change after Seq touched its guard, so its content is also the answer at
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
// tiers). It is declared here, where it is consumed.
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
// what Set stores, and returns at once. Server fills through it when a tier
// offers it. The guard invariant must hold for a fill stored late exactly as
// for a Set (the tier compares the entry's Seq with the floors when it
// stores, not when it queues).
type AsyncSetter interface {
	SetAsync(key, guard string, e Entry)
}

// ErrCorruptEntry marks an encoded entry that does not decode.
var ErrCorruptEntry = errors.New("query: corrupt cache entry")

// Entry encoding for tiers that store bytes (Redis), version 1:
//
//	version  1 byte = 0x01
//	seq      uint64
//	tip      1 byte empty flag, uint64 height, 32 bytes hash
//	status   uint16
//	etag     uvarint length, bytes
//	body     the rest
const entryVersion byte = 0x01

// AppendEntry appends e's encoding to dst.
func AppendEntry(dst []byte, e *Entry) []byte {
	dst = append(dst, entryVersion)
	dst = binary.BigEndian.AppendUint64(dst, e.Seq)
	if e.Tip.Empty {
		dst = append(dst, 1)
	} else {
		dst = append(dst, 0)
	}
	dst = binary.BigEndian.AppendUint64(dst, e.Tip.Height)
	dst = append(dst, e.Tip.Hash[:]...)
	dst = binary.BigEndian.AppendUint16(dst, uint16(e.Status))
	dst = binary.AppendUvarint(dst, uint64(len(e.ETag)))
	dst = append(dst, e.ETag...)
	return append(dst, e.Body...)
}

// DecodeEntry decodes an encoded entry; Body aliases b.
func DecodeEntry(b []byte) (Entry, error) {
	const fixed = 1 + 8 + 1 + 8 + chain.HashSize + 2
	if len(b) < fixed || b[0] != entryVersion || b[9] > 1 {
		return Entry{}, fmt.Errorf("entry of %d bytes: %w", len(b), ErrCorruptEntry)
	}
	e := Entry{Seq: binary.BigEndian.Uint64(b[1:])}
	e.Tip.Empty = b[9] == 1
	e.Tip.Height = binary.BigEndian.Uint64(b[10:])
	copy(e.Tip.Hash[:], b[18:])
	e.Status = int(binary.BigEndian.Uint16(b[18+chain.HashSize:]))
	n, k := binary.Uvarint(b[fixed:])
	if k <= 0 || n > uint64(len(b)-fixed-k) {
		return Entry{}, fmt.Errorf("entry etag length: %w", ErrCorruptEntry)
	}
	rest := b[fixed+k:]
	e.ETag = string(rest[:n])
	e.Body = rest[n:]
	return e, nil
}

package disk

import (
	"errors"
	"fmt"
	"hash/maphash"

	"github.com/cockroachdb/pebble/v2"

	"github.com/utxo-cache/utxo-cache/chain"
)

// txFilter is a Bloom filter over the tx hashes that have at least one
// outpoint row (live or spent) in the store. It answers "certainly absent"
// for almost every new transaction, so the duplicate-outpoint check of a new
// output, and the lookup of an unknown input, need no Pebble read.
//
// Invariant: every tx hash with a row on disk is in the filter (no false
// negatives). Hashes are added after a commit and never removed (rows that a
// rollback or pruning deletes leave a stale bit: only a false positive, which
// costs a Pebble read). The filter is built at open by scanning the outpoint
// keyspace and rebuilt when its population passes its capacity, so its false
// positive rate stays near 1%. Only the writer goroutine touches it: no lock.
type txFilter struct {
	seed     maphash.Seed
	bits     []uint64
	mask     uint64 // len(bits)*64 - 1; the bit count is a power of two
	added    int    // insertions since the last build
	capacity int    // insertions before the rate degrades: rebuild
}

const (
	txFilterBitsPerEntry = 10 // about 1% false positives with 7 probes
	txFilterProbes       = 7
	txFilterMinCapacity  = 1 << 16
)

func newTxFilter(capacity int) *txFilter {
	capacity = max(capacity, txFilterMinCapacity)
	nbits := uint64(1)
	for nbits < uint64(capacity)*txFilterBitsPerEntry {
		nbits <<= 1
	}
	return &txFilter{seed: maphash.MakeSeed(), bits: make([]uint64, nbits/64), mask: nbits - 1, capacity: capacity}
}

// probes returns the two base hashes of h (Kirsch-Mitzenmacher: probe i is
// h1 + i*h2). maphash with a random seed keeps crafted tx hashes from
// aiming at one bit pattern.
func (f *txFilter) probes(h *chain.Hash) (uint64, uint64) {
	x := maphash.Bytes(f.seed, h[:])
	return x, (x >> 32) | (x << 32) | 1
}

func (f *txFilter) add(h *chain.Hash) {
	h1, h2 := f.probes(h)
	for i := uint64(0); i < txFilterProbes; i++ {
		b := (h1 + i*h2) & f.mask
		f.bits[b>>6] |= 1 << (b & 63)
	}
	f.added++
}

// mayContain is false only for a tx hash that has no row on disk.
func (f *txFilter) mayContain(h *chain.Hash) bool {
	h1, h2 := f.probes(h)
	for i := uint64(0); i < txFilterProbes; i++ {
		b := (h1 + i*h2) & f.mask
		if f.bits[b>>6]&(1<<(b&63)) == 0 {
			return false
		}
	}
	return true
}

func (f *txFilter) full() bool { return f.added > f.capacity }

// txFilterHeadroom is the least number of tx hashes a built filter takes
// before it is full: a small store does not rebuild every few thousand
// transactions. At 10 bits an entry it costs a few MiB.
const txFilterHeadroom = 1 << 21

// buildTxFilter scans the outpoint keyspace of r twice (count, then add), so
// memory is the filter alone, and returns a filter holding every tx hash in
// it, with room for as many again (at least txFilterHeadroom). stop, when it
// returns true, abandons the scan with ErrStopped.
func buildTxFilter(r pebble.Reader, stop func() bool) (*txFilter, error) {
	n, err := scanTxHashes(r, stop, nil)
	if err != nil {
		return nil, err
	}
	f := newTxFilter(max(2*n, n+txFilterHeadroom))
	if _, err := scanTxHashes(r, stop, f.add); err != nil {
		return nil, err
	}
	f.added = n
	return f, nil
}

// ErrStopped reports a scan abandoned because its caller asked to stop.
var ErrStopped = errors.New("disk: stopped")

// scanTxHashes calls fn (if set) once per distinct tx hash of the outpoint
// keyspace of r and returns how many there are.
func scanTxHashes(r pebble.Reader, stop func() bool, fn func(*chain.Hash)) (int, error) {
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixUtxo}, UpperBound: []byte{prefixUtxo + 1}})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	n := 0
	var last chain.Hash
	for valid := it.First(); valid; valid = it.Next() {
		k := it.Key()
		if len(k) != outPointKeyLen {
			return 0, fmt.Errorf("disk: outpoint key %x: %w", k, ErrCorrupt)
		}
		if n > 0 && string(k[1:33]) == string(last[:]) {
			continue // the outputs of one tx are adjacent
		}
		copy(last[:], k[1:33])
		n++
		if n%4096 == 0 && stop != nil && stop() {
			return 0, ErrStopped
		}
		if fn != nil {
			fn(&last)
		}
	}
	if err := it.Error(); err != nil {
		return 0, fmt.Errorf("disk: scan outpoints: %w", err)
	}
	return n, nil
}

// txFilterRebuild is a filter being built in the background from a snapshot
// taken right after a commit. The writer keeps adding the hashes of later
// commits to the old filter and to pending; when the build is done, the
// writer adds pending to the new filter and swaps it in. Every tx hash with
// a row on disk is then in the new filter: those of rows up to the snapshot
// from the scan, later ones from pending (rows a rollback restores belong to
// outpoints whose hash one of the two already holds). So the no-false-
// negative invariant holds at every moment, and the writer never stalls on a
// scan of the whole outpoint keyspace.
type txFilterRebuild struct {
	done    chan txFilterBuilt // buffered: the builder never blocks
	pending []chain.Hash
}

type txFilterBuilt struct {
	f   *txFilter
	err error
}

// txFilterAdded records that a committed row has tx hash h. Writer only.
func (s *Store) txFilterAdded(h *chain.Hash) {
	s.txf.add(h)
	if s.txfRebuild != nil {
		s.txfRebuild.pending = append(s.txfRebuild.pending, *h)
	}
}

// maintainTxFilter swaps in a finished rebuild, or starts one when the
// filter is full. Called by the writer after each commit.
func (s *Store) maintainTxFilter() {
	if r := s.txfRebuild; r != nil {
		select {
		case built := <-r.done:
			s.txfRebuild = nil
			if built.err != nil {
				// The old filter is still a superset: only its false
				// positive rate suffers. The next commit tries again.
				if !errors.Is(built.err, ErrStopped) {
					s.opts.Logger.Warn("rebuilding the tx-hash filter failed; retrying", "err", built.err)
				}
				return
			}
			for i := range r.pending {
				built.f.add(&r.pending[i])
			}
			s.txf = built.f
			s.metrics.filterRebuilds.Add(1)
		default:
		}
		return
	}
	if !s.txf.full() {
		return
	}
	snap := s.db.NewSnapshot()
	r := &txFilterRebuild{done: make(chan txFilterBuilt, 1)}
	s.txfRebuild = r
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		defer snap.Close()
		if s.testBeforeTxFilterBuild != nil {
			s.testBeforeTxFilterBuild()
		}
		f, err := buildTxFilter(snap, s.stopping.Load)
		r.done <- txFilterBuilt{f, err}
	}()
}

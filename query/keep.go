package query

import (
	"bytes"
	"context"
	"encoding/hex"
	"hash/maphash"
	"slices"
	"strconv"
	"sync/atomic"

	"github.com/utxo-cache/utxo-cache/cache"
	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/changeset"
)

// # Entries a block leaves as they are
//
// A block invalidates every cached answer of each address it touches (the
// address guard), but most of those answers have not changed: a block adds
// outputs at the end of an address's chain order and spends a few of its
// outputs, so the first page in ascending order of an address with many
// outputs is the same before and after, and its balance is known exactly
// from the change set. Re-reading them from the disk after every block
// would cost the read path what the cache is for (under a feed of blocks the
// hot addresses are the ones every block touches).
//
// So before a change's invalidation (Changed, on the writer goroutine) the
// server peeks into its in-process tiers (Peeker) for the first pages and
// the balance of each address the change touched, and keeps:
//
//   - a first page whose every item and next_cursor the change leaves as
//     they are: it ends with a next_cursor at position L, every position the
//     change touched for the address (changeset.Set.Spans) lies strictly after L
//     in the page's order, and the address still has more outputs than the
//     page holds (its balance count after the change): the page's items are
//     the same and another item still follows;
//   - for a hot address (read often: hotSet), a first page that holds all
//     of its outputs (next_cursor null) and still will: rebuilt from its own
//     items and the change's outputs (patchedPage). Not for every address:
//     a rebuilt page costs a SHA-256 of its body, worth it only for a page
//     read again before the next block;
//   - a balance answer, rebuilt from the change set's balance row (exact).
//
// Once the change is published (AfterPublish) those entries are stored again
// with the change's Seq and tip, so readers of the new state hit. Rollbacks
// and catch-up windows keep nothing. Cursor pages are not kept.
//
// Why it is exact: an entry that Peek returns before the change's
// invalidation is the answer at every state from its Seq to the one before
// the change (no change in between touched its guard). If the change leaves
// its answer as it is, it is also the answer at the change's Seq, which is
// what the restored entry claims; if a later change touches the guard
// before the store lands, the tier refuses it (the floor is above its Seq).

// Peeker is an owned cache.Tier that can return an entry without counting a read
// and without I/O (the in-process memory tier): the server peeks on the
// writer goroutine, between a commit and its invalidation.
type Peeker interface {
	// Peek returns what Get would, without counting a hit or a miss and
	// without deleting anything. It may still count as a use of key in the
	// tier's eviction policy (Ristretto's admission counters see every
	// lookup).
	Peek(key, guard string) (cache.Entry, bool)
}

// peekTier is an owned tier that is also a Peeker.
type peekTier interface {
	cache.Tier
	Peeker
}

// addressMarks is a lossy set of addresses (first-page readers mark them),
// so the writer peeks for the first pages only of addresses that may have
// some cached: a fixed table of address hashes, one per slot, where a later
// address evicts an earlier one. A false "marked" costs some peeks; a lost
// mark, a page not kept. Safe for concurrent use.
type addressMarks struct {
	seed  maphash.Seed
	slots []atomic.Uint64
}

// pagedMarks is the number of slots of Server.paged (512 KiB).
const pagedMarks = 1 << 16

func newAddressMarks(n int) addressMarks {
	return addressMarks{seed: maphash.MakeSeed(), slots: make([]atomic.Uint64, n)}
}

func (m *addressMarks) mark(a string) {
	h := maphash.String(m.seed, a) | 1 // never 0, the empty slot
	if s := &m.slots[h%uint64(len(m.slots))]; s.Load() != h {
		s.Store(h)
	}
}

func (m *addressMarks) marked(a string) bool {
	h := maphash.String(m.seed, a) | 1
	return m.slots[h%uint64(len(m.slots))].Load() == h
}

// keptEntry is an answer a change leaves as it is, to store again once the
// change is published.
type keptEntry struct {
	key, guard string
	e          cache.Entry
}

// kept is what Changed found for one change, for AfterPublish. Writer
// goroutine only.
type kept struct {
	seq      uint64
	entries  []keptEntry
	balances []string // addresses, not hot, whose balance entry was cached
	patched  int      // entries rebuilt by patchedPage
}

// collectKept finds, before cs's invalidation, the entries cs leaves as they
// are (see the section comment); guards[i] is the guard of
// cs.Addresses[i]. A catch-up window (several blocks in one change) keeps
// nothing: its addresses' entries are mostly long gone, and its change set
// is large. Writer goroutine only.
func (s *Server) collectKept(cs *changeset.Set, guards []string) {
	s.kept = kept{seq: cs.Seq, entries: s.kept.entries[:0], balances: s.kept.balances[:0]}
	if s.peek == nil || cs.Rollback || len(cs.Spans) != len(cs.Addresses) ||
		(!cs.OldTip.Empty && cs.NewTip.Height != cs.OldTip.Height+1) {
		return
	}
	shapes := s.shapes.top(nil)
	prefixes := make([]string, len(shapes)) // each shape's page key less the address
	for j, p := range shapes {
		prefixes[j] = pageKey("", p.desc, int(p.limit), "")
	}
	var byAddr map[int32][]changeset.AddressOutput // built on the first complete page
	for i, a := range cs.Addresses {
		bal, known := cs.Balances[a]
		if !known {
			continue
		}
		guard := guards[i]
		hot := s.hot != nil && s.hot.contains(a)
		if _, ok := s.peek.Peek("b|"+a, guard); ok && !hot {
			s.kept.balances = append(s.kept.balances, a) // a hot one AfterPublish puts anyway
		}
		if !s.paged.marked(a) {
			continue // no first page of a read lately: nothing to peek
		}
		for j, p := range shapes {
			key := prefixes[j] + a
			e, ok := s.peek.Peek(key, guard)
			if !ok {
				continue
			}
			if bal.Count > uint64(p.limit) {
				if s.pageUnchanged(a, p.desc, &e, cs.Spans[i]) {
					s.kept.entries = append(s.kept.entries, keptEntry{key: key, guard: guard, e: e})
				}
				continue
			}
			if !hot {
				continue // a rebuilt page costs its whole body's SHA-256: only for pages read often
			}
			if byAddr == nil {
				byAddr = outputsByAddress(cs.Outputs)
			}
			if pe, ok := s.patchedPage(a, p.desc, &e, byAddr[int32(i)], bal.Count, cs.OldTip); ok {
				s.kept.entries = append(s.kept.entries, keptEntry{key: key, guard: guard, e: pe})
				s.kept.patched++
			}
		}
	}
}

// outputsByAddress groups a change set's Outputs by address index.
func outputsByAddress(outs []changeset.AddressOutput) map[int32][]changeset.AddressOutput {
	m := make(map[int32][]changeset.AddressOutput)
	for _, o := range outs {
		m[o.Address] = append(m[o.Address], o)
	}
	return m
}

// nullTail ends a page answer that holds the last output of its listing.
const nullTail = `],"next_cursor":null}`

// patchedPage rebuilds the first page answer e of address a, in order
// desc, for the state after a change that added and removed outs (a's
// outputs in changeset.Set.Outputs), with no disk read. It applies only when e
// holds every output of a (next_cursor null) and so will the new page
// (count, a's outputs after the change, is within the page's limit, which
// the caller checked): the new items are e's items less the removed
// outputs, with the added ones, all created by the change above oldTip, at
// the end of the chain order. ok is false when e is not such a page or
// does not hold what the change removed: the invalidation then stands.
//
// The page is not decoded: an item starts with {"tx_hash":"…","index":N,
// (appendUtxo), a sequence no JSON string inside an item can hold (its
// quotes would be escaped), so a removed output's item is found by that
// prefix and cut out whole (itemEnd), and the added items are spliced in
// at the page's end (or start, descending).
func (s *Server) patchedPage(a string, desc bool, e *cache.Entry, outs []changeset.AddressOutput, count uint64, oldTip chain.Tip) (cache.Entry, bool) {
	if e.Status != 200 {
		return cache.Entry{}, false
	}
	prefix := appendString([]byte(`"address":`), a)
	prefix = append(prefix, `,"utxos":[`...)
	body := e.Body
	if !bytes.HasPrefix(body, prefix) || !bytes.HasSuffix(body, []byte(nullTail)) ||
		len(body) < len(prefix)+len(nullTail) {
		return cache.Entry{}, false
	}
	items := body[len(prefix) : len(body)-len(nullTail)]
	n := bytes.Count(items, []byte(itemHead))
	var added []*chain.Utxo
	var cuts [][2]int // removed items' spans in items
	for _, o := range outs {
		if o.Added {
			if !oldTip.Empty && o.Utxo.Height <= oldTip.Height {
				return cache.Entry{}, false // not at the end of the chain order
			}
			if !storable(o.Utxo) {
				return cache.Entry{}, false // its listing does not read
			}
			added = append(added, o.Utxo)
			continue
		}
		from, to, ok := findItem(items, o.Utxo.OutPoint)
		if !ok {
			return cache.Entry{}, false // the page does not hold what the change removed
		}
		cuts = append(cuts, [2]int{from, to})
	}
	if uint64(n-len(cuts)+len(added)) != count {
		return cache.Entry{}, false
	}
	slices.SortFunc(cuts, func(x, y [2]int) int { return x[0] - y[0] })
	slices.SortFunc(added, func(x, y *chain.Utxo) int {
		return chain.ComparePositions(x.Position(), y.Position())
	})
	if desc {
		slices.Reverse(added)
	}
	out := make([]byte, 0, len(body)+len(added)*256)
	out = append(out, prefix...)
	appendAdded := func(first bool) {
		for i, u := range added {
			if i > 0 || !first {
				out = append(out, ',')
			}
			out = appendChainUtxo(out, u)
		}
	}
	if desc {
		appendAdded(true)
	}
	// The items left are the runs between the cut ones, each run whole
	// items with the commas between them, plus the comma that separated it
	// from a cut item: trimmed, and joined with one comma.
	wrote := desc && len(added) > 0
	last := 0
	for i := 0; i <= len(cuts); i++ {
		end := len(items)
		if i < len(cuts) {
			end = cuts[i][0]
		}
		run := bytes.TrimSuffix(bytes.TrimPrefix(items[last:end], []byte{','}), []byte{','})
		if i < len(cuts) {
			last = cuts[i][1]
		}
		if len(run) == 0 {
			continue
		}
		if wrote {
			out = append(out, ',')
		}
		out = append(out, run...)
		wrote = true
	}
	if !desc {
		appendAdded(!wrote)
	}
	out = append(out, nullTail...)
	return cache.Entry{Status: 200, Body: out, ETag: etagOf(out)}, true
}

// itemHead starts every item of a page (appendUtxo).
const itemHead = `{"tx_hash":"`

// findItem returns the span [from, to) of op's item in a page's items, or
// false when the page has none.
func findItem(items []byte, op chain.OutPoint) (from, to int, ok bool) {
	var key [len(itemHead) + 2*chain.HashSize + len(`","index":`) + 10 + 1]byte
	k := append(key[:0], itemHead...)
	k = hex.AppendEncode(k, op.TxHash[:])
	k = append(k, `","index":`...)
	k = strconv.AppendUint(k, uint64(op.Index), 10)
	k = append(k, ',')
	from = bytes.Index(items, k)
	if from < 0 {
		return 0, 0, false
	}
	to, ok = itemEnd(items, from)
	return from, to, ok
}

// itemEnd returns the end of the JSON object that starts at items[from],
// skipping what its strings hold.
func itemEnd(items []byte, from int) (int, bool) {
	depth, inString := 0, false
	for i := from; i < len(items); i++ {
		c := items[i]
		switch {
		case inString && c == '\\':
			i++ // the escaped byte
		case c == '"':
			inString = !inString
		case inString:
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			if depth--; depth == 0 {
				return i + 1, true
			}
		}
	}
	return 0, false
}

// pageUnchanged reports whether the page answer e of address a, in order
// desc, is left as it is by a change that touched a's positions in span
// only, given that a still has more outputs than the page holds.
func (s *Server) pageUnchanged(a string, desc bool, e *cache.Entry, span changeset.PositionSpan) bool {
	if e.Status != 200 {
		return false
	}
	const tail = `],"next_cursor":"`
	body := e.Body
	if len(body) < len(tail)+2 || !bytes.HasSuffix(body, []byte(`"}`)) {
		return false // the last page (next_cursor null): it holds the touched end
	}
	i := bytes.LastIndex(body, []byte(tail))
	if i < 0 || i+len(tail) > len(body)-2 {
		return false // not a page this server wrote (a Redis entry from elsewhere)
	}
	last, err := s.cursors.decode(string(body[i+len(tail):len(body)-2]), a, desc)
	if err != nil {
		return false
	}
	if desc {
		return chain.ComparePositions(span.Hi, last) < 0
	}
	return chain.ComparePositions(span.Lo, last) > 0
}

// restoreKept stores again, at cs, the entries collectKept kept for it: cs
// is published now. Writer goroutine only.
func (s *Server) restoreKept(cs *changeset.Set) {
	k := &s.kept
	if k.seq != cs.Seq || s.peek == nil {
		return
	}
	ctx := context.Background()
	for i := range k.entries {
		ke := &k.entries[i]
		ke.e.Seq, ke.e.Tip = cs.Seq, cs.NewTip
		fill(ctx, s.peek, ke.key, ke.guard, ke.e)
	}
	for _, a := range k.balances {
		b := cs.Balances[a]
		s.putBalance(a, &b, cs)
	}
	s.m.keptPages(len(k.entries)-k.patched, k.patched)
	clear(k.entries) // drop the bodies until the next change
	k.entries, k.balances, k.seq, k.patched = k.entries[:0], k.balances[:0], 0, 0
}

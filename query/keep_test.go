package query

import (
	"bytes"
	"strconv"
	"strings"
	"testing"

	"github.com/utxo-cache/utxo-cache/cache"
	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/changeset"
)

// TestPageUnchangedOddBodies: pageUnchanged runs on the writer goroutine over
// whatever the memory tier holds (on a replica, entries copied from the
// shared Redis tier, written by other nodes): a body it cannot read is a
// page it does not keep, never a panic.
func TestPageUnchangedOddBodies(t *testing.T) {
	s := &Server{cursors: newCursorCodec([]byte("secret"))}
	span := changeset.PositionSpan{Lo: chain.Position{Height: 9}, Hi: chain.Position{Height: 9}}
	for _, body := range []string{
		``,
		`"}`,
		`null}`,
		`"address":"a","utxos":[],"next_cursor":null}`,
		`"address":"a","utxos":[],"next_cursor":""}`,
		`"address":"a","utxos":[],"next_cursor":"}`,
		`],"next_cursor":"}`,
		`x],"next_cursor":"}`,
	} {
		for _, desc := range []bool{false, true} {
			e := cache.Entry{Status: 200, Body: []byte(body)}
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Errorf("body %q, desc %v: panic: %v", body, desc, r)
					}
				}()
				if s.pageUnchanged("a", desc, &e, span) {
					t.Errorf("body %q, desc %v: kept", body, desc)
				}
			}()
		}
	}
}

// TestSplitItems: page items are split at their top-level commas whatever
// their strings hold (escaped quotes, braces, brackets, commas), and
// anything that is not a list of objects is refused.
func TestSplitItems(t *testing.T) {
	a := `{"tx_hash":"` + strings.Repeat("ab", 32) + `","index":7,"address":"x\"},{[\\","assets":[{"policy":"00"}],"height":3}`
	b := `{"tx_hash":"` + strings.Repeat("01", 32) + `","index":0,"address":"y","assets":[],"height":4}`
	items, ok := splitItems([]byte(a + "," + b))
	if !ok || len(items) != 2 || string(items[0]) != a || string(items[1]) != b {
		t.Fatalf("split %q: %v %q", a+","+b, ok, items)
	}
	op, ok := itemOutPoint(items[0])
	if !ok || op.Index != 7 || op.TxHash[0] != 0xab {
		t.Fatalf("outpoint of %q: %v %v", items[0], ok, op)
	}
	if items, ok := splitItems(nil); !ok || len(items) != 0 {
		t.Fatalf("empty: %v %q", ok, items)
	}
	for _, bad := range []string{a + ",", "," + a, a + b, "[" + a + "]", `{"a":"}`, a[:len(a)-1], "x"} {
		if items, ok := splitItems([]byte(bad)); ok {
			t.Errorf("split %q: accepted as %q", bad, items)
		}
	}
	for _, bad := range []string{b[:20], `{"tx_hash":"zz` + b[14:], strings.Replace(b, `"index":0`, `"index":x`, 1)} {
		if _, ok := itemOutPoint([]byte(bad)); ok {
			t.Errorf("outpoint of %q accepted", bad)
		}
	}
}

// splitItems splits the items of a JSON array's contents (objects separated
// by commas, as appendUtxo writes them) without decoding them; ok is false
// on anything else.
func splitItems(b []byte) (items [][]byte, ok bool) {
	for len(b) > 0 {
		if b[0] != '{' {
			return nil, false
		}
		end, ok := itemEnd(b, 0)
		if !ok {
			return nil, false
		}
		items = append(items, b[:end])
		b = b[end:]
		if len(b) > 0 {
			if b[0] != ',' || len(b) == 1 {
				return nil, false
			}
			b = b[1:]
		}
	}
	return items, true
}

// itemOutPoint reads the outpoint an item of a page starts with
// ({"tx_hash":"…","index":N,…}, as appendUtxo writes it).
func itemOutPoint(it []byte) (chain.OutPoint, bool) {
	const head, mid = itemHead, `","index":`
	var op chain.OutPoint
	if len(it) < len(head)+2*chain.HashSize+len(mid) || !bytes.HasPrefix(it, []byte(head)) {
		return op, false
	}
	h, err := chain.ParseHash(string(it[len(head) : len(head)+2*chain.HashSize]))
	if err != nil {
		return op, false
	}
	rest := it[len(head)+2*chain.HashSize:]
	if !bytes.HasPrefix(rest, []byte(mid)) {
		return op, false
	}
	rest = rest[len(mid):]
	end := bytes.IndexByte(rest, ',')
	if end < 0 {
		return op, false
	}
	idx, err := strconv.ParseUint(string(rest[:end]), 10, 32)
	if err != nil {
		return op, false
	}
	op.TxHash, op.Index = h, uint32(idx)
	return op, true
}

package cardano

import (
	"errors"
	"fmt"
)

// A second, minimal CBOR decoder, written for the tests alone so that the
// facts they check (transaction hashes, per-block totals, raw address bytes)
// do not come from the library the adapter uses. It knows RFC 8949's item
// structure and nothing of Cardano: definite and indefinite lengths, tags,
// and the raw bytes of every item.

type item struct {
	major  byte   // 0 uint, 1 nint, 2 bytes, 3 text, 4 array, 5 map, 6 tag, 7 simple
	arg    uint64 // the value (0, 1), the tag number (6)
	raw    []byte // the item's whole encoding
	bytes  []byte // contents of a byte or text string (chunks joined)
	elems  []item // array elements; map entries as key, value, key, value…
	tagged *item  // the tag's content
}

var errTruncated = errors.New("truncated")

func parseItem(b []byte) (item, error) {
	it, n, err := parseAt(b, 0, 0)
	if err != nil {
		return it, err
	}
	if n != len(b) {
		return it, fmt.Errorf("%d trailing bytes", len(b)-n)
	}
	return it, nil
}

func parseAt(b []byte, pos, depth int) (item, int, error) {
	if depth > 200 {
		return item{}, 0, errors.New("too deep")
	}
	start := pos
	if pos >= len(b) {
		return item{}, 0, errTruncated
	}
	it := item{major: b[pos] >> 5}
	info := b[pos] & 31
	pos++
	indefinite := false
	switch {
	case info < 24:
		it.arg = uint64(info)
	case info <= 27:
		n := 1 << (info - 24)
		if pos+n > len(b) {
			return it, 0, errTruncated
		}
		for _, c := range b[pos : pos+n] {
			it.arg = it.arg<<8 | uint64(c)
		}
		pos += n
	case info == 31 && it.major >= 2 && it.major <= 5:
		indefinite = true
	default:
		return it, 0, fmt.Errorf("bad additional info %d", info)
	}
	switch it.major {
	case 2, 3:
		if indefinite {
			for {
				if pos >= len(b) {
					return it, 0, errTruncated
				}
				if b[pos] == 0xff {
					pos++
					break
				}
				chunk, n, err := parseAt(b, pos, depth+1)
				if err != nil {
					return it, 0, err
				}
				it.bytes = append(it.bytes, chunk.bytes...)
				pos = n
			}
		} else {
			if it.arg > uint64(len(b)-pos) {
				return it, 0, errTruncated
			}
			it.bytes = b[pos : pos+int(it.arg)]
			pos += int(it.arg)
		}
	case 4, 5:
		count := it.arg
		if it.major == 5 {
			count *= 2
		}
		for i := uint64(0); indefinite || i < count; i++ {
			if indefinite {
				if pos >= len(b) {
					return it, 0, errTruncated
				}
				if b[pos] == 0xff {
					pos++
					break
				}
			}
			e, n, err := parseAt(b, pos, depth+1)
			if err != nil {
				return it, 0, err
			}
			it.elems = append(it.elems, e)
			pos = n
		}
	case 6:
		c, n, err := parseAt(b, pos, depth+1)
		if err != nil {
			return it, 0, err
		}
		it.tagged = &c
		pos = n
	}
	it.raw = b[start:pos]
	return it, pos, nil
}

// untag returns the content of tags (258, sets) wrapping it.
func (it item) untag() item {
	for it.major == 6 && it.tagged != nil {
		it = *it.tagged
	}
	return it
}

// get returns the value under unsigned key k of a map.
func (it item) get(k uint64) (item, bool) {
	for i := 0; i+1 < len(it.elems); i += 2 {
		if key := it.elems[i]; key.major == 0 && key.arg == k {
			return it.elems[i+1], true
		}
	}
	return item{}, false
}

package script

import (
	"encoding/hex"
	"fmt"
	"strconv"
)

// decoder reads the few CBOR items this package needs from b, strictly:
// every method reports false (or an error) rather than read past b.
type decoder struct {
	b   []byte
	off int
}

// The CBOR major types read here.
const (
	majorUint  = 0
	majorBytes = 2
	majorArray = 4
)

// indefinite is the argument head() reports for an indefinite length.
const indefinite = ^uint64(0)

// head reads an item's head: its major type and argument (a length, a
// value; indefinite for additional info 31).
func (d *decoder) head() (major byte, arg uint64, ok bool) {
	if d.off >= len(d.b) {
		return 0, 0, false
	}
	ib := d.b[d.off]
	d.off++
	major, ai := ib>>5, ib&0x1f
	switch {
	case ai < 24:
		return major, uint64(ai), true
	case ai == 31:
		return major, indefinite, true
	case ai > 27:
		return 0, 0, false
	}
	n := 1 << (ai - 24) // 1, 2, 4 or 8 bytes
	if len(d.b)-d.off < n {
		return 0, 0, false
	}
	var v uint64
	for _, c := range d.b[d.off : d.off+n] {
		v = v<<8 | uint64(c)
	}
	d.off += n
	return major, v, true
}

// arrayHead reads a definite array's head: its length.
func (d *decoder) arrayHead() (uint64, bool) {
	m, n, ok := d.head()
	if !ok || m != majorArray || n == indefinite {
		return 0, false
	}
	return n, true
}

// uint reads an unsigned integer.
func (d *decoder) uint() (uint64, bool) {
	m, v, ok := d.head()
	if !ok || m != majorUint || v == indefinite {
		return 0, false
	}
	return v, true
}

// bytes reads a byte string, definite (aliasing b) or indefinite (its
// chunks, each definite, concatenated into a new slice).
func (d *decoder) bytes() ([]byte, bool) {
	m, n, ok := d.head()
	if !ok || m != majorBytes {
		return nil, false
	}
	if n != indefinite {
		if uint64(len(d.b)-d.off) < n {
			return nil, false
		}
		s := d.b[d.off : d.off+int(n)]
		d.off += int(n)
		return s, true
	}
	out := []byte{}
	for {
		if d.off >= len(d.b) {
			return nil, false
		}
		if d.b[d.off] == 0xff {
			d.off++
			return out, true
		}
		m, n, ok := d.head()
		if !ok || m != majorBytes || n == indefinite || uint64(len(d.b)-d.off) < n {
			return nil, false
		}
		out = append(out, d.b[d.off:d.off+int(n)]...)
		d.off += int(n)
	}
}

// The native script forms (the ledger's timelock), by their first element.
const (
	nativeSig    = 0 // [0, key hash]
	nativeAll    = 1 // [1, [scripts]]
	nativeAny    = 2 // [2, [scripts]]
	nativeAtLeas = 3 // [3, n, [scripts]]
	nativeAfter  = 4 // [4, slot]: valid from slot on
	nativeBefore = 5 // [5, slot]: valid before slot
)

// skipNative reads one native script, checking its form.
func (d *decoder) skipNative(depth int) error {
	return d.native(depth, nil)
}

// native reads one native script and, when dst is not nil, appends its JSON
// (NativeJSON's format) to *dst. Arrays may be of definite or indefinite
// length, as the ledger's decoder takes them; the hash is of the bytes as
// sent either way.
func (d *decoder) native(depth int, dst *[]byte) error {
	if depth > maxNesting {
		return fmt.Errorf("%w: native script nested deeper than %d", ErrInvalid, maxNesting)
	}
	m, n, ok := d.head()
	if !ok || m != majorArray || (n != indefinite && n < 2) {
		return fmt.Errorf("%w: a native script is an array [form, …]", ErrInvalid)
	}
	indef := n == indefinite
	form, ok := d.uint()
	if !ok {
		return fmt.Errorf("%w: native script form", ErrInvalid)
	}
	out := func(s string) {
		if dst != nil {
			*dst = append(*dst, s...)
		}
	}
	want := uint64(2)
	switch form {
	case nativeSig:
		kh, ok := d.bytes()
		if !ok || len(kh) != HashLen {
			return fmt.Errorf("%w: a signature script is [0, 28-byte key hash]", ErrInvalid)
		}
		out(`{"type":"sig","keyHash":"` + hex.EncodeToString(kh) + `"}`)
	case nativeAll, nativeAny, nativeAtLeas:
		switch form {
		case nativeAll:
			out(`{"type":"all","scripts":[`)
		case nativeAny:
			out(`{"type":"any","scripts":[`)
		default:
			want = 3
			req, ok := d.uint()
			if !ok {
				return fmt.Errorf("%w: atLeast's count", ErrInvalid)
			}
			out(`{"type":"atLeast","required":` + strconv.FormatUint(req, 10) + `,"scripts":[`)
		}
		lm, k, ok := d.head()
		if !ok || lm != majorArray {
			return fmt.Errorf("%w: a native script's list of scripts", ErrInvalid)
		}
		for i := uint64(0); k == indefinite || i < k; i++ {
			if k == indefinite && d.brk() {
				break
			}
			if i > 0 {
				out(",")
			}
			if err := d.native(depth+1, dst); err != nil {
				return err
			}
		}
		out("]}")
	case nativeAfter, nativeBefore:
		slot, ok := d.uint()
		if !ok {
			return fmt.Errorf("%w: a time-lock script is [%d, slot]", ErrInvalid, form)
		}
		kind := "after"
		if form == nativeBefore {
			kind = "before"
		}
		out(`{"type":"` + kind + `","slot":` + strconv.FormatUint(slot, 10) + `}`)
	default:
		return fmt.Errorf("%w: native script form %d", ErrInvalid, form)
	}
	if (indef && !d.brk()) || (!indef && n != want) {
		return fmt.Errorf("%w: native script form %d: wrong number of elements", ErrInvalid, form)
	}
	return nil
}

// brk consumes a break byte (the end of an indefinite-length item) and
// reports whether there was one.
func (d *decoder) brk() bool {
	if d.off < len(d.b) && d.b[d.off] == 0xff {
		d.off++
		return true
	}
	return false
}

// NativeJSON renders a native script's CBOR (a Ref's Body of language
// Native) as the JSON Blockfrost and cardano-cli write: {"type":"sig",
// "keyHash":hex}, {"type":"all"|"any","scripts":[…]}, {"type":"atLeast",
// "required":n,"scripts":[…]}, {"type":"after"|"before","slot":n}, appended
// to dst. Strict as ParseRef.
func NativeJSON(dst, native []byte) ([]byte, error) {
	d := decoder{b: native}
	if err := d.native(0, &dst); err != nil {
		return nil, err
	}
	if d.off != len(native) {
		return nil, fmt.Errorf("%w: %d trailing bytes", ErrInvalid, len(native)-d.off)
	}
	return dst, nil
}

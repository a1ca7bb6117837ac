package disk

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/utxo-cache/utxo-cache/chain"
)

// ErrCorrupt marks a stored value or key that does not decode: the store is
// damaged or was written by incompatible code. Match with errors.Is.
var ErrCorrupt = errors.New("disk: corrupt data")

// decbuf reads a stored value with one sticky error: after the first failure
// every read returns zero values and err() reports the failure. Decoders
// check err() once at the end, and reject trailing bytes with done().
type decbuf struct {
	b   []byte
	e   error
	ctx string
	// op, when set, is named in the error: rendering it only on failure
	// keeps the successful decode of a hot path free of formatting.
	op *chain.OutPoint
}

func (d *decbuf) fail(what string) {
	if d.e == nil {
		ctx := d.ctx
		if d.op != nil {
			ctx += " " + d.op.String()
		}
		d.e = fmt.Errorf("%s: %s: %w", ctx, what, ErrCorrupt)
	}
}

func (d *decbuf) err() error { return d.e }

// done fails when bytes remain and returns the sticky error.
func (d *decbuf) done() error {
	if d.e == nil && len(d.b) != 0 {
		d.fail(fmt.Sprintf("%d trailing bytes", len(d.b)))
	}
	return d.e
}

func (d *decbuf) byte1() byte {
	if d.e != nil || len(d.b) < 1 {
		d.fail("short byte")
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decbuf) u32() uint32 {
	if d.e != nil || len(d.b) < 4 {
		d.fail("short uint32")
		return 0
	}
	v := binary.BigEndian.Uint32(d.b)
	d.b = d.b[4:]
	return v
}

func (d *decbuf) u64() uint64 {
	if d.e != nil || len(d.b) < 8 {
		d.fail("short uint64")
		return 0
	}
	v := binary.BigEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

func (d *decbuf) uvarint() uint64 {
	if d.e != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("bad uvarint")
		return 0
	}
	if n != uvarintLen(v) {
		d.fail("non-canonical uvarint") // decode then encode must give the same bytes
		return 0
	}
	d.b = d.b[n:]
	return v
}

// fixed returns the next n bytes, aliasing the buffer.
func (d *decbuf) fixed(n int) []byte {
	if d.e != nil || n < 0 || len(d.b) < n {
		d.fail("short bytes")
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

// lenBytes reads a uvarint length (at most max) and that many bytes, copied;
// a zero length gives nil.
func (d *decbuf) lenBytes(max int) []byte { return cloneOrNil(d.lenRef(max)) }

// lenRef reads what lenBytes reads without the copy: the bytes alias the
// buffer.
func (d *decbuf) lenRef(max int) []byte {
	n := d.uvarint()
	if d.e != nil {
		return nil
	}
	if n > uint64(max) || n > uint64(len(d.b)) {
		d.fail("length out of range")
		return nil
	}
	if n == 0 {
		return nil
	}
	return d.fixed(int(n))
}

// count reads a uvarint element count that cannot exceed the remaining bytes
// divided by minSize, so a corrupt count cannot cause a huge allocation.
func (d *decbuf) count(minSize int) int {
	n := d.uvarint()
	if d.e == nil && n > uint64(len(d.b)/max(minSize, 1)) {
		d.fail("count out of range")
		return 0
	}
	return int(n)
}

func appendLenBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

// uvarintLen is the length of v's canonical uvarint encoding.
func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

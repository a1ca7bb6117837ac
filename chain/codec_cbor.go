package chain

import (
	"encoding/binary"
	"fmt"
	"io"
	"unicode/utf8"
)

// The CBOR block encoding (docs/blocks.md, Content-Type application/cbor; files
// *.cbor hold an RFC 8742 CBOR sequence of blocks).
//
// The data model is the JSON one: maps with the contract's field names as
// text-string keys, byte strings where JSON has hex, unsigned or negative
// integers, true/false.
//
// # Decoding (strict)
//
//   - Keys must be text strings naming a known field, each at most once per
//     map (the exact check that fxamacker's DupMapKeyEnforcedAPF performs).
//   - Indefinite-length items, tags, floats and simple values other than
//     false, true and null are rejected. Integers with non-shortest heads
//     are accepted (RFC 8949 §5.3: they are well-formed).
//   - value and quantity are an unsigned integer or a strict decimal text
//     string (as in JSON); height, slot and index are unsigned integers, time an
//     integer.
//   - Defaults, nulls, empty values, asset order and required fields are as
//     in JSON (see codec_json.go).
//   - An announced array length over its count limit fails with ErrTooLarge
//     before anything is allocated; any announced length longer than the
//     remaining input is a truncation.
//   - Nothing may follow the block's data item.
//
// The walker of decode.go does the decoding; codec_cbor_fxamacker_test.go
// holds a second decoder built on fxamacker/cbor's struct decoding, and
// FuzzCBORDecodersAgree checks that both accept the same inputs and decode
// them to the same blocks (decode.go says why the service uses the walker).
//
// # Canonical encoding
//
// RFC 8949 §4.2.1 core deterministic encoding: shortest heads, definite
// lengths, map keys in bytewise order of their encodings (for these short
// keys: shorter first, then alphabetical). Optional fields are omitted at
// their defaults exactly as in the JSON canonical form. Example (pinned by
// TestCBORDocExample), the block
// {"height":1,"hash":"11…11","txs":[{"hash":"22…22","inputs":[],"outputs":[{"address":"a","value":5}]}]}:
//
//	a3                                map(3)
//	   63 747873                      "txs"
//	   81                             array(1)
//	      a3                          map(3)
//	         64 68617368              "hash"
//	         5820 2222…22             bytes(32)
//	         66 696e70757473          "inputs"
//	         80                       array(0)
//	         67 6f757470757473        "outputs"
//	         81                       array(1)
//	            a2                    map(2)
//	               65 76616c7565      "value"
//	               05                 5
//	               67 61646472657373  "address"
//	               61 61              "a"
//	   64 68617368                    "hash"
//	   5820 1111…11                   bytes(32)
//	   66 686569676874                "height"
//	   01                             1
//
// testdata/golden_block.cbor.hex pins the encoding of a block with every field.

// DecodeBlockCBOR decodes one CBOR block (a single data item). Every error
// wraps ErrInvalidBlock and names the offending field, except a block over
// lim.MaxBlockBytes or a list over a count limit, which wrap ErrTooLarge; a
// truncated item also wraps io.ErrUnexpectedEOF. The result shares no memory
// with data. It never panics.
func DecodeBlockCBOR(data []byte, lim Limits) (*Block, error) {
	lim = lim.EnsureDefaults()
	if len(data) > lim.MaxBlockBytes {
		return nil, fmt.Errorf("block of %d bytes over limit %d: %w", len(data), lim.MaxBlockBytes, ErrTooLarge)
	}
	return decodeBlock(&cborSource{data: data}, lim)
}

// CBOR major types.
const (
	cborUint   = 0
	cborNegInt = 1
	cborBytes  = 2
	cborText   = 3
	cborArray  = 4
	cborMap    = 5
	cborTag    = 6
	cborSimple = 7

	cborFalse = 0xf4
	cborTrue  = 0xf5
	cborNull  = 0xf6
)

// cborSource reads CBOR data items from a byte slice.
type cborSource struct {
	data []byte
	off  int
	nesting
}

var errCBORTruncated = fmt.Errorf("truncated data item: %w", io.ErrUnexpectedEOF)

// describeCBOR names the kind of item an initial byte starts.
func describeCBOR(ib byte) string {
	switch ib >> 5 {
	case cborUint:
		return "unsigned integer"
	case cborNegInt:
		return "negative integer"
	case cborBytes:
		return "byte string"
	case cborText:
		return "text string"
	case cborArray:
		return "array"
	case cborMap:
		return "map"
	case cborTag:
		return "tag"
	}
	switch ib {
	case cborFalse, cborTrue:
		return "boolean"
	case cborNull:
		return "null"
	case 0xf7:
		return "undefined"
	case 0xf9, 0xfa, 0xfb:
		return "float"
	case 0xff:
		return "break"
	}
	return "simple value"
}

// head reads the initial byte and argument of the next item.
func (s *cborSource) head() (major byte, arg uint64, err error) {
	if s.off >= len(s.data) {
		return 0, 0, errCBORTruncated
	}
	ib := s.data[s.off]
	major, ai := ib>>5, ib&0x1f
	var n int
	switch {
	case ai < 24:
		s.off++
		return major, uint64(ai), nil
	case ai <= 27:
		n = 1 << (ai - 24)
	case ai == 31 && major >= cborBytes && major <= cborMap:
		return 0, 0, fmt.Errorf("indefinite-length %s at offset %d (not supported)", describeCBOR(ib), s.off)
	default:
		return 0, 0, fmt.Errorf("malformed initial byte %#02x at offset %d", ib, s.off)
	}
	if len(s.data)-s.off-1 < n {
		return 0, 0, errCBORTruncated
	}
	p := s.data[s.off+1 : s.off+1+n]
	switch n {
	case 1:
		arg = uint64(p[0])
	case 2:
		arg = uint64(binary.BigEndian.Uint16(p))
	case 4:
		arg = uint64(binary.BigEndian.Uint32(p))
	default:
		arg = binary.BigEndian.Uint64(p)
	}
	s.off += 1 + n
	return major, arg, nil
}

// expect reads the head of an item of the given major type, or reports what
// is there instead without consuming it.
func (s *cborSource) expect(major byte, want string) (uint64, error) {
	if s.off >= len(s.data) {
		return 0, errCBORTruncated
	}
	if ib := s.data[s.off]; ib>>5 != major {
		return 0, fmt.Errorf("expected %s, got %s", want, describeCBOR(ib))
	}
	_, arg, err := s.head()
	return arg, err
}

// take consumes n bytes of string content.
func (s *cborSource) take(n uint64) ([]byte, error) {
	if n > uint64(len(s.data)-s.off) {
		return nil, errCBORTruncated
	}
	b := s.data[s.off : s.off+int(n)]
	s.off += int(n)
	return b, nil
}

func (s *cborSource) objectStart() error {
	n, err := s.expect(cborMap, "map")
	if err != nil {
		return err
	}
	if n > uint64(len(s.data)-s.off)/2 { // each pair takes at least 2 bytes
		return errCBORTruncated
	}
	return s.push(container{remaining: int(n)})
}

func (s *cborSource) objectNext() ([]byte, bool, error) {
	c := s.top()
	if c.remaining == 0 {
		s.pop()
		return nil, false, nil
	}
	c.remaining--
	n, err := s.expect(cborText, "text string map key")
	if err != nil {
		return nil, false, err
	}
	key, err := s.take(n)
	return key, err == nil, err
}

func (s *cborSource) arrayStart(limit int) (int, error) {
	n, err := s.expect(cborArray, "array")
	if err != nil {
		return 0, err
	}
	if n > uint64(limit) {
		return 0, fmt.Errorf("%d entries over limit %d: %w", n, limit, ErrTooLarge)
	}
	if n > uint64(len(s.data)-s.off) { // each entry takes at least 1 byte
		return 0, errCBORTruncated
	}
	return int(n), s.push(container{remaining: int(n)})
}

func (s *cborSource) arrayNext() (bool, error) {
	c := s.top()
	if c.remaining == 0 {
		s.pop()
		return false, nil
	}
	c.remaining--
	return true, nil
}

func (s *cborSource) null() (bool, error) {
	if s.off < len(s.data) && s.data[s.off] == cborNull {
		s.off++
		return true, nil
	}
	return false, nil
}

func (s *cborSource) uint(max uint64) (uint64, error) {
	v, err := s.expect(cborUint, "unsigned integer")
	if err != nil {
		return 0, err
	}
	if v > max {
		return 0, fmt.Errorf("%d out of range 0..%d", v, max)
	}
	return v, nil
}

func (s *cborSource) int64() (int64, error) {
	if s.off >= len(s.data) {
		return 0, errCBORTruncated
	}
	ib := s.data[s.off]
	if m := ib >> 5; m != cborUint && m != cborNegInt {
		return 0, fmt.Errorf("expected integer, got %s", describeCBOR(ib))
	}
	major, arg, err := s.head()
	switch {
	case err != nil:
		return 0, err
	case arg > 1<<63-1:
		return 0, fmt.Errorf("integer overflows int64")
	case major == cborNegInt:
		return -1 - int64(arg), nil
	}
	return int64(arg), nil
}

func (s *cborSource) amount() (uint64, error) {
	if s.off < len(s.data) && s.data[s.off]>>5 == cborText {
		str, err := s.textBytes()
		if err != nil {
			return 0, err
		}
		return parseDecimal(str)
	}
	return s.uint(1<<64 - 1)
}

func (s *cborSource) boolean() (bool, error) {
	if s.off >= len(s.data) {
		return false, errCBORTruncated
	}
	switch ib := s.data[s.off]; ib {
	case cborFalse, cborTrue:
		s.off++
		return ib == cborTrue, nil
	default:
		return false, fmt.Errorf("expected boolean, got %s", describeCBOR(ib))
	}
}

func (s *cborSource) hash(h *Hash) error {
	n, err := s.expect(cborBytes, "byte string")
	if err != nil {
		return err
	}
	if n != HashSize {
		return fmt.Errorf("length %d bytes, want %d", n, HashSize)
	}
	b, err := s.take(n)
	if err != nil {
		return err
	}
	copy(h[:], b)
	return nil
}

func (s *cborSource) bytes(a *arena) ([]byte, error) {
	n, err := s.expect(cborBytes, "byte string")
	if err != nil {
		return nil, err
	}
	b, err := s.take(n)
	if err != nil || len(b) == 0 {
		return nil, err
	}
	out := a.alloc(len(b))
	copy(out, b)
	return out, nil
}

// textBytes reads a text string and checks it is UTF-8; the result aliases
// s.data.
func (s *cborSource) textBytes() ([]byte, error) {
	n, err := s.expect(cborText, "text string")
	if err != nil {
		return nil, err
	}
	start := s.off
	b, err := s.take(n)
	if err != nil {
		return nil, err
	}
	if !utf8.Valid(b) {
		return nil, fmt.Errorf("invalid UTF-8 in text string at offset %d", start)
	}
	return b, nil
}

func (s *cborSource) text() (string, error) {
	b, err := s.textBytes()
	return string(b), err
}

func (s *cborSource) end() error {
	if s.off != len(s.data) {
		return fmt.Errorf("%d bytes of trailing data at offset %d", len(s.data)-s.off, s.off)
	}
	return nil
}

// AppendBlockCBOR appends the canonical CBOR encoding of b (described above)
// to dst. It does not validate b: a block that fails ValidateBlock encodes,
// but does not decode again.
func AppendBlockCBOR(dst []byte, b *Block) []byte {
	n := 3 // txs, hash, height
	if b.Time != 0 {
		n++
	}
	if b.Slot != 0 {
		n++
	}
	if !b.PrevHash.IsZero() {
		n++
	}
	dst = appendCBORHead(dst, cborMap, uint64(n))
	dst = appendCBORText(dst, "txs")
	dst = appendCBORHead(dst, cborArray, uint64(len(b.Txs)))
	for i := range b.Txs {
		dst = appendTxCBOR(dst, &b.Txs[i])
	}
	dst = appendCBORBytes(appendCBORText(dst, "hash"), b.Hash[:])
	if b.Slot != 0 {
		dst = appendCBORHead(appendCBORText(dst, "slot"), cborUint, b.Slot)
	}
	if b.Time != 0 {
		dst = appendCBORInt(appendCBORText(dst, "time"), b.Time)
	}
	dst = appendCBORHead(appendCBORText(dst, "height"), cborUint, b.Height)
	if !b.PrevHash.IsZero() {
		dst = appendCBORBytes(appendCBORText(dst, "prev_hash"), b.PrevHash[:])
	}
	return dst
}

func appendTxCBOR(dst []byte, tx *Tx) []byte {
	n := 3 // hash, inputs, outputs
	for _, present := range []bool{tx.Invalid, tx.Coinbase, len(tx.CollateralInputs) > 0, tx.CollateralReturn != nil} {
		if present {
			n++
		}
	}
	dst = appendCBORHead(dst, cborMap, uint64(n))
	dst = appendCBORBytes(appendCBORText(dst, "hash"), tx.Hash[:])
	if tx.Invalid {
		dst = append(appendCBORText(dst, "valid"), cborFalse)
	}
	dst = appendOutPointsCBOR(appendCBORText(dst, "inputs"), tx.Inputs)
	dst = appendCBORHead(appendCBORText(dst, "outputs"), cborArray, uint64(len(tx.Outputs)))
	for i := range tx.Outputs {
		dst = appendOutputCBOR(dst, &tx.Outputs[i])
	}
	if tx.Coinbase {
		dst = append(appendCBORText(dst, "coinbase"), cborTrue)
	}
	if len(tx.CollateralInputs) > 0 {
		dst = appendOutPointsCBOR(appendCBORText(dst, "collateral_inputs"), tx.CollateralInputs)
	}
	if tx.CollateralReturn != nil {
		dst = appendOutputCBOR(appendCBORText(dst, "collateral_return"), tx.CollateralReturn)
	}
	return dst
}

func appendOutPointsCBOR(dst []byte, ops []OutPoint) []byte {
	dst = appendCBORHead(dst, cborArray, uint64(len(ops)))
	for _, op := range ops {
		dst = appendCBORHead(dst, cborMap, 2)
		dst = appendCBORHead(appendCBORText(dst, "index"), cborUint, uint64(op.Index))
		dst = appendCBORBytes(appendCBORText(dst, "tx_hash"), op.TxHash[:])
	}
	return dst
}

func appendOutputCBOR(dst []byte, o *Output) []byte {
	n := 2 // value, address
	for _, present := range []bool{len(o.Datum) > 0, len(o.Assets) > 0, o.DatumHash != nil, len(o.ScriptRef) > 0} {
		if present {
			n++
		}
	}
	dst = appendCBORHead(dst, cborMap, uint64(n))
	if len(o.Datum) > 0 {
		dst = appendCBORBytes(appendCBORText(dst, "datum"), o.Datum)
	}
	dst = appendCBORHead(appendCBORText(dst, "value"), cborUint, o.Value)
	if len(o.Assets) > 0 {
		dst = appendCBORHead(appendCBORText(dst, "assets"), cborArray, uint64(len(o.Assets)))
		for _, a := range o.Assets {
			dst = appendCBORHead(dst, cborMap, 3)
			dst = appendCBORBytes(appendCBORText(dst, "name"), a.Name)
			dst = appendCBORBytes(appendCBORText(dst, "policy"), a.Policy)
			dst = appendCBORHead(appendCBORText(dst, "quantity"), cborUint, a.Quantity)
		}
	}
	dst = appendCBORText(appendCBORText(dst, "address"), o.Address)
	if o.DatumHash != nil {
		dst = appendCBORBytes(appendCBORText(dst, "datum_hash"), o.DatumHash[:])
	}
	if len(o.ScriptRef) > 0 {
		dst = appendCBORBytes(appendCBORText(dst, "script_ref"), o.ScriptRef)
	}
	return dst
}

// appendCBORHead appends the shortest head for major type and argument.
func appendCBORHead(dst []byte, major byte, arg uint64) []byte {
	m := major << 5
	switch {
	case arg < 24:
		return append(dst, m|byte(arg))
	case arg <= 0xff:
		return append(dst, m|24, byte(arg))
	case arg <= 0xffff:
		return binary.BigEndian.AppendUint16(append(dst, m|25), uint16(arg))
	case arg <= 0xffff_ffff:
		return binary.BigEndian.AppendUint32(append(dst, m|26), uint32(arg))
	}
	return binary.BigEndian.AppendUint64(append(dst, m|27), arg)
}

func appendCBORInt(dst []byte, v int64) []byte {
	if v < 0 {
		return appendCBORHead(dst, cborNegInt, uint64(^v)) // -1-v
	}
	return appendCBORHead(dst, cborUint, uint64(v))
}

func appendCBORBytes(dst, b []byte) []byte {
	return append(appendCBORHead(dst, cborBytes, uint64(len(b))), b...)
}

func appendCBORText(dst []byte, s string) []byte {
	return append(appendCBORHead(dst, cborText, uint64(len(s))), s...)
}

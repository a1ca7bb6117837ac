package chain

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"io"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// The JSON block encoding (docs/blocks.md, Content-Type application/json;
// files *.jsonl hold one block per line).
//
// # Decoding (strict)
//
//   - Field names exactly as in the contract; an unknown field, or the same
//     field twice in one object, is rejected. Keys are compared after
//     unescaping, so "h\u0061sh" is "hash" and a duplicate of it. Because
//     every accepted key is known, duplicate detection is exact (a bitmask
//     per object), not a heuristic.
//   - Byte fields are hex strings, either case; hashes exactly 64 characters.
//   - height, time, slot and index are JSON numbers without fraction or exponent
//     (height, slot and index also without sign). value and quantity are a JSON
//     number or a decimal string, both strict uint64: no sign, fraction,
//     exponent or leading zero, no overflow.
//   - null for an optional field means absent; for a required field it is an
//     error. Empty optional byte strings and lists decode as nil, so "datum":
//     "" is the same as no datum (the digest cannot tell them apart either).
//   - inputs and outputs are required (an empty list when there are none),
//     as are the policy, name and quantity of an asset.
//   - Assets are returned sorted in (policy, name) order: the contract treats
//     them as a set, and a duplicate is rejected.
//   - Strings must be valid UTF-8; escapes, including surrogate pairs, are
//     decoded; a lone surrogate is rejected.
//   - Only whitespace may follow the block.
//
// # Canonical encoding
//
// Fields in contract order, no whitespace, lowercase hex, integers as JSON
// numbers. Optional fields at their defaults are omitted: prev_hash when zero,
// time and slot when 0, valid when true, coinbase when false, collateral_inputs and
// assets when empty, collateral_return, datum_hash, datum and script_ref when
// absent. inputs and outputs are always written, even when empty. Example:
//
//	{"height":1,"hash":"11…11","txs":[{"hash":"22…22","inputs":[],"outputs":[{"address":"a","value":5}]}]}

// DecodeBlockJSON decodes one JSON block. Every error wraps ErrInvalidBlock
// and names the offending field, except a block over lim.MaxBlockBytes or a
// list over a count limit, which wrap ErrTooLarge. The result shares no
// memory with data. It never panics.
func DecodeBlockJSON(data []byte, lim Limits) (*Block, error) {
	lim = lim.EnsureDefaults()
	if len(data) > lim.MaxBlockBytes {
		return nil, fmt.Errorf("block of %d bytes over limit %d: %w", len(data), lim.MaxBlockBytes, ErrTooLarge)
	}
	return decodeBlock(&jsonSource{data: data}, lim)
}

// jsonSource reads JSON values from a byte slice.
type jsonSource struct {
	data    []byte
	off     int
	scratch []byte // unescaped string contents
	nesting
}

func (s *jsonSource) skipSpace() {
	for s.off < len(s.data) {
		switch s.data[s.off] {
		case ' ', '\t', '\n', '\r':
			s.off++
		default:
			return
		}
	}
}

// unexpected describes the value at s.off as not being what was wanted.
func (s *jsonSource) unexpected(want string) error {
	if s.off >= len(s.data) {
		return fmt.Errorf("expected %s, got end of data: %w", want, io.ErrUnexpectedEOF)
	}
	rest := s.data[s.off:]
	var got string
	switch c := rest[0]; {
	case c == '{':
		got = "object"
	case c == '[':
		got = "array"
	case c == '"':
		got = "string"
	case bytes.HasPrefix(rest, []byte("true")), bytes.HasPrefix(rest, []byte("false")):
		got = "boolean"
	case bytes.HasPrefix(rest, []byte("null")):
		got = "null"
	case c == '-' || (c >= '0' && c <= '9'):
		got = "number"
	default:
		got = fmt.Sprintf("invalid character %q at offset %d", rune(c), s.off)
	}
	return fmt.Errorf("expected %s, got %s", want, got)
}

func (s *jsonSource) objectStart() error {
	s.skipSpace()
	if s.off >= len(s.data) || s.data[s.off] != '{' {
		return s.unexpected("object")
	}
	s.off++
	return s.push(container{first: true})
}

func (s *jsonSource) objectNext() ([]byte, bool, error) {
	c := s.top()
	s.skipSpace()
	if s.off >= len(s.data) {
		return nil, false, fmt.Errorf("unterminated object: %w", io.ErrUnexpectedEOF)
	}
	if c.first {
		c.first = false
		if s.data[s.off] == '}' {
			s.off++
			s.pop()
			return nil, false, nil
		}
	} else {
		switch s.data[s.off] {
		case '}':
			s.off++
			s.pop()
			return nil, false, nil
		case ',':
			s.off++
			s.skipSpace()
		default:
			return nil, false, s.unexpected("',' or '}'")
		}
	}
	if s.off >= len(s.data) || s.data[s.off] != '"' {
		return nil, false, s.unexpected("field name")
	}
	key, err := s.str()
	if err != nil {
		return nil, false, err
	}
	s.skipSpace()
	if s.off >= len(s.data) || s.data[s.off] != ':' {
		return nil, false, s.unexpected("':'")
	}
	s.off++
	return key, true, nil
}

func (s *jsonSource) arrayStart(limit int) (int, error) {
	s.skipSpace()
	if s.off >= len(s.data) || s.data[s.off] != '[' {
		return 0, s.unexpected("array")
	}
	s.off++
	return 0, s.push(container{first: true, limit: limit})
}

func (s *jsonSource) arrayNext() (bool, error) {
	c := s.top()
	s.skipSpace()
	if s.off >= len(s.data) {
		return false, fmt.Errorf("unterminated array: %w", io.ErrUnexpectedEOF)
	}
	if c.first {
		c.first = false
		if s.data[s.off] == ']' {
			s.off++
			s.pop()
			return false, nil
		}
	} else {
		switch s.data[s.off] {
		case ']':
			s.off++
			s.pop()
			return false, nil
		case ',':
			s.off++
		default:
			return false, s.unexpected("',' or ']'")
		}
	}
	c.count++
	if c.count > c.limit {
		return false, fmt.Errorf("more than %d entries: %w", c.limit, ErrTooLarge)
	}
	return true, nil
}

func (s *jsonSource) null() (bool, error) {
	s.skipSpace()
	if bytes.HasPrefix(s.data[s.off:], []byte("null")) {
		s.off += 4
		return true, nil
	}
	return false, nil
}

// number scans a JSON number per RFC 8259 and reports its parts. Leading
// zeros ("007") are a syntax error there, so they are one here.
func (s *jsonSource) number(want string) (tok []byte, neg, fracOrExp bool, err error) {
	s.skipSpace()
	start := s.off
	d := s.data
	i := s.off
	if i < len(d) && d[i] == '-' {
		neg = true
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
		if i < len(d) && d[i] >= '0' && d[i] <= '9' {
			return nil, false, false, fmt.Errorf("number with leading zero at offset %d", start)
		}
	case i < len(d) && d[i] >= '1' && d[i] <= '9':
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
	default:
		if neg {
			return nil, false, false, fmt.Errorf("invalid number at offset %d", start)
		}
		return nil, false, false, s.unexpected(want)
	}
	if i < len(d) && d[i] == '.' {
		fracOrExp = true
		i++
		j := i
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
		if i == j {
			return nil, false, false, fmt.Errorf("invalid number at offset %d", start)
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		fracOrExp = true
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		j := i
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
		if i == j {
			return nil, false, false, fmt.Errorf("invalid number at offset %d", start)
		}
	}
	s.off = i
	return d[start:i], neg, fracOrExp, nil
}

func (s *jsonSource) uint(max uint64) (uint64, error) {
	tok, neg, fracOrExp, err := s.number("unsigned integer")
	if err != nil {
		return 0, err
	}
	if neg || fracOrExp {
		return 0, fmt.Errorf("%s is not an unsigned integer", clip(tok))
	}
	v, err := parseDecimal(tok)
	if err != nil {
		return 0, err
	}
	if v > max {
		return 0, fmt.Errorf("%d out of range 0..%d", v, max)
	}
	return v, nil
}

func (s *jsonSource) int64() (int64, error) {
	tok, neg, fracOrExp, err := s.number("integer")
	if err != nil {
		return 0, err
	}
	if fracOrExp {
		return 0, fmt.Errorf("%s is not an integer", clip(tok))
	}
	digits := tok
	if neg {
		digits = tok[1:]
	}
	mag, err := parseDecimal(digits)
	switch {
	case err != nil, !neg && mag > 1<<63-1, neg && mag > 1<<63:
		return 0, fmt.Errorf("%s overflows int64", clip(tok))
	case neg:
		return int64(-mag), nil
	}
	return int64(mag), nil
}

func (s *jsonSource) amount() (uint64, error) {
	s.skipSpace()
	if s.off < len(s.data) && s.data[s.off] == '"' {
		str, err := s.str()
		if err != nil {
			return 0, err
		}
		return parseDecimal(str)
	}
	return s.uint(1<<64 - 1)
}

func (s *jsonSource) boolean() (bool, error) {
	s.skipSpace()
	rest := s.data[s.off:]
	switch {
	case bytes.HasPrefix(rest, []byte("true")):
		s.off += 4
		return true, nil
	case bytes.HasPrefix(rest, []byte("false")):
		s.off += 5
		return false, nil
	}
	return false, s.unexpected("boolean")
}

// hexString reads a string value for a hex byte field.
func (s *jsonSource) hexString() ([]byte, error) {
	s.skipSpace()
	if s.off >= len(s.data) || s.data[s.off] != '"' {
		return nil, s.unexpected("hex string")
	}
	str, err := s.str()
	if err != nil {
		return nil, err
	}
	if len(str)%2 != 0 {
		return nil, fmt.Errorf("odd number of hex characters (%d)", len(str))
	}
	return str, nil
}

func (s *jsonSource) hash(h *Hash) error {
	str, err := s.hexString()
	if err != nil {
		return err
	}
	if len(str) != 2*HashSize {
		return fmt.Errorf("length %d bytes, want %d", len(str)/2, HashSize)
	}
	if _, err := hex.Decode(h[:], str); err != nil {
		return fmt.Errorf("invalid hex: %q", clip(str))
	}
	return nil
}

func (s *jsonSource) bytes(a *arena) ([]byte, error) {
	str, err := s.hexString()
	if err != nil || len(str) == 0 {
		return nil, err
	}
	b := a.alloc(len(str) / 2)
	if _, err := hex.Decode(b, str); err != nil {
		return nil, fmt.Errorf("invalid hex: %q", clip(str))
	}
	return b, nil
}

func (s *jsonSource) text() (string, error) {
	s.skipSpace()
	if s.off >= len(s.data) || s.data[s.off] != '"' {
		return "", s.unexpected("string")
	}
	start := s.off
	str, err := s.str()
	if err != nil {
		return "", err
	}
	if !utf8.Valid(str) {
		return "", fmt.Errorf("invalid UTF-8 in string at offset %d", start)
	}
	return string(str), nil
}

func (s *jsonSource) end() error {
	s.skipSpace()
	if s.off != len(s.data) {
		return fmt.Errorf("trailing data at offset %d", s.off)
	}
	return nil
}

// str reads the string starting at s.off (a '"') and returns its contents,
// unescaped. The result may alias s.data or s.scratch: it is valid until the
// next call. It does not check UTF-8: text does, and every other string
// (keys, hex, decimals) is checked against an ASCII alphabet anyway.
func (s *jsonSource) str() ([]byte, error) {
	start := s.off + 1
	i := start
	escaped := false
	for i < len(s.data) {
		c := s.data[i]
		if c == '"' {
			break
		}
		if c == '\\' {
			escaped = true
			i += 2
			continue
		}
		if c < 0x20 {
			return nil, fmt.Errorf("control character %#02x in string at offset %d", c, i)
		}
		i++
	}
	if i >= len(s.data) {
		return nil, fmt.Errorf("unterminated string: %w", io.ErrUnexpectedEOF)
	}
	raw := s.data[start:i]
	s.off = i + 1
	if escaped {
		return s.unescape(raw, start)
	}
	return raw, nil
}

// unescape decodes the escapes of raw (the contents of a string starting at
// offset start) into s.scratch.
func (s *jsonSource) unescape(raw []byte, start int) ([]byte, error) {
	out := s.scratch[:0]
	bad := func() error { return fmt.Errorf("invalid escape in string at offset %d", start) }
	for i := 0; i < len(raw); {
		c := raw[i]
		if c != '\\' {
			out = append(out, c)
			i++
			continue
		}
		if i+1 >= len(raw) {
			return nil, bad()
		}
		switch raw[i+1] {
		case '"', '\\', '/':
			out = append(out, raw[i+1])
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := hex4(raw[i+2:])
			if !ok {
				return nil, bad()
			}
			i += 6
			if utf16.IsSurrogate(r) {
				// A high surrogate must be followed by an escaped low one.
				if i+1 >= len(raw) || raw[i] != '\\' || raw[i+1] != 'u' {
					return nil, bad()
				}
				lo, ok := hex4(raw[i+2:])
				if !ok {
					return nil, bad()
				}
				if r = utf16.DecodeRune(r, lo); r == utf8.RuneError {
					return nil, bad()
				}
				i += 6
			}
			out = utf8.AppendRune(out, r)
			continue
		default:
			return nil, bad()
		}
		i += 2
	}
	s.scratch = out
	return out, nil
}

// hex4 parses the four hex digits of a \u escape.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	return r, true
}

// AppendBlockJSON appends the canonical JSON encoding of b (described above)
// to dst, without a trailing newline. It does not validate b: a block that
// fails ValidateBlock encodes, but does not decode again. An address that is
// not UTF-8 has its invalid bytes replaced by U+FFFD.
func AppendBlockJSON(dst []byte, b *Block) []byte {
	dst = append(dst, `{"height":`...)
	dst = strconv.AppendUint(dst, b.Height, 10)
	dst = appendJSONHex(append(dst, `,"hash":`...), b.Hash[:])
	if !b.PrevHash.IsZero() {
		dst = appendJSONHex(append(dst, `,"prev_hash":`...), b.PrevHash[:])
	}
	if b.Time != 0 {
		dst = strconv.AppendInt(append(dst, `,"time":`...), b.Time, 10)
	}
	if b.Slot != 0 {
		dst = strconv.AppendUint(append(dst, `,"slot":`...), b.Slot, 10)
	}
	dst = append(dst, `,"txs":[`...)
	for i := range b.Txs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendTxJSON(dst, &b.Txs[i])
	}
	return append(dst, "]}"...)
}

func appendTxJSON(dst []byte, tx *Tx) []byte {
	dst = appendJSONHex(append(dst, `{"hash":`...), tx.Hash[:])
	dst = appendOutPointsJSON(append(dst, `,"inputs":`...), tx.Inputs)
	dst = append(dst, `,"outputs":[`...)
	for i := range tx.Outputs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendOutputJSON(dst, &tx.Outputs[i])
	}
	dst = append(dst, ']')
	if len(tx.CollateralInputs) > 0 {
		dst = appendOutPointsJSON(append(dst, `,"collateral_inputs":`...), tx.CollateralInputs)
	}
	if tx.CollateralReturn != nil {
		dst = appendOutputJSON(append(dst, `,"collateral_return":`...), tx.CollateralReturn)
	}
	if tx.Invalid {
		dst = append(dst, `,"valid":false`...)
	}
	if tx.Coinbase {
		dst = append(dst, `,"coinbase":true`...)
	}
	return append(dst, '}')
}

func appendOutPointsJSON(dst []byte, ops []OutPoint) []byte {
	dst = append(dst, '[')
	for i, op := range ops {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONHex(append(dst, `{"tx_hash":`...), op.TxHash[:])
		dst = strconv.AppendUint(append(dst, `,"index":`...), uint64(op.Index), 10)
		dst = append(dst, '}')
	}
	return append(dst, ']')
}

func appendOutputJSON(dst []byte, o *Output) []byte {
	dst = appendJSONString(append(dst, `{"address":`...), o.Address)
	dst = strconv.AppendUint(append(dst, `,"value":`...), o.Value, 10)
	if len(o.Assets) > 0 {
		dst = append(dst, `,"assets":[`...)
		for i, a := range o.Assets {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONHex(append(dst, `{"policy":`...), a.Policy)
			dst = appendJSONHex(append(dst, `,"name":`...), a.Name)
			dst = strconv.AppendUint(append(dst, `,"quantity":`...), a.Quantity, 10)
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	if o.DatumHash != nil {
		dst = appendJSONHex(append(dst, `,"datum_hash":`...), o.DatumHash[:])
	}
	if len(o.Datum) > 0 {
		dst = appendJSONHex(append(dst, `,"datum":`...), o.Datum)
	}
	if len(o.ScriptRef) > 0 {
		dst = appendJSONHex(append(dst, `,"script_ref":`...), o.ScriptRef)
	}
	return append(dst, '}')
}

func appendJSONHex(dst, b []byte) []byte {
	dst = append(dst, '"')
	dst = hex.AppendEncode(dst, b)
	return append(dst, '"')
}

// appendJSONString appends s as a JSON string, escaping only what RFC 8259
// requires (quote, backslash, control characters).
func appendJSONString(dst []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				dst = append(dst, `\ufffd`...)
			} else {
				dst = append(dst, s[i:i+size]...)
			}
			i += size
			continue
		}
		switch {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c == '\n':
			dst = append(dst, `\n`...)
		case c == '\r':
			dst = append(dst, `\r`...)
		case c == '\t':
			dst = append(dst, `\t`...)
		case c < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		default:
			dst = append(dst, c)
		}
		i++
	}
	return append(dst, '"')
}

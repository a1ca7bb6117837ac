package textenc

import (
	"errors"
	"fmt"
)

// ErrBech32 is the class of every DecodeBech32 error.
var ErrBech32 = errors.New("textenc: not a valid bech32 string")

// bech32Rev maps a character to its 5-bit value, 0xff for a character
// outside the charset (either case).
var bech32Rev = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for i := 0; i < len(bech32Charset); i++ {
		c := bech32Charset[i]
		t[c] = byte(i)
		if c >= 'a' && c <= 'z' {
			t[c-'a'+'A'] = byte(i)
		}
	}
	return t
}()

// DecodeBech32 checks s (hrp, "1", the data, a 6-character checksum with
// constant: Bech32Const or Bech32mConst) and returns its human-readable part,
// in lower case, and its data regrouped into 8-bit bytes, appended to dst.
// There is no length limit (Cardano's addresses exceed BIP 173's 90
// characters); a string of mixed case, a character outside the charset, a
// bad checksum or non-zero padding bits is an error matching ErrBech32. The
// hrp aliases s when s is in lower case.
func DecodeBech32(s string, constant uint32, dst []byte) (hrp string, data []byte, err error) {
	sep := -1
	lower, upper := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 33 || c > 126 {
			return "", dst, fmt.Errorf("%w: character %d out of range", ErrBech32, i)
		}
		switch {
		case c >= 'a' && c <= 'z':
			lower = true
		case c >= 'A' && c <= 'Z':
			upper = true
		}
		if c == '1' {
			sep = i
		}
	}
	switch {
	case lower && upper:
		return "", dst, fmt.Errorf("%w: mixed case", ErrBech32)
	case sep < 1:
		return "", dst, fmt.Errorf("%w: no human-readable part", ErrBech32)
	case len(s)-sep-1 < 6:
		return "", dst, fmt.Errorf("%w: shorter than its checksum", ErrBech32)
	}
	hrp = s[:sep]
	if upper {
		b := []byte(hrp)
		for i, c := range b {
			if c >= 'A' && c <= 'Z' {
				b[i] = c - 'A' + 'a'
			}
		}
		hrp = string(b)
	}
	chk := uint32(1)
	for i := 0; i < len(hrp); i++ {
		chk = polymodStep(chk, hrp[i]>>5)
	}
	chk = polymodStep(chk, 0)
	for i := 0; i < len(hrp); i++ {
		chk = polymodStep(chk, hrp[i]&31)
	}
	payload := s[sep+1:]
	acc, bits := uint32(0), 0
	for i := 0; i < len(payload); i++ {
		v := bech32Rev[payload[i]]
		if v == 0xff {
			return "", dst, fmt.Errorf("%w: character %q outside the charset", ErrBech32, payload[i])
		}
		chk = polymodStep(chk, v)
		if i >= len(payload)-6 {
			continue // the checksum
		}
		acc = acc<<5 | uint32(v)
		bits += 5
		if bits >= 8 {
			bits -= 8
			dst = append(dst, byte(acc>>bits))
		}
	}
	if chk != constant {
		return "", dst, fmt.Errorf("%w: bad checksum", ErrBech32)
	}
	if bits >= 5 || acc&(1<<bits-1) != 0 {
		return "", dst, fmt.Errorf("%w: bad padding", ErrBech32)
	}
	return hrp, dst, nil
}

// polymodStep is one step of bech32Polymod: the generator terms of the
// five bits shifted out come from one table lookup (polymodGen) instead of
// five data-dependent branches, which a random address mispredicts.
func polymodStep(chk uint32, v byte) uint32 {
	return (chk&0x1ffffff)<<5 ^ uint32(v) ^ polymodGen[chk>>25]
}

// polymodGen[t] is the XOR of the generator's terms (bech32Gen) for the
// bits set in t, the five bits a step shifts out of the checksum.
var polymodGen = func() (t [32]uint32) {
	for top := range t {
		for i, g := range bech32Gen {
			if top>>i&1 != 0 {
				t[top] ^= g
			}
		}
	}
	return t
}()

package chain

import (
	"math/big"
	"math/bits"
)

// Uint128 is an unsigned 128-bit integer for sums of uint64 amounts. A sum of
// fewer than 2^64 uint64 values cannot overflow it, and a UTXO set never holds
// 2^64 outputs, so balances kept as Uint128 never overflow (docs/api.md).
type Uint128 struct {
	Hi, Lo uint64
}

// U128 widens v.
func U128(v uint64) Uint128 { return Uint128{Lo: v} }

// IsZero reports whether u == 0.
func (u Uint128) IsZero() bool { return u.Hi == 0 && u.Lo == 0 }

// AddU64 returns u + v. It wraps only past 2^128, which a sum of uint64
// amounts over a UTXO set never reaches.
func (u Uint128) AddU64(v uint64) Uint128 {
	lo, carry := bits.Add64(u.Lo, v, 0)
	return Uint128{Hi: u.Hi + carry, Lo: lo}
}

// Cmp returns -1, 0 or +1.
func (u Uint128) Cmp(v Uint128) int {
	switch {
	case u.Hi < v.Hi:
		return -1
	case u.Hi > v.Hi:
		return 1
	case u.Lo < v.Lo:
		return -1
	case u.Lo > v.Lo:
		return 1
	}
	return 0
}

// String renders u in decimal.
func (u Uint128) String() string {
	if u.Hi == 0 {
		return uitoa(u.Lo)
	}
	b := new(big.Int).SetUint64(u.Hi)
	b.Lsh(b, 64)
	b.Or(b, new(big.Int).SetUint64(u.Lo))
	return b.String()
}

func uitoa(v uint64) string {
	var buf [20]byte
	i := len(buf)
	for v >= 10 {
		i--
		buf[i] = byte('0' + v%10)
		v /= 10
	}
	i--
	buf[i] = byte('0' + v)
	return string(buf[i:])
}

// Add returns u + v, wrapping past 2^128 (unreachable for sums of uint64
// amounts over a UTXO set).
func (u Uint128) Add(v Uint128) Uint128 {
	lo, c := bits.Add64(u.Lo, v.Lo, 0)
	hi, _ := bits.Add64(u.Hi, v.Hi, c)
	return Uint128{Hi: hi, Lo: lo}
}

// Sub returns u - v and false when v > u.
func (u Uint128) Sub(v Uint128) (Uint128, bool) {
	lo, c := bits.Sub64(u.Lo, v.Lo, 0)
	hi, c2 := bits.Sub64(u.Hi, v.Hi, c)
	return Uint128{Hi: hi, Lo: lo}, c2 == 0
}

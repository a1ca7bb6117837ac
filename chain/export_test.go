package chain

import "math/bits"

// SubU64 returns u - v and whether it borrowed past zero (a corrupt balance).
func (u Uint128) SubU64(v uint64) (Uint128, bool) {
	lo, borrow := bits.Sub64(u.Lo, v, 0)
	hi, borrow2 := bits.Sub64(u.Hi, 0, borrow)
	return Uint128{Hi: hi, Lo: lo}, borrow2 != 0
}

package chain

import (
	"math"
	"testing"
)

func TestUint128AddU64(t *testing.T) {
	for _, tc := range []struct {
		u    Uint128
		v    uint64
		want Uint128
	}{
		{U128(0), 0, U128(0)},
		{U128(math.MaxUint64 - 1), 1, U128(math.MaxUint64)},
		{U128(math.MaxUint64), 1, Uint128{Hi: 1, Lo: 0}}, // 2^64
		{U128(math.MaxUint64), math.MaxUint64, Uint128{Hi: 1, Lo: math.MaxUint64 - 1}},
		{Uint128{Hi: 1, Lo: math.MaxUint64}, 1, Uint128{Hi: 2, Lo: 0}},
	} {
		if got := tc.u.AddU64(tc.v); got != tc.want {
			t.Errorf("%v + %d = %v, want %v", tc.u, tc.v, got, tc.want)
		}
	}
}

func TestUint128SubU64(t *testing.T) {
	for _, tc := range []struct {
		u      Uint128
		v      uint64
		want   Uint128
		borrow bool
	}{
		{U128(5), 5, U128(0), false},
		{Uint128{Hi: 1, Lo: 0}, 1, U128(math.MaxUint64), false}, // 2^64 - 1
		{Uint128{Hi: 1, Lo: 0}, math.MaxUint64, U128(1), false},
		{Uint128{Hi: 2, Lo: 3}, 4, Uint128{Hi: 1, Lo: math.MaxUint64}, false},
		{U128(0), 1, Uint128{Hi: math.MaxUint64, Lo: math.MaxUint64}, true},
		{U128(3), 4, Uint128{Hi: math.MaxUint64, Lo: math.MaxUint64}, true},
	} {
		got, borrow := tc.u.SubU64(tc.v)
		if got != tc.want || borrow != tc.borrow {
			t.Errorf("%v - %d = %v, %v; want %v, %v", tc.u, tc.v, got, borrow, tc.want, tc.borrow)
		}
	}
}

func TestUint128CmpString(t *testing.T) {
	two64 := Uint128{Hi: 1}
	ordered := []Uint128{U128(0), U128(1), U128(math.MaxUint64), two64, {Hi: 1, Lo: 1}, {Hi: math.MaxUint64, Lo: math.MaxUint64}}
	for i, a := range ordered {
		for j, b := range ordered {
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got := a.Cmp(b); got != want {
				t.Errorf("Cmp(%v, %v) = %d, want %d", a, b, got, want)
			}
		}
	}
	for _, tc := range []struct {
		u    Uint128
		want string
	}{
		{U128(0), "0"},
		{U128(math.MaxUint64), "18446744073709551615"},
		{two64, "18446744073709551616"},
		{Uint128{Hi: 1, Lo: 1}, "18446744073709551617"},
		{Uint128{Hi: math.MaxUint64, Lo: math.MaxUint64}, "340282366920938463463374607431768211455"},
	} {
		if got := tc.u.String(); got != tc.want {
			t.Errorf("String(%+v) = %s, want %s", tc.u, got, tc.want)
		}
	}
	if !U128(0).IsZero() || two64.IsZero() || U128(1).IsZero() {
		t.Error("IsZero")
	}
	// Summing 2^64 - 1 twice carries into Hi.
	if s := U128(0).AddU64(math.MaxUint64).AddU64(math.MaxUint64); s.String() != "36893488147419103230" {
		t.Errorf("sum = %s", s)
	}
}

func TestUint128AddSub(t *testing.T) {
	two64 := Uint128{Hi: 1}
	max := Uint128{Hi: math.MaxUint64, Lo: math.MaxUint64}
	for _, tc := range []struct {
		a, b, sum Uint128
	}{
		{U128(math.MaxUint64), U128(1), two64},
		{U128(math.MaxUint64), U128(math.MaxUint64), Uint128{Hi: 1, Lo: math.MaxUint64 - 1}},
		{two64, two64, Uint128{Hi: 2}},
		{Uint128{Hi: 1, Lo: math.MaxUint64}, U128(1), Uint128{Hi: 2}},
		{max, U128(1), U128(0)}, // wraps past 2^128
	} {
		if got := tc.a.Add(tc.b); got != tc.sum {
			t.Errorf("%v + %v = %v, want %v", tc.a, tc.b, got, tc.sum)
		}
		if got := tc.b.Add(tc.a); got != tc.sum {
			t.Errorf("%v + %v = %v, want %v (commuted)", tc.b, tc.a, got, tc.sum)
		}
	}
	for _, tc := range []struct {
		a, b, diff Uint128
		ok         bool
	}{
		{two64, U128(1), U128(math.MaxUint64), true},
		{two64, U128(math.MaxUint64), U128(1), true},
		{two64, two64, U128(0), true},
		{Uint128{Hi: 2}, two64, two64, true},
		{U128(math.MaxUint64), two64, max, false}, // 2^64-1 - 2^64 borrows
		{U128(0), U128(1), max, false},
	} {
		got, ok := tc.a.Sub(tc.b)
		if got != tc.diff || ok != tc.ok {
			t.Errorf("%v - %v = %v, %v; want %v, %v", tc.a, tc.b, got, ok, tc.diff, tc.ok)
		}
	}
}

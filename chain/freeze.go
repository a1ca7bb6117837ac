package chain

import (
	"errors"
	"fmt"
	"slices"
	"unicode/utf8"
)

// Frozen outpoints (docs/wallet-state.md): an operator marks live outputs
// frozen, with a reason, and later unfreezes them. A freeze is confirmed
// state, as a block is, but not chain state: it changes no output, so the
// UTXO count and digest (digest.go) do not see it.

// Bounds of a freeze or unfreeze request. A request names at most
// MaxFreezeOutPoints outpoints, each once; a reason holds 1 to
// MaxFreezeReasonLen bytes of UTF-8 without control characters (it is shown
// in logs and kept on every node).
const (
	MaxFreezeOutPoints = 1000
	MaxFreezeReasonLen = 256
)

// CoinbaseMaturity is how many blocks a coinbase output waits before a block
// may spend it: an output of a coinbase transaction in the block at height H
// may be spent from height H + CoinbaseMaturity on (Bitcoin's rule; the
// block format follows it; Cardano has no coinbase transactions).
const CoinbaseMaturity = 100

// SpendableAt returns the first height of a block that may spend u, and
// whether u has such a bound at all (only coinbase outputs do).
func (u *Utxo) SpendableAt() (uint64, bool) {
	if !u.Coinbase() {
		return 0, false
	}
	return u.Height + CoinbaseMaturity, true
}

// Freeze is a freeze or unfreeze: the outpoints, in request order, and, for
// a freeze, the reason.
type Freeze struct {
	OutPoints []OutPoint
	Reason    string // empty in an unfreeze
}

// ErrFrozen marks an operation refused because an output is frozen.
var ErrFrozen = errors.New("chain: output is frozen")

// Validate checks f's bounds: 1..MaxFreezeOutPoints distinct outpoints, and,
// when reason is true (a freeze), a reason within MaxFreezeReasonLen bytes
// of UTF-8 with no control characters; without it (an unfreeze) no reason.
// Errors match ErrInvalidArgument.
func (f *Freeze) Validate(reason bool) error {
	n := len(f.OutPoints)
	if n < 1 || n > MaxFreezeOutPoints {
		return fmt.Errorf("outpoints: %d, want 1..%d: %w", n, MaxFreezeOutPoints, ErrInvalidArgument)
	}
	sorted := slices.Clone(f.OutPoints)
	slices.SortFunc(sorted, CompareOutPoints)
	for i := 1; i < len(sorted); i++ {
		if sorted[i] == sorted[i-1] {
			return fmt.Errorf("outpoints: %s is named twice: %w", sorted[i], ErrInvalidArgument)
		}
	}
	if !reason {
		if f.Reason != "" {
			return fmt.Errorf("an unfreeze takes no reason: %w", ErrInvalidArgument)
		}
		return nil
	}
	switch {
	case f.Reason == "":
		return fmt.Errorf("reason: empty, say why: %w", ErrInvalidArgument)
	case len(f.Reason) > MaxFreezeReasonLen:
		return fmt.Errorf("reason: %d bytes, at most %d: %w", len(f.Reason), MaxFreezeReasonLen, ErrInvalidArgument)
	case !utf8.ValidString(f.Reason):
		return fmt.Errorf("reason: not UTF-8: %w", ErrInvalidArgument)
	}
	for _, c := range f.Reason {
		if c < 0x20 || c == 0x7f {
			return fmt.Errorf("reason: holds a control character: %w", ErrInvalidArgument)
		}
	}
	return nil
}

// CompareOutPoints orders outpoints by tx hash bytes, then index: the order
// of their keys in the store.
func CompareOutPoints(a, b OutPoint) int {
	for i := range a.TxHash {
		if a.TxHash[i] != b.TxHash[i] {
			if a.TxHash[i] < b.TxHash[i] {
				return -1
			}
			return 1
		}
	}
	switch {
	case a.Index < b.Index:
		return -1
	case a.Index > b.Index:
		return 1
	}
	return 0
}

// DecodeFreezeJSON decodes the body of POST /v1/frozen ({"outpoints": [...],
// "reason": "…"}, reason true) or DELETE /v1/frozen ({"outpoints": [...]}),
// strictly, as every request body (request.go), and checks its bounds
// (Freeze.Validate). Errors match ErrInvalidArgument; it never panics.
func DecodeFreezeJSON(data []byte, reason bool) (Freeze, error) {
	d := blockDecoder{src: &jsonSource{data: data}, invalid: ErrInvalidArgument}
	f, err := d.freeze(reason)
	if err == nil {
		err = d.end()
	}
	if errors.Is(err, ErrTooLarge) {
		return Freeze{}, fmt.Errorf("outpoints: more than %d: %w", MaxFreezeOutPoints, ErrInvalidArgument)
	}
	if err != nil {
		return Freeze{}, err
	}
	if err := f.Validate(reason); err != nil {
		return Freeze{}, err
	}
	return f, nil
}

func (d *blockDecoder) freeze(reason bool) (Freeze, error) {
	var f Freeze
	if err := d.src.objectStart(); err != nil {
		return f, d.fail(err)
	}
	var seen uint16
	for {
		key, ok, err := d.src.objectNext()
		if err != nil {
			return f, d.fail(err)
		}
		if !ok {
			break
		}
		switch {
		case string(key) == "outpoints":
			if err := d.enter(&seen, 0, "outpoints"); err != nil {
				return f, err
			}
			if f.OutPoints, err = d.outPoints(MaxFreezeOutPoints); err != nil {
				return f, err
			}
		case string(key) == "reason" && reason:
			if err := d.enter(&seen, 1, "reason"); err != nil {
				return f, err
			}
			if f.Reason, err = d.src.text(); err != nil {
				return f, d.fail(err)
			}
		default:
			return f, d.unknown(key)
		}
		d.path.pop()
	}
	required, names := uint16(1<<0), []string{"outpoints"}
	if reason {
		required, names = 1<<0|1<<1, []string{"outpoints", "reason"}
	}
	return f, d.checkRequired(seen, required, names)
}

package writer

import (
	"context"
	"fmt"

	"github.com/utxo-cache/utxo-cache/chain"
)

// freezeEstimate is the room the free-space guard asks for a freeze or
// unfreeze: a few hundred bytes per outpoint (its record and index rows
// written again, the freeze row, the log record), rounded up generously.
const freezeEstimate = 1 << 20

// Freeze freezes the live outputs f names, with f's reason, as one change of
// the commit sequence (docs/wallet-state.md): committed, then invalidated in
// the caches and published, like a block. Result.Applied is false when
// every outpoint was already frozen for that reason (nothing changed).
// Errors match chain.ErrInvalidArgument (f out of bounds) or
// chain.ErrUnknownInput (an outpoint that is not a live output), with
// nothing changed, or wrap a storage failure.
func (w *Writer) Freeze(ctx context.Context, f chain.Freeze) (Result, error) {
	if err := f.Validate(true); err != nil {
		return Result{}, err
	}
	return w.submit(ctx, request{freeze: &f})
}

// Unfreeze clears the freeze of the outpoints of f that are frozen, as one
// change; Result.Applied is false when none was. Errors match
// chain.ErrInvalidArgument, or wrap a storage failure.
func (w *Writer) Unfreeze(ctx context.Context, f chain.Freeze) (Result, error) {
	if err := f.Validate(false); err != nil {
		return Result{}, err
	}
	return w.submit(ctx, request{freeze: &f, unfreeze: true})
}

// setFrozen commits a freeze or an unfreeze. Writer goroutine only.
func (w *Writer) setFrozen(f *chain.Freeze, unfreeze bool) (Result, error) {
	st := w.store.State()
	if err := w.guard(freezeEstimate); err != nil {
		return Result{Tip: st.Tip, Seq: st.Seq}, fmt.Errorf("freeze: %w", err)
	}
	set := w.store.Freeze
	if unfreeze {
		set = w.store.Unfreeze
	}
	fr, err := set(*f)
	if err != nil || fr.Changes == nil {
		return Result{Tip: st.Tip, Seq: st.Seq}, err
	}
	cs := fr.Changes
	return Result{Applied: true, Tip: cs.NewTip, Seq: cs.Seq, Changes: cs}, nil
}

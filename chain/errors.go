package chain

import "errors"

// The contract's rejection classes (docs/api.md, "Error codes"). Producers wrap them
// with context (block height, tx, outpoint); consumers match with errors.Is,
// and the API maps each to one HTTP status and error code.
var (
	// ErrInvalidBlock: not decodable, a field missing or of the wrong type or size.
	ErrInvalidBlock = errors.New("invalid block")
	// ErrNotNextBlock: the block does not extend the tip.
	ErrNotNextBlock = errors.New("not the next block")
	// ErrUnknownInput: an input that is not a live unspent outpoint.
	ErrUnknownInput = errors.New("unknown input")
	// ErrDoubleSpend: the same outpoint spent twice in one block.
	ErrDoubleSpend = errors.New("double spend")
	// ErrDuplicateOutpoint: an output whose outpoint is already live.
	ErrDuplicateOutpoint = errors.New("duplicate outpoint")
	// ErrRollbackTooDeep: a rollback target below tip - rollback_window.
	ErrRollbackTooDeep = errors.New("rollback too deep")
	// ErrInvalidArgument: a malformed request value, a rollback target above
	// the tip or a hash not on the current chain.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrNotFound: no such outpoint (never existed, or its spent record was pruned).
	ErrNotFound = errors.New("not found")
	// ErrTooLarge: input over a configured size limit.
	ErrTooLarge = errors.New("too large")
)

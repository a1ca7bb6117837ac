package chain

import (
	"errors"
	"fmt"
	"slices"
)

// Pending transactions (docs/wallet-state.md#pending-transactions): a wallet
// backend posts the transactions it broadcast and that no block holds yet.
// The writer keeps them beside the confirmed state, in the commit sequence,
// until a block confirms them, a block spends one of their inputs with
// another transaction (conflicting), their poster withdraws them, or they
// expire.

// PendingStatus is what became of a pending transaction. The values are
// persisted (status rows): never renumber them.
type PendingStatus uint8

const (
	// PendingActive: in the pending set.
	PendingActive PendingStatus = 1
	// PendingConfirmed: a block holds it (PendingInfo.Height).
	PendingConfirmed PendingStatus = 2
	// PendingConflicting: a block or a replacement spent one of its inputs
	// (or an input of an ancestor) with another transaction
	// (PendingInfo.ConflictsWith).
	PendingConflicting PendingStatus = 3
	// PendingWithdrawn: its poster withdrew it (or an ancestor), or a
	// rollback found an input no longer live.
	PendingWithdrawn PendingStatus = 4
	// PendingExpired: it (or an ancestor) stayed pending past its expiry.
	PendingExpired PendingStatus = 5
)

func (s PendingStatus) String() string {
	switch s {
	case PendingActive:
		return "pending"
	case PendingConfirmed:
		return "confirmed"
	case PendingConflicting:
		return "conflicting"
	case PendingWithdrawn:
		return "withdrawn"
	case PendingExpired:
		return "expired"
	}
	return fmt.Sprintf("PendingStatus(%d)", uint8(s))
}

// DefaultPendingTTL is how long a pending transaction stays pending, in
// seconds, unless a node is configured otherwise: 14 days, Bitcoin Core's
// mempool expiry.
const DefaultPendingTTL = 14 * 24 * 3600

// PendingInfo is the status of one transaction the pending set knows or
// knew.
type PendingInfo struct {
	TxHash Hash
	Status PendingStatus
	// Height is the block that confirmed it (PendingConfirmed).
	Height uint64
	// ConflictsWith is the transaction that spent one of its inputs
	// (PendingConflicting); zero when a block's invalid transaction did.
	ConflictsWith Hash
	// Since is when it entered its status (unix seconds): the writer's
	// clock for a post, a withdrawal or an expiry, the block's time for a
	// confirmation or a conflict made by a block.
	Since uint64
	// Order is its posting order (pending only; also kept while it is
	// confirmed or conflicting, for a rollback to restore).
	Order uint64
}

var (
	// ErrConflict refuses a pending transaction that spends an output
	// another pending transaction already spends (a *ConflictError).
	ErrConflict = errors.New("chain: input already spent by a pending transaction")
	// ErrInsufficientStorage refuses a pending transaction over the pending
	// set's bounds (transactions or bytes): nothing is evicted for it.
	ErrInsufficientStorage = errors.New("chain: pending set is full")
)

// ConflictError names the pending transaction that already spends an
// input; it matches ErrConflict.
type ConflictError struct {
	OutPoint OutPoint
	Spender  Hash   // the pending transaction that spends it
	Input    uint32 // the spender's input that spends it
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("%s is already spent by pending transaction %s (input %d)", e.OutPoint, e.Spender, e.Input)
}

// Is makes a ConflictError match ErrConflict.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// PendingPost is the body of POST /v1/pending: one transaction in the block
// format, and whether it replaces the pending transactions that spend its
// inputs.
type PendingPost struct {
	Tx      Tx
	Replace bool
}

// MaxPendingTxBytes bounds one pending transaction in the block format's
// CBOR: 1 MiB (a standard Bitcoin transaction is at most 400 kB of weight,
// a Cardano one 16 KiB).
const MaxPendingTxBytes = 1 << 20

// CheckPendingTx checks what a pending transaction must be beyond the block
// format's rules: a valid (not phase-2-invalid), non-coinbase transaction
// with 1 or more inputs, each named once. Errors match ErrInvalidArgument.
func CheckPendingTx(tx *Tx) error {
	if tx.Coinbase {
		return fmt.Errorf("a coinbase transaction cannot be pending: %w", ErrInvalidArgument)
	}
	if tx.Invalid {
		return fmt.Errorf("a pending transaction must be valid: %w", ErrInvalidArgument)
	}
	if len(tx.Inputs) == 0 {
		return fmt.Errorf("a pending transaction needs an input: %w", ErrInvalidArgument)
	}
	sorted := slices.Clone(tx.Inputs)
	slices.SortFunc(sorted, CompareOutPoints)
	for i := range sorted {
		if i > 0 && sorted[i] == sorted[i-1] {
			return fmt.Errorf("inputs: %s is spent twice: %w", sorted[i], ErrInvalidArgument)
		}
		if sorted[i].TxHash == tx.Hash {
			return fmt.Errorf("inputs: %s spends the transaction's own output: %w", sorted[i], ErrInvalidArgument)
		}
	}
	// Collateral inputs and return are kept as given: a block that holds
	// the transaction may use them; the pending set takes it as valid.
	return nil
}

// DecodePendingJSON decodes the JSON body of POST /v1/pending: a Tx of the
// block format with an optional "replace": bool, strictly, and checks it
// (ValidateTx within lim, CheckPendingTx). Errors match ErrInvalidArgument
// (or ErrTooLarge for a count over lim); it never panics.
func DecodePendingJSON(data []byte, lim Limits) (PendingPost, error) {
	return decodePending(&jsonSource{data: data}, lim)
}

// DecodePendingCBOR is DecodePendingJSON for the CBOR body (one data item,
// the block format's CBOR Tx with an optional "replace").
func DecodePendingCBOR(data []byte, lim Limits) (PendingPost, error) {
	return decodePending(&cborSource{data: data}, lim)
}

func decodePending(src tokenSource, lim Limits) (PendingPost, error) {
	lim = lim.EnsureDefaults()
	var p PendingPost
	d := blockDecoder{src: src, lim: lim, invalid: ErrInvalidArgument, replace: &p.Replace}
	if err := d.tx(&p.Tx); err != nil {
		return PendingPost{}, err
	}
	if err := d.end(); err != nil {
		return PendingPost{}, err
	}
	if err := ValidateTx(&p.Tx, lim); err != nil {
		return PendingPost{}, err
	}
	return p, CheckPendingTx(&p.Tx)
}

// ValidateTx checks one transaction against the block format's field rules
// and lim, as ValidateBlock checks each of a block's. Errors match
// ErrInvalidArgument, or ErrTooLarge for a count over lim.
func ValidateTx(tx *Tx, lim Limits) error {
	if err := validateTx(tx, lim.EnsureDefaults()); err != nil {
		if errors.Is(err, ErrTooLarge) {
			return err
		}
		return fmt.Errorf("%v: %w", err, ErrInvalidArgument)
	}
	return nil
}

// AppendTxCBOR appends tx in the block format's CBOR (one map, as inside a
// block's "txs"): the stored form of a pending transaction, in the store's
// rows and the change log. An output marked Unspendable (a Bitcoin
// OP_RETURN, which keeps its index) is written with an empty address, which
// no producer of the block format can send (its addresses are 1 to 1024
// bytes), and DecodeTxCBOR reads it back as Unspendable.
func AppendTxCBOR(dst []byte, tx *Tx) []byte { return appendTxCBOR(dst, tx) }

// DecodeTxCBOR decodes one transaction in AppendTxCBOR's form (one data
// item, nothing after it), strictly within lim, and validates it; an output
// with an empty address is Unspendable. Errors match ErrInvalidBlock (or
// ErrTooLarge); it never panics.
func DecodeTxCBOR(data []byte, lim Limits) (*Tx, error) {
	lim = lim.EnsureDefaults()
	d := blockDecoder{src: &cborSource{data: data}, lim: lim}
	tx := new(Tx)
	if err := d.tx(tx); err != nil {
		return nil, err
	}
	if err := d.end(); err != nil {
		return nil, err
	}
	for i := range tx.Outputs {
		if tx.Outputs[i].Address == "" {
			tx.Outputs[i].Unspendable = true
		}
	}
	if cr := tx.CollateralReturn; cr != nil && cr.Address == "" {
		cr.Unspendable = true
	}
	if err := validateTx(tx, lim); err != nil {
		return nil, err
	}
	return tx, nil
}

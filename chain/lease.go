package chain

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
)

// Leases (docs/wallet-state.md): a wallet backend holds live outputs for a
// while so that another instance does not select them. A lease has an id,
// its outpoints and an absolute expiry (unix seconds); it is written on the
// writer, in the commit sequence, and shown by every node.

// Bounds of a lease request.
const (
	// MaxLeaseOutPoints bounds the outpoints one request names.
	MaxLeaseOutPoints = 1000
	// MinLeaseTTL, MaxLeaseTTL and DefaultLeaseTTL are the bounds and the
	// default of ttl_seconds.
	MinLeaseTTL     = 1
	MaxLeaseTTL     = 86_400
	DefaultLeaseTTL = 600
	// MaxLeaseIDLen bounds a lease id: 1 to 64 characters of A-Z a-z 0-9
	// '-' '_' (URL-safe, so it can name the lease in a path).
	MaxLeaseIDLen = 64
)

// ErrLeased marks a lease refused because another lease holds an output.
var ErrLeased = errors.New("chain: output is leased")

// HeldOutPoint is an outpoint another lease holds, and until when (unix
// seconds).
type HeldOutPoint struct {
	OutPoint  OutPoint
	ExpiresAt uint64
}

// LeasedError refuses a lease because other leases hold some of its
// outpoints, which it lists; it matches ErrLeased.
type LeasedError struct {
	Held []HeldOutPoint
}

func (e *LeasedError) Error() string {
	if len(e.Held) == 0 {
		return ErrLeased.Error()
	}
	return fmt.Sprintf("%d outpoints are held by another lease (%s until %d first)", len(e.Held), e.Held[0].OutPoint, e.Held[0].ExpiresAt)
}

// Is makes a LeasedError match ErrLeased.
func (e *LeasedError) Is(target error) bool { return target == ErrLeased }

// LeaseRequest is the body of POST /v1/leases.
type LeaseRequest struct {
	// ID names the lease; empty asks for a generated one (NewLeaseID).
	ID        string
	OutPoints []OutPoint
	// TTL is ttl_seconds, MinLeaseTTL..MaxLeaseTTL; 0 means DefaultLeaseTTL.
	TTL uint32
}

// CheckLeaseID checks a lease id's length and characters. Errors match
// ErrInvalidArgument.
func CheckLeaseID(id string) error {
	if len(id) < 1 || len(id) > MaxLeaseIDLen {
		return fmt.Errorf("lease_id: %d characters, want 1..%d: %w", len(id), MaxLeaseIDLen, ErrInvalidArgument)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return fmt.Errorf("lease_id: character %d is not one of A-Z a-z 0-9 - _: %w", i, ErrInvalidArgument)
		}
	}
	return nil
}

// NewLeaseID returns a random lease id: 22 URL-safe characters holding 128
// random bits.
func NewLeaseID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// Validate checks r's bounds: a valid id when one is given, 1..
// MaxLeaseOutPoints distinct outpoints, a TTL of 0 (the default) or
// MinLeaseTTL..MaxLeaseTTL. Errors match ErrInvalidArgument.
func (r *LeaseRequest) Validate() error {
	if r.ID != "" {
		if err := CheckLeaseID(r.ID); err != nil {
			return err
		}
	}
	if err := checkDistinct(r.OutPoints, MaxLeaseOutPoints); err != nil {
		return err
	}
	if r.TTL != 0 && (r.TTL < MinLeaseTTL || r.TTL > MaxLeaseTTL) {
		return fmt.Errorf("ttl_seconds: %d, want %d..%d: %w", r.TTL, MinLeaseTTL, MaxLeaseTTL, ErrInvalidArgument)
	}
	return nil
}

// checkDistinct checks that ops holds 1..max outpoints, each once.
func checkDistinct(ops []OutPoint, max int) error {
	n := len(ops)
	if n < 1 || n > max {
		return fmt.Errorf("outpoints: %d, want 1..%d: %w", n, max, ErrInvalidArgument)
	}
	sorted := slices.Clone(ops)
	slices.SortFunc(sorted, CompareOutPoints)
	for i := 1; i < len(sorted); i++ {
		if sorted[i] == sorted[i-1] {
			return fmt.Errorf("outpoints: %s is named twice: %w", sorted[i], ErrInvalidArgument)
		}
	}
	return nil
}

// DecodeLeaseJSON decodes the body of POST /v1/leases ({"lease_id"?,
// "outpoints": [...], "ttl_seconds"?}) strictly, as every request body, and
// checks its bounds (LeaseRequest.Validate). Errors match
// ErrInvalidArgument; it never panics.
func DecodeLeaseJSON(data []byte) (LeaseRequest, error) {
	d := blockDecoder{src: &jsonSource{data: data}, invalid: ErrInvalidArgument}
	r, err := d.lease()
	if err == nil {
		err = d.end()
	}
	if errors.Is(err, ErrTooLarge) {
		return LeaseRequest{}, fmt.Errorf("outpoints: more than %d: %w", MaxLeaseOutPoints, ErrInvalidArgument)
	}
	if err != nil {
		return LeaseRequest{}, err
	}
	if err := r.Validate(); err != nil {
		return LeaseRequest{}, err
	}
	return r, nil
}

func (d *blockDecoder) lease() (LeaseRequest, error) {
	var r LeaseRequest
	if err := d.src.objectStart(); err != nil {
		return r, d.fail(err)
	}
	var seen uint16
	for {
		key, ok, err := d.src.objectNext()
		if err != nil {
			return r, d.fail(err)
		}
		if !ok {
			break
		}
		switch string(key) {
		case "outpoints":
			if err := d.enter(&seen, 0, "outpoints"); err != nil {
				return r, err
			}
			if r.OutPoints, err = d.outPoints(MaxLeaseOutPoints); err != nil {
				return r, err
			}
		case "lease_id":
			if err := d.enter(&seen, 1, "lease_id"); err != nil {
				return r, err
			}
			if r.ID, err = d.src.text(); err != nil {
				return r, d.fail(err)
			}
			if r.ID == "" {
				return r, fmt.Errorf("lease_id: empty: %w", ErrInvalidArgument)
			}
		case "ttl_seconds":
			if err := d.enter(&seen, 2, "ttl_seconds"); err != nil {
				return r, err
			}
			ttl, err := d.src.uint(MaxLeaseTTL)
			if err != nil {
				return r, fmt.Errorf("ttl_seconds: %v: %w", err, ErrInvalidArgument)
			}
			if ttl < MinLeaseTTL {
				return r, fmt.Errorf("ttl_seconds: %d, want %d..%d: %w", ttl, MinLeaseTTL, MaxLeaseTTL, ErrInvalidArgument)
			}
			r.TTL = uint32(ttl)
		default:
			return r, d.unknown(key)
		}
		d.path.pop()
	}
	return r, d.checkRequired(seen, 1<<0, []string{"outpoints"})
}

// WalletOpKind says what one operation of a wallet change did. The names
// are persisted in the change log.
type WalletOpKind uint8

const (
	// WalletLease granted or renewed a lease: its outpoints (those the
	// request named; a renewal keeps the ones it held) and its new expiry.
	WalletLease WalletOpKind = 1
	// WalletRelease ended a lease at its holder's request.
	WalletRelease WalletOpKind = 2
	// WalletExpire ended a lease whose expiry the writer's clock passed
	// (LeaseID), or a pending transaction's (TxHash).
	WalletExpire WalletOpKind = 3
	// WalletPost added a pending transaction (Tx, Replace, Since,
	// ExpiresAt): with Replace, the pending transactions spending its
	// inputs, and their descendants, became conflicting.
	WalletPost WalletOpKind = 4
	// WalletWithdraw withdrew a pending transaction (TxHash) and its
	// descendants.
	WalletWithdraw WalletOpKind = 5
)

func (k WalletOpKind) String() string {
	switch k {
	case WalletLease:
		return "lease"
	case WalletRelease:
		return "release"
	case WalletExpire:
		return "expire"
	case WalletPost:
		return "post"
	case WalletWithdraw:
		return "withdraw"
	}
	return fmt.Sprintf("WalletOpKind(%d)", uint8(k))
}

// WalletOp is one operation of a wallet change, as the writer decided it: a
// replica applies it to the same state and gets the same rows, without a
// clock.
type WalletOp struct {
	Kind WalletOpKind
	// LeaseID names the lease of a lease operation (lease, release, and an
	// expire of a lease); empty for the pending operations.
	LeaseID string
	// OutPoints are a lease's only. ExpiresAt (unix seconds) is a lease's
	// or a posted transaction's.
	OutPoints []OutPoint
	ExpiresAt uint64
	// Tx and Replace are a post's; Since (unix seconds, the writer's clock)
	// a post's or a withdraw's.
	Tx      *Tx
	Replace bool
	Since   uint64
	// TxHash names the transaction of a withdraw, or of an expire of a
	// pending transaction.
	TxHash Hash
}

// IsPending reports whether op is a pending-transaction operation (post,
// withdraw, or an expire that names a transaction).
func (op *WalletOp) IsPending() bool {
	return op.Kind == WalletPost || op.Kind == WalletWithdraw || op.Kind == WalletExpire && op.LeaseID == ""
}

// Validate checks op's shape. Errors match ErrInvalidArgument.
func (op *WalletOp) Validate() error {
	if op.IsPending() {
		return op.validatePending()
	}
	if op.Tx != nil || op.Replace || op.Since != 0 || !op.TxHash.IsZero() {
		return fmt.Errorf("%s of lease %s carries a transaction: %w", op.Kind, op.LeaseID, ErrInvalidArgument)
	}
	if err := CheckLeaseID(op.LeaseID); err != nil {
		return err
	}
	switch op.Kind {
	case WalletLease:
		if op.ExpiresAt == 0 {
			return fmt.Errorf("lease %s without an expiry: %w", op.LeaseID, ErrInvalidArgument)
		}
		return checkDistinct(op.OutPoints, MaxLeaseOutPoints)
	case WalletRelease, WalletExpire:
		if len(op.OutPoints) != 0 || op.ExpiresAt != 0 {
			return fmt.Errorf("%s of %s carries outpoints or an expiry: %w", op.Kind, op.LeaseID, ErrInvalidArgument)
		}
		return nil
	}
	return fmt.Errorf("wallet operation of kind %d: %w", op.Kind, ErrInvalidArgument)
}

func (op *WalletOp) validatePending() error {
	if op.LeaseID != "" || len(op.OutPoints) != 0 {
		return fmt.Errorf("%s of a pending transaction carries a lease: %w", op.Kind, ErrInvalidArgument)
	}
	switch op.Kind {
	case WalletPost:
		if op.Tx == nil || !op.TxHash.IsZero() || op.Since == 0 || op.ExpiresAt <= op.Since {
			return fmt.Errorf("post needs a transaction, since and a later expiry, and no tx_hash: %w", ErrInvalidArgument)
		}
		if err := ValidateTx(op.Tx, Limits{}); err != nil {
			return err
		}
		return CheckPendingTx(op.Tx)
	case WalletWithdraw:
		if op.Tx != nil || op.Replace || op.Since == 0 || op.ExpiresAt != 0 || op.TxHash.IsZero() {
			return fmt.Errorf("withdraw needs a tx_hash and since, and nothing else: %w", ErrInvalidArgument)
		}
		return nil
	default: // expire
		if op.Tx != nil || op.Replace || op.Since != 0 || op.ExpiresAt != 0 || op.TxHash.IsZero() {
			return fmt.Errorf("expire needs a tx_hash and nothing else: %w", ErrInvalidArgument)
		}
		return nil
	}
}

// MaxWalletOps bounds the operations of one wallet change (the writer's
// group commit takes at most this many requests).
const MaxWalletOps = 4096

package chain

import (
	"errors"
	"fmt"

	"github.com/fxamacker/cbor/v2"
)

// ChangeKind says what one change of the commit sequence did. The values are
// persisted (in the change log): never renumber them.
type ChangeKind uint8

const (
	// ChangeApply applied one block.
	ChangeApply ChangeKind = 1
	// ChangeRollback rolled the chain back to a target height.
	ChangeRollback ChangeKind = 2
	// ChangeFreeze froze live outputs (Change.Freeze): no chain change.
	ChangeFreeze ChangeKind = 3
	// ChangeUnfreeze unfroze outputs (Change.Freeze, no reason).
	ChangeUnfreeze ChangeKind = 4
	// ChangeWallet is a batch of wallet operations (Change.Wallet): leases
	// granted, renewed, released and expired. No chain change.
	ChangeWallet ChangeKind = 5
)

func (k ChangeKind) String() string {
	switch k {
	case ChangeApply:
		return "apply"
	case ChangeRollback:
		return "rollback"
	case ChangeFreeze:
		return "freeze"
	case ChangeUnfreeze:
		return "unfreeze"
	case ChangeWallet:
		return "wallet"
	}
	return fmt.Sprintf("ChangeKind(%d)", uint8(k))
}

// Summary is the state a change left: the figures a replica compares with
// its own after applying it.
type Summary struct {
	Tip       Tip
	UtxoCount uint64
	Digest    Digest
}

// Change is one change of the commit sequence, as the writer's change log
// keeps it and serves it to replicas (docs/replication.md#the-change-log; the
// wire record is specified below and in docs/replication.md#change-records).
type Change struct {
	Seq  uint64
	Kind ChangeKind
	// Block is the applied block (ChangeApply).
	Block *Block
	// Spent lists, for an apply, the outputs the block spent that were live
	// before it (an output created and spent inside the block is not
	// there: Block has it), in outpoint order (transaction hash bytes, then
	// index), each as the store held it. SpentKnown is false for a record
	// written before the log carried them: then Spent is empty and unknown.
	Spent      []Utxo
	SpentKnown bool
	// Target is the rollback's target (ChangeRollback): its height, and the
	// block there (Empty when the rollback went below the store's first
	// block, which empties the store).
	Target Tip
	// Freeze is what a freeze or unfreeze changed (ChangeFreeze,
	// ChangeUnfreeze): the outpoints whose frozen state it set, in the
	// writer's order, and the reason of a freeze.
	Freeze *Freeze
	// Wallet is the operations of a wallet change (ChangeWallet), in the
	// order the writer decided them.
	Wallet []WalletOp
	// Pending lists the pending transactions that entered or left the
	// pending set in the change (an apply, a rollback or a wallet change),
	// in the order the store moved them; empty when the set did not change.
	// A transaction may enter and leave in one change (a post evicted by a
	// later one of the same change, a transaction a rollback returns and
	// then withdraws), and leave and enter again.
	Pending []PendingMove
	After   Summary
}

// PendingMove is one pending transaction entering (Status PendingActive) or
// leaving (any other status: what became of it) the pending set, as the
// store held it: enough to derive what the move did to every address and
// index value without any other state.
type PendingMove struct {
	Tx     *Tx
	Status PendingStatus
	// Since is when the transaction was posted (unix seconds), as its
	// unconfirmed outputs show it.
	Since uint64
	// Spent is the output each input spends, one per input in input order,
	// as the store held it (an output of another pending transaction has
	// height 0).
	Spent []Utxo
}

// ErrInvalidChange marks a change-log record that does not decode or makes
// no sense.
var ErrInvalidChange = errors.New("chain: invalid change record")

// Change records on the wire, version 1: one RFC 8949 core deterministic CBOR
// map per change, and a change log is a CBOR sequence (RFC 8742) of them.
//
//	{
//	  "seq":    uint,                                   the change's commit sequence
//	  "kind":   "apply" | "rollback",
//	  "after":  {"tip": {"height": uint, "hash": bytes(32)} | null,
//	             "utxo_count": uint, "utxo_digest": bytes(32)},
//	  "block":  Block (as in docs/blocks.md, CBOR),     apply only
//	  "spent":  [[bytes(32), uint, uint, uint, uint, Output], …]
//	                                                    apply only: the outputs the block spent
//	                                                    that were live before it, in outpoint
//	                                                    order, each as [tx_hash, index, height,
//	                                                    tx_pos, flags, output (as in a block)];
//	                                                    absent in records written before it existed
//	  "target": {"height": uint, "hash": bytes(32)?}    rollback only; no hash when
//	                                                    the rollback empties the store
//	  "freeze": {"outpoints": [[bytes(32), uint], …],  freeze and unfreeze only
//	             "reason": text}                        (reason: freeze only)
//	  "wallet": [{"op": "lease" | "release" | "expire"  wallet only: its operations
//	                  | "post" | "withdraw",            in the writer's order
//	              "lease_id": text,                     lease operations only
//	              "outpoints": [[bytes(32), uint], …],  lease only
//	              "expires_at": uint,                   lease and post (unix seconds)
//	              "tx": Tx (as in a block, CBOR),       post only
//	              "replace": true,                      post only, when it replaces
//	              "since": uint,                        post and withdraw (unix seconds)
//	              "tx_hash": bytes(32)}, …]            withdraw, and expire of a
//	                                                    pending transaction
//	  "pending": [{"tx": Tx (as in a block, CBOR),     apply, rollback and wallet, when the
//	               "status": "pending" | "confirmed"    pending set changed: the transactions
//	                 | "conflicting" | "withdrawn"      that entered it ("pending") or left it
//	                 | "expired",                       (what became of them), in the store's
//	               "since": uint,                       order; since: when it was posted; spent:
//	               "spent": [[bytes(32), uint, uint,    the output each input spends, as "spent"
//	                          uint, uint, Output], …]}, above, in input order;
//	              …]                                    absent when the set did not change
//	}
//
// A freeze or unfreeze leaves the figures of "after" as they were: they
// describe confirmed outputs, which a freeze does not change. The kinds
// "freeze" and "unfreeze" came with format version 1 unchanged: a reader
// that predates them refuses the record (unknown kind) rather than skip it.
//
// Keys appear in core deterministic order (seq, kind, after, block, spent, freeze, target),
// so one change always has one encoding. A rollback record for tip 9 → 8:
//
//	a4 63 736571 0a                 "seq": 10
//	   64 6b696e64 68 726f6c6c6261636b   "kind": "rollback"
//	   65 6166746572 a3 …             "after": {…}
//	   66 746172676574 a2 …           "target": {"height": 8, "hash": …}
type changeOut struct {
	Seq    uint64          `cbor:"seq"`
	Kind   string          `cbor:"kind"`
	After  summaryOut      `cbor:"after"`
	Block  cbor.RawMessage `cbor:"block,omitempty"`
	Spent  *[]spentOut     `cbor:"spent,omitempty"` // nil: not known; empty: none
	Target *targetOut      `cbor:"target,omitempty"`
	Freeze *freezeOut      `cbor:"freeze,omitempty"`
	Wallet []walletOpOut   `cbor:"wallet,omitempty"`
	Moves  []moveOut       `cbor:"pending,omitempty"`
}

type moveOut struct {
	Tx     cbor.RawMessage `cbor:"tx"`
	Status string          `cbor:"status"`
	Since  uint64          `cbor:"since"`
	Spent  []spentOut      `cbor:"spent"`
}

type moveIn struct {
	Tx     cbor.RawMessage `cbor:"tx"`
	Status *string         `cbor:"status"`
	Since  *uint64         `cbor:"since"`
	Spent  *[]spentIn      `cbor:"spent"`
}

func appendSpentOut(dst []spentOut, us []Utxo) []spentOut {
	for i := range us {
		u := &us[i]
		dst = append(dst, spentOut{TxHash: u.TxHash[:], Index: u.Index, Height: u.Height, TxPos: u.TxPos, Flags: u.Flags,
			Output: appendOutputCBOR(nil, &u.Output)})
	}
	return dst
}

// decodeSpentIn decodes spent outputs into dst.
func decodeSpentIn(in []spentIn, lim Limits, dst []Utxo) error {
	for i := range in {
		sp, u := &in[i], &dst[i]
		if len(sp.TxHash) != HashSize {
			return fmt.Errorf("spent %d: tx hash of %d bytes", i, len(sp.TxHash))
		}
		copy(u.TxHash[:], sp.TxHash)
		u.Index, u.Height, u.TxPos, u.Flags = sp.Index, sp.Height, sp.TxPos, sp.Flags
		if err := decodeOutputCBOR(sp.Output, lim, &u.Output); err != nil {
			return fmt.Errorf("spent %d: %v", i, err)
		}
	}
	return nil
}

// pendingStatusOf parses a status name.
func pendingStatusOf(name string) (PendingStatus, bool) {
	for s := PendingActive; s <= PendingExpired; s++ {
		if s.String() == name {
			return s, true
		}
	}
	return 0, false
}

type walletOpOut struct {
	Op        string          `cbor:"op"`
	LeaseID   string          `cbor:"lease_id,omitempty"`
	OutPoints []outPointOut   `cbor:"outpoints,omitempty"`
	ExpiresAt uint64          `cbor:"expires_at,omitempty"`
	Tx        cbor.RawMessage `cbor:"tx,omitempty"`
	Replace   bool            `cbor:"replace,omitempty"`
	Since     uint64          `cbor:"since,omitempty"`
	TxHash    []byte          `cbor:"tx_hash,omitempty"`
}

// spentOut is one output an apply spent: [tx_hash, index, height, tx_pos,
// flags, output].
type spentOut struct {
	_      struct{} `cbor:",toarray"`
	TxHash []byte
	Index  uint32
	Height uint64
	TxPos  uint32
	Flags  uint8
	Output cbor.RawMessage
}

// freezeOut is the "freeze" member; each outpoint is a two-element array.
type freezeOut struct {
	OutPoints []outPointOut `cbor:"outpoints"`
	Reason    string        `cbor:"reason,omitempty"`
}

type outPointOut struct {
	_      struct{} `cbor:",toarray"`
	TxHash []byte
	Index  uint32
}

type summaryOut struct {
	Tip       *tipOut `cbor:"tip"` // nil encodes as null: the empty store
	UtxoCount uint64  `cbor:"utxo_count"`
	Digest    []byte  `cbor:"utxo_digest"`
}

type tipOut struct {
	Height uint64 `cbor:"height"`
	Hash   []byte `cbor:"hash"`
}

type targetOut struct {
	Height uint64 `cbor:"height"`
	Hash   []byte `cbor:"hash,omitempty"`
}

// AppendChangeCBOR appends the wire record of c.
func AppendChangeCBOR(dst []byte, c *Change) ([]byte, error) {
	out := changeOut{Seq: c.Seq, Kind: c.Kind.String()}
	out.After = summaryOut{UtxoCount: c.After.UtxoCount, Digest: c.After.Digest[:]}
	if !c.After.Tip.Empty {
		out.After.Tip = &tipOut{Height: c.After.Tip.Height, Hash: c.After.Tip.Hash[:]}
	}
	switch c.Kind {
	case ChangeApply:
		if c.Block == nil {
			return dst, fmt.Errorf("apply change %d without a block: %w", c.Seq, ErrInvalidChange)
		}
		out.Block = AppendBlockCBOR(nil, c.Block)
		if c.SpentKnown {
			// An empty list is written as such: the record says it knows.
			spent := make([]spentOut, len(c.Spent))
			out.Spent = &spent
			for i := range c.Spent {
				u := &c.Spent[i]
				spent[i] = spentOut{TxHash: u.TxHash[:], Index: u.Index, Height: u.Height, TxPos: u.TxPos, Flags: u.Flags,
					Output: appendOutputCBOR(nil, &u.Output)}
			}
		}
	case ChangeRollback:
		out.Target = &targetOut{Height: c.Target.Height}
		if !c.Target.Empty {
			out.Target.Hash = c.Target.Hash[:]
		}
	case ChangeFreeze, ChangeUnfreeze:
		if c.Freeze == nil || c.Freeze.Validate(c.Kind == ChangeFreeze) != nil {
			return dst, fmt.Errorf("%s change %d without a valid freeze: %w", c.Kind, c.Seq, ErrInvalidChange)
		}
		out.Freeze = &freezeOut{Reason: c.Freeze.Reason, OutPoints: make([]outPointOut, len(c.Freeze.OutPoints))}
		for i, op := range c.Freeze.OutPoints {
			out.Freeze.OutPoints[i] = outPointOut{TxHash: op.TxHash[:], Index: op.Index}
		}
	case ChangeWallet:
		if len(c.Wallet) == 0 || len(c.Wallet) > MaxWalletOps {
			return dst, fmt.Errorf("wallet change %d with %d operations: %w", c.Seq, len(c.Wallet), ErrInvalidChange)
		}
		out.Wallet = make([]walletOpOut, len(c.Wallet))
		for i := range c.Wallet {
			op := &c.Wallet[i]
			if err := op.Validate(); err != nil {
				return dst, fmt.Errorf("wallet change %d: %v: %w", c.Seq, err, ErrInvalidChange)
			}
			o := walletOpOut{Op: op.Kind.String(), LeaseID: op.LeaseID, ExpiresAt: op.ExpiresAt, Replace: op.Replace, Since: op.Since}
			if op.Tx != nil {
				o.Tx = appendTxCBOR(nil, op.Tx)
			}
			if !op.TxHash.IsZero() {
				o.TxHash = op.TxHash[:]
			}
			for _, p := range op.OutPoints {
				o.OutPoints = append(o.OutPoints, outPointOut{TxHash: p.TxHash[:], Index: p.Index})
			}
			out.Wallet[i] = o
		}
	default:
		return dst, fmt.Errorf("change %d of kind %d: %w", c.Seq, c.Kind, ErrInvalidChange)
	}
	if len(c.Pending) > 0 {
		if c.Kind == ChangeFreeze || c.Kind == ChangeUnfreeze {
			return dst, fmt.Errorf("%s change %d with pending moves: %w", c.Kind, c.Seq, ErrInvalidChange)
		}
		out.Moves = make([]moveOut, len(c.Pending))
		for i := range c.Pending {
			mv := &c.Pending[i]
			if mv.Tx == nil || len(mv.Spent) != len(mv.Tx.Inputs) || mv.Status < PendingActive || mv.Status > PendingExpired {
				return dst, fmt.Errorf("change %d: pending move %d needs a tx, a status and one spent output per input: %w", c.Seq, i, ErrInvalidChange)
			}
			out.Moves[i] = moveOut{Tx: appendTxCBOR(nil, mv.Tx), Status: mv.Status.String(), Since: mv.Since,
				Spent: appendSpentOut(make([]spentOut, 0, len(mv.Spent)), mv.Spent)}
		}
	}
	b, err := MarshalDeterministic(&out)
	if err != nil {
		return dst, err
	}
	return append(dst, b...), nil
}

// changeIn is the strict wire struct: presence is checked field by field.
type changeIn struct {
	Seq    *uint64         `cbor:"seq"`
	Kind   *string         `cbor:"kind"`
	After  *summaryIn      `cbor:"after"`
	Block  cbor.RawMessage `cbor:"block"`
	Spent  *[]spentIn      `cbor:"spent"`
	Target *targetIn       `cbor:"target"`
	Freeze *freezeIn       `cbor:"freeze"`
	Wallet []walletOpIn    `cbor:"wallet"`
	Moves  []moveIn        `cbor:"pending"`
}

type walletOpIn struct {
	Op        *string         `cbor:"op"`
	LeaseID   *string         `cbor:"lease_id"`
	OutPoints []outPointIn    `cbor:"outpoints"`
	ExpiresAt uint64          `cbor:"expires_at"`
	Tx        cbor.RawMessage `cbor:"tx"`
	Replace   bool            `cbor:"replace"`
	Since     uint64          `cbor:"since"`
	TxHash    []byte          `cbor:"tx_hash"`
}

type spentIn struct {
	_      struct{} `cbor:",toarray"`
	TxHash []byte
	Index  uint32
	Height uint64
	TxPos  uint32
	Flags  uint8
	Output cbor.RawMessage
}

type freezeIn struct {
	OutPoints []outPointIn `cbor:"outpoints"`
	Reason    *string      `cbor:"reason"`
}

type outPointIn struct {
	_      struct{} `cbor:",toarray"`
	TxHash []byte
	Index  uint32
}

type summaryIn struct {
	Tip       cbor.RawMessage `cbor:"tip"`
	UtxoCount *uint64         `cbor:"utxo_count"`
	Digest    []byte          `cbor:"utxo_digest"`
}

type tipIn struct {
	Height *uint64 `cbor:"height"`
	Hash   []byte  `cbor:"hash"`
}

type targetIn struct {
	Height *uint64 `cbor:"height"`
	Hash   []byte  `cbor:"hash"`
}

// changeDecMode is strict: duplicate keys, unknown fields, indefinite
// lengths and tags are errors.
var changeDecMode = func() cbor.DecMode {
	dm, err := cbor.DecOptions{
		DupMapKey:         cbor.DupMapKeyEnforcedAPF,
		IndefLength:       cbor.IndefLengthForbidden,
		TagsMd:            cbor.TagsForbidden,
		ExtraReturnErrors: cbor.ExtraDecErrorUnknownField,
		MaxNestedLevels:   64,
		MaxArrayElements:  1 << 20,
		MaxMapPairs:       1 << 20,
	}.DecMode()
	if err != nil {
		panic(fmt.Sprintf("chain: change decoder options: %v", err))
	}
	return dm
}()

// DecodeChangeCBOR decodes the first change record of data (a CBOR sequence)
// and returns the bytes after it. The block is decoded strictly within lim.
// Errors match ErrInvalidChange (or ErrInvalidBlock, ErrTooLarge for the
// block) and never panic.
func DecodeChangeCBOR(data []byte, lim Limits) (*Change, []byte, error) {
	var in changeIn
	rest, err := changeDecMode.UnmarshalFirst(data, &in)
	if err != nil {
		return nil, data, fmt.Errorf("%v: %w", err, ErrInvalidChange)
	}
	bad := func(format string, args ...any) (*Change, []byte, error) {
		return nil, data, fmt.Errorf("change: "+format+": %w", append(args, ErrInvalidChange)...)
	}
	if in.Seq == nil || in.Kind == nil || in.After == nil {
		return bad("seq, kind and after are required")
	}
	c := &Change{Seq: *in.Seq}
	if in.After.UtxoCount == nil || len(in.After.Digest) != len(c.After.Digest) {
		return bad("change %d: after needs utxo_count and a 32-byte utxo_digest", c.Seq)
	}
	c.After.UtxoCount = *in.After.UtxoCount
	copy(c.After.Digest[:], in.After.Digest)
	if len(in.After.Tip) == 0 {
		return bad("change %d: after.tip is required", c.Seq)
	}
	if in.After.Tip[0] == 0xf6 && len(in.After.Tip) == 1 { // null: the empty store
		c.After.Tip = Tip{Empty: true}
	} else {
		var t tipIn
		if err := changeDecMode.Unmarshal(in.After.Tip, &t); err != nil {
			return bad("change %d: after.tip: %v", c.Seq, err)
		}
		if t.Height == nil || len(t.Hash) != HashSize {
			return bad("change %d: after.tip needs a height and a 32-byte hash", c.Seq)
		}
		c.After.Tip.Height = *t.Height
		copy(c.After.Tip.Hash[:], t.Hash)
	}
	switch *in.Kind {
	case "apply":
		c.Kind = ChangeApply
		if len(in.Block) == 0 || in.Target != nil || in.Freeze != nil || in.Wallet != nil {
			return bad("change %d: apply needs a block and no target", c.Seq)
		}
		b, err := DecodeBlockCBOR(in.Block, lim)
		if err != nil {
			return nil, data, fmt.Errorf("change %d: block: %w", c.Seq, err)
		}
		c.Block = b
		if in.Spent != nil {
			c.SpentKnown = true
			c.Spent = make([]Utxo, len(*in.Spent))
			for i := range *in.Spent {
				sp, u := &(*in.Spent)[i], &c.Spent[i]
				if len(sp.TxHash) != HashSize {
					return bad("change %d: spent %d: tx hash of %d bytes", c.Seq, i, len(sp.TxHash))
				}
				copy(u.TxHash[:], sp.TxHash)
				u.Index, u.Height, u.TxPos, u.Flags = sp.Index, sp.Height, sp.TxPos, sp.Flags
				if err := decodeOutputCBOR(sp.Output, lim, &u.Output); err != nil {
					return bad("change %d: spent %d: %v", c.Seq, i, err)
				}
				if i > 0 && CompareOutPoints(c.Spent[i-1].OutPoint, u.OutPoint) >= 0 {
					return bad("change %d: spent %d is out of outpoint order", c.Seq, i)
				}
			}
		}
	case "rollback":
		c.Kind = ChangeRollback
		if len(in.Block) != 0 || in.Target == nil || in.Target.Height == nil || in.Freeze != nil || in.Wallet != nil || in.Spent != nil {
			return bad("change %d: rollback needs a target height and no block", c.Seq)
		}
		c.Target.Height = *in.Target.Height
		switch len(in.Target.Hash) {
		case 0:
			c.Target.Empty = true
		case HashSize:
			copy(c.Target.Hash[:], in.Target.Hash)
		default:
			return bad("change %d: target hash of %d bytes", c.Seq, len(in.Target.Hash))
		}
	case "freeze", "unfreeze":
		c.Kind = ChangeFreeze
		if *in.Kind == "unfreeze" {
			c.Kind = ChangeUnfreeze
		}
		if len(in.Block) != 0 || in.Target != nil || in.Freeze == nil || in.Wallet != nil || in.Spent != nil {
			return bad("change %d: %s needs a freeze and no block or target", c.Seq, *in.Kind)
		}
		f := &Freeze{OutPoints: make([]OutPoint, len(in.Freeze.OutPoints))}
		for i, op := range in.Freeze.OutPoints {
			if len(op.TxHash) != HashSize {
				return bad("change %d: freeze outpoint %d: tx hash of %d bytes", c.Seq, i, len(op.TxHash))
			}
			copy(f.OutPoints[i].TxHash[:], op.TxHash)
			f.OutPoints[i].Index = op.Index
		}
		if in.Freeze.Reason != nil {
			if c.Kind == ChangeUnfreeze || *in.Freeze.Reason == "" {
				return bad("change %d: %s with a reason it cannot have", c.Seq, *in.Kind)
			}
			f.Reason = *in.Freeze.Reason
		}
		if err := f.Validate(c.Kind == ChangeFreeze); err != nil {
			return bad("change %d: %v", c.Seq, err)
		}
		c.Freeze = f
	case "wallet":
		c.Kind = ChangeWallet
		if len(in.Block) != 0 || in.Target != nil || in.Freeze != nil || in.Spent != nil || len(in.Wallet) == 0 || len(in.Wallet) > MaxWalletOps {
			return bad("change %d: wallet needs 1..%d operations and no block, target or freeze", c.Seq, MaxWalletOps)
		}
		c.Wallet = make([]WalletOp, len(in.Wallet))
		for i, o := range in.Wallet {
			if o.Op == nil {
				return bad("change %d: wallet operation %d needs op", c.Seq, i)
			}
			op := &c.Wallet[i]
			switch *o.Op {
			case "lease":
				op.Kind = WalletLease
			case "release":
				op.Kind = WalletRelease
			case "expire":
				op.Kind = WalletExpire
			case "post":
				op.Kind = WalletPost
			case "withdraw":
				op.Kind = WalletWithdraw
			default:
				return bad("change %d: wallet operation %d: unknown op %q", c.Seq, i, *o.Op)
			}
			if o.LeaseID != nil {
				if *o.LeaseID == "" {
					return bad("change %d: wallet operation %d: empty lease_id", c.Seq, i)
				}
				op.LeaseID = *o.LeaseID
			}
			op.ExpiresAt, op.Replace, op.Since = o.ExpiresAt, o.Replace, o.Since
			if o.Tx != nil {
				tx, err := DecodeTxCBOR(o.Tx, lim)
				if err != nil {
					return bad("change %d: wallet operation %d: tx: %v", c.Seq, i, err)
				}
				op.Tx = tx
			}
			if o.TxHash != nil {
				if len(o.TxHash) != HashSize {
					return bad("change %d: wallet operation %d: tx_hash of %d bytes", c.Seq, i, len(o.TxHash))
				}
				copy(op.TxHash[:], o.TxHash)
				if op.TxHash.IsZero() {
					return bad("change %d: wallet operation %d: zero tx_hash", c.Seq, i)
				}
			}
			if o.OutPoints != nil {
				op.OutPoints = make([]OutPoint, len(o.OutPoints))
			}
			for j, p := range o.OutPoints {
				if len(p.TxHash) != HashSize {
					return bad("change %d: wallet operation %d outpoint %d: tx hash of %d bytes", c.Seq, i, j, len(p.TxHash))
				}
				copy(op.OutPoints[j].TxHash[:], p.TxHash)
				op.OutPoints[j].Index = p.Index
			}
			if err := op.Validate(); err != nil {
				return bad("change %d: wallet operation %d: %v", c.Seq, i, err)
			}
		}
	default:
		return bad("change %d: unknown kind %q", c.Seq, *in.Kind)
	}
	if in.Moves != nil {
		if len(in.Moves) == 0 || c.Kind == ChangeFreeze || c.Kind == ChangeUnfreeze {
			return bad("change %d: %s with %d pending moves", c.Seq, c.Kind, len(in.Moves))
		}
		c.Pending = make([]PendingMove, len(in.Moves))
		for i := range in.Moves {
			mi, mv := &in.Moves[i], &c.Pending[i]
			if len(mi.Tx) == 0 || mi.Status == nil || mi.Since == nil || mi.Spent == nil {
				return bad("change %d: pending move %d needs tx, status, since and spent", c.Seq, i)
			}
			st, ok := pendingStatusOf(*mi.Status)
			if !ok {
				return bad("change %d: pending move %d: unknown status %q", c.Seq, i, *mi.Status)
			}
			tx, err := DecodeTxCBOR(mi.Tx, lim)
			if err != nil {
				return bad("change %d: pending move %d: tx: %v", c.Seq, i, err)
			}
			if len(*mi.Spent) != len(tx.Inputs) {
				return bad("change %d: pending move %d: %d spent outputs for %d inputs", c.Seq, i, len(*mi.Spent), len(tx.Inputs))
			}
			mv.Tx, mv.Status, mv.Since = tx, st, *mi.Since
			mv.Spent = make([]Utxo, len(tx.Inputs))
			if err := decodeSpentIn(*mi.Spent, lim, mv.Spent); err != nil {
				return bad("change %d: pending move %d: %v", c.Seq, i, err)
			}
			for j := range mv.Spent {
				if mv.Spent[j].OutPoint != tx.Inputs[j] {
					return bad("change %d: pending move %d: spent %d is not input %d's output", c.Seq, i, j, j)
				}
			}
		}
	}
	return c, rest, nil
}

// decodeOutputCBOR decodes into o one output, as a block carries it, from
// data (one CBOR item, nothing after it), strictly within lim, and validates
// it as a block's output.
func decodeOutputCBOR(data []byte, lim Limits, o *Output) error {
	lim = lim.EnsureDefaults()
	d := blockDecoder{src: &cborSource{data: data}, lim: lim}
	if err := d.output(o); err != nil {
		return err
	}
	if err := d.end(); err != nil {
		return err
	}
	return validateOutput(o, lim)
}

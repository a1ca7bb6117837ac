package writer

import (
	"context"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

// Pending transactions (docs/wallet-state.md#pending-transactions) share
// the leases' queue and group commit (lease.go): a post or a withdrawal is
// one wallet request, decided on the writer goroutine against the committed
// state and the requests decided before it in the same change. The expiry
// sweep (Options.LeaseSweep) ends expired pending transactions with the
// expired leases.
//
// Post and Withdraw are the writer-level entry points for every producer of
// pending transactions: the API's POST and DELETE /v1/pending, and a
// follower mirroring its node's mempool.

// PendingResult answers a Post or a Withdraw.
type PendingResult struct {
	TxHash chain.Hash
	// Changed is false when the request changed nothing: a post of a
	// transaction already pending, a withdrawal of one that is not.
	Changed bool
	Seq     uint64 // the change that holds it (the current seq when unchanged)
	Tip     chain.Tip
}

// Post adds p.Tx to the pending set at the writer's clock (its expiry is
// the store's Pending.TTL later), as part of one wallet change. Posting a
// transaction already pending changes nothing and succeeds. Errors match
// chain.ErrInvalidArgument (not a transaction that can be pending),
// chain.ErrUnknownInput (an input neither live nor an output of a pending
// transaction), chain.ErrConflict (a *chain.ConflictError naming the
// pending spender; not with p.Replace, which evicts it and its descendants
// instead), chain.ErrInsufficientStorage (over the pending set's bounds),
// with nothing changed, or wrap a storage failure.
func (w *Writer) Post(ctx context.Context, p chain.PendingPost) (PendingResult, error) {
	if err := chain.CheckPendingTx(&p.Tx); err != nil {
		return PendingResult{}, err
	}
	rep, err := w.submitWallet(ctx, disk.WalletRequest{Post: &p})
	if err != nil {
		return PendingResult{}, err
	}
	return PendingResult{TxHash: p.Tx.Hash, Changed: rep.out.Changed, Seq: rep.res.Seq, Tip: rep.res.Tip}, nil
}

// Withdraw withdraws pending transaction h and its descendants (status
// withdrawn), or changes nothing when h is not pending (Changed false).
func (w *Writer) Withdraw(ctx context.Context, h chain.Hash) (PendingResult, error) {
	rep, err := w.submitWallet(ctx, disk.WalletRequest{Withdraw: &h})
	if err != nil {
		return PendingResult{}, err
	}
	return PendingResult{TxHash: h, Changed: rep.out.Changed, Seq: rep.res.Seq, Tip: rep.res.Tip}, nil
}

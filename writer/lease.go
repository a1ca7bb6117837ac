package writer

import (
	"context"
	"fmt"
	"time"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

// Leases (docs/wallet-state.md): wallet requests are decided and committed
// on the writer goroutine, many to a change (group commit): the goroutine
// takes the wallet request in hand and every one already waiting, up to
// maxWalletBatch requests or maxWalletBatchOutPoints outpoints, decides them one by one against the committed state and
// the ones decided before them (disk.Store.Wallet), and commits the
// accepted ones as one wallet change: one synced batch, one seq, which
// each answer carries. While that batch syncs, the next requests queue up,
// so the batch grows with the load and a lone request waits for no timer.
// Of two overlapping lease requests, whichever the goroutine decides first
// wins; the other finds the outpoints held.

// maxWalletBatch bounds the requests of one wallet change, and
// maxWalletBatchOutPoints the outpoints they name (past it the batch takes no
// more requests): a change record stays well under a megabyte (about 40
// bytes an outpoint), far below what a replica reads of one change.
const (
	maxWalletBatch          = 1000
	maxWalletBatchOutPoints = 10_000
)

// walletQueueLength is how many wallet requests may wait for the writer
// goroutine before a caller blocks.
const walletQueueLength = 4096

// walletEstimate is the room the free-space guard asks for a wallet change:
// a few hundred bytes per outpoint, for up to maxWalletBatch requests of
// chain.MaxLeaseOutPoints each would be far more, but a batch is mostly
// small; rounded up generously.
const walletEstimate = 4 << 20

// DefaultLeaseSweep is how often the writer ends the leases its clock has
// expired (Options.LeaseSweep).
const DefaultLeaseSweep = time.Second

type walletRequest struct {
	ctx   context.Context
	req   disk.WalletRequest
	reply chan walletReply
}

type walletReply struct {
	out disk.WalletOutcome
	res Result
	err error
}

// LeaseResult answers a Lease.
type LeaseResult struct {
	LeaseID   string
	ExpiresAt uint64 // unix seconds
	Seq       uint64 // the change that granted it
	Tip       chain.Tip
}

// Lease grants, renews or extends the lease r asks for, at the writer's
// clock (Options.Now), as part of one wallet change. Errors match
// chain.ErrInvalidArgument (r out of bounds), chain.ErrUnknownInput (an
// outpoint that is not a live output), chain.ErrFrozen, chain.ErrLeased
// (a *disk.LeasedError naming each outpoint another lease holds), with
// nothing changed, or wrap a storage failure.
func (w *Writer) Lease(ctx context.Context, r chain.LeaseRequest) (LeaseResult, error) {
	if err := r.Validate(); err != nil {
		return LeaseResult{}, err
	}
	rep, err := w.submitWallet(ctx, disk.WalletRequest{Lease: &r})
	if err != nil {
		return LeaseResult{}, err
	}
	return LeaseResult{LeaseID: rep.out.LeaseID, ExpiresAt: rep.out.ExpiresAt, Seq: rep.res.Seq, Tip: rep.res.Tip}, nil
}

// Release ends lease id, or changes nothing when there is no such lease
// (Result.Applied false): an idempotent delete.
func (w *Writer) Release(ctx context.Context, id string) (Result, error) {
	if err := chain.CheckLeaseID(id); err != nil {
		return Result{}, err
	}
	rep, err := w.submitWallet(ctx, disk.WalletRequest{Release: id})
	return rep.res, err
}

// ExpireLeases ends every lease whose expiry is at or before the writer's
// clock, as one change (Result.Applied false when none has expired). The
// writer does this itself every Options.LeaseSweep.
func (w *Writer) ExpireLeases(ctx context.Context) (Result, error) {
	rep, err := w.submitWallet(ctx, disk.WalletRequest{Expire: true})
	return rep.res, err
}

// ApplyWallet applies ops, a wallet change of another writer's log, as one
// change: a replica's way to its writer's leases. Errors match
// chain.ErrInvalidArgument (an operation the state cannot take), or wrap a
// storage failure.
func (w *Writer) ApplyWallet(ctx context.Context, ops []chain.WalletOp) (Result, error) {
	return w.submit(ctx, request{wallet: ops})
}

func (w *Writer) submitWallet(ctx context.Context, r disk.WalletRequest) (walletReply, error) {
	wr := walletRequest{ctx: ctx, req: r, reply: make(chan walletReply, 1)}
	select {
	case <-w.stop:
		return walletReply{}, ErrClosed
	default:
	}
	select {
	case w.wallet <- wr:
	case <-w.stop:
		return walletReply{}, ErrClosed
	case <-ctx.Done():
		return walletReply{}, ctx.Err()
	}
	rep := <-wr.reply
	if rep.err == nil {
		rep.err = rep.out.Err
	}
	return rep, rep.err
}

// now is the writer's clock in unix seconds.
func (w *Writer) now() uint64 {
	t := w.opts.Now().Unix()
	if t < 1 {
		return 1
	}
	return uint64(t)
}

// handleWallet takes first and every wallet request already waiting (up to
// maxWalletBatch), decides them and commits the accepted ones as one
// change, then answers each. Writer goroutine only.
func (w *Writer) handleWallet(first walletRequest) {
	batch := []walletRequest{first}
	outPoints := requestWeight(first.req)
more:
	for len(batch) < maxWalletBatch && outPoints < maxWalletBatchOutPoints {
		select {
		case r := <-w.wallet:
			batch = append(batch, r)
			outPoints += requestWeight(r.req)
		default:
			break more
		}
	}
	live := batch[:0]
	reqs := make([]disk.WalletRequest, 0, len(batch))
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.reply <- walletReply{err: err}
			continue
		}
		live = append(live, r)
		reqs = append(reqs, r.req)
	}
	if len(live) == 0 {
		return
	}
	st := w.store.State()
	fail := func(err error) {
		for _, r := range live {
			r.reply <- walletReply{res: Result{Tip: st.Tip, Seq: st.Seq}, err: err}
		}
	}
	if err := w.Failed(); err != nil {
		fail(err)
		return
	}
	if err := w.guard(walletEstimate); err != nil {
		fail(fmt.Errorf("wallet: %w", err))
		return
	}
	wr, err := w.store.Wallet(reqs, w.now())
	var res Result
	if err == nil && wr.Changes != nil {
		res = Result{Applied: true, Tip: wr.Changes.NewTip, Seq: wr.Changes.Seq, Changes: wr.Changes}
	}
	res, err = w.finish(res, err)
	if err != nil {
		fail(err)
		return
	}
	if res.Changes == nil {
		res = Result{Tip: st.Tip, Seq: st.Seq}
	}
	for i, r := range live {
		rep := walletReply{out: wr.Outcomes[i], res: res}
		if rep.out.Err != nil {
			rep.res = Result{Tip: res.Tip, Seq: res.Seq}
		}
		r.reply <- rep
	}
}

// requestWeight is what a wallet request counts against
// maxWalletBatchOutPoints: its outpoints (a lease's), or a pending
// transaction's inputs and outputs.
func requestWeight(r disk.WalletRequest) int {
	switch {
	case r.Lease != nil:
		return len(r.Lease.OutPoints)
	case r.Post != nil:
		return len(r.Post.Tx.Inputs) + len(r.Post.Tx.Outputs)
	}
	return 1
}

// applyWallet commits ops, a replica's wallet change. Writer goroutine only.
func (w *Writer) applyWallet(ops []chain.WalletOp) (Result, error) {
	st := w.store.State()
	if err := w.guard(walletEstimate); err != nil {
		return Result{Tip: st.Tip, Seq: st.Seq}, fmt.Errorf("wallet: %w", err)
	}
	cs, err := w.store.ApplyWallet(ops)
	if err != nil {
		return Result{Tip: st.Tip, Seq: st.Seq}, err
	}
	return Result{Applied: true, Tip: cs.NewTip, Seq: cs.Seq, Changes: cs}, nil
}

// sweepLeases ends the leases and pending transactions the writer's clock
// has expired, if any.
// Writer goroutine only.
func (w *Writer) sweepLeases() {
	next, ok := w.store.NextLeaseExpiry()
	if p, pok := w.store.NextPendingExpiry(); pok && (!ok || p < next) {
		next, ok = p, true
	}
	if !ok || next > w.now() || w.Failed() != nil {
		return
	}
	w.handleWallet(walletRequest{ctx: context.Background(), req: disk.WalletRequest{Expire: true}, reply: make(chan walletReply, 1)})
}

package follow

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"

	"github.com/utxo-cache/utxo-cache/bitcoin"
	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/writer"
)

// Pending is what the mempool mirror needs of the store's pending set;
// *writer.Writer has it (writer/pending.go states the rules).
//
// Post with Replace set evicts a pending transaction that spends one of the
// same inputs, with its descendants (the node replaced it). A refusal for
// an input that is neither live nor the output of a pending transaction
// (chain.ErrUnknownInput) makes the mirror retry later: its parent, or the
// block that creates its input, has not arrived yet. A refusal for the
// pending set's bounds (chain.ErrInsufficientStorage) ends the round's
// posts until the set has room. Posting a transaction that is already
// pending succeeds and changes nothing.
//
// Withdraw withdraws a pending transaction and its descendants; for one
// that is not pending (a block confirmed it or made it conflicting) it
// changes nothing and succeeds.
type Pending interface {
	Post(ctx context.Context, p chain.PendingPost) (writer.PendingResult, error)
	Withdraw(ctx context.Context, h chain.Hash) (writer.PendingResult, error)
}

// Mempool mirror bounds.
const (
	// maxMempoolJSONBytes bounds the node's mempool listing: 64 bytes per
	// txid with the verbose=false form, so 1 GiB is some 15 million
	// transactions, far above any mempool's (300 MB of transactions is
	// about 300,000 of them); the verbose form is about 700 bytes per entry.
	maxMempoolJSONBytes = 1 << 30
	// maxDeferredBytes bounds the raw transactions the mirror keeps to
	// retry (fetched, refused for an unknown input); beyond it a refused
	// transaction is fetched again on its next try rather than kept.
	maxDeferredBytes = 64 << 20
)

// mempoolListing is the node's mempool at one moment: its txids in the
// node's order (Bitcoin Core lists parents before their children) and, on
// Core 25 and later, its mempool sequence.
type mempoolListing struct {
	txids   []chain.Hash
	seq     uint64
	haveSeq bool
}

// mempoolContents fetches the node's listing. Core 25 and later answer
// `verbose=false&mempool_sequence=true` with {"txids": [...],
// "mempool_sequence": N}, parents before children; older nodes ignore the
// query and answer the verbose object, txid → entry, whose keys are the
// listing, put parents first by each entry's "depends". Either order is a
// courtesy: the mirror retries a child refused before its parent.
func (n *node) mempoolContents(ctx context.Context) (mempoolListing, error) {
	const path = "/rest/mempool/contents.json?verbose=false&mempool_sequence=true"
	body, err := n.get(ctx, path, maxMempoolJSONBytes)
	if err != nil {
		return mempoolListing{}, err
	}
	l, err := parseMempoolListing(body)
	if err != nil {
		return mempoolListing{}, &kindError{kind: KindDecode, err: fmt.Errorf("GET %s: %w", path, err)}
	}
	return l, nil
}

// parseMempoolListing decodes either form of the node's listing (see
// mempoolContents). Strict on what it reads: every txid must parse.
func parseMempoolListing(body []byte) (mempoolListing, error) {
	var l mempoolListing
	var modern struct {
		TxIDs []string `json:"txids"`
		Seq   *uint64  `json:"mempool_sequence"`
	}
	if err := json.Unmarshal(body, &modern); err == nil && modern.TxIDs != nil {
		l.txids = make([]chain.Hash, 0, len(modern.TxIDs))
		for _, s := range modern.TxIDs {
			h, err := chain.ParseHash(s)
			if err != nil {
				return mempoolListing{}, fmt.Errorf("mempool txid %q: %w", s, err)
			}
			l.txids = append(l.txids, h)
		}
		if modern.Seq != nil {
			l.seq, l.haveSeq = *modern.Seq, true
		}
		return l, nil
	}
	// The verbose form: an object keyed by txid (empty: {}).
	var verbose map[string]json.RawMessage
	if err := json.Unmarshal(body, &verbose); err != nil {
		return mempoolListing{}, fmt.Errorf("neither a txid listing nor a verbose mempool: %w", err)
	}
	type entry struct {
		Depends []string `json:"depends"`
	}
	deps := make(map[chain.Hash][]chain.Hash, len(verbose))
	for s, raw := range verbose {
		if s == "txids" || s == "mempool_sequence" {
			continue // a modern answer with a null txids list
		}
		h, err := chain.ParseHash(s)
		if err != nil {
			return mempoolListing{}, fmt.Errorf("mempool txid %q: %w", s, err)
		}
		var e entry
		if err := json.Unmarshal(raw, &e); err != nil {
			return mempoolListing{}, fmt.Errorf("mempool entry %s: %w", s, err)
		}
		for _, d := range e.Depends {
			dh, err := chain.ParseHash(d)
			if err != nil {
				return mempoolListing{}, fmt.Errorf("mempool entry %s depends %q: %w", s, d, err)
			}
			deps[h] = append(deps[h], dh)
		}
		if _, ok := deps[h]; !ok {
			deps[h] = nil
		}
	}
	l.txids = parentsFirst(deps)
	return l, nil
}

// parentsFirst orders the transactions of deps (txid → its in-mempool
// parents) so that each comes after its parents, breaking ties by txid so
// that the order does not depend on map iteration. A parent missing from
// deps is ignored, and so is a cycle (a node never lists one). Iterative:
// a node's answer cannot make it recurse.
func parentsFirst(deps map[chain.Hash][]chain.Hash) []chain.Hash {
	ids := make([]chain.Hash, 0, len(deps))
	for h := range deps {
		ids = append(ids, h)
	}
	sortHashes(ids)
	out := make([]chain.Hash, 0, len(ids))
	const visiting, done = 1, 2
	state := make(map[chain.Hash]uint8, len(ids))
	type frame struct {
		h       chain.Hash
		parents []chain.Hash
	}
	var stack []frame
	push := func(h chain.Hash) {
		parents := slices.Clone(deps[h])
		sortHashes(parents)
		state[h] = visiting
		stack = append(stack, frame{h: h, parents: parents})
	}
	for _, root := range ids {
		if state[root] != 0 {
			continue
		}
		push(root)
		for len(stack) > 0 {
			top := &stack[len(stack)-1]
			if len(top.parents) == 0 {
				state[top.h] = done
				out = append(out, top.h)
				stack = stack[:len(stack)-1]
				continue
			}
			p := top.parents[0]
			top.parents = top.parents[1:]
			if _, listed := deps[p]; listed && state[p] == 0 {
				push(p)
			}
		}
	}
	return out
}

func sortHashes(hs []chain.Hash) {
	slices.SortFunc(hs, func(a, b chain.Hash) int { return bytes.Compare(a[:], b[:]) })
}

// rawTx fetches a transaction of the node's mempool. Found is false when
// the node no longer has it (it left the mempool since the listing).
func (n *node) rawTx(ctx context.Context, txid chain.Hash) (raw []byte, found bool, err error) {
	raw, err = n.get(ctx, "/rest/tx/"+txid.String()+".bin", bitcoin.MaxBlockBytes)
	if err != nil {
		var ke *kindError
		if errors.As(err, &ke) && ke.kind == KindHTTP && ke.status == 404 {
			return nil, false, nil
		}
		return nil, false, err
	}
	return raw, true, nil
}

// mirror keeps the store's pending set in step with the node's mempool. It
// runs on the follower's goroutine only (no locking).
//
// # Reconciliation
//
// Each sync, once the store is at the node's best block, lists the node's
// mempool in full. An unchanged mempool sequence (Core 25 and later) means
// nothing changed, and the sync ends there unless a refused transaction is
// waiting for a new block. Otherwise the listing is compared with what the
// mirror posted:
//
//   - a transaction the mirror posted that the node no longer lists left the
//     mempool (evicted, replaced, expired, or confirmed): it is withdrawn.
//     Withdrawals happen only when the node's best block is the same after
//     the listing as before it, so a block that confirmed transactions
//     between the two answers is applied first (by the next poll), and the
//     block, not a withdrawal, settles them;
//   - a listed transaction the mirror has not posted is fetched and posted
//     with replace set: the node's mempool holds no conflicts, so a pending
//     transaction it conflicts with is one the node dropped for it (a
//     replacement by fee);
//   - a post refused for an unknown input waits (its parent comes later in
//     the same round, or its input's block in a later poll) and is retried
//     while some post of the round succeeds, then at the next sync.
//
// The sequence is only a shortcut: every sync that does anything works from
// a full listing, so a missed notification (a gap) cannot leave the mirror
// wrong. What the mirror posted is known to this process only: after a
// restart it starts from an empty record, re-posts (a no-op) what the node
// still lists, and leaves transactions that left the node's mempool while it
// was stopped pending until a block settles them or --pending-ttl expires
// them.
type mirror struct {
	node    *node
	adapter *bitcoin.Adapter
	pending Pending
	log     *slog.Logger
	m       *metrics

	seq      uint64
	haveSeq  bool
	posted   map[chain.Hash]uint64 // txid → the order it was posted in
	nextPost uint64
	deferred map[chain.Hash][]byte // refused for an unknown input; nil: fetch again
	defBytes int
	lastTip  chain.Hash // the tip the deferred ones were last tried at
	// unsupported holds listed transactions the mirror cannot post (they do
	// not decode, or the pending set refused them for a reason a retry
	// cannot change), not fetched again while the node lists them.
	unsupported map[chain.Hash]struct{}
	full        bool // the last post was refused for the pending set's bounds
}

// errPendingFull ends a round's posts: the pending set is at its bounds.
var errPendingFull = errors.New("follow: pending set full")

func newMirror(n *node, a *bitcoin.Adapter, p Pending, log *slog.Logger, m *metrics) *mirror {
	return &mirror{node: n, adapter: a, pending: p, log: log, m: m,
		posted: map[chain.Hash]uint64{}, deferred: map[chain.Hash][]byte{}, unsupported: map[chain.Hash]struct{}{}}
}

// sync brings the pending set to the node's mempool (see mirror). best is
// the node's best block the store is at.
func (mr *mirror) sync(ctx context.Context, best chain.Hash) error {
	l, err := mr.node.mempoolContents(ctx)
	if err != nil {
		return err
	}
	mr.log.Debug("mempool mirror: listing", "listing", l)
	retryDeferred := len(mr.deferred) > 0 && best != mr.lastTip
	if l.haveSeq && mr.haveSeq && l.seq == mr.seq && !retryDeferred {
		return nil
	}
	listed := make(map[chain.Hash]struct{}, len(l.txids))
	for _, h := range l.txids {
		listed[h] = struct{}{}
	}

	// Withdraw what left, unless a block arrived meanwhile.
	_, bestAfter, err := mr.node.chainInfo(ctx)
	if err != nil {
		return err
	}
	stable := bestAfter == best
	if stable {
		// Newest first, so that a child goes before its parent and each
		// withdrawal names one transaction.
		var gone []chain.Hash
		for h := range mr.posted {
			if _, ok := listed[h]; !ok {
				gone = append(gone, h)
			}
		}
		slices.SortFunc(gone, func(a, b chain.Hash) int { return cmp.Compare(mr.posted[b], mr.posted[a]) })
		for _, h := range gone {
			res, err := mr.pending.Withdraw(ctx, h)
			switch {
			case err != nil && ctx.Err() != nil:
				return ctx.Err()
			case err != nil:
				return &kindError{kind: KindWriter, err: fmt.Errorf("withdraw %s, which left the node's mempool: %w", h, err)}
			case res.Changed:
				mr.m.mempoolWithdrawn.Inc()
			}
			delete(mr.posted, h)
		}
	}
	for h := range mr.deferred {
		if _, ok := listed[h]; !ok {
			mr.dropDeferred(h)
		}
	}
	for h := range mr.unsupported {
		if _, ok := listed[h]; !ok {
			delete(mr.unsupported, h)
		}
	}

	// Post what is new, parents first, retrying refusals while the round
	// makes progress.
	var todo []chain.Hash
	for _, h := range l.txids {
		_, posted := mr.posted[h]
		_, unsupported := mr.unsupported[h]
		if !posted && !unsupported {
			todo = append(todo, h)
		}
	}
	full := false
rounds:
	for len(todo) > 0 {
		var again []chain.Hash
		progress := false
		for _, h := range todo {
			if err := ctx.Err(); err != nil {
				return err
			}
			ok, err := mr.post(ctx, h)
			if errors.Is(err, errPendingFull) {
				full = true
				break rounds
			}
			if err != nil {
				return err
			}
			if ok {
				progress = true
			} else if _, waiting := mr.deferred[h]; waiting {
				again = append(again, h)
			}
		}
		if !progress {
			break
		}
		todo = again
	}
	mr.lastTip = best
	if stable && !full {
		// Only a listing reconciled in full (withdrawals and posts) may
		// let the next sync skip an unchanged sequence.
		mr.seq, mr.haveSeq = l.seq, l.haveSeq
	} else {
		mr.haveSeq = false
	}
	mr.m.mempoolMirrored.Set(float64(len(mr.posted)))
	mr.m.mempoolDeferred.Set(float64(len(mr.deferred)))
	return nil
}

// post fetches (or takes from deferred) and posts one transaction; ok
// reports it is pending now. A refusal for an unknown input keeps it in
// deferred; another refusal is logged and the transaction is left for the
// next sync that changes the listing. err is a failure to talk to the node
// (it ends the sync).
func (mr *mirror) post(ctx context.Context, h chain.Hash) (ok bool, err error) {
	raw := mr.deferred[h]
	if raw == nil {
		var found bool
		raw, found, err = mr.node.rawTx(ctx, h)
		if err != nil {
			return false, err
		}
		if !found {
			mr.dropDeferred(h)
			return false, nil // it left the mempool since the listing
		}
	}
	tx, err := mr.convert(raw)
	switch {
	case err != nil:
		mr.dropDeferred(h)
		mr.unsupported[h] = struct{}{}
		mr.m.errors.WithLabelValues(KindDecode).Inc()
		mr.log.Warn("mempool mirror: a transaction of the node's mempool does not decode", "txid", h, "err", err)
		return false, nil
	case tx.Hash != h:
		mr.dropDeferred(h)
		mr.m.errors.WithLabelValues(KindDecode).Inc()
		mr.log.Warn("mempool mirror: the node served another transaction than the one asked for", "asked", h, "got", tx.Hash)
		return false, nil
	}
	_, perr := mr.pending.Post(ctx, chain.PendingPost{Tx: *tx, Replace: true})
	mr.log.Debug("mempool mirror: post", "txid", h, "err", perr)
	switch {
	case errors.Is(perr, chain.ErrInsufficientStorage):
		mr.keepDeferred(h, raw)
		if !mr.full {
			mr.log.Warn("mempool mirror: the pending set is full (--pending-max-txs, --pending-max-bytes): the rest of the node's mempool waits for room", "err", perr)
		}
		mr.full = true
		mr.m.mempoolFull.Set(1)
		return false, errPendingFull
	case perr == nil:
		if mr.full {
			mr.log.Info("mempool mirror: the pending set has room again")
			mr.full = false
			mr.m.mempoolFull.Set(0)
		}
		mr.dropDeferred(h)
		mr.posted[h] = mr.nextPost
		mr.nextPost++
		mr.m.mempoolPosted.Inc()
		return true, nil
	case errors.Is(perr, chain.ErrUnknownInput):
		mr.keepDeferred(h, raw)
		return false, nil
	case ctx.Err() != nil:
		return false, ctx.Err()
	case errors.Is(perr, chain.ErrInvalidArgument), errors.Is(perr, chain.ErrInvalidBlock), errors.Is(perr, chain.ErrConflict):
		// A refusal of the transaction itself: posting it again cannot
		// change the answer while the node lists it.
		mr.dropDeferred(h)
		mr.unsupported[h] = struct{}{}
		mr.m.errors.WithLabelValues(KindMempool).Inc()
		mr.log.Warn("mempool mirror: the pending set refused a transaction of the node's mempool", "txid", h, "err", perr)
		return false, nil
	default: // the writer or its store failed: the poll fails and is retried
		mr.keepDeferred(h, raw)
		return false, &kindError{kind: KindWriter, err: fmt.Errorf("post %s of the node's mempool: %w", h, perr)}
	}
}

func (mr *mirror) convert(raw []byte) (*chain.Tx, error) {
	mtx, err := bitcoin.DecodeTx(raw)
	if err != nil {
		return nil, err
	}
	return mr.adapter.ConvertTx(mtx)
}

func (mr *mirror) keepDeferred(h chain.Hash, raw []byte) {
	if old, ok := mr.deferred[h]; ok {
		mr.defBytes -= len(old)
	}
	if mr.defBytes+len(raw) > maxDeferredBytes {
		raw = nil // fetched again when retried
	}
	mr.deferred[h] = raw
	mr.defBytes += len(raw)
}

func (mr *mirror) dropDeferred(h chain.Hash) {
	if old, ok := mr.deferred[h]; ok {
		mr.defBytes -= len(old)
		delete(mr.deferred, h)
	}
}

// String is for logs.
func (l mempoolListing) String() string {
	if !l.haveSeq {
		return strconv.Itoa(len(l.txids)) + " txs"
	}
	return strconv.Itoa(len(l.txids)) + " txs at sequence " + strconv.FormatUint(l.seq, 10)
}

package query

import (
	"context"
	"strconv"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

// # Pending transactions
//
// The pending set lives in the store beside the confirmed state and changes
// only through the commit sequence (docs/wallet-state.md): every read of it
// comes from one published snapshot, so a node answers its writer's
// pending set at its own seq. Answers about pending transactions are read
// from the snapshot each time and never cached: answers that do not ask
// about them read nothing of them, so their cache entries and ETags are
// untouched by wallet changes.
//
// Front ends that serve pending data in their own shapes (Esplora's
// mempool stats, Blockfrost) call PendingOf with a published view: the
// unconfirmed outputs of a key, the outputs of the key that pending
// transactions spend, and their sums.

// PendingStatus answers GET /v1/pending/{tx_hash}: {"tx_hash", "status",
// "height"? (confirmed), "conflicts_with"? (conflicting), "since"}, or 404
// not_found when this node's state knows nothing of it (never posted, or
// forgotten). Read from one snapshot, never cached.
func (s *Server) PendingStatus(ctx context.Context, h chain.Hash) (Answer, error) {
	v, err := s.store.PublishedView()
	if err != nil {
		return Answer{}, err
	}
	defer v.Close()
	s.m.diskRead()
	info, found, err := v.PendingStatus(h)
	if err != nil {
		return Answer{}, err
	}
	buf := getAnswerBuf()
	body := *buf
	status := 200
	if !found {
		status = 404
		body = appendErrorBody(body, "not_found", "transaction "+h.String()+" is not known to the pending set at this seq (never posted, or forgotten)")
	} else {
		body = AppendPendingInfo(body, &info)
		body = append(body, '}')
	}
	*buf = body
	return Answer{Status: status, Tip: v.Tip(), Seq: v.State().Seq, Body: body, Tier: "disk", buf: buf}, nil
}

// AppendPendingInfo appends the members of a pending status object
// (without braces): "tx_hash", "status", "height"?, "conflicts_with"?,
// "since".
func AppendPendingInfo(body []byte, info *chain.PendingInfo) []byte {
	body = append(body, `"tx_hash":`...)
	body = appendHexString(body, info.TxHash[:])
	body = append(body, `,"status":"`...)
	body = append(body, info.Status.String()...)
	body = append(body, '"')
	if info.Status == chain.PendingConfirmed {
		body = append(body, `,"height":`...)
		body = strconv.AppendUint(body, info.Height, 10)
	}
	if info.Status == chain.PendingConflicting && !info.ConflictsWith.IsZero() {
		body = append(body, `,"conflicts_with":`...)
		body = appendHexString(body, info.ConflictsWith[:])
	}
	body = append(body, `,"since":`...)
	return strconv.AppendUint(body, info.Since, 10)
}

// PendingOfKey is what the pending set says of one index key at one
// snapshot.
type PendingOfKey struct {
	// Funded are the unconfirmed outputs pending transactions pay to the
	// key, in posting order, each with when its transaction was posted;
	// those another pending transaction spends included (Spent names them).
	Funded []disk.PendingOutput
	// Spent are the key's outputs, confirmed or unconfirmed, that pending
	// transactions spend, in outpoint order.
	Spent []disk.PendingSpentOutput
	// Sums are Esplora's mempool_stats: funded over Funded, spent over
	// Spent (assets filtered as the key's balance filters them: none is
	// filtered for an address or a credential).
	FundedSum, SpentSum chain.Balance
}

// PendingOf reads what the pending set says of value in dimension dim from
// v (a published view: the caller's snapshot, so the answer is consistent
// with its confirmed part). Safe for concurrent use; v stays the caller's.
func PendingOf(v *disk.View, dim disk.Dimension, value []byte) (PendingOfKey, error) {
	var p PendingOfKey
	err := v.PendingOutputs(dim, value, false, func(o *disk.PendingOutput) error {
		p.Funded = append(p.Funded, *o)
		p.FundedSum = addToBalance(p.FundedSum, &o.Utxo)
		return nil
	})
	if err != nil {
		return p, err
	}
	err = v.PendingSpentOf(dim, value, func(o *disk.PendingSpentOutput) error {
		p.Spent = append(p.Spent, *o)
		p.SpentSum = addToBalance(p.SpentSum, &o.Utxo)
		return nil
	})
	return p, err
}

// addToBalance adds u (its value and every asset) to b.
func addToBalance(b chain.Balance, u *chain.Utxo) chain.Balance {
	b.Count++
	b.Value = b.Value.AddU64(u.Value)
	for _, a := range u.Assets {
		found := false
		for i := range b.Assets {
			if string(b.Assets[i].Policy) == string(a.Policy) && string(b.Assets[i].Name) == string(a.Name) {
				b.Assets[i].Quantity = b.Assets[i].Quantity.AddU64(a.Quantity)
				found = true
				break
			}
		}
		if !found {
			b.Assets = append(b.Assets, chain.AssetSum{Policy: a.Policy, Name: a.Name, Quantity: chain.Uint128{}.AddU64(a.Quantity)})
		}
	}
	return b
}

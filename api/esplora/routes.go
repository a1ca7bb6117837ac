package esplora

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"

	"github.com/utxo-cache/utxo-cache/bitcoin"
	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/query"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

// MaxPageLimit bounds the paged UTXO listing's limit.
const MaxPageLimit = 1000

// listChunk is how many index entries an unpaged listing reads per
// iterator: the whole listing still comes from one snapshot.
const listChunk = 1000

// validAddress reports whether a is an address this store can list
// outputs under: a standard address (bitcoin.AddressScript) or the
// fallback "script:<hex>" of a non-standard script.
func validAddress(a string) bool {
	if _, ok := bitcoin.AddressScript(a); ok {
		return true
	}
	_, ok := bitcoin.ScriptHashOf(a)
	return ok
}

// parseScriptHash reads a script hash: 64 hex digits, SHA-256 of the
// output script in natural byte order.
func parseScriptHash(s string) ([]byte, bool) {
	if len(s) != 2*bitcoin.ScriptHashLen {
		return nil, false
	}
	b, err := hex.DecodeString(s)
	return b, err == nil
}

// addressUtxo answers an address's listing. The address is checked only
// when the listing is empty: the store lists outputs under addresses the
// Bitcoin adapter wrote, so one that lists any is valid, and the check
// (a base58 or bech32 decode) stays off the path of a wallet's polling.
func (f *Frontend) addressUtxo(ctx context.Context, r Request) (Reply, error) {
	a := r.Param("address")
	if len(a) > query.MaxAddressLen {
		return f.fail(400, "Invalid Bitcoin address"), nil
	}
	rep, err := f.utxo(ctx, r, disk.DimAddress, a, query.AddressGuard(a))
	if err == nil && rep.Answer.Status == 200 && string(rep.Answer.Body) == "[]" && !validAddress(a) {
		rep.Answer.Release()
		return f.fail(400, "Invalid Bitcoin address"), nil
	}
	return rep, err
}

func (f *Frontend) scripthashUtxo(ctx context.Context, r Request) (Reply, error) {
	h, ok := parseScriptHash(r.Param("hash"))
	if !ok {
		return f.fail(400, "Invalid scripthash"), nil
	}
	if !f.r.Indexes(disk.DimScriptHash) {
		return f.fail(404, noScriptHashIndex), nil
	}
	return f.utxo(ctx, r, disk.DimScriptHash, string(h), query.IndexGuard(disk.DimScriptHash, h))
}

const noScriptHashIndex = "This service does not keep the script_hash index on this store (a store's indexes are chosen when it is created: --indexes script_hash); use /api/address/:address"

// utxo answers a UTXO listing of (dim, value): unpaged (the whole listing,
// refused over Options.UtxosLimit) or, with ?limit=, one page of it. value
// is converted to bytes only when the answer is computed: a cached answer
// is found by its key alone.
func (f *Frontend) utxo(ctx context.Context, r Request, dim disk.Dimension, value string, guard query.Guard) (Reply, error) {
	limitStr, paged := r.Query("limit")
	cursor, hasCursor := r.Query("cursor")
	if hasCursor && !paged {
		return f.fail(400, "cursor needs limit"), nil
	}
	// The cache key is built on the stack.
	var kb [256]byte
	if !paged {
		k := append(kb[:0], "eu|"...)
		k = strconv.AppendInt(k, int64(f.opts.UtxosLimit), 10)
		k = append(k, '|', byte('0'+dim), '|')
		k = append(k, value...)
		ans, err := f.r.FrontRead(ctx, query.FrontKey(k), guard, func(v *disk.View, body []byte) ([]byte, error) {
			return f.appendUtxos(v, body, dim, []byte(value), nil, 0)
		})
		if err != nil {
			return Reply{}, err
		}
		return reply(ans, ContentJSON, MaxAgeShort), nil
	}
	n, ok := parseUint(limitStr, 16)
	if !ok || n < 1 || n > MaxPageLimit {
		return f.fail(400, "limit must be an integer in 1.."+strconv.Itoa(MaxPageLimit)), nil
	}
	var after *chain.Position
	if hasCursor {
		p, ok := parseCursor(cursor)
		if !ok {
			return f.fail(400, "Invalid cursor"), nil
		}
		after = &p
	}
	var next string
	k := append(kb[:0], "ep|"...)
	k = strconv.AppendUint(k, n, 10)
	k = append(k, '|')
	k = append(k, cursor...)
	k = append(k, '|', byte('0'+dim), '|')
	k = append(k, value...)
	ans, err := f.r.FrontRead(ctx, query.FrontKey(k), guard, func(v *disk.View, body []byte) ([]byte, error) {
		return f.appendUtxos(v, body, dim, []byte(value), after, int(n))
	})
	if err != nil {
		return Reply{}, err
	}
	if ans.Status == 200 {
		// The next cursor is the last item's position, carried in the
		// body's trailer so that a cached answer keeps it.
		ans.Body, next = splitTrailer(ans.Body)
	}
	rep := reply(ans, ContentJSON, MaxAgeShort)
	rep.NextCursor = next
	return rep, nil
}

// A paged answer is cached as its JSON array followed by a trailer: '\n'
// and the next cursor (empty on the last page). splitTrailer separates
// them.
func splitTrailer(b []byte) ([]byte, string) {
	i := bytes.LastIndexByte(b, '\n')
	if i < 0 {
		return b, ""
	}
	return b[:i], string(b[i+1:])
}

// appendUtxos appends the listing of (dim, value) read from v: all of it
// (limit 0) or a page of limit outputs after the position after, then, on
// its last page, the pending outputs (Mempool). Confirmed outputs spent by
// a pending transaction are left out.
func (f *Frontend) appendUtxos(v *disk.View, body []byte, dim disk.Dimension, value []byte, after *chain.Position, limit int) ([]byte, error) {
	pending, err := f.opts.Mempool.Pending(v, dim, value)
	if err != nil {
		return body, err
	}
	headers := headerCache{v: v}
	var enc utxoEncoder
	body = append(body, '[')
	n := 0
	var itemErr error
	item := func(r *disk.UtxoRef) error {
		if _, spent := pending.Spent[r.OutPoint]; spent {
			return nil
		}
		h, err := headers.at(r.Height)
		if err != nil {
			return err
		}
		if f.opts.UtxosLimit > 0 && limit == 0 && n >= f.opts.UtxosLimit {
			itemErr = errOverLimit
			return errOverLimit
		}
		if n > 0 {
			body = append(body, ',')
		}
		n++
		body = enc.appendItem(body, r.OutPoint, r.Value, &h)
		return nil
	}
	q := disk.ListQuery{Dim: dim, Value: value, After: after, Limit: listChunk}
	var next chain.Position
	more := true
	if limit > 0 {
		q.Limit = limit
		next, more, err = v.ListFunc(q, item)
	} else {
		for more {
			next, more, err = v.ListFunc(q, item)
			if err != nil {
				break
			}
			q.After = &next
		}
	}
	switch {
	case errors.Is(itemErr, errOverLimit):
		return errStatus(body, 400, "Too many unspent transaction outputs (>"+strconv.Itoa(f.opts.UtxosLimit)+
			"). Page through them with ?limit=N&cursor=C, or raise --esplora-utxos-limit.")
	case errors.Is(err, errNoTime):
		return errStatus(body, 404, "This store does not keep the time of the blocks it applied before it kept block times: re-import it to serve this listing")
	case err != nil:
		return body, err
	}
	if limit > 0 && more {
		body = append(body, "]\n"...)
		return appendCursor(body, next), nil
	}
	for _, o := range pending.Outputs {
		if f.opts.UtxosLimit > 0 && limit == 0 && n >= f.opts.UtxosLimit {
			return errStatus(body, 400, "Too many unspent transaction outputs (>"+strconv.Itoa(f.opts.UtxosLimit)+
				"). Page through them with ?limit=N&cursor=C, or raise --esplora-utxos-limit.")
		}
		if n > 0 {
			body = append(body, ',')
		}
		n++
		body = enc.appendItem(body, o.OutPoint, o.Value, nil)
	}
	body = append(body, ']')
	if limit > 0 {
		body = append(body, '\n')
	}
	return body, nil
}

var errOverLimit = errors.New("esplora: over the utxos limit")

// utxoEncoder appends the UTXO objects of one listing, keeping the last
// txid's hex and the last block's status object: a listing's outputs of
// one transaction, and of one block, are neighbours, and encode them once.
type utxoEncoder struct {
	tx           chain.Hash
	txHex        [2 * chain.HashSize]byte
	txValid      bool
	statusHeight uint64
	status       []byte // the status object of the block at statusHeight, in statusBuf
	statusBuf    [192]byte
	statusValid  bool
}

// appendItem appends one UTXO object; h is nil for an unconfirmed output.
func (e *utxoEncoder) appendItem(body []byte, op chain.OutPoint, value uint64, h *disk.BlockHeader) []byte {
	if !e.txValid || e.tx != op.TxHash {
		e.tx, e.txValid = op.TxHash, true
		hex.Encode(e.txHex[:], op.TxHash[:])
	}
	body = append(body, `{"txid":"`...)
	body = append(body, e.txHex[:]...)
	body = append(body, `","vout":`...)
	body = strconv.AppendUint(body, uint64(op.Index), 10)
	body = append(body, `,"status":`...)
	if h == nil {
		body = appendStatus(body, nil)
	} else {
		if !e.statusValid || e.statusHeight != h.Height {
			e.statusHeight, e.statusValid = h.Height, true
			e.status = appendStatus(e.statusBuf[:0], h)
		}
		body = append(body, e.status...)
	}
	body = append(body, `,"value":`...)
	body = strconv.AppendUint(body, value, 10)
	return append(body, '}')
}

// appendStatus appends a transaction status: confirmed in block h, or
// unconfirmed (h nil).
func appendStatus(body []byte, h *disk.BlockHeader) []byte {
	if h == nil {
		return append(body, `{"confirmed":false}`...)
	}
	body = append(body, `{"confirmed":true,"block_height":`...)
	body = strconv.AppendUint(body, h.Height, 10)
	body = append(body, `,"block_hash":"`...)
	body = hex.AppendEncode(body, h.Hash[:])
	body = append(body, `","block_time":`...)
	body = strconv.AppendInt(body, h.Time, 10)
	return append(body, '}')
}

// headerCache reads the headers of one answer's blocks once each.
type headerCache struct {
	v    *disk.View
	last disk.BlockHeader
	ok   bool
}

func (c *headerCache) at(height uint64) (disk.BlockHeader, error) {
	if c.ok && c.last.Height == height {
		return c.last, nil
	}
	h, found, err := c.v.BlockAt(height)
	switch {
	case err != nil:
		return h, err
	case !found:
		return h, errors.New("esplora: no block-hash row at the height of a live output")
	case !h.TimeKnown:
		return h, errNoTime
	}
	c.last, c.ok = h, true
	return h, nil
}

// A cursor of the paged listing is the position of the last output of the
// page: "height-txpos-index", decimal. Any position is a valid place to
// resume, so a cursor carries no authentication.
func appendCursor(b []byte, p chain.Position) []byte {
	b = strconv.AppendUint(b, p.Height, 10)
	b = append(b, '-')
	b = strconv.AppendUint(b, uint64(p.TxPos), 10)
	b = append(b, '-')
	return strconv.AppendUint(b, uint64(p.Index), 10)
}

func parseCursor(s string) (chain.Position, bool) {
	parts := strings.Split(s, "-")
	if len(parts) != 3 {
		return chain.Position{}, false
	}
	h, ok1 := parseUint(parts[0], 64)
	t, ok2 := parseUint(parts[1], 32)
	i, ok3 := parseUint(parts[2], 32)
	if !ok1 || !ok2 || !ok3 || string(appendCursor(nil, chain.Position{Height: h, TxPos: uint32(t), Index: uint32(i)})) != s {
		return chain.Position{}, false
	}
	return chain.Position{Height: h, TxPos: uint32(t), Index: uint32(i)}, true
}

func (f *Frontend) addressStats(ctx context.Context, r Request) (Reply, error) {
	a := r.Param("address")
	if !validAddress(a) {
		return f.fail(400, "Invalid Bitcoin address"), nil
	}
	return f.stats(ctx, "address", a, disk.DimAddress, []byte(a), query.AddressGuard(a))
}

func (f *Frontend) scripthashStats(ctx context.Context, r Request) (Reply, error) {
	s := r.Param("hash")
	h, ok := parseScriptHash(s)
	if !ok {
		return f.fail(400, "Invalid scripthash"), nil
	}
	if !f.r.Indexes(disk.DimScriptHash) {
		return f.fail(404, noScriptHashIndex), nil
	}
	return f.stats(ctx, "scripthash", s, disk.DimScriptHash, h, query.IndexGuard(disk.DimScriptHash, h))
}

// stats answers an address's or script hash's chain_stats and
// mempool_stats, with the keys in Esplora's order (sorted: "scripthash"
// comes last).
func (f *Frontend) stats(ctx context.Context, field, label string, dim disk.Dimension, value []byte, guard query.Guard) (Reply, error) {
	key := append([]byte{'e', 's', '|', byte('0' + dim), '|'}, label...)
	ans, err := f.r.FrontRead(ctx, query.FrontKey(key), guard, func(v *disk.View, body []byte) ([]byte, error) {
		c, err := v.Counters(dim, value)
		switch {
		case errors.Is(err, disk.ErrNoCounters):
			return errStatus(body, 404, "This store keeps no address counters (a Bitcoin store counts from the first block it applies with this version; other stores do not count), so it cannot answer chain_stats")
		case err != nil:
			return body, err
		}
		pending, err := f.opts.Mempool.Pending(v, dim, value)
		if err != nil {
			return body, err
		}
		body = append(body, '{')
		if field == "address" {
			body = appendLabel(body, field, label)
			body = append(body, ',')
		}
		body = append(body, `"chain_stats":`...)
		body = appendStats(body, Stats{TxCount: c.TxCount, FundedTxoCount: c.FundedCount, FundedTxoSum: c.FundedSum, SpentTxoCount: c.SpentCount, SpentTxoSum: c.SpentSum})
		if c.FromHeight > 0 {
			// A store started mid-chain counts from its first block: said
			// in a member Esplora does not have, which clients ignore.
			body = append(body, `,"chain_stats_from_height":`...)
			body = strconv.AppendUint(body, c.FromHeight, 10)
		}
		body = append(body, `,"mempool_stats":`...)
		body = appendStats(body, pending.Stats)
		if field != "address" {
			body = append(body, ',')
			body = appendLabel(body, field, label)
		}
		return append(body, '}'), nil
	})
	if err != nil {
		return Reply{}, err
	}
	return reply(ans, ContentJSON, MaxAgeShort), nil
}

func appendLabel(body []byte, field, label string) []byte {
	body = append(body, '"')
	body = append(body, field...)
	body = append(body, `":`...)
	return query.AppendJSONString(body, label)
}

func appendStats(body []byte, s Stats) []byte {
	body = append(body, `{"funded_txo_count":`...)
	body = strconv.AppendUint(body, s.FundedTxoCount, 10)
	body = append(body, `,"funded_txo_sum":`...)
	body = append(body, s.FundedTxoSum.String()...)
	body = append(body, `,"spent_txo_count":`...)
	body = strconv.AppendUint(body, s.SpentTxoCount, 10)
	body = append(body, `,"spent_txo_sum":`...)
	body = append(body, s.SpentTxoSum.String()...)
	body = append(body, `,"tx_count":`...)
	body = strconv.AppendUint(body, s.TxCount, 10)
	return append(body, '}')
}

func (f *Frontend) outspend(_ context.Context, r Request) (Reply, error) {
	txid, ok := parseTxid(r.Param("txid"))
	if !ok {
		return f.fail(400, "Invalid hex string"), nil
	}
	vout, ok := parseUint(r.Param("vout"), 32)
	if !ok {
		return f.fail(400, "Invalid number"), nil
	}
	op := chain.OutPoint{TxHash: txid, Index: uint32(vout)}
	var spentHeight uint64
	confirmed := false
	ans, err := f.r.FrontView(func(v *disk.View, body []byte) ([]byte, error) {
		var inner error
		err := v.UtxoFunc(op, func(u *disk.UtxoRef) error {
			if !u.Spent {
				ptx, vin, ok, err := f.opts.Mempool.Spender(v, op)
				if err != nil {
					return err
				}
				if !ok {
					body = append(body, `{"spent":false}`...)
					return nil
				}
				body = appendSpending(body, ptx, vin, nil)
				return nil
			}
			if !u.SpenderVinKnown {
				body, inner = errStatus(body, 404, "Spender input not kept: output "+op.String()+" was spent by "+u.SpenderTxHash.String()+
					" at height "+strconv.FormatUint(u.SpentHeight, 10)+" before this store recorded spending inputs")
				return nil
			}
			h, found, err := v.BlockAt(u.SpentHeight)
			if err != nil {
				return err
			}
			if !found || !h.TimeKnown {
				body, inner = errStatus(body, 404, "This store does not keep the block of height "+strconv.FormatUint(u.SpentHeight, 10))
				return nil
			}
			spentHeight, confirmed = u.SpentHeight, true
			body = appendSpending(body, u.SpenderTxHash, u.SpenderVin, &h)
			return nil
		})
		if errors.Is(err, chain.ErrNotFound) {
			return errStatus(body, 404, "Output "+op.String()+" not known: neither live nor a spent output this store still keeps (spent outputs are kept for the prune depth); this service never answers an unknown outpoint as unspent")
		}
		if err == nil {
			err = inner
		}
		return body, err
	})
	if err != nil {
		return Reply{}, err
	}
	maxAge := MaxAgeShort
	if confirmed {
		maxAge = maxAgeByDepth(ans.Tip, spentHeight)
	}
	return reply(ans, ContentJSON, maxAge), nil
}

func appendSpending(body []byte, txid chain.Hash, vin uint32, h *disk.BlockHeader) []byte {
	body = append(body, `{"spent":true,"txid":"`...)
	body = append(body, txid.String()...)
	body = append(body, `","vin":`...)
	body = strconv.AppendUint(body, uint64(vin), 10)
	body = append(body, `,"status":`...)
	body = appendStatus(body, h)
	return append(body, '}')
}

func (f *Frontend) outspends(_ context.Context, r Request) (Reply, error) {
	if _, ok := parseTxid(r.Param("txid")); !ok {
		return f.fail(400, "Invalid hex string"), nil
	}
	return f.fail(404, "This service does not keep transactions, so it cannot know every output of one (unspendable outputs are never stored, spent ones are pruned): ask /api/tx/:txid/outspend/:vout for each output"), nil
}

func (f *Frontend) tipHeight(context.Context, Request) (Reply, error) {
	p := f.r.Published()
	if p.Tip.Empty {
		return f.fail(404, "Block not found: the store has applied no block"), nil
	}
	return textReply(p, 200, strconv.FormatUint(p.Tip.Height, 10), MaxAgeShort), nil
}

func (f *Frontend) tipHash(context.Context, Request) (Reply, error) {
	p := f.r.Published()
	if p.Tip.Empty {
		return f.fail(404, "Block not found: the store has applied no block"), nil
	}
	return textReply(p, 200, p.Tip.Hash.String(), MaxAgeShort), nil
}

func (f *Frontend) blockHeight(_ context.Context, r Request) (Reply, error) {
	height, ok := parseUint(r.Param("height"), 64)
	if !ok {
		return f.fail(400, "Invalid number"), nil
	}
	ans, err := f.r.FrontView(func(v *disk.View, body []byte) ([]byte, error) {
		h, found, err := v.BlockAt(height)
		switch {
		case err != nil:
			return body, err
		case !found && (v.Tip().Empty || height > v.Tip().Height):
			return errStatus(body, 404, "Block not found")
		case !found:
			return errStatus(body, 404, "Block not found: this store holds the chain from a later height (it was started mid-chain)")
		}
		return append(body, h.Hash.String()...), nil
	})
	if err != nil {
		return Reply{}, err
	}
	return reply(ans, ContentText, maxAgeByDepth(ans.Tip, height)), nil
}

func (f *Frontend) blockStatus(_ context.Context, r Request) (Reply, error) {
	hash, ok := parseTxid(r.Param("hash"))
	if !ok {
		return f.fail(400, "Invalid hex string"), nil
	}
	var height uint64
	inBest := false
	ans, err := f.r.FrontView(func(v *disk.View, body []byte) ([]byte, error) {
		h, found, err := v.HeightOf(hash)
		if err != nil {
			return body, err
		}
		if !found {
			// Not on the store's chain. Exact only when the store holds
			// the chain from genesis: a hash below a mid-chain store's
			// first block may well be on the best chain.
			_, fromGenesis, err := v.BlockAt(0)
			if err != nil {
				return body, err
			}
			if !fromGenesis {
				return errStatus(body, 404, "Block not known: this store holds the chain from a later height (it was started mid-chain), so it cannot say whether this block is on the best chain")
			}
			return append(body, `{"in_best_chain":false,"height":null,"next_best":null}`...), nil
		}
		height, inBest = h, true
		body = append(body, `{"in_best_chain":true,"height":`...)
		body = strconv.AppendUint(body, h, 10)
		body = append(body, `,"next_best":`...)
		next, found, err := v.BlockAt(h + 1)
		if err != nil {
			return body, err
		}
		if !found {
			body = append(body, "null"...)
		} else {
			body = append(body, '"')
			body = append(body, next.Hash.String()...)
			body = append(body, '"')
		}
		return append(body, '}'), nil
	})
	if err != nil {
		return Reply{}, err
	}
	maxAge := MaxAgeShort
	if inBest {
		maxAge = maxAgeByDepth(ans.Tip, height)
	}
	return reply(ans, ContentJSON, maxAge), nil
}

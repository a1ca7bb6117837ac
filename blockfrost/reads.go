package blockfrost

import (
	"context"
	"encoding/hex"
	"fmt"
	"strconv"

	"github.com/utxo-cache/utxo-cache/cardano/script"
	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/query"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

// address answers /addresses/{address}: the address's live balance
// (amount: lovelace, then each asset), its stake address (a base
// address's; null otherwise, a pointer address's included), its type and
// whether its payment credential is a script. An address with no live
// output answers its zero balance, not 404: the store keeps no history,
// so it cannot tell an unused address from a spent-out one.
func (f *FrontEnd) address(ctx context.Context, req Request) (query.Answer, error) {
	s, err := ParseSubject(req.Param("address"))
	if err != nil {
		return query.Answer{}, err
	}
	if s.Hash != nil {
		return query.Answer{}, fmt.Errorf("/addresses/{address} takes an address, not a payment credential: %w", chain.ErrInvalidArgument)
	}
	return f.r.FrontRead(ctx, query.FrontKey(append([]byte("a|"), s.Address...)), query.AddressGuard(s.Address), func(v *disk.View, body []byte) ([]byte, error) {
		b, err := v.Balance(disk.DimAddress, []byte(s.Address))
		if err != nil {
			return body, err
		}
		body = append(body, `{"address":`...)
		body = appendString(body, s.Address)
		body = append(body, `,"amount":[{"unit":"lovelace","quantity":"`...)
		body = append(body, b.Value.String()...)
		body = append(body, `"}`...)
		for _, a := range b.Assets {
			body = append(body, `,{"unit":"`...)
			body = hex.AppendEncode(body, a.Policy)
			body = hex.AppendEncode(body, a.Name)
			body = append(body, `","quantity":"`...)
			body = append(body, a.Quantity.String()...)
			body = append(body, `"}`...)
		}
		body = append(body, `],"stake_address":`...)
		if st := stakeAddress(s.Raw); !s.Byron && st != "" {
			body = appendString(body, st)
		} else {
			body = append(body, "null"...)
		}
		if s.Byron {
			body = append(body, `,"type":"byron","script":false}`...)
		} else {
			body = append(body, `,"type":"shelley","script":`...)
			body = strconv.AppendBool(body, paymentIsScript(s.Raw))
			body = append(body, '}')
		}
		return body, nil
	})
}

// parseHash reads a hex hash of n bytes (either case).
func parseHash(s string, n int, what string) ([]byte, error) {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != n {
		return nil, fmt.Errorf("%s %q: %d bytes in hex: %w", what, clip(s), n, chain.ErrInvalidArgument)
	}
	return b, nil
}

// txUtxos answers /txs/{hash}/utxos from the outputs of the transaction the
// store holds: the live ones and the spent ones still kept (the prune
// depth), each with consumed_by_tx. Blockfrost's "inputs" member is not
// sent: the store keeps no record of which outputs a transaction spent by
// the spender's hash. An output spent and pruned is absent from "outputs";
// a transaction none of whose outputs is held answers 404.
func (f *FrontEnd) txUtxos(_ context.Context, req Request) (query.Answer, error) {
	b, err := parseHash(req.Param("hash"), chain.HashSize, "transaction hash")
	if err != nil {
		return query.Answer{}, err
	}
	tx := chain.Hash(b)
	return f.r.FrontView(func(v *disk.View, body []byte) ([]byte, error) {
		start := len(body)
		body = append(body, `{"hash":`...)
		body = appendHexString(body, tx[:])
		body = append(body, `,"outputs":[`...)
		n := 0
		err := v.TxOutputsFunc(tx, func(r *disk.UtxoRef) error {
			if n > 0 {
				body = append(body, ',')
			}
			n++
			body = appendTxOutput(body, r)
			return nil
		})
		if err != nil {
			return body, err
		}
		if n == 0 {
			return notFound(body[:start], "this service holds no output of transaction "+tx.String()+
				": it keeps live outputs and spent ones for its prune depth, not the chain's history")
		}
		return append(body, "]}"...), nil
	})
}

// latestBlock answers /blocks/latest with what the store keeps of its tip:
// hash, height, slot, previous_block and confirmations (0). Blockfrost's
// other members (time, epoch, size, fees, the producer's keys…) are not
// sent: the store does not keep them.
func (f *FrontEnd) latestBlock(_ context.Context, _ Request) (query.Answer, error) {
	return f.r.FrontView(func(v *disk.View, body []byte) ([]byte, error) {
		tip := v.Tip()
		if tip.Empty {
			return notFound(body, "this store has applied no block yet")
		}
		p, found, err := v.PointAt(tip.Height)
		if err != nil {
			return body, err
		}
		body = append(body, `{"hash":`...)
		body = appendHexString(body, tip.Hash[:])
		body = append(body, `,"height":`...)
		body = strconv.AppendUint(body, tip.Height, 10)
		body = append(body, `,"slot":`...)
		if found && p.Slot != 0 {
			body = strconv.AppendUint(body, p.Slot, 10)
		} else {
			body = append(body, "null"...)
		}
		body = append(body, `,"previous_block":`...)
		prev, found, err := chain.Point{}, false, error(nil)
		if tip.Height > 0 {
			prev, found, err = v.PointAt(tip.Height - 1)
			if err != nil {
				return body, err
			}
		}
		if found {
			body = appendHexString(body, prev.Hash[:])
		} else {
			body = append(body, "null"...)
		}
		return append(body, `,"next_block":null,"confirmations":0}`...), nil
	})
}

// refScript finds a reference script by hash in the store's live outputs
// (the reference_script_hash index) and calls fn with it; a hash no live
// output carries answers 404.
func (f *FrontEnd) refScript(ctx context.Context, req Request, kind string, fn func(body []byte, ref script.Ref) []byte) (query.Answer, error) {
	h, err := parseHash(req.Param("hash"), script.HashLen, "script hash")
	if err != nil {
		return query.Answer{}, err
	}
	if err := f.indexKept(disk.DimReferenceScriptHash, "a script lookup"); err != nil {
		return query.Answer{}, err
	}
	return f.r.FrontRead(ctx, query.FrontKey(hex.AppendEncode(append([]byte(kind), '|'), h)), query.IndexGuard(disk.DimReferenceScriptHash, h), func(v *disk.View, body []byte) ([]byte, error) {
		var ref script.Ref
		var refBytes []byte
		_, _, err := v.ListFunc(disk.ListQuery{Dim: disk.DimReferenceScriptHash, Value: h, Limit: 1}, func(r *disk.UtxoRef) error {
			refBytes = append([]byte(nil), r.ScriptRef...)
			return nil
		})
		if err != nil {
			return body, err
		}
		if refBytes == nil {
			return notFound(body, "no live output of this store carries a reference script of hash "+hex.EncodeToString(h)+
				": this service serves the scripts of live outputs' reference scripts only")
		}
		if ref, err = script.ParseRef(refBytes); err != nil {
			return body, fmt.Errorf("blockfrost: stored reference script %x: %w", h, err)
		}
		return fn(body, ref), nil
	})
}

func (f *FrontEnd) scriptInfo(ctx context.Context, req Request) (query.Answer, error) {
	return f.refScript(ctx, req, "si", func(body []byte, ref script.Ref) []byte {
		body = append(body, `{"script_hash":`...)
		body = appendHexString(body, ref.Hash[:])
		body = append(body, `,"type":"`...)
		body = append(body, ref.Language.String()...)
		body = append(body, `","serialised_size":`...)
		if ref.Language == script.Native {
			body = append(body, "null"...)
		} else {
			body = strconv.AppendInt(body, int64(len(ref.Body)), 10)
		}
		return append(body, '}')
	})
}

func (f *FrontEnd) scriptCBOR(ctx context.Context, req Request) (query.Answer, error) {
	return f.refScript(ctx, req, "sc", func(body []byte, ref script.Ref) []byte {
		body = append(body, `{"cbor":`...)
		if ref.Language == script.Native {
			body = append(body, "null"...)
		} else {
			body = appendHexString(body, ref.Body)
		}
		return append(body, '}')
	})
}

func (f *FrontEnd) scriptJSON(ctx context.Context, req Request) (query.Answer, error) {
	return f.refScript(ctx, req, "sj", func(body []byte, ref script.Ref) []byte {
		body = append(body, `{"json":`...)
		if ref.Language != script.Native {
			return append(body, "null}"...)
		}
		out, err := script.NativeJSON(body, ref.Body)
		if err != nil { // ParseRef read the same bytes: unreachable
			return append(body, "null}"...)
		}
		return append(out, '}')
	})
}

// datumCBOR answers /scripts/datum/{hash}/cbor from the inline datums of
// the store's live outputs (the datum_hash index). A datum that live
// outputs name only by its hash, or that only spent outputs carried, is
// not held: 404.
func (f *FrontEnd) datumCBOR(ctx context.Context, req Request) (query.Answer, error) {
	h, err := parseHash(req.Param("hash"), script.DatumHashLen, "datum hash")
	if err != nil {
		return query.Answer{}, err
	}
	if err := f.indexKept(disk.DimDatumHash, "a datum lookup"); err != nil {
		return query.Answer{}, err
	}
	return f.r.FrontRead(ctx, query.FrontKey(hex.AppendEncode([]byte("dc|"), h)), query.IndexGuard(disk.DimDatumHash, h), func(v *disk.View, body []byte) ([]byte, error) {
		start := len(body)
		body = append(body, `{"cbor":`...)
		found := false
		_, _, err := v.ListFunc(disk.ListQuery{Dim: disk.DimDatumHash, Value: h, Limit: 1}, func(r *disk.UtxoRef) error {
			body = appendHexString(body, r.Datum)
			found = true
			return nil
		})
		if err != nil {
			return body, err
		}
		if !found {
			return notFound(body[:start], "no live output of this store carries an inline datum of hash "+hex.EncodeToString(h)+
				": this service serves the inline datums of live outputs only")
		}
		return append(body, '}'), nil
	})
}

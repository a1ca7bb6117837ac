package chain

import (
	"errors"
	"fmt"
)

// The JSON bodies of the HTTP API's requests (CONTRACT §3) other than blocks:
// POST /v1/utxos/lookup and POST /v1/rollback. They are decoded by the block
// codec's strict reader and schema walk (decode.go), so every JSON body the
// service accepts follows one set of rules (codec_json.go): field names
// exactly as written (no case folding, unlike encoding/json), a duplicate or
// unknown field rejected, hashes 64 hex characters of either case, integers
// without sign, fraction or exponent, and nothing but whitespace after the
// value. encoding/json
// would keep the last of two duplicate keys: {"height":14146,"height":14136}
// would roll back to 14136.
//
// Every error wraps ErrInvalidArgument and names the offending field
// ("outpoints[2].index: …").

// DecodeLookupJSON decodes {"outpoints": [OutPoint, …]} holding 1..max
// outpoints, in request order. It never panics.
func DecodeLookupJSON(data []byte, max int) ([]OutPoint, error) {
	d := blockDecoder{src: &jsonSource{data: data}, invalid: ErrInvalidArgument}
	ops, err := d.lookup(max)
	if err == nil {
		err = d.end()
	}
	if errors.Is(err, ErrTooLarge) {
		// The only count limit here is max: a bad argument, not a large body.
		return nil, fmt.Errorf("outpoints: more than %d: %w", max, ErrInvalidArgument)
	}
	if err != nil {
		return nil, err
	}
	if len(ops) == 0 {
		return nil, fmt.Errorf("outpoints: empty, want 1..%d: %w", max, ErrInvalidArgument)
	}
	return ops, nil
}

func (d *blockDecoder) lookup(max int) ([]OutPoint, error) {
	if err := d.src.objectStart(); err != nil {
		return nil, d.fail(err)
	}
	var ops []OutPoint
	var seen uint16
	for {
		key, ok, err := d.src.objectNext()
		if err != nil {
			return nil, d.fail(err)
		}
		if !ok {
			break
		}
		switch string(key) {
		case "outpoints":
			if err := d.enter(&seen, 0, "outpoints"); err != nil {
				return nil, err
			}
			if ops, err = d.outPoints(max); err != nil {
				return nil, err
			}
		default:
			return nil, d.unknown(key)
		}
		d.path.pop()
	}
	return ops, d.checkRequired(seen, 1<<0, []string{"outpoints"})
}

// RollbackTarget is the body of POST /v1/rollback: {"height": H} or
// {"hash": "…"}, exactly one of them (neither may be null: there is no
// optional field here).
type RollbackTarget struct {
	Height uint64
	Hash   Hash
	ByHash bool // the target is Hash, not Height
}

// DecodeRollbackJSON decodes a rollback target. It never panics.
func DecodeRollbackJSON(data []byte) (RollbackTarget, error) {
	d := blockDecoder{src: &jsonSource{data: data}, invalid: ErrInvalidArgument}
	t, err := d.rollbackTarget()
	if err == nil {
		err = d.end()
	}
	return t, err
}

func (d *blockDecoder) rollbackTarget() (RollbackTarget, error) {
	var t RollbackTarget
	if err := d.src.objectStart(); err != nil {
		return t, d.fail(err)
	}
	var seen uint16
	for {
		key, ok, err := d.src.objectNext()
		if err != nil {
			return t, d.fail(err)
		}
		if !ok {
			break
		}
		switch string(key) {
		case "height":
			if err = d.enter(&seen, 0, "height"); err != nil {
				return t, err
			}
			t.Height, err = d.src.uint(1<<64 - 1)
		case "hash":
			if err = d.enter(&seen, 1, "hash"); err != nil {
				return t, err
			}
			t.ByHash = true
			err = d.src.hash(&t.Hash)
		default:
			return t, d.unknown(key)
		}
		if err != nil {
			return t, d.fail(err)
		}
		d.path.pop()
	}
	if seen != 1<<0 && seen != 1<<1 {
		return RollbackTarget{}, fmt.Errorf("give exactly one of height and hash: %w", ErrInvalidArgument)
	}
	return t, nil
}

// end rejects anything but whitespace after the value.
func (d *blockDecoder) end() error {
	if err := d.src.end(); err != nil {
		return d.fail(err)
	}
	return nil
}

package chain

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// This file holds the part of block decoding that both encodings share: the
// schema of docs/blocks.md (which fields exist, which are required, their types,
// defaults and count limits) walked over a tokenSource.
//
// # Why not encoding/json or fxamacker's struct decoding
//
// Out of the box both are lenient where the contract is strict: a CBOR null
// or JSON null decodes into a uint64 field as 0 (so a required "index": null
// silently becomes index 0), fxamacker copies a 2-byte byte string into a
// [32]byte and zero-fills the rest, encoding/json keeps the last of two
// duplicate keys, and neither names the failing element
// ("txs[3].outputs[1].address").
//
// fxamacker/cbor can be made exactly as strict: codec_cbor_fxamacker_test.go
// does it (strict DecOptions, fields that keep the raw item so presence,
// null and type are checked, and a conversion pass that names the element),
// and FuzzCBORDecodersAgree checks that it accepts the same inputs as this
// walker and decodes them to the same blocks. It is kept as that reference
// only, because it is about four times slower; even fxamacker decoding into
// plain structs, with none of the contract's checks, takes about twice as
// long as the walker, so no decoder built on its struct decoding comes within
// 1.5x. The 300-transaction block of BenchmarkDecodeBlockCBOR (165 kB), on 2
// shared cores, median of 10 interleaved runs, two sessions:
//
//	go test -run='^$' -bench=DecodeBlockCBOR -benchmem ./chain/
//	decoder=walker              894 µs   922 µs   254736 B/op  1410 allocs/op
//	decoder=fxamacker          3333 µs  4386 µs   666560 B/op  3925 allocs/op
//	decoder=fxamacker-lenient  1618 µs  1966 µs   265745 B/op  3123 allocs/op
//
// The schema is small and fixed, so a direct walk is short,
// allocation-light and exact: every key is known, so duplicate detection is
// a bitmask, and nesting depth is fixed by the schema, not by the input.
// fxamacker/cbor stays the strict reference for CBOR decoding, the oracle
// for well-formedness (FuzzDecodeBlockCBOR), and the deterministic encoder
// (MarshalDeterministic). JSON has no such reference: encoding/json has no
// duplicate-key check and no presence tracking, so it keeps the walker too.

// tokenSource is one encoding's reader of values. Each method consumes exactly
// one value (or reports an error, after which the source is not used again).
// Errors are short messages without a path; the walker adds the path and the
// sentinel. Byte slices it returns (keys) are valid until the next call.
type tokenSource interface {
	// objectStart consumes the start of an object (JSON) or map (CBOR).
	objectStart() error
	// objectNext returns the next key of the innermost open object, or
	// ok == false after its last.
	objectNext() (key []byte, ok bool, err error)
	// arrayStart consumes the start of an array of at most limit entries. It
	// returns the announced length (CBOR), or 0 when unknown (JSON).
	arrayStart(limit int) (hint int, err error)
	// arrayNext reports whether the innermost open array has another entry.
	arrayNext() (bool, error)
	// null consumes a null and reports true, or consumes nothing.
	null() (bool, error)
	// uint reads an unsigned integer ≤ max.
	uint(max uint64) (uint64, error)
	// int64 reads a signed 64-bit integer.
	int64() (int64, error)
	// amount reads a uint64 given as an integer or a decimal string.
	amount() (uint64, error)
	boolean() (bool, error)
	// hash reads exactly HashSize bytes (hex in JSON).
	hash(h *Hash) error
	// bytes reads a byte field (hex in JSON) into memory from a; empty is nil.
	bytes(a *arena) ([]byte, error)
	// text reads a UTF-8 string.
	text() (string, error)
	// end reports an error unless the input is exhausted.
	end() error
}

// container is the iteration state of one open object or array.
type container struct {
	remaining int  // CBOR: entries left
	count     int  // JSON: array entries seen
	limit     int  // JSON: array entries allowed
	first     bool // JSON: nothing consumed after the opening bracket
}

// nesting is a source's stack of open containers. It lives in the source,
// not in the walker's frames, because a pointer passed through the interface
// would move every container to the heap. The schema nests at most 7 deep
// (block, txs, tx, outputs, output, assets, asset).
type nesting struct {
	open  [8]container
	depth int
}

func (n *nesting) push(c container) error {
	if n.depth == len(n.open) {
		return errors.New("nested too deeply")
	}
	n.open[n.depth] = c
	n.depth++
	return nil
}

// top is the innermost open container; the walker calls objectNext and
// arrayNext only after a successful start, so there is one.
func (n *nesting) top() *container { return &n.open[n.depth-1] }

func (n *nesting) pop() { n.depth-- }

// blockDecoder walks the schema. It is used for one block (or one request
// body, request.go) and discarded.
type blockDecoder struct {
	src   tokenSource
	lim   Limits
	path  fieldPath
	arena arena
	// invalid is the sentinel every decoding error wraps: nil means
	// ErrInvalidBlock (blocks); request bodies use ErrInvalidArgument.
	invalid error
	// memory is BlockMemory of what is decoded so far, checked against
	// lim's block memory limit as each item arrives.
	memory int64
	// replace, when set, makes tx accept a "replace" member (a pending
	// transaction's body, pending.go) and receives its value.
	replace *bool
}

// charge adds n bytes to the block's memory estimate, and fails once it is
// over the limit: the rest of the block is not decoded.
func (d *blockDecoder) charge(n int64) error {
	d.memory += n
	if limit := d.lim.BlockMemoryLimit(); d.memory > int64(limit) {
		return d.fail(overMemory(d.memory, limit, true))
	}
	return nil
}

// decodeBlock decodes one block from src, rejects trailing data and
// validates the result. lim must already have its defaults.
func decodeBlock(src tokenSource, lim Limits) (*Block, error) {
	d := blockDecoder{src: src, lim: lim}
	b, err := d.block()
	if err != nil {
		return nil, err
	}
	if err := d.end(); err != nil {
		return nil, err
	}
	if err := ValidateBlock(b, lim); err != nil {
		return nil, err
	}
	return b, nil
}

// fail wraps err with the current path and, unless it is a size limit, with
// the decoder's invalid sentinel (ErrInvalidBlock for blocks).
func (d *blockDecoder) fail(err error) error {
	invalid := d.invalid
	if invalid == nil {
		invalid = ErrInvalidBlock
	}
	p := d.path.String()
	switch {
	case errors.Is(err, ErrTooLarge) && p == "":
		return err
	case errors.Is(err, ErrTooLarge):
		return fmt.Errorf("%s: %w", p, err)
	case p == "":
		return fmt.Errorf("%w: %w", err, invalid)
	default:
		return fmt.Errorf("%s: %w: %w", p, err, invalid)
	}
}

var errMissing = errors.New("missing")

// enter pushes the field on the path and marks it seen, rejecting a
// duplicate key.
func (d *blockDecoder) enter(seen *uint16, bit uint, name string) error {
	d.path.push(name)
	if *seen&(1<<bit) != 0 {
		return d.fail(errors.New("duplicate field"))
	}
	*seen |= 1 << bit
	return nil
}

// present consumes a null for an optional field and reports whether the
// field has a value. A null optional field is the same as an absent one.
func (d *blockDecoder) present() (bool, error) {
	null, err := d.src.null()
	return !null, err
}

// unknown rejects a key that is not in the schema.
func (d *blockDecoder) unknown(key []byte) error {
	return d.fail(fmt.Errorf("unknown field %q", clip(key)))
}

// checkRequired reports the first field of names whose bit is in required
// but not in seen.
func (d *blockDecoder) checkRequired(seen, required uint16, names []string) error {
	for bit, name := range names {
		if required&^seen&(1<<bit) != 0 {
			d.path.push(name)
			return d.fail(errMissing)
		}
	}
	return nil
}

var blockFields = []string{"height", "hash", "prev_hash", "time", "txs", "slot"}

const blockRequired = 1<<0 | 1<<1 | 1<<4

func (d *blockDecoder) block() (*Block, error) {
	if err := d.src.objectStart(); err != nil {
		return nil, d.fail(err)
	}
	b := new(Block)
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
		case "height":
			if err = d.enter(&seen, 0, "height"); err != nil {
				return nil, err
			}
			b.Height, err = d.src.uint(1<<64 - 1)
		case "hash":
			if err = d.enter(&seen, 1, "hash"); err != nil {
				return nil, err
			}
			err = d.src.hash(&b.Hash)
		case "prev_hash":
			if err = d.enter(&seen, 2, "prev_hash"); err != nil {
				return nil, err
			}
			var ok bool
			if ok, err = d.present(); ok {
				err = d.src.hash(&b.PrevHash)
			}
		case "time":
			if err = d.enter(&seen, 3, "time"); err != nil {
				return nil, err
			}
			var ok bool
			if ok, err = d.present(); ok {
				b.Time, err = d.src.int64()
			}
		case "slot":
			if err = d.enter(&seen, 5, "slot"); err != nil {
				return nil, err
			}
			var ok bool
			if ok, err = d.present(); ok {
				b.Slot, err = d.src.uint(1<<64 - 1)
			}
		case "txs":
			if err = d.enter(&seen, 4, "txs"); err != nil {
				return nil, err
			}
			if b.Txs, err = d.txs(); err != nil {
				return nil, err
			}
		default:
			return nil, d.unknown(key)
		}
		if err != nil {
			return nil, d.fail(err)
		}
		d.path.pop()
	}
	if err := d.checkRequired(seen, blockRequired, blockFields); err != nil {
		return nil, err
	}
	return b, nil
}

// txs decodes the txs array; the caller has pushed "txs".
// decodeArray decodes an array of at most limit entries, each with elem,
// naming entry i in errors. An empty array decodes as nil.
func decodeArray[T any](d *blockDecoder, limit int, elem func(*T) error) ([]T, error) {
	hint, err := d.src.arrayStart(limit)
	if err != nil {
		return nil, d.fail(err)
	}
	var out []T
	if hint > 0 {
		out = make([]T, 0, hint)
	}
	for i := 0; ; i++ {
		ok, err := d.src.arrayNext()
		if err != nil {
			return nil, d.fail(err)
		}
		if !ok {
			break
		}
		d.path.setIndex(i)
		var zero T
		out = append(out, zero)
		if err := elem(&out[i]); err != nil {
			return nil, err
		}
		d.path.setIndex(-1) // a count error names the array, not an entry
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

func (d *blockDecoder) txs() ([]Tx, error) {
	return decodeArray(d, d.lim.MaxTxs, d.tx)
}

var txFields = []string{"hash", "inputs", "outputs", "collateral_inputs", "collateral_return", "valid", "coinbase"}

const txRequired = 1<<0 | 1<<1 | 1<<2 // hash, inputs, outputs (docs/blocks.md: required unless optional)

func (d *blockDecoder) tx(tx *Tx) error {
	if err := d.charge(BlockMemoryPerTx); err != nil {
		return err
	}
	if err := d.src.objectStart(); err != nil {
		return d.fail(err)
	}
	valid := true
	var seen uint16
	for {
		key, ok, err := d.src.objectNext()
		if err != nil {
			return d.fail(err)
		}
		if !ok {
			break
		}
		switch string(key) {
		case "hash":
			if err = d.enter(&seen, 0, "hash"); err != nil {
				return err
			}
			err = d.src.hash(&tx.Hash)
		case "inputs":
			if err = d.enter(&seen, 1, "inputs"); err != nil {
				return err
			}
			// Required (docs/blocks.md): null is as wrong as a missing key.
			if tx.Inputs, err = d.outPoints(d.lim.MaxInputsPerTx); err != nil {
				return err
			}
		case "outputs":
			if err = d.enter(&seen, 2, "outputs"); err != nil {
				return err
			}
			if tx.Outputs, err = d.outputs(); err != nil {
				return err
			}
		case "collateral_inputs":
			if err = d.enter(&seen, 3, "collateral_inputs"); err != nil {
				return err
			}
			var ok bool
			if ok, err = d.present(); ok {
				if tx.CollateralInputs, err = d.outPoints(d.lim.MaxInputsPerTx); err != nil {
					return err
				}
			}
		case "collateral_return":
			if err = d.enter(&seen, 4, "collateral_return"); err != nil {
				return err
			}
			var ok bool
			if ok, err = d.present(); ok {
				o := new(Output)
				if err = d.output(o); err != nil {
					return err
				}
				tx.CollateralReturn = o
			}
		case "valid":
			if err = d.enter(&seen, 5, "valid"); err != nil {
				return err
			}
			var ok bool
			if ok, err = d.present(); ok {
				valid, err = d.src.boolean()
			}
		case "coinbase":
			if err = d.enter(&seen, 6, "coinbase"); err != nil {
				return err
			}
			var ok bool
			if ok, err = d.present(); ok {
				tx.Coinbase, err = d.src.boolean()
			}
		case "replace":
			if d.replace == nil {
				return d.unknown(key)
			}
			if err = d.enter(&seen, 7, "replace"); err != nil {
				return err
			}
			*d.replace, err = d.src.boolean()
		default:
			return d.unknown(key)
		}
		if err != nil {
			return d.fail(err)
		}
		d.path.pop()
	}
	tx.Invalid = !valid
	return d.checkRequired(seen, txRequired, txFields)
}

// outPoints decodes an array of outpoints; the caller has pushed its name.
func (d *blockDecoder) outPoints(limit int) ([]OutPoint, error) {
	return decodeArray(d, limit, d.outPoint)
}

var outPointFields = []string{"tx_hash", "index"}

const outPointRequired = 1<<0 | 1<<1

func (d *blockDecoder) outPoint(op *OutPoint) error {
	if err := d.charge(BlockMemoryPerInput); err != nil {
		return err
	}
	if err := d.src.objectStart(); err != nil {
		return d.fail(err)
	}
	var seen uint16
	for {
		key, ok, err := d.src.objectNext()
		if err != nil {
			return d.fail(err)
		}
		if !ok {
			break
		}
		switch string(key) {
		case "tx_hash":
			if err = d.enter(&seen, 0, "tx_hash"); err != nil {
				return err
			}
			err = d.src.hash(&op.TxHash)
		case "index":
			if err = d.enter(&seen, 1, "index"); err != nil {
				return err
			}
			var v uint64
			v, err = d.src.uint(1<<32 - 1)
			op.Index = uint32(v)
		default:
			return d.unknown(key)
		}
		if err != nil {
			return d.fail(err)
		}
		d.path.pop()
	}
	return d.checkRequired(seen, outPointRequired, outPointFields)
}

// outputs decodes the outputs array; the caller has pushed "outputs".
func (d *blockDecoder) outputs() ([]Output, error) {
	return decodeArray(d, d.lim.MaxOutputsPerTx, d.output)
}

var outputFields = []string{"address", "value", "assets", "datum_hash", "datum", "script_ref"}

const outputRequired = 1<<0 | 1<<1

func (d *blockDecoder) output(o *Output) error {
	if err := d.src.objectStart(); err != nil {
		return d.fail(err)
	}
	var seen uint16
	for {
		key, ok, err := d.src.objectNext()
		if err != nil {
			return d.fail(err)
		}
		if !ok {
			break
		}
		switch string(key) {
		case "address":
			if err = d.enter(&seen, 0, "address"); err != nil {
				return err
			}
			o.Address, err = d.src.text()
		case "value":
			if err = d.enter(&seen, 1, "value"); err != nil {
				return err
			}
			o.Value, err = d.src.amount()
		case "assets":
			if err = d.enter(&seen, 2, "assets"); err != nil {
				return err
			}
			var ok bool
			if ok, err = d.present(); ok {
				if o.Assets, err = d.assets(); err != nil {
					return err
				}
			}
		case "datum_hash":
			if err = d.enter(&seen, 3, "datum_hash"); err != nil {
				return err
			}
			var ok bool
			if ok, err = d.present(); ok {
				h := new(Hash)
				err = d.src.hash(h)
				o.DatumHash = h
			}
		case "datum":
			if err = d.enter(&seen, 4, "datum"); err != nil {
				return err
			}
			var ok bool
			if ok, err = d.present(); ok {
				o.Datum, err = d.src.bytes(&d.arena)
			}
		case "script_ref":
			if err = d.enter(&seen, 5, "script_ref"); err != nil {
				return err
			}
			var ok bool
			if ok, err = d.present(); ok {
				o.ScriptRef, err = d.src.bytes(&d.arena)
			}
		default:
			return d.unknown(key)
		}
		if err != nil {
			return d.fail(err)
		}
		d.path.pop()
	}
	if err := d.checkRequired(seen, outputRequired, outputFields); err != nil {
		return err
	}
	return d.charge(outputMemory(o))
}

// assets decodes the assets array and sorts it in (policy, name) order; the
// caller has pushed "assets".
func (d *blockDecoder) assets() ([]Asset, error) {
	assets, err := decodeArray(d, d.lim.MaxAssetsPerOutput, d.asset)
	if err != nil || assets == nil {
		return nil, err
	}
	if !AssetsSorted(assets) {
		SortAssets(assets)
	}
	return assets, nil
}

var assetFields = []string{"policy", "name", "quantity"}

const assetRequired = 1<<0 | 1<<1 | 1<<2

func (d *blockDecoder) asset(a *Asset) error {
	if err := d.src.objectStart(); err != nil {
		return d.fail(err)
	}
	var seen uint16
	for {
		key, ok, err := d.src.objectNext()
		if err != nil {
			return d.fail(err)
		}
		if !ok {
			break
		}
		switch string(key) {
		case "policy":
			if err = d.enter(&seen, 0, "policy"); err != nil {
				return err
			}
			a.Policy, err = d.src.bytes(&d.arena)
		case "name":
			if err = d.enter(&seen, 1, "name"); err != nil {
				return err
			}
			a.Name, err = d.src.bytes(&d.arena)
		case "quantity":
			if err = d.enter(&seen, 2, "quantity"); err != nil {
				return err
			}
			a.Quantity, err = d.src.amount()
		default:
			return d.unknown(key)
		}
		if err != nil {
			return d.fail(err)
		}
		d.path.pop()
	}
	return d.checkRequired(seen, assetRequired, assetFields)
}

// fieldPath is the position of the value being decoded, rendered only when
// an error needs it ("txs[3].outputs[1].address"). Its depth is fixed by the
// schema (at most 5), not by the input.
type fieldPath struct {
	segs [8]pathSeg
	n    int
}

type pathSeg struct {
	name string
	idx  int // array index, or -1
}

func (p *fieldPath) push(name string) {
	if p.n < len(p.segs) {
		p.segs[p.n] = pathSeg{name: name, idx: -1}
	}
	p.n++
}

func (p *fieldPath) pop() { p.n-- }

func (p *fieldPath) setIndex(i int) {
	if p.n > 0 && p.n <= len(p.segs) {
		p.segs[p.n-1].idx = i
	}
}

func (p *fieldPath) String() string {
	var sb strings.Builder
	for i := range min(p.n, len(p.segs)) {
		if i > 0 {
			sb.WriteByte('.')
		}
		sb.WriteString(p.segs[i].name)
		if p.segs[i].idx >= 0 {
			sb.WriteByte('[')
			sb.WriteString(strconv.Itoa(p.segs[i].idx))
			sb.WriteByte(']')
		}
	}
	return sb.String()
}

// arena hands out the byte fields of one block (policies, names, datums)
// from shared chunks, so that a block with thousands of assets costs a few
// allocations, not thousands. Slices are capacity-capped, so appending to
// one never overwrites another; a decoded block never aliases its input.
type arena struct {
	buf  []byte
	next int // size of the next chunk
}

const (
	arenaMinChunk = 512
	arenaMaxChunk = 32 << 10
)

func (a *arena) alloc(n int) []byte {
	if n > arenaMaxChunk/4 {
		return make([]byte, n)
	}
	if cap(a.buf)-len(a.buf) < n {
		a.next = min(max(2*a.next, arenaMinChunk), arenaMaxChunk)
		a.buf = make([]byte, 0, max(a.next, n))
	}
	l := len(a.buf)
	a.buf = a.buf[:l+n]
	return a.buf[l : l+n : l+n]
}

// parseDecimal parses a strict unsigned decimal: digits only, no sign,
// no leading zeros except "0" itself, at most 2^64-1.
func parseDecimal(s []byte) (uint64, error) {
	if len(s) == 0 || (s[0] == '0' && len(s) > 1) {
		return 0, fmt.Errorf("%q is not an unsigned decimal integer", clip(s))
	}
	var v uint64
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%q is not an unsigned decimal integer", clip(s))
		}
		if v > (1<<64-1)/10 || v*10 > 1<<64-1-uint64(c-'0') {
			return 0, fmt.Errorf("%s overflows uint64", clip(s))
		}
		v = v*10 + uint64(c-'0')
	}
	return v, nil
}

// clip shortens s for an error message.
func clip(s []byte) string {
	const max = 40
	if len(s) > max {
		return string(s[:max]) + "…"
	}
	return string(s)
}

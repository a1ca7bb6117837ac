package cardano

import (
	"bytes"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"testing"

	"golang.org/x/crypto/blake2b"

	"github.com/utxo-cache/utxo-cache/chain"
)

// The facts of a fixture block, read from its raw CBOR by rawcbor_test.go's
// decoder, with no code shared with the adapter.
type rawFacts struct {
	era       uint64
	blockHash [32]byte
	txs       []rawTx
}

type rawTx struct {
	hash             [32]byte
	inputs           []string // "txhash:index" as chain.OutPoint renders it, Shelley on
	collateral       []string
	outputs          []rawOut
	collateralReturn bool
}

type rawOut struct {
	addr      []byte
	lovelace  uint64
	assets    int // (policy, name) entries with a quantity > 0
	datumHash []byte
	datum     []byte
	script    []byte
}

func readFacts(tagged []byte) (rawFacts, error) {
	var f rawFacts
	top, err := parseItem(tagged)
	if err != nil {
		return f, err
	}
	if top.major != 4 || len(top.elems) != 2 || top.elems[0].major != 0 {
		return f, fmt.Errorf("not [tag, block]")
	}
	f.era = top.elems[0].arg
	blk := top.elems[1]
	if len(blk.elems) < 2 {
		return f, fmt.Errorf("block of %d elements", len(blk.elems))
	}
	header := blk.elems[0]
	if f.era <= 1 {
		// A Byron block's hash covers [tag, header].
		f.blockHash = blake2b.Sum256(append([]byte{0x82, byte(f.era)}, header.raw...))
	} else {
		f.blockHash = blake2b.Sum256(header.raw)
	}
	switch f.era {
	case 0:
		return f, nil
	case 1:
		for _, txAux := range blk.elems[1].elems[0].elems {
			tx := txAux.elems[0]
			rt := rawTx{hash: blake2b.Sum256(tx.raw)}
			for _, o := range tx.elems[1].elems {
				rt.outputs = append(rt.outputs, rawOut{addr: o.elems[0].raw, lovelace: o.elems[1].arg})
			}
			f.txs = append(f.txs, rt)
		}
		return f, nil
	}
	for _, body := range blk.elems[1].elems {
		rt := rawTx{hash: blake2b.Sum256(body.raw)}
		outs, _ := body.get(1)
		for _, o := range outs.elems {
			ro, err := readOutput(o)
			if err != nil {
				return f, err
			}
			rt.outputs = append(rt.outputs, ro)
		}
		_, rt.collateralReturn = body.get(16)
		ins, _ := body.get(0)
		rt.inputs = readOutPoints(ins)
		if c, ok := body.get(13); ok {
			rt.collateral = readOutPoints(c)
		}
		f.txs = append(f.txs, rt)
	}
	return f, nil
}

// readOutPoints reads a set of inputs (an array, tag 258 allowed) of
// [txid, index].
func readOutPoints(set item) []string {
	var ops []string
	for _, in := range set.untag().elems {
		ops = append(ops, fmt.Sprintf("%x:%d", in.elems[0].bytes, in.elems[1].arg))
	}
	return ops
}

func readOutput(o item) (rawOut, error) {
	var ro rawOut
	var value item
	switch o.major {
	case 4:
		ro.addr, value = o.elems[0].bytes, o.elems[1]
		if len(o.elems) == 3 {
			ro.datumHash = o.elems[2].bytes
		}
	case 5:
		a, _ := o.get(0)
		ro.addr = a.bytes
		value, _ = o.get(1)
		if d, ok := o.get(2); ok {
			switch d.elems[0].arg {
			case 0:
				ro.datumHash = d.elems[1].bytes
			case 1:
				ro.datum = d.elems[1].untag().bytes
			}
		}
		if s, ok := o.get(3); ok {
			ro.script = s.untag().bytes
		}
	default:
		return ro, fmt.Errorf("output of major type %d", o.major)
	}
	if value.major == 0 {
		ro.lovelace = value.arg
		return ro, nil
	}
	ro.lovelace = value.elems[0].arg
	ma := value.elems[1]
	for i := 1; i < len(ma.elems); i += 2 {
		names := ma.elems[i]
		for j := 1; j < len(names.elems); j += 2 {
			if names.elems[j].arg > 0 {
				ro.assets++
			}
		}
	}
	return ro, nil
}

// allBlocks returns the single fixture blocks, then the chunks' complete
// blocks (named "chunk#i").
func allBlocks(tb testing.TB) []fixture {
	blocks := append([]fixture(nil), loadFixtures(tb)...)
	for _, lc := range loadChunks(tb) {
		for i, blk := range lc.chunk.Blocks {
			blocks = append(blocks, fixture{name: fmt.Sprintf("%s#%d", lc.name, i), tagged: blk})
		}
	}
	return blocks
}

// TestFixtureFactsIndependently checks every converted fixture block (single
// and chunk) against facts computed from its raw bytes: block and transaction
// hashes (blake2b-256 of the original header and body bytes), inputs and
// collateral inputs as sets (Shelley on), and, output by output, the address
// bytes behind the rendered string, lovelace, asset count, datum hash,
// inline datum and reference script byte for byte.
func TestFixtureFactsIndependently(t *testing.T) {
	a := newAdapter(t)
	for _, fx := range allBlocks(t) {
		b, err := a.Convert(fx.tagged)
		if err != nil {
			t.Fatalf("%s: %v", fx.name, err)
		}
		f, err := readFacts(fx.tagged)
		if err != nil {
			t.Fatalf("%s: raw decode: %v", fx.name, err)
		}
		if uint64(b.Era) != f.era {
			t.Errorf("%s: era %d, raw tag %d", fx.name, b.Era, f.era)
		}
		if b.Chain.Hash != chain.Hash(f.blockHash) {
			t.Errorf("%s: block hash %s, blake2b-256 of the header %x", fx.name, b.Chain.Hash, f.blockHash)
		}
		if len(b.Chain.Txs) != len(f.txs) {
			t.Fatalf("%s: %d txs, raw %d", fx.name, len(b.Chain.Txs), len(f.txs))
		}
		for i, rt := range f.txs {
			tx := &b.Chain.Txs[i]
			if tx.Hash != chain.Hash(rt.hash) {
				t.Errorf("%s tx %d: hash %s, blake2b-256 of the body %x", fx.name, i, tx.Hash, rt.hash)
			}
			if len(tx.Outputs) != len(rt.outputs) {
				t.Fatalf("%s tx %s: %d outputs, raw %d", fx.name, tx.Hash, len(tx.Outputs), len(rt.outputs))
			}
			if f.era >= 2 {
				checkOutPoints(t, fmt.Sprintf("%s tx %s inputs", fx.name, tx.Hash), tx.Inputs, rt.inputs)
				checkOutPoints(t, fmt.Sprintf("%s tx %s collateral", fx.name, tx.Hash), tx.CollateralInputs, rt.collateral)
			}
			if (tx.CollateralReturn != nil) != rt.collateralReturn {
				t.Errorf("%s tx %s: collateral return %v, raw %v", fx.name, tx.Hash, tx.CollateralReturn != nil, rt.collateralReturn)
			}
			for j, ro := range rt.outputs {
				checkOutput(t, fmt.Sprintf("%s %s#%d", fx.name, tx.Hash, j), &tx.Outputs[j], ro)
			}
		}
	}
}

// checkOutPoints compares inputs as sets: the order of a set is not
// meaningful, and the library may sort it.
func checkOutPoints(t *testing.T, where string, got []chain.OutPoint, raw []string) {
	t.Helper()
	var g []string
	for _, op := range got {
		g = append(g, op.String())
	}
	slices.Sort(g)
	raw = slices.Sorted(slices.Values(raw))
	if !slices.Equal(g, raw) {
		t.Errorf("%s: %v, raw %v", where, g, raw)
	}
}

func checkOutput(t *testing.T, where string, out *chain.Output, ro rawOut) {
	t.Helper()
	addr, err := addressBytes(out.Address)
	if err != nil {
		t.Errorf("%s: address %q does not decode: %v", where, out.Address, err)
	} else if !bytes.Equal(addr, ro.addr) {
		t.Errorf("%s: address %q decodes to %x, raw bytes %x", where, out.Address, addr, ro.addr)
	}
	if out.Value != ro.lovelace {
		t.Errorf("%s: value %d, raw %d", where, out.Value, ro.lovelace)
	}
	if len(out.Assets) != ro.assets {
		t.Errorf("%s: %d assets, raw %d", where, len(out.Assets), ro.assets)
	}
	if !chain.AssetsSorted(out.Assets) {
		t.Errorf("%s: assets not sorted by (policy, name)", where)
	}
	var dh []byte
	if out.DatumHash != nil {
		dh = out.DatumHash[:]
	}
	if !bytes.Equal(dh, ro.datumHash) {
		t.Errorf("%s: datum hash %x, raw %x", where, dh, ro.datumHash)
	}
	if !bytes.Equal(out.Datum, ro.datum) || (out.Datum == nil) != (ro.datum == nil) {
		t.Errorf("%s: inline datum %x, raw %x", where, out.Datum, ro.datum)
	}
	if !bytes.Equal(out.ScriptRef, ro.script) || (out.ScriptRef == nil) != (ro.script == nil) {
		t.Errorf("%s: script ref %x, raw %x", where, out.ScriptRef, ro.script)
	}
}

// addressBytes decodes an address string back to bytes: bech32 with its
// checksum verified (any length), or base58.
func addressBytes(s string) ([]byte, error) {
	if hrp, data, ok := strings.Cut(s, "1"); ok && (hrp == "addr" || hrp == "addr_test") {
		return bech32Decode(hrp, data)
	}
	return base58Decode(s)
}

func bech32Decode(hrp, data string) ([]byte, error) {
	const charset = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"
	if len(data) < 6 {
		return nil, fmt.Errorf("too short")
	}
	var vals []byte
	for i := range len(hrp) {
		vals = append(vals, hrp[i]>>5)
	}
	vals = append(vals, 0)
	for i := range len(hrp) {
		vals = append(vals, hrp[i]&31)
	}
	var five []byte
	for _, c := range data {
		k := strings.IndexRune(charset, c)
		if k < 0 {
			return nil, fmt.Errorf("character %q", c)
		}
		five = append(five, byte(k))
	}
	vals = append(vals, five...)
	// BIP-173: the polymod of hrp-expansion ‖ data ‖ checksum is 1.
	chk := uint32(1)
	for _, v := range vals {
		top := chk >> 25
		chk = (chk&0x1ffffff)<<5 ^ uint32(v)
		for i, g := range [5]uint32{0x3b6a57b2, 0x26508e6d, 0x1ea119fa, 0x3d4233dd, 0x2a1462b3} {
			if top>>i&1 == 1 {
				chk ^= g
			}
		}
	}
	if chk != 1 {
		return nil, fmt.Errorf("bad checksum")
	}
	five = five[:len(five)-6]
	var out []byte
	var acc, bits uint
	for _, v := range five {
		acc = acc<<5 | uint(v)
		bits += 5
		if bits >= 8 {
			bits -= 8
			out = append(out, byte(acc>>bits))
		}
	}
	if bits >= 5 || acc&(1<<bits-1) != 0 {
		return nil, fmt.Errorf("bad padding")
	}
	return out, nil
}

func base58Decode(s string) ([]byte, error) {
	const alphabet = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
	n := new(big.Int)
	for _, c := range s {
		k := strings.IndexRune(alphabet, c)
		if k < 0 {
			return nil, fmt.Errorf("character %q", c)
		}
		n.Mul(n, big.NewInt(58))
		n.Add(n, big.NewInt(int64(k)))
	}
	lead := len(s) - len(strings.TrimLeft(s, "1"))
	return append(make([]byte, lead), n.Bytes()...), nil
}

// TestFixtureTotals checks the totals the fixtures' provenance states for
// the Shelley-to-Conway blocks (the single blocks but conway4 and conway8,
// and the chunks' complete blocks), once from the raw CBOR and once from
// what the adapter yields.
func TestFixtureTotals(t *testing.T) {
	type totals struct {
		txs, created, inline, datumHashes, scripts, withAssets, byron, collReturnsNotCreated int
	}
	want := totals{1462, 3268, 516, 199, 18, 1620, 60, 238}
	var raw, got totals
	a := newAdapter(t)
	for _, fx := range allBlocks(t) {
		if fx.name == "conway4" || fx.name == "conway8" {
			continue
		}
		f, err := readFacts(fx.tagged)
		if err != nil {
			t.Fatal(err)
		}
		if f.era < 2 {
			continue
		}
		for _, rt := range f.txs {
			raw.txs++
			if rt.collateralReturn {
				raw.collReturnsNotCreated++
			}
			for _, o := range rt.outputs {
				raw.created++
				raw.inline += btoi(o.datum != nil)
				raw.datumHashes += btoi(o.datumHash != nil)
				raw.scripts += btoi(o.script != nil)
				raw.withAssets += btoi(o.assets > 0)
				raw.byron += btoi(len(o.addr) > 0 && o.addr[0]>>4 == 8)
			}
		}
		b, err := a.Convert(fx.tagged)
		if err != nil {
			t.Fatal(err)
		}
		for i := range b.Chain.Txs {
			tx := &b.Chain.Txs[i]
			got.txs++
			if !tx.Invalid && tx.CollateralReturn != nil {
				got.collReturnsNotCreated++
			}
			tx.Creates(func(_ uint32, o *chain.Output, _ bool) {
				got.created++
				got.inline += btoi(o.Datum != nil)
				got.datumHashes += btoi(o.DatumHash != nil)
				got.scripts += btoi(o.ScriptRef != nil)
				got.withAssets += btoi(len(o.Assets) > 0)
				got.byron += btoi(!strings.HasPrefix(o.Address, "addr"))
			})
		}
	}
	if raw != want {
		t.Errorf("raw CBOR totals %+v, provenance says %+v", raw, want)
	}
	if got != want {
		t.Errorf("adapter totals %+v, provenance says %+v", got, want)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

package chain

import (
	"bytes"
	"encoding/hex"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/fxamacker/cbor/v2"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

type codecCase struct {
	name string
	doc  any
	lim  Limits
	want error  // nil, ErrInvalidBlock or ErrTooLarge
	msg  string // substring of the error
}

// codec is one of the two encodings under test.
type codec struct {
	name   string
	encode func(doc any) ([]byte, bool)
	decode func([]byte, Limits) (*Block, error)
	append func([]byte, *Block) []byte
}

var codecs = []codec{
	{"json", encJSON, DecodeBlockJSON, AppendBlockJSON},
	{"cbor", encCBOR, DecodeBlockCBOR, AppendBlockCBOR},
}

// codecCases is the table shared by both encodings, the fuzz seeds and the
// stream tests. A case whose document holds a tRaw for one encoding only
// runs for that encoding.
func codecCases() []codecCase {
	const (
		out0   = "txs.0.outputs.0"
		asset0 = out0 + ".assets.0"
	)
	full := func() any { return fullDoc() }
	minJSON, _ := encJSON(minimalDoc())
	minCBOR, _ := encCBOR(minimalDoc())
	u64Over := "18446744073709551616"

	cases := []codecCase{
		// Accepted.
		{name: "minimal", doc: minimalDoc()},
		{name: "full", doc: full()},
		{name: "minimal tx", doc: set(minimalDoc(), "txs", tArr{tObj{{"hash", tHex(fill(2, 32))}, {"inputs", tArr{}}, {"outputs", tArr{}}}})},
		{name: "nulls for optional fields", doc: func() any {
			d := set(full(), "prev_hash", tNull{})
			d = set(d, "time", tNull{})
			d = set(d, "slot", tNull{})
			d = set(d, "txs.1.collateral_return", tNull{})
			d = set(d, "txs.1.collateral_inputs", tNull{})
			d = set(d, "txs.1.valid", tNull{})
			d = set(d, "txs.1.coinbase", tNull{})
			d = set(d, out0+".assets", tNull{})
			d = set(d, out0+".datum_hash", tNull{})
			d = set(d, out0+".datum", tNull{})
			return set(d, out0+".script_ref", tNull{})
		}()},
		{name: "empty optional lists and bytes", doc: func() any {
			d := set(full(), "txs.1.collateral_inputs", tArr{})
			d = set(d, out0+".assets", tArr{})
			d = set(d, out0+".datum", tHex(nil))
			return set(d, out0+".script_ref", tHex(nil))
		}()},
		{name: "negative time", doc: set(minimalDoc(), "time", tInt(-1))},
		{name: "max values", doc: func() any {
			d := set(full(), "height", tUint(1<<64-1))
			d = set(d, "time", tInt(-1<<63))
			d = set(d, "slot", tUint(1<<64-1))
			d = set(d, "txs.0.inputs.0.index", tUint(1<<32-1))
			d = set(d, out0+".value", tUint(1<<64-1))
			return set(d, asset0+".quantity", tStr("18446744073709551615"))
		}()},
		{name: "value zero as string", doc: set(full(), out0+".value", tStr("0"))},
		{name: "address 1 and 1024 bytes", doc: func() any {
			d := set(full(), out0+".address", tStr("x"))
			return set(d, "txs.0.outputs.1.address", tStr(strings.Repeat("é", 512)))
		}()},
		{name: "address with escapes", doc: set(full(), out0+".address", tStr("a\"b\\c\nd\x01é😀"))},
		{name: "policy and name 64 bytes", doc: set(set(full(), asset0+".policy", tHex(fill(1, 64))), asset0+".name", tHex(fill(2, 64)))},
		{name: "datum and script 64KiB", doc: set(set(full(), out0+".datum", tHex(fill(1, MaxDatumLen))), out0+".script_ref", tHex(fill(2, MaxScriptRefLen)))},
		{name: "uppercase hex", doc: set(minimalDoc(), "hash", rawJSON(`"`+strings.Repeat("AB", 32)+`"`))},
		{name: "escaped key", doc: rawJSON(`{"h\u0065ight":1,"hash":"` + strings.Repeat("11", 32) + `","txs":[]}`)},
		{name: "escaped hex", doc: set(minimalDoc(), "hash", rawJSON(`"\u0031`+strings.Repeat("1", 63)+`"`))},
		{name: "whitespace", doc: rawJSON(" \r\n\t{ \"height\" : 1 , \"hash\" : \"" + strings.Repeat("11", 32) + "\" , \"txs\" : [ ] } \n")},
		{name: "non-shortest heads", doc: set(set(minimalDoc(), "height", rawCBOR(0x1b, 0, 0, 0, 0, 0, 0, 0, 1)), "txs", rawCBOR(0x98, 0))},
		{name: "limits exactly reached", lim: Limits{MaxTxs: 3, MaxInputsPerTx: 2, MaxOutputsPerTx: 2, MaxAssetsPerOutput: 2}, doc: full()},

		// Missing required fields.
		{name: "missing height", doc: del(full(), "height"), want: ErrInvalidBlock, msg: "height: missing: invalid block"},
		{name: "missing hash", doc: del(full(), "hash"), want: ErrInvalidBlock, msg: "hash: missing"},
		{name: "missing txs", doc: del(full(), "txs"), want: ErrInvalidBlock, msg: "txs: missing"},
		{name: "missing tx hash", doc: del(full(), "txs.2.hash"), want: ErrInvalidBlock, msg: "txs[2].hash: missing"},
		{name: "missing tx inputs", doc: del(full(), "txs.0.inputs"), want: ErrInvalidBlock, msg: "txs[0].inputs: missing"},
		{name: "missing tx outputs", doc: del(full(), "txs.0.outputs"), want: ErrInvalidBlock, msg: "txs[0].outputs: missing"},
		{name: "null tx inputs", doc: set(full(), "txs.0.inputs", tNull{}), want: ErrInvalidBlock, msg: "txs[0].inputs"},
		{name: "null tx outputs", doc: set(full(), "txs.0.outputs", tNull{}), want: ErrInvalidBlock, msg: "txs[0].outputs"},
		{name: "missing outpoint tx_hash", doc: del(full(), "txs.0.inputs.1.tx_hash"), want: ErrInvalidBlock, msg: "txs[0].inputs[1].tx_hash: missing"},
		{name: "missing outpoint index", doc: del(full(), "txs.1.collateral_inputs.0.index"), want: ErrInvalidBlock, msg: "txs[1].collateral_inputs[0].index: missing"},
		{name: "missing address", doc: del(full(), out0+".address"), want: ErrInvalidBlock, msg: "txs[0].outputs[0].address: missing"},
		{name: "missing value", doc: del(full(), "txs.1.collateral_return.value"), want: ErrInvalidBlock, msg: "txs[1].collateral_return.value: missing"},
		{name: "missing policy", doc: del(full(), asset0+".policy"), want: ErrInvalidBlock, msg: "assets[0].policy: missing"},
		{name: "missing name", doc: del(full(), asset0+".name"), want: ErrInvalidBlock, msg: "assets[0].name: missing"},
		{name: "missing quantity", doc: del(full(), asset0+".quantity"), want: ErrInvalidBlock, msg: "assets[0].quantity: missing"},

		// null for required fields.
		{name: "null height", doc: set(full(), "height", tNull{}), want: ErrInvalidBlock, msg: "height: expected unsigned integer, got null"},
		{name: "null hash", doc: set(full(), "hash", tNull{}), want: ErrInvalidBlock, msg: "hash: expected"},
		{name: "null txs", doc: set(full(), "txs", tNull{}), want: ErrInvalidBlock, msg: "txs: expected array, got null"},
		{name: "null tx", doc: set(full(), "txs.1", tNull{}), want: ErrInvalidBlock, msg: "txs[1]: expected"},
		{name: "null index", doc: set(full(), "txs.0.inputs.0.index", tNull{}), want: ErrInvalidBlock, msg: "txs[0].inputs[0].index: expected unsigned integer, got null"},
		{name: "null address", doc: set(full(), out0+".address", tNull{}), want: ErrInvalidBlock, msg: "address: expected"},
		{name: "null value", doc: set(full(), out0+".value", tNull{}), want: ErrInvalidBlock, msg: "value: expected"},
		{name: "null quantity", doc: set(full(), asset0+".quantity", tNull{}), want: ErrInvalidBlock, msg: "quantity: expected"},

		// Wrong types.
		{name: "block not an object", doc: tArr{}, want: ErrInvalidBlock, msg: ", got array: invalid block"},
		{name: "height as string", doc: set(full(), "height", tStr("42")), want: ErrInvalidBlock, msg: "height: expected unsigned integer"},
		{name: "height negative", doc: set(full(), "height", tInt(-1)), want: ErrInvalidBlock, msg: "height:"},
		{name: "height over uint64", doc: set(full(), "height", rawJSON(u64Over)), want: ErrInvalidBlock, msg: "height: " + u64Over + " overflows uint64"},
		{name: "height bignum", doc: set(full(), "height", rawCBOR(0xc2, 0x41, 0x01)), want: ErrInvalidBlock, msg: "height: expected unsigned integer, got tag"},
		{name: "height float", doc: set(full(), "height", rawBoth("1.0", []byte{0xf9, 0x3c, 0x00})), want: ErrInvalidBlock, msg: "height:"},
		{name: "hash as number", doc: set(full(), "hash", tUint(1)), want: ErrInvalidBlock, msg: "hash: expected"},
		{name: "hash as text", doc: set(full(), "hash", rawCBOR(append([]byte{0x78, 64}, strings.Repeat("11", 32)...)...)), want: ErrInvalidBlock, msg: "hash: expected byte string, got text string"},
		{name: "txs as object", doc: set(full(), "txs", tObj{}), want: ErrInvalidBlock, msg: "txs: expected array, got"},
		{name: "tx as array", doc: set(full(), "txs.0", tArr{}), want: ErrInvalidBlock, msg: "txs[0]: expected"},
		{name: "inputs as object", doc: set(full(), "txs.0.inputs", tObj{}), want: ErrInvalidBlock, msg: "txs[0].inputs: expected array"},
		{name: "valid as string", doc: set(full(), "txs.1.valid", tStr("false")), want: ErrInvalidBlock, msg: "txs[1].valid: expected boolean, got"},
		{name: "coinbase as number", doc: set(full(), "txs.2.coinbase", tUint(1)), want: ErrInvalidBlock, msg: "txs[2].coinbase: expected boolean"},
		{name: "address as number", doc: set(full(), out0+".address", tUint(1)), want: ErrInvalidBlock, msg: "address: expected"},
		{name: "address as bytes", doc: set(full(), out0+".address", rawCBOR(0x41, 'a')), want: ErrInvalidBlock, msg: "address: expected text string, got byte string"},
		{name: "address invalid UTF-8", doc: set(full(), out0+".address", rawBoth("\"a\xffb\"", []byte{0x63, 'a', 0xff, 'b'})), want: ErrInvalidBlock, msg: "address: invalid UTF-8"},
		{name: "address lone surrogate", doc: set(full(), out0+".address", rawJSON(`"\ud800x"`)), want: ErrInvalidBlock, msg: "address: invalid escape"},
		{name: "address control character", doc: set(full(), out0+".address", rawJSON("\"a\tb\"")), want: ErrInvalidBlock, msg: "address: control character"},
		{name: "index over uint32", doc: set(full(), "txs.0.inputs.0.index", tUint(1<<32)), want: ErrInvalidBlock, msg: "txs[0].inputs[0].index: 4294967296 out of range"},
		{name: "index as string", doc: set(full(), "txs.0.inputs.0.index", tStr("1")), want: ErrInvalidBlock, msg: "index: expected unsigned integer"},
		{name: "time fraction", doc: set(full(), "time", rawBoth("1.5", []byte{0xf9, 0x3e, 0x00})), want: ErrInvalidBlock, msg: "time:"},
		{name: "negative slot", doc: set(full(), "slot", tInt(-1)), want: ErrInvalidBlock, msg: "slot:"},
		{name: "slot as string", doc: set(full(), "slot", tStr("1")), want: ErrInvalidBlock, msg: "slot: expected unsigned integer"},
		{name: "slot over uint64", doc: set(full(), "slot", rawJSON(u64Over)), want: ErrInvalidBlock, msg: "slot:"},
		{name: "time over int64", doc: set(full(), "time", rawBoth("9223372036854775808", []byte{0x1b, 0x80, 0, 0, 0, 0, 0, 0, 0})), want: ErrInvalidBlock, msg: "time:"},
		{name: "datum as text", doc: set(full(), out0+".datum", rawCBOR(0x61, 'a')), want: ErrInvalidBlock, msg: "datum: expected byte string, got text string"},
		{name: "undefined", doc: set(full(), out0+".datum", rawCBOR(0xf7)), want: ErrInvalidBlock, msg: "datum: expected byte string, got undefined"},

		// Hash sizes and hex.
		{name: "hash 31 bytes", doc: set(full(), "hash", tHex(fill(1, 31))), want: ErrInvalidBlock, msg: "hash: length 31 bytes, want 32"},
		{name: "hash 33 bytes", doc: set(full(), "hash", tHex(fill(1, 33))), want: ErrInvalidBlock, msg: "hash: length 33 bytes, want 32"},
		{name: "prev_hash 0 bytes", doc: set(full(), "prev_hash", tHex(nil)), want: ErrInvalidBlock, msg: "prev_hash: length 0 bytes"},
		{name: "tx hash 31 bytes", doc: set(full(), "txs.1.hash", tHex(fill(1, 31))), want: ErrInvalidBlock, msg: "txs[1].hash: length 31"},
		{name: "outpoint tx_hash 33 bytes", doc: set(full(), "txs.0.inputs.1.tx_hash", tHex(fill(1, 33))), want: ErrInvalidBlock, msg: "txs[0].inputs[1].tx_hash: length 33"},
		{name: "datum_hash 31 bytes", doc: set(full(), out0+".datum_hash", tHex(fill(1, 31))), want: ErrInvalidBlock, msg: "datum_hash: length 31"},
		{name: "hash bad hex", doc: set(full(), "hash", rawJSON(`"`+strings.Repeat("zz", 32)+`"`)), want: ErrInvalidBlock, msg: "hash: invalid hex"},
		{name: "hash odd hex", doc: set(full(), "hash", rawJSON(`"`+strings.Repeat("1", 63)+`"`)), want: ErrInvalidBlock, msg: "hash: odd number of hex characters"},
		{name: "datum bad hex", doc: set(full(), out0+".datum", rawJSON(`"0g"`)), want: ErrInvalidBlock, msg: "datum: invalid hex"},
		{name: "datum odd hex", doc: set(full(), out0+".datum", rawJSON(`"abc"`)), want: ErrInvalidBlock, msg: "datum: odd number"},
		{name: "datum 0x prefix", doc: set(full(), out0+".datum", rawJSON(`"0xab"`)), want: ErrInvalidBlock, msg: "datum: invalid hex"},

		// Contract sizes (ValidateBlock).
		{name: "address 0 bytes", doc: set(full(), out0+".address", tStr("")), want: ErrInvalidBlock, msg: "txs[0].outputs[0].address: length 0 outside 1..1024: invalid block"},
		{name: "address 1025 bytes", doc: set(full(), "txs.1.collateral_return.address", tStr(strings.Repeat("a", 1025))), want: ErrInvalidBlock, msg: "txs[1].collateral_return.address: length 1025 outside 1..1024"},
		{name: "policy 65 bytes", doc: set(full(), asset0+".policy", tHex(fill(1, 65))), want: ErrInvalidBlock, msg: "txs[0].outputs[0].assets[0].policy: length 65 over 64"},
		{name: "name 65 bytes", doc: set(full(), asset0+".name", tHex(fill(1, 65))), want: ErrInvalidBlock, msg: "name: length 65 over 64"},
		{name: "quantity 0", doc: set(full(), asset0+".quantity", tUint(0)), want: ErrInvalidBlock, msg: "quantity: must be > 0"},
		{name: "quantity \"0\"", doc: set(full(), asset0+".quantity", tStr("0")), want: ErrInvalidBlock, msg: "quantity: must be > 0"},
		{name: "duplicate asset", doc: set(full(), out0+".assets.1", assetDoc(fill(0xc2, 28), []byte("tok"), tUint(9))), want: ErrInvalidBlock, msg: "txs[0].outputs[0].assets: duplicate asset"},
		{name: "datum 64KiB+1", doc: set(full(), out0+".datum", tHex(fill(1, MaxDatumLen+1))), want: ErrInvalidBlock, msg: "datum: length 65537 over 65536"},
		{name: "script_ref 64KiB+1", doc: set(full(), out0+".script_ref", tHex(fill(1, MaxScriptRefLen+1))), want: ErrInvalidBlock, msg: "script_ref: length 65537 over 65536"},

		// Amounts.
		{name: "value \"-1\"", doc: set(full(), out0+".value", tStr("-1")), want: ErrInvalidBlock, msg: `value: "-1" is not an unsigned decimal integer`},
		{name: "value \"1.5\"", doc: set(full(), out0+".value", tStr("1.5")), want: ErrInvalidBlock, msg: `value: "1.5" is not`},
		{name: "value \"1e3\"", doc: set(full(), out0+".value", tStr("1e3")), want: ErrInvalidBlock, msg: `value: "1e3" is not`},
		{name: "value \"007\"", doc: set(full(), out0+".value", tStr("007")), want: ErrInvalidBlock, msg: `value: "007" is not`},
		{name: "value \"+1\"", doc: set(full(), out0+".value", tStr("+1")), want: ErrInvalidBlock, msg: `value: "+1" is not`},
		{name: "value \" 1\"", doc: set(full(), out0+".value", tStr(" 1")), want: ErrInvalidBlock, msg: `value: " 1" is not`},
		{name: "value \"\"", doc: set(full(), out0+".value", tStr("")), want: ErrInvalidBlock, msg: `value: "" is not`},
		{name: "value \"0x10\"", doc: set(full(), out0+".value", tStr("0x10")), want: ErrInvalidBlock, msg: `value: "0x10" is not`},
		{name: "value string over uint64", doc: set(full(), out0+".value", tStr(u64Over)), want: ErrInvalidBlock, msg: "value: " + u64Over + " overflows uint64"},
		{name: "value number over uint64", doc: set(full(), out0+".value", rawJSON(u64Over)), want: ErrInvalidBlock, msg: "value: " + u64Over + " overflows uint64"},
		{name: "value -1", doc: set(full(), out0+".value", tInt(-1)), want: ErrInvalidBlock, msg: "value:"},
		{name: "value -0", doc: set(full(), out0+".value", rawJSON("-0")), want: ErrInvalidBlock, msg: "value: -0 is not an unsigned integer"},
		{name: "value 1.5", doc: set(full(), out0+".value", rawBoth("1.5", []byte{0xf9, 0x3e, 0x00})), want: ErrInvalidBlock, msg: "value:"},
		{name: "value 1e3", doc: set(full(), out0+".value", rawJSON("1e3")), want: ErrInvalidBlock, msg: "value: 1e3 is not an unsigned integer"},
		{name: "value 1.0", doc: set(full(), out0+".value", rawJSON("1.0")), want: ErrInvalidBlock, msg: "value: 1.0 is not an unsigned integer"},
		{name: "value 007", doc: set(full(), out0+".value", rawJSON("007")), want: ErrInvalidBlock, msg: "value: number with leading zero"},
		{name: "value bignum", doc: set(full(), out0+".value", rawCBOR(0xc2, 0x41, 0x05)), want: ErrInvalidBlock, msg: "value: expected unsigned integer, got tag"},
		{name: "value as bool", doc: set(full(), out0+".value", true), want: ErrInvalidBlock, msg: "value: expected unsigned integer, got boolean"},
		{name: "quantity -1", doc: set(full(), asset0+".quantity", tStr("-1")), want: ErrInvalidBlock, msg: `quantity: "-1" is not`},

		// Unknown and duplicate fields.
		{name: "unknown block field", doc: addKV(full(), "", "extra", tUint(1)), want: ErrInvalidBlock, msg: `unknown field "extra"`},
		{name: "unknown tx field", doc: addKV(full(), "txs.1", "fee", tUint(1)), want: ErrInvalidBlock, msg: `txs[1]: unknown field "fee"`},
		{name: "unknown outpoint field", doc: addKV(full(), "txs.0.inputs.0", "value", tUint(1)), want: ErrInvalidBlock, msg: `txs[0].inputs[0]: unknown field "value"`},
		{name: "unknown output field", doc: addKV(full(), out0, "Address", tStr("x")), want: ErrInvalidBlock, msg: `txs[0].outputs[0]: unknown field "Address"`},
		{name: "unknown asset field", doc: addKV(full(), asset0, "asset_name", tHex(nil)), want: ErrInvalidBlock, msg: `assets[0]: unknown field "asset_name"`},
		{name: "duplicate block field", doc: addKV(full(), "", "height", tUint(43)), want: ErrInvalidBlock, msg: "height: duplicate field"},
		{name: "duplicate optional field", doc: addKV(full(), "", "prev_hash", tNull{}), want: ErrInvalidBlock, msg: "prev_hash: duplicate field"},
		{name: "duplicate tx field", doc: addKV(full(), "txs.0", "hash", tHex(fill(9, 32))), want: ErrInvalidBlock, msg: "txs[0].hash: duplicate field"},
		{name: "duplicate output field", doc: addKV(full(), out0, "value", tUint(1)), want: ErrInvalidBlock, msg: "txs[0].outputs[0].value: duplicate field"},
		{name: "duplicate asset field", doc: addKV(full(), asset0, "quantity", tUint(1)), want: ErrInvalidBlock, msg: "quantity: duplicate field"},
		{name: "duplicate escaped key", doc: rawJSON(`{"height":1,"hash":"` + strings.Repeat("11", 32) + `","txs":[],"h\u0065ight":2}`), want: ErrInvalidBlock, msg: "height: duplicate field"},
		{name: "integer map key", doc: rawCBOR(0xa1, 0x01, 0x01), want: ErrInvalidBlock, msg: "expected text string map key, got unsigned integer"},

		// Framing.
		{name: "empty input", doc: rawBoth("", nil), want: ErrInvalidBlock},
		{name: "only whitespace", doc: rawJSON(" \n"), want: ErrInvalidBlock},
		{name: "trailing garbage", doc: rawBoth(string(minJSON)+" x", append(minCBOR[:len(minCBOR):len(minCBOR)], 0x00)), want: ErrInvalidBlock, msg: "trailing data"},
		{name: "two blocks", doc: rawBoth(string(minJSON)+string(minJSON), append(minCBOR[:len(minCBOR):len(minCBOR)], minCBOR...)), want: ErrInvalidBlock, msg: "trailing data"},
		{name: "truncated", doc: rawBoth(string(minJSON[:len(minJSON)-1]), minCBOR[:len(minCBOR)-1]), want: ErrInvalidBlock},
		{name: "trailing comma", doc: rawJSON(`{"height":1,"hash":"` + strings.Repeat("11", 32) + `","txs":[],}`), want: ErrInvalidBlock, msg: "expected field name"},
		{name: "array trailing comma", doc: set(minimalDoc(), "txs", rawJSON(`[{"hash":"`+strings.Repeat("11", 32)+`","inputs":[],"outputs":[]},]`)), want: ErrInvalidBlock, msg: "txs[1]: expected object"},
		{name: "single quotes", doc: rawJSON(`{'height':1}`), want: ErrInvalidBlock},
		{name: "byte order mark", doc: rawJSON("\ufeff" + string(minJSON)), want: ErrInvalidBlock, msg: "expected object"},
		{name: "indefinite map", doc: rawCBOR(append(append([]byte{0xbf}, minCBOR[1:]...), 0xff)...), want: ErrInvalidBlock, msg: "indefinite-length map"},
		{name: "indefinite array", doc: set(minimalDoc(), "txs", rawCBOR(0x9f, 0xff)), want: ErrInvalidBlock, msg: "txs: indefinite-length array"},
		{name: "self-described tag", doc: rawCBOR(append([]byte{0xd9, 0xd9, 0xf7}, minCBOR...)...), want: ErrInvalidBlock, msg: "expected map, got tag"},
		{name: "reserved initial byte", doc: set(minimalDoc(), "height", rawCBOR(0x1c)), want: ErrInvalidBlock, msg: "height: malformed initial byte"},
		{name: "array longer than input", doc: set(minimalDoc(), "txs", rawCBOR(0x99, 0x00, 0x10)), want: ErrInvalidBlock, msg: "txs: truncated"},
		{name: "map longer than input", doc: rawCBOR(0xbb, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff), want: ErrInvalidBlock, msg: "truncated"},
		{name: "string longer than input", doc: set(minimalDoc(), "hash", rawCBOR(0x5b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)), want: ErrInvalidBlock, msg: "hash: length"},

		// Limits.
		{name: "block over MaxBlockBytes", lim: Limits{MaxBlockBytes: 64}, doc: full(), want: ErrTooLarge, msg: "over limit 64"},
		{name: "txs over MaxTxs", lim: Limits{MaxTxs: 2}, doc: full(), want: ErrTooLarge, msg: "txs: "},
		{name: "inputs over MaxInputsPerTx", lim: Limits{MaxInputsPerTx: 1}, doc: full(), want: ErrTooLarge, msg: "txs[0].inputs: "},
		{name: "collateral inputs over MaxInputsPerTx", lim: Limits{MaxInputsPerTx: 1}, doc: set(set(full(), "txs.0.inputs", tArr{}), "txs.1.collateral_inputs", tArr{outPointDoc(1, 0), outPointDoc(2, 0)}), want: ErrTooLarge, msg: "txs[1].collateral_inputs: "},
		{name: "outputs over MaxOutputsPerTx", lim: Limits{MaxOutputsPerTx: 1}, doc: full(), want: ErrTooLarge, msg: "txs[0].outputs: "},
		{name: "assets over MaxAssetsPerOutput", lim: Limits{MaxAssetsPerOutput: 1}, doc: full(), want: ErrTooLarge, msg: "txs[0].outputs[0].assets: "},
		{name: "huge announced array", doc: set(minimalDoc(), "txs", rawCBOR(0x9b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)), want: ErrTooLarge, msg: "txs: 18446744073709551615 entries over limit 100000"},
	}
	return cases
}

func TestDecodeTable(t *testing.T) {
	for _, c := range codecs {
		t.Run("format="+c.name, func(t *testing.T) {
			for _, tc := range codecCases() {
				data, ok := c.encode(tc.doc)
				if !ok {
					continue
				}
				t.Run(tc.name, func(t *testing.T) {
					b, err := c.decode(data, tc.lim)
					if tc.want == nil {
						if err != nil {
							t.Fatalf("decode: %v", err)
						}
						checkRoundTrip(t, b, tc.lim)
						return
					}
					if err == nil {
						t.Fatalf("decode succeeded, want %v", tc.want)
					}
					if !errors.Is(err, tc.want) {
						t.Fatalf("error %q does not wrap %v", err, tc.want)
					}
					other := map[error]error{ErrInvalidBlock: ErrTooLarge, ErrTooLarge: ErrInvalidBlock}[tc.want]
					if errors.Is(err, other) {
						t.Errorf("error %q wraps both sentinels", err)
					}
					if !strings.Contains(err.Error(), tc.msg) {
						t.Errorf("error %q does not contain %q", err, tc.msg)
					}
					if b != nil {
						t.Errorf("decode returned a block with its error")
					}
				})
			}
		})
	}
}

// checkRoundTrip checks that b survives both encodings, and that the
// canonical encodings are fixed points.
func checkRoundTrip(t testing.TB, b *Block, lim Limits) {
	t.Helper()
	for _, c := range codecs {
		enc := c.append(nil, b)
		b2, err := c.decode(enc, lim)
		if err != nil {
			t.Fatalf("%s: decode of canonical encoding: %v\n%s", c.name, err, clipHex(enc))
		}
		if !reflect.DeepEqual(b, b2) {
			t.Fatalf("%s: round trip changed the block:\n got %+v\nwant %+v", c.name, b2, b)
		}
		if enc2 := c.append(nil, b2); !bytes.Equal(enc, enc2) {
			t.Fatalf("%s: canonical encoding is not a fixed point:\n%s\n%s", c.name, clipHex(enc), clipHex(enc2))
		}
	}
}

func clipHex(b []byte) string {
	if len(b) > 512 {
		return hex.EncodeToString(b[:512]) + "…"
	}
	return hex.EncodeToString(b)
}

func TestDecodeFull(t *testing.T) {
	for _, c := range codecs {
		t.Run("format="+c.name, func(t *testing.T) {
			data, _ := c.encode(fullDoc())
			b, err := c.decode(data, Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if want := fullBlock(); !reflect.DeepEqual(b, want) {
				t.Fatalf("got  %+v\nwant %+v", b, want)
			}
		})
	}
}

func TestDecodeMinimal(t *testing.T) {
	want := &Block{Hash: fillHash(0x11)}
	for _, c := range codecs {
		data, _ := c.encode(minimalDoc())
		b, err := c.decode(data, Limits{})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !reflect.DeepEqual(b, want) {
			t.Fatalf("%s: got %+v, want %+v", c.name, b, want)
		}
	}
}

// TestDecodeNoAliasing checks that a decoded block does not share memory with
// its input (streams reuse their buffers).
func TestDecodeNoAliasing(t *testing.T) {
	for _, c := range codecs {
		data, _ := c.encode(fullDoc())
		b, err := c.decode(data, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		clear(data)
		if want := fullBlock(); !reflect.DeepEqual(b, want) {
			t.Fatalf("%s: block changed when its input was overwritten", c.name)
		}
	}
}

func TestErrorMessageExact(t *testing.T) {
	data, _ := encJSON(set(fullDoc(), "txs.0.outputs.0.address", tStr("")))
	_, err := DecodeBlockJSON(data, Limits{})
	const want = "txs[0].outputs[0].address: length 0 outside 1..1024: invalid block"
	if err == nil || err.Error() != want {
		t.Fatalf("error = %v, want %q", err, want)
	}
	data, _ = encCBOR(set(fullDoc(), "txs.0.inputs.1.index", tNull{}))
	_, err = DecodeBlockCBOR(data, Limits{})
	const want2 = "txs[0].inputs[1].index: expected unsigned integer, got null: invalid block"
	if err == nil || err.Error() != want2 {
		t.Fatalf("error = %v, want %q", err, want2)
	}
}

// TestCanonicalCBORMatchesFxamacker checks the canonical CBOR encoding
// against fxamacker/cbor: its strict decoder accepts it, and its RFC 8949
// core deterministic encoder (MarshalDeterministic) reproduces it byte for
// byte.
func TestCanonicalCBORMatchesFxamacker(t *testing.T) {
	for _, tc := range codecCases() {
		if tc.want != nil {
			continue
		}
		data, ok := encCBOR(tc.doc)
		if !ok {
			continue
		}
		b, err := DecodeBlockCBOR(data, tc.lim)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		enc := AppendBlockCBOR(nil, b)
		var v any
		if err := strictCBOR.Unmarshal(enc, &v); err != nil {
			t.Fatalf("%s: fxamacker rejects the canonical encoding: %v", tc.name, err)
		}
		re, err := MarshalDeterministic(v)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(enc, re) {
			t.Fatalf("%s: not core deterministic:\n ours %s\n fxa  %s", tc.name, clipHex(enc), clipHex(re))
		}
	}
}

// strictCBOR is fxamacker/cbor configured as strictly as our decoder: the
// oracle for well-formedness in tests and fuzzing.
var strictCBOR = func() cbor.DecMode {
	dm, err := cbor.DecOptions{
		DupMapKey:        cbor.DupMapKeyEnforcedAPF,
		IndefLength:      cbor.IndefLengthForbidden,
		TagsMd:           cbor.TagsForbidden,
		MaxNestedLevels:  16,
		MaxArrayElements: DefaultMaxTxs,
		MaxMapPairs:      16,
		UTF8:             cbor.UTF8RejectInvalid,
		DefaultMapType:   reflect.TypeOf(map[string]any(nil)),
	}.DecMode()
	if err != nil {
		panic(err)
	}
	return dm
}()

func TestValidateBlockHandBuilt(t *testing.T) {
	b := fullBlock()
	if err := ValidateBlock(b, Limits{}); err != nil {
		t.Fatal(err)
	}
	// Unsorted assets are fine and are not reordered; duplicates are not.
	assets := b.Txs[0].Outputs[0].Assets
	assets[0], assets[1] = assets[1], assets[0]
	if err := ValidateBlock(b, Limits{}); err != nil {
		t.Fatal(err)
	}
	if assets[0].Quantity != 5 {
		t.Fatal("ValidateBlock reordered the assets")
	}
	assets[1] = Asset{Policy: assets[0].Policy, Name: assets[0].Name, Quantity: 1}
	if err := ValidateBlock(b, Limits{}); !errors.Is(err, ErrInvalidBlock) || !strings.Contains(err.Error(), "txs[0].outputs[0].assets: duplicate asset") {
		t.Fatalf("duplicate asset: %v", err)
	}
	b = fullBlock()
	b.Txs[0].Outputs[1].Address = "\xff"
	if err := ValidateBlock(b, Limits{}); !errors.Is(err, ErrInvalidBlock) {
		t.Fatalf("invalid UTF-8 address: %v", err)
	}
}

func TestLimitsWithDefaults(t *testing.T) {
	want := Limits{MaxBlockBytes: 64 << 20, MaxTxs: 100_000, MaxInputsPerTx: 10_000, MaxOutputsPerTx: 10_000, MaxAssetsPerOutput: 1_000}
	if got := (Limits{}).EnsureDefaults(); got != want {
		t.Fatalf("zero: %+v", got)
	}
	if got := (Limits{MaxBlockBytes: -1, MaxTxs: -5}).EnsureDefaults(); got != want {
		t.Fatalf("negative: %+v", got)
	}
	set := Limits{MaxBlockBytes: 1, MaxTxs: 2, MaxInputsPerTx: 3, MaxOutputsPerTx: 4, MaxAssetsPerOutput: 5}
	if got := set.EnsureDefaults(); got != set {
		t.Fatalf("set: %+v", got)
	}
}

// TestGolden pins the canonical encodings of fullBlock. Run with -update to
// rewrite the files after a deliberate format change (and bump the version).
func TestGolden(t *testing.T) {
	b := fullBlock()
	files := []struct {
		name string
		got  []byte
		read func([]byte) ([]byte, error)
	}{
		{"golden_block.json", append(AppendBlockJSON(nil, b), '\n'), func(f []byte) ([]byte, error) { return f, nil }},
		{"golden_block.cbor.hex", []byte(hex.EncodeToString(AppendBlockCBOR(nil, b)) + "\n"), func(f []byte) ([]byte, error) { return f, nil }},
	}
	for _, f := range files {
		path := filepath.Join("testdata", f.name)
		if *update {
			if err := os.WriteFile(path, f.got, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(f.got, want) {
			t.Errorf("%s changed:\n got %s\nwant %s", f.name, f.got, want)
		}
	}
	// The files decode back to the block.
	j, _ := os.ReadFile("testdata/golden_block.json")
	if got, err := DecodeBlockJSON(j, Limits{}); err != nil || !reflect.DeepEqual(got, b) {
		t.Errorf("golden JSON decodes to %+v, %v", got, err)
	}
	h, _ := os.ReadFile("testdata/golden_block.cbor.hex")
	c, err := hex.DecodeString(strings.TrimSpace(string(h)))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := DecodeBlockCBOR(c, Limits{}); err != nil || !reflect.DeepEqual(got, b) {
		t.Errorf("golden CBOR decodes to %+v, %v", got, err)
	}
}

func TestFormat(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Format
	}{{"json", FormatJSON}, {"jsonl", FormatJSON}, {"JSON", FormatJSON}, {"cbor", FormatCBOR}} {
		if got, err := ParseFormat(tc.in); err != nil || got != tc.want {
			t.Errorf("ParseFormat(%q) = %v, %v", tc.in, got, err)
		}
	}
	if _, err := ParseFormat("xml"); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("ParseFormat(xml): %v", err)
	}
	for _, tc := range []struct {
		in   string
		want Format
	}{{"a/b.jsonl", FormatJSON}, {"b.json", FormatJSON}, {"B.CBOR", FormatCBOR}, {"/x.y/blocks.cbor", FormatCBOR}} {
		if got, err := FormatFromPath(tc.in); err != nil || got != tc.want {
			t.Errorf("FormatFromPath(%q) = %v, %v", tc.in, got, err)
		}
	}
	for _, in := range []string{"blocks", "blocks.txt", "blocks.cbor.gz", "cbor"} {
		if _, err := FormatFromPath(in); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("FormatFromPath(%q): %v", in, err)
		}
	}
	if FormatJSON != 1 || FormatCBOR != 2 {
		t.Error("Format values are persisted: never renumber them")
	}
	if FormatJSON.String() != "json" || FormatCBOR.String() != "cbor" || Format(9).String() != "Format(9)" {
		t.Error("Format.String")
	}
	if FormatJSON.ContentType() != "application/json" || FormatCBOR.ContentType() != "application/cbor" {
		t.Error("Format.ContentType")
	}
}

// TestCBORDocExample pins the annotated example in codec_cbor.go.
func TestCBORDocExample(t *testing.T) {
	b := &Block{Height: 1, Hash: fillHash(0x11), Txs: []Tx{{Hash: fillHash(0x22), Outputs: []Output{{Address: "a", Value: 5}}}}}
	want := "a3" + "63747873" + "81" + "a3" + "6468617368" + "5820" + strings.Repeat("22", 32) +
		"66696e70757473" + "80" + "676f757470757473" + "81" + "a2" + "6576616c7565" + "05" + "6761646472657373" + "6161" +
		"6468617368" + "5820" + strings.Repeat("11", 32) + "66686569676874" + "01"
	if got := hex.EncodeToString(AppendBlockCBOR(nil, b)); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	wantJSON := `{"height":1,"hash":"` + strings.Repeat("11", 32) + `","txs":[{"hash":"` + strings.Repeat("22", 32) +
		`","inputs":[],"outputs":[{"address":"a","value":5}]}]}`
	if got := string(AppendBlockJSON(nil, b)); got != wantJSON {
		t.Fatalf("got  %s\nwant %s", got, wantJSON)
	}
}

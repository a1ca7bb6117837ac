package bitcoin

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/btcsuite/btcd/btcutil"
	"github.com/btcsuite/btcd/btcutil/bech32"
	"github.com/btcsuite/btcd/chaincfg"
	"github.com/btcsuite/btcd/txscript"
)

// ScriptAddressPrefix starts the fallback address of a script with no
// standard address: "script:" + hex(SHA-256(script)). It is not a valid
// base58 or bech32 string.
const ScriptAddressPrefix = "script:"

// maxScriptSize is consensus MAX_SCRIPT_SIZE: a longer output script can never
// be spent.
const maxScriptSize = 10000

// isUnspendable reports whether Bitcoin Core leaves the output out of its UTXO
// set (CScript::IsUnspendable). Unlike txscript.IsUnspendable it does not
// count scripts that fail to parse: Core keeps those.
func isUnspendable(script []byte) bool {
	return (len(script) > 0 && script[0] == txscript.OP_RETURN) || len(script) > maxScriptSize
}

// scriptAddress derives the address of an output script for the network (the
// mapping table is in the package doc). Scripts are classified with
// txscript.GetScriptClass, whose templates are those of
// txscript.ExtractPkScriptAddrs; the hash is then taken from its fixed place
// in the template and encoded here, which avoids ExtractPkScriptAddrs'
// allocations and, for P2PK, its curve-point parsing. The tests check the
// result against ExtractPkScriptAddrs on every output of the fixtures.
func scriptAddress(script []byte, params *chaincfg.Params) string {
	switch txscript.GetScriptClass(script) {
	case txscript.PubKeyHashTy: // OP_DUP OP_HASH160 OP_DATA_20 <hash> OP_EQUALVERIFY OP_CHECKSIG
		return base58Check(params.PubKeyHashAddrID, script[3:23])
	case txscript.ScriptHashTy: // OP_HASH160 OP_DATA_20 <hash> OP_EQUAL
		return base58Check(params.ScriptHashAddrID, script[2:22])
	case txscript.PubKeyTy: // OP_DATA_33/65 <key> OP_CHECKSIG: the key as written
		return base58Check(params.PubKeyHashAddrID, btcutil.Hash160(script[1:len(script)-1]))
	}
	// P2WPKH and P2WSH (v0, 20 or 32 bytes), P2TR (v1, 32 bytes) and the
	// witness versions not yet in use, as Bitcoin Core encodes them.
	if version, program, ok := witnessProgram(script); ok && (version != 0 || len(program) == 20 || len(program) == 32) {
		if a, ok := encodeSegwit(params.Bech32HRPSegwit, version, program); ok {
			return a
		}
	}
	return fallbackAddress(script)
}

// fallbackAddress is "script:" + hex(SHA-256(script)).
func fallbackAddress(script []byte) string {
	sum := sha256.Sum256(script)
	buf := make([]byte, len(ScriptAddressPrefix)+2*len(sum))
	copy(buf, ScriptAddressPrefix)
	hex.Encode(buf[len(ScriptAddressPrefix):], sum[:])
	return string(buf)
}

// witnessProgram splits a BIP141 witness program: a version opcode (OP_0 or
// OP_1..OP_16) followed by one direct push of 2 to 40 bytes, nothing else.
func witnessProgram(script []byte) (version byte, program []byte, ok bool) {
	if len(script) < 4 || len(script) > 42 {
		return 0, nil, false
	}
	switch op := script[0]; {
	case op == txscript.OP_0:
		version = 0
	case op >= txscript.OP_1 && op <= txscript.OP_16:
		version = op - txscript.OP_1 + 1
	default:
		return 0, nil, false
	}
	if int(script[1]) != len(script)-2 {
		return 0, nil, false
	}
	return version, script[2:], true
}

// encodeSegwit encodes a witness program as BIP173 (version 0, bech32) or
// BIP350 (versions 1..16, bech32m) address.
func encodeSegwit(hrp string, version byte, program []byte) (string, bool) {
	data, err := bech32.ConvertBits(program, 8, 5, true)
	if err != nil {
		return "", false
	}
	data = append([]byte{version}, data...)
	var s string
	if version == 0 {
		s, err = bech32.Encode(hrp, data)
	} else {
		s, err = bech32.EncodeM(hrp, data)
	}
	if err != nil {
		return "", false
	}
	return s, true
}

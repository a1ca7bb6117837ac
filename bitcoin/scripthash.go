package bitcoin

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/btcsuite/btcd/btcutil/bech32"
	"github.com/btcsuite/btcd/txscript"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/internal/textenc"
)

// ScriptHashLen is the length of a script hash: SHA-256 of an output script.
const ScriptHashLen = sha256.Size

// The base58 version bytes of the networks this package knows (network.go):
// mainnet's P2PKH and P2SH, then testnet, signet and regtest's, which share
// theirs.
const (
	mainPubKeyHashID byte = 0x00
	mainScriptHashID byte = 0x05
	testPubKeyHashID byte = 0x6f
	testScriptHashID byte = 0xc4
)

// AddressScript returns the output script an address of this package's
// mapping (the package doc) stands for, and false for a string that is no
// such address. It inverts scriptAddress for every address class but one:
// a P2PK output is listed under the P2PKH address of its key, whose script
// this returns (the store keeps the address, not the key). The fallback
// address "script:<hex>" names a script by its hash only: AddressScript
// returns false for it (ScriptHashOf gives its hash).
//
// It accepts the addresses of every network (mainnet, testnet, signet and
// regtest version bytes and human-readable parts) and is a pure function of
// the string, as a disk.ValuesFunc must be.
func AddressScript(address string) ([]byte, bool) {
	if strings.HasPrefix(address, ScriptAddressPrefix) {
		return nil, false
	}
	if i := strings.LastIndexByte(address, '1'); i > 0 && strings.ToLower(address) == address {
		switch address[:i] {
		case "bc", "tb", "bcrt":
			return segwitScript(address)
		}
	}
	raw, err := textenc.DecodeBase58(address)
	if err != nil || len(raw) != 1+20+4 {
		return nil, false
	}
	first := sha256.Sum256(raw[:21])
	second := sha256.Sum256(first[:])
	if string(second[:4]) != string(raw[21:]) {
		return nil, false
	}
	switch raw[0] {
	case mainPubKeyHashID, testPubKeyHashID:
		s := make([]byte, 0, 25)
		s = append(s, txscript.OP_DUP, txscript.OP_HASH160, txscript.OP_DATA_20)
		s = append(s, raw[1:21]...)
		return append(s, txscript.OP_EQUALVERIFY, txscript.OP_CHECKSIG), true
	case mainScriptHashID, testScriptHashID:
		s := make([]byte, 0, 23)
		s = append(s, txscript.OP_HASH160, txscript.OP_DATA_20)
		s = append(s, raw[1:21]...)
		return append(s, txscript.OP_EQUAL), true
	}
	return nil, false
}

// segwitScript decodes a BIP173/BIP350 address into its witness program
// script: version 0 in bech32 with a 20- or 32-byte program, versions 1..16
// in bech32m, as encodeSegwit writes them.
func segwitScript(address string) ([]byte, bool) {
	_, data, variant, err := bech32.DecodeGeneric(address)
	if err != nil || len(data) < 1 || data[0] > 16 {
		return nil, false
	}
	version := data[0]
	if (version == 0) != (variant == bech32.Version0) {
		return nil, false
	}
	program, err := bech32.ConvertBits(data[1:], 5, 8, false)
	if err != nil || len(program) < 2 || len(program) > 40 || (version == 0 && len(program) != 20 && len(program) != 32) {
		return nil, false
	}
	op := byte(txscript.OP_0)
	if version > 0 {
		op = txscript.OP_1 + version - 1
	}
	s := make([]byte, 0, 2+len(program))
	s = append(s, op, byte(len(program)))
	return append(s, program...), true
}

// ScriptHashOf returns the script hash an address is listed under in the
// script-hash index: SHA-256 of AddressScript's script, or the hash the
// fallback address "script:<hex>" carries. False for a string that is
// neither.
func ScriptHashOf(address string) ([ScriptHashLen]byte, bool) {
	var h [ScriptHashLen]byte
	if rest, ok := strings.CutPrefix(address, ScriptAddressPrefix); ok {
		if len(rest) != 2*ScriptHashLen || strings.ToLower(rest) != rest {
			return h, false
		}
		if _, err := hex.Decode(h[:], []byte(rest)); err != nil {
			return h, false
		}
		return h, true
	}
	s, ok := AddressScript(address)
	if !ok {
		return h, false
	}
	return sha256.Sum256(s), true
}

// ScriptHashValues is the script-hash index's function of an output (a
// disk.ValuesFunc): it yields ScriptHashOf(u.Address) when the address is
// one this package writes, nothing otherwise (a Cardano address, say).
func ScriptHashValues(u *chain.Utxo, yield func(value []byte)) {
	if h, ok := ScriptHashOf(u.Address); ok {
		yield(h[:])
	}
}

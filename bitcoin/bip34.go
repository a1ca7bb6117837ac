package bitcoin

import (
	"bytes"
	"fmt"

	"github.com/btcsuite/btcd/chaincfg"
	"github.com/btcsuite/btcd/wire"
)

// # Heights in coinbases (BIP34)
//
// From a network's BIP34 activation height on, every block's coinbase
// scriptSig begins with the block's height, exactly as Bitcoin Core writes
// it (CScript() << height): OP_0 for 0, OP_1..OP_16 for 1..16, else a push of
// the minimal little-endian script number, e.g. height 277647 (0x043c8f):
//
//	03 8f3c04   push 3 bytes: 0x8f 0x3c 0x04
//
// Convert enforces Core's rule: a block placed at or above the activation
// height must begin its coinbase with that height. CheckHeight, for a caller
// that chooses a height (import-bitcoin's --start-height), also refuses to
// place below activation a block whose coinbase binds it to a height at or
// above it (CoinbaseHeight), such as block 277647 placed at 100. Convert
// does not do that second check: before activation a coinbase may begin
// with arbitrary data that reads as a large height, Core accepts such
// blocks, and a block of the real chain must never be refused.
//
//	network   first height   source
//	mainnet   227931         btcd chaincfg.MainNetParams.BIP0034Height
//	testnet   21111          btcd chaincfg.TestNet3Params.BIP0034Height
//	signet    1              btcd chaincfg.SigNetParams.BIP0034Height
//	regtest   1              Bitcoin Core's regtest (consensus.BIP34Height = 1,
//	                         "always active unless overridden"); btcd's
//	                         RegressionNetParams says 100000000 (inactive),
//	                         which Core's regtest block files do not follow
//
// A regtest node started with -testactivationheight=bip34@N mines blocks
// below N without a height; such a chain cannot be imported.

// bip34Height returns the first height of n whose coinbases carry it.
func (n Network) bip34Height() uint64 {
	switch n {
	case "", Mainnet:
		return uint64(chaincfg.MainNetParams.BIP0034Height)
	case Testnet:
		return uint64(chaincfg.TestNet3Params.BIP0034Height)
	case Signet:
		return uint64(chaincfg.SigNetParams.BIP0034Height)
	}
	return 1 // Regtest, as Bitcoin Core runs it
}

// CheckHeight reports whether blk may be placed at height, for a caller that
// chooses the height: a block whose coinbase binds it to a height
// (CoinbaseHeight) must be placed there, and a block placed at or above the
// network's BIP34 activation height must begin its coinbase with that height
// (Convert's rule). The error wraps ErrInvalidBlock and names both heights
// when the coinbase names one. It does not otherwise validate blk.
func (a *Adapter) CheckHeight(blk *wire.MsgBlock, height uint64) error {
	if declared, ok := a.CoinbaseHeight(blk); ok && declared != height {
		hash := blk.BlockHash()
		return fmt.Errorf("%w: block %s is at height %d (its coinbase says so, BIP34), not at height %d",
			ErrInvalidBlock, displayHash(&hash), declared, height)
	}
	return a.checkCoinbaseHeight(blk, height)
}

// checkCoinbaseHeight is Core's BIP34 rule: at or above the activation
// height, the coinbase begins with the block's height.
func (a *Adapter) checkCoinbaseHeight(blk *wire.MsgBlock, height uint64) error {
	if height < a.network.bip34Height() {
		return nil
	}
	hash := blk.BlockHash()
	script, ok := coinbaseScript(blk)
	if !ok {
		return fmt.Errorf("%w: block %s has no coinbase to carry its height", ErrInvalidBlock, displayHash(&hash))
	}
	if bytes.HasPrefix(script, appendScriptHeight(nil, height)) {
		return nil
	}
	if claimed, ok := scriptHeight(script); ok {
		return fmt.Errorf("%w: block %s is at height %d (its coinbase says so, BIP34), not at height %d",
			ErrInvalidBlock, displayHash(&hash), claimed, height)
	}
	return fmt.Errorf("%w: block %s at height %d: its coinbase does not begin with its height, "+
		"which %s blocks carry from height %d on (BIP34)", ErrInvalidBlock, displayHash(&hash), height, a.network, a.network.bip34Height())
}

// CoinbaseHeight returns the height blk declares in its coinbase when the
// declaration is binding: a block of version 2 or later whose coinbase begins
// with a height, encoded exactly as Core does, at or above the network's
// activation height. CheckHeight accepts blk at that height. ok is false for
// any other block (older blocks' coinbases begin with arbitrary data).
func (a *Adapter) CoinbaseHeight(blk *wire.MsgBlock) (height uint64, ok bool) {
	if blk.Header.Version < 2 {
		return 0, false
	}
	script, ok := coinbaseScript(blk)
	if !ok {
		return 0, false
	}
	h, ok := scriptHeight(script)
	if !ok || h < a.network.bip34Height() || !bytes.HasPrefix(script, appendScriptHeight(nil, h)) {
		return 0, false
	}
	return h, true
}

// coinbaseScript returns the scriptSig of blk's coinbase, if its first
// transaction has the coinbase shape.
func coinbaseScript(blk *wire.MsgBlock) ([]byte, bool) {
	if len(blk.Transactions) == 0 || !isCoinbase(blk.Transactions[0]) {
		return nil, false
	}
	return blk.Transactions[0].TxIn[0].SignatureScript, true
}

// appendScriptHeight appends height as Core's CScript() << height writes it.
func appendScriptHeight(dst []byte, height uint64) []byte {
	switch {
	case height == 0:
		return append(dst, 0x00) // OP_0
	case height <= 16:
		return append(dst, 0x50+byte(height)) // OP_1 .. OP_16
	}
	var num [9]byte
	n := 0
	for v := height; v > 0; v >>= 8 {
		num[n] = byte(v)
		n++
	}
	if num[n-1]&0x80 != 0 { // the top bit is the sign: add a zero byte
		n++
	}
	dst = append(dst, byte(n)) // a direct push of n bytes
	return append(dst, num[:n]...)
}

// scriptHeight decodes the non-negative number a script begins with (OP_0,
// OP_1..OP_16, or a push of 1..9 bytes read as a little-endian script
// number), leniently: for messages, not for the check.
func scriptHeight(script []byte) (uint64, bool) {
	if len(script) == 0 {
		return 0, false
	}
	switch op := script[0]; {
	case op == 0x00:
		return 0, true
	case op >= 0x51 && op <= 0x60:
		return uint64(op - 0x50), true
	case op >= 1 && op <= 9 && len(script) > int(op):
		num := script[1 : 1+int(op)]
		if num[len(num)-1]&0x80 != 0 {
			return 0, false // negative
		}
		var v uint64
		for i := len(num) - 1; i >= 0; i-- {
			v = v<<8 | uint64(num[i])
		}
		return v, true
	}
	return 0, false
}

package blockfrost

import (
	"encoding/hex"
	"strconv"
	"unicode/utf8"

	"github.com/utxo-cache/utxo-cache/cardano/script"
	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

// AppendError appends Blockfrost's error object: {"status_code": status,
// "error": the status's reason phrase, "message": message}. Lucid turns a
// 404 into an empty list only when the body has this shape.
func AppendError(dst []byte, status int, reason, message string) []byte {
	dst = append(dst, `{"status_code":`...)
	dst = strconv.AppendInt(dst, int64(status), 10)
	dst = append(dst, `,"error":`...)
	dst = appendString(dst, reason)
	dst = append(dst, `,"message":`...)
	dst = appendString(dst, message)
	return append(dst, '}')
}

// appendString appends s as a JSON string (from a string or, with no
// conversion, from stored bytes).
func appendString[S string | []byte](dst []byte, s S) []byte {
	const hexDigits = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		// A run of bytes that need no escaping (all of an address) is
		// appended in one copy.
		j := i
		for j < len(s) && safeASCII[s[j]] {
			j++
		}
		if j > i {
			dst = append(dst, s[i:j]...)
			i = j
			continue
		}
		c := s[i]
		if c < utf8.RuneSelf {
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\t':
				dst = append(dst, '\\', 't')
			case '\r':
				dst = append(dst, '\\', 'r')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(string(s[i:min(len(s), i+utf8.UTFMax)]))
		if r == utf8.RuneError && n == 1 {
			dst = append(dst, `\ufffd`...)
		} else {
			dst = append(dst, s[i:i+n]...)
		}
		i += n
	}
	return append(dst, '"')
}

// safeASCII marks the bytes a JSON string holds as they are: printable
// ASCII but the quote and the backslash.
var safeASCII = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

func appendHexString(dst, b []byte) []byte {
	dst = append(dst, '"')
	dst = hex.AppendEncode(dst, b)
	return append(dst, '"')
}

// appendAmount appends Blockfrost's amount list of an output: lovelace
// first, then each asset as policy hex then name hex, in stored order
// (policy, name), every quantity a decimal string.
func appendAmount(dst []byte, r *disk.UtxoRef) []byte {
	dst = append(dst, `[{"unit":"lovelace","quantity":"`...)
	dst = strconv.AppendUint(dst, r.Value, 10)
	dst = append(dst, `"}`...)
	it := r.Assets()
	for {
		policy, name, q, ok := it.Next()
		if !ok {
			break
		}
		dst = append(dst, `,{"unit":"`...)
		dst = hex.AppendEncode(dst, policy)
		dst = hex.AppendEncode(dst, name)
		dst = append(dst, `","quantity":"`...)
		dst = strconv.AppendUint(dst, q, 10)
		dst = append(dst, `"}`...)
	}
	return append(dst, ']')
}

// appendDatumFields appends the "data_hash", "inline_datum" and
// "reference_script_hash" members of an output (each null when absent),
// with their leading commas. data_hash is the hash the output names, or for
// an inline datum the datum's hash, as Blockfrost gives both.
func appendDatumFields(dst []byte, r *disk.UtxoRef) []byte {
	dst = append(dst, `,"data_hash":`...)
	switch {
	case r.DatumHash != nil:
		dst = appendHexString(dst, r.DatumHash)
	case r.Datum != nil:
		h := script.DatumHash(r.Datum)
		dst = appendHexString(dst, h[:])
	default:
		dst = append(dst, "null"...)
	}
	dst = append(dst, `,"inline_datum":`...)
	if r.Datum != nil {
		dst = appendHexString(dst, r.Datum)
	} else {
		dst = append(dst, "null"...)
	}
	dst = append(dst, `,"reference_script_hash":`...)
	if r.ScriptRef == nil {
		return append(dst, "null"...)
	}
	if ref, err := script.ParseRef(r.ScriptRef); err == nil {
		return appendHexString(dst, ref.Hash[:])
	}
	// A reference script that does not read (the ledger accepts none) has
	// no hash: the store indexes it under none either.
	return append(dst, "null"...)
}

// blockHashes reads the hash of the block at a height, from one view,
// remembering the last one (a page's outputs often share blocks).
// The last hash is kept as its quoted hex too, so a page's items of one
// block encode it once.
type blockHashes struct {
	v      *disk.View
	height uint64
	// json[:n] is the hash as a JSON string, or null when not found (a
	// length, not a slice of json: a pointer into the struct itself would
	// move it to the heap).
	json  [2 + 2*chain.HashSize]byte
	n     int
	valid bool
}

// appendAt appends the hash of the block at height h as a JSON string, or
// null when the store has no row for h.
func (b *blockHashes) appendAt(dst []byte, h uint64) ([]byte, error) {
	if !b.valid || b.height != h {
		p, found, err := b.v.PointAt(h)
		if err != nil {
			return dst, err
		}
		b.height, b.valid = h, true
		if found {
			b.n = len(appendHexString(b.json[:0], p.Hash[:]))
		} else {
			b.n = copy(b.json[:], "null")
		}
	}
	return append(dst, b.json[:b.n]...), nil
}

// txHashes keeps the last transaction hash an item encoded, as its quoted
// hex: a page's outputs of one transaction are neighbours in the listing.
type txHashes struct {
	hash  chain.Hash
	json  [2 + 2*chain.HashSize]byte // the hash as a JSON string
	valid bool
}

func (t *txHashes) append(dst []byte, h *chain.Hash) []byte {
	if !t.valid || t.hash != *h {
		t.hash, t.valid = *h, true
		appendHexString(t.json[:0], h[:])
	}
	return append(dst, t.json[:]...)
}

// addressJSON keeps the last address an item encoded, with its JSON
// string: every item of an address's listing carries the same address, and
// the items of a credential's or an account's listing mostly a few, so each
// is escaped once and then copied. Both are kept in arrays (no allocation,
// and nothing pointing into the struct itself, which would move it to the
// heap); a longer address is escaped on every item.
type addressJSON struct {
	raw     [256]byte
	rawLen  int
	json    [264]byte
	jsonLen int // 0: nothing kept
}

func (a *addressJSON) append(dst, address []byte) []byte {
	if a.jsonLen > 0 && string(a.raw[:a.rawLen]) == string(address) {
		return append(dst, a.json[:a.jsonLen]...)
	}
	start := len(dst)
	dst = appendString(dst, address)
	if enc := dst[start:]; len(address) <= len(a.raw) && len(enc) <= len(a.json) {
		a.rawLen = copy(a.raw[:], address)
		a.jsonLen = copy(a.json[:], enc)
	} else {
		a.jsonLen = 0
	}
	return dst
}

// appendAddressUtxo appends one item of an address's (or a credential's,
// or an account's) UTXO list: address, tx_hash, tx_index (Blockfrost's
// deprecated name of output_index, still read), output_index, amount, block
// (the hash of the creating block; null when the store has no row for its
// height, which a store started mid-chain lacks below its first block),
// data_hash, inline_datum, reference_script_hash.
func appendAddressUtxo(dst []byte, r *disk.UtxoRef, addrs *addressJSON, blocks *blockHashes, txs *txHashes) ([]byte, error) {
	dst = append(dst, `{"address":`...)
	dst = addrs.append(dst, r.Address)
	dst = append(dst, `,"tx_hash":`...)
	dst = txs.append(dst, &r.OutPoint.TxHash)
	dst = append(dst, `,"tx_index":`...)
	var num [10]byte
	index := strconv.AppendUint(num[:0], uint64(r.OutPoint.Index), 10)
	dst = append(dst, index...)
	dst = append(dst, `,"output_index":`...)
	dst = append(dst, index...)
	dst = append(dst, `,"amount":`...)
	dst = appendAmount(dst, r)
	dst = append(dst, `,"block":`...)
	dst, err := blocks.appendAt(dst, r.Height)
	if err != nil {
		return dst, err
	}
	dst = appendDatumFields(dst, r)
	return append(dst, '}'), nil
}

// appendTxOutput appends one output of /txs/{hash}/utxos: address, amount,
// output_index, data_hash, inline_datum, collateral (a collateral return),
// reference_script_hash, consumed_by_tx (the spender's hash, null while
// live).
func appendTxOutput(dst []byte, r *disk.UtxoRef) []byte {
	dst = append(dst, `{"address":`...)
	dst = appendString(dst, r.Address)
	dst = append(dst, `,"amount":`...)
	dst = appendAmount(dst, r)
	dst = append(dst, `,"output_index":`...)
	dst = strconv.AppendUint(dst, uint64(r.OutPoint.Index), 10)
	dst = appendDatumFields(dst, r)
	dst = append(dst, `,"collateral":`...)
	dst = strconv.AppendBool(dst, r.CollateralReturn())
	dst = append(dst, `,"consumed_by_tx":`...)
	if r.Spent {
		dst = appendHexString(dst, r.SpenderTxHash[:])
	} else {
		dst = append(dst, "null"...)
	}
	return append(dst, '}')
}

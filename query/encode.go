package query

import (
	"encoding/hex"
	"strconv"
	"unicode/utf8"

	"github.com/utxo-cache/utxo-cache/chain"
)

// The answers of docs/api.md are encoded by hand, appending to a buffer: they
// are computed once per cache fill but on every disk read, and the shapes are
// fixed. Amounts are decimal strings; optional members are omitted when absent.

// AppendTip appends {"height":H,"hash":"…"} (null for an empty store).
func AppendTip(dst []byte, t chain.Tip) []byte {
	if t.Empty {
		return append(dst, "null"...)
	}
	dst = append(dst, `{"height":`...)
	dst = strconv.AppendUint(dst, t.Height, 10)
	dst = append(dst, `,"hash":`...)
	dst = appendHexString(dst, t.Hash[:])
	return append(dst, '}')
}

func appendUtxo(dst []byte, u *chain.Utxo) []byte {
	dst = append(dst, `{"tx_hash":`...)
	dst = appendHexString(dst, u.TxHash[:])
	dst = append(dst, `,"index":`...)
	dst = strconv.AppendUint(dst, uint64(u.Index), 10)
	dst = append(dst, `,"address":`...)
	dst = appendString(dst, u.Address)
	dst = append(dst, `,"value":"`...)
	dst = strconv.AppendUint(dst, u.Value, 10)
	dst = append(dst, `","assets":[`...)
	for i, a := range u.Assets {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"policy":`...)
		dst = appendHexString(dst, a.Policy)
		dst = append(dst, `,"name":`...)
		dst = appendHexString(dst, a.Name)
		dst = append(dst, `,"quantity":"`...)
		dst = strconv.AppendUint(dst, a.Quantity, 10)
		dst = append(dst, `"}`...)
	}
	dst = append(dst, ']')
	if u.DatumHash != nil {
		dst = append(dst, `,"datum_hash":`...)
		dst = appendHexString(dst, u.DatumHash[:])
	}
	if u.Datum != nil {
		dst = append(dst, `,"datum":`...)
		dst = appendHexString(dst, u.Datum)
	}
	if u.ScriptRef != nil {
		dst = append(dst, `,"script_ref":`...)
		dst = appendHexString(dst, u.ScriptRef)
	}
	dst = append(dst, `,"height":`...)
	dst = strconv.AppendUint(dst, u.Height, 10)
	if u.Coinbase() {
		dst = append(dst, `,"coinbase":true`...)
	}
	if u.CollateralReturn() {
		dst = append(dst, `,"collateral_return":true`...)
	}
	return append(dst, '}')
}

func appendSpent(dst []byte, s *chain.Spent) []byte {
	if s == nil {
		return append(dst, "null"...)
	}
	dst = append(dst, `{"tx_hash":`...)
	dst = appendHexString(dst, s.TxHash[:])
	dst = append(dst, `,"height":`...)
	dst = strconv.AppendUint(dst, s.Height, 10)
	return append(dst, '}')
}

func appendBalanceBody(dst []byte, address string, b *chain.Balance) []byte {
	dst = append(dst, `"address":`...)
	dst = appendString(dst, address)
	dst = append(dst, `,"value":"`...)
	dst = append(dst, b.Value.String()...)
	dst = append(dst, `","assets":[`...)
	for i, a := range b.Assets {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"policy":`...)
		dst = appendHexString(dst, a.Policy)
		dst = append(dst, `,"name":`...)
		dst = appendHexString(dst, a.Name)
		dst = append(dst, `,"quantity":"`...)
		dst = append(dst, a.Quantity.String()...)
		dst = append(dst, `"}`...)
	}
	dst = append(dst, `],"utxo_count":`...)
	dst = strconv.AppendUint(dst, b.Count, 10)
	return append(dst, '}')
}

// AppendError appends the contract's error object with the tip it was
// answered at: {"tip":…,"error":{"code":…,"message":…}}.
func AppendError(dst []byte, tip chain.Tip, code, message string) []byte {
	dst = append(dst, `{"tip":`...)
	dst = AppendTip(dst, tip)
	dst = append(dst, ',')
	return appendErrorBody(dst, code, message)
}

// AppendReadyWritesRefused appends /readyz's body for a node that serves
// reads but refuses writes: {"status":"ready","writes":"refused",
// "reason":code,"message":message}.
func AppendReadyWritesRefused(dst []byte, code, message string) []byte {
	dst = append(dst, `{"status":"ready","writes":"refused","reason":`...)
	dst = appendString(dst, code)
	dst = append(dst, `,"message":`...)
	dst = appendString(dst, message)
	return append(dst, '}')
}

// appendErrorBody appends `"error":{…}}`: an error answer after its tip.
func appendErrorBody(dst []byte, code, message string) []byte {
	dst = append(dst, `"error":{"code":`...)
	dst = appendString(dst, code)
	dst = append(dst, `,"message":`...)
	dst = appendString(dst, message)
	return append(dst, "}}"...)
}

func appendHexString(dst, b []byte) []byte {
	dst = append(dst, '"')
	dst = hex.AppendEncode(dst, b)
	return append(dst, '"')
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD, as
// encoding/json does; control characters, quote and backslash are escaped.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

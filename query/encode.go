package query

import (
	"encoding/hex"
	"strconv"
	"unicode/utf8"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
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

// appendUtxo appends the contract's UTXO object for an output read in place
// from the store (disk.UtxoRef): straight from the stored bytes, with no
// intermediate chain.Utxo. TestAnswersMatchReference and FuzzUtxoEncoding
// hold it byte for byte to the encoding of the decoded chain.Utxo, and to
// appendChainUtxo.
func appendUtxo(dst []byte, r *disk.UtxoRef) []byte {
	dst = appendUtxoHead(dst, r)
	dst = append(dst, `,"height":`...)
	dst = strconv.AppendUint(dst, r.Height, 10)
	if r.Coinbase() {
		dst = append(dst, `,"coinbase":true,"spendable_at_height":`...)
		dst = strconv.AppendUint(dst, r.Height+chain.CoinbaseMaturity, 10)
	}
	if r.CollateralReturn() {
		dst = append(dst, `,"collateral_return":true`...)
	}
	if r.Frozen {
		dst = append(dst, `,"frozen":true`...)
	}
	return append(dst, '}')
}

// appendUtxoHead appends the members of r's UTXO object that come before
// "height" (from the opening brace through "script_ref"): what a confirmed
// and an unconfirmed output's objects share (appendPendingUtxoRef).
func appendUtxoHead(dst []byte, r *disk.UtxoRef) []byte {
	dst = appendOutPointHead(dst, r.OutPoint)
	dst = append(dst, `,"address":`...)
	dst = appendString(dst, r.Address)
	dst = append(dst, `,"value":"`...)
	dst = strconv.AppendUint(dst, r.Value, 10)
	dst = append(dst, `","assets":[`...)
	for i, it := 0, r.Assets(); ; i++ {
		policy, name, quantity, ok := it.Next()
		if !ok {
			break
		}
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"policy":`...)
		dst = appendHexString(dst, policy)
		dst = append(dst, `,"name":`...)
		dst = appendHexString(dst, name)
		dst = append(dst, `,"quantity":"`...)
		dst = strconv.AppendUint(dst, quantity, 10)
		dst = append(dst, `"}`...)
	}
	dst = append(dst, ']')
	if r.DatumHash != nil {
		dst = append(dst, `,"datum_hash":`...)
		dst = appendHexString(dst, r.DatumHash)
	}
	if r.Datum != nil {
		dst = append(dst, `,"datum":`...)
		dst = appendHexString(dst, r.Datum)
	}
	if r.ScriptRef != nil {
		dst = append(dst, `,"script_ref":`...)
		dst = appendHexString(dst, r.ScriptRef)
	}
	return dst
}

// appendChainUtxo appends the contract's UTXO object for u, an output the
// store holds (see storable): the bytes appendUtxo writes for u's stored
// record, unfrozen (a chain.Utxo carries no freeze: the outputs it encodes
// are ones a block just created, which no freeze can name yet). The store keeps an absent and an empty datum or script ref alike
// (a zero length), so both are omitted here. Kept entries append the
// outputs a change added from the change set's chain.Utxos with it
// (patchedPage); TestChainUtxoEncodingMatchesStored and FuzzUtxoEncoding
// hold the two encoders byte for byte.
func appendChainUtxo(dst []byte, u *chain.Utxo) []byte {
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
	if len(u.Datum) > 0 {
		dst = append(dst, `,"datum":`...)
		dst = appendHexString(dst, u.Datum)
	}
	if len(u.ScriptRef) > 0 {
		dst = append(dst, `,"script_ref":`...)
		dst = appendHexString(dst, u.ScriptRef)
	}
	dst = append(dst, `,"height":`...)
	dst = strconv.AppendUint(dst, u.Height, 10)
	if at, ok := u.SpendableAt(); ok {
		dst = append(dst, `,"coinbase":true,"spendable_at_height":`...)
		dst = strconv.AppendUint(dst, at, 10)
	}
	if u.CollateralReturn() {
		dst = append(dst, `,"collateral_return":true`...)
	}
	return append(dst, '}')
}

// AppendChainUtxo appends the UTXO object of u, unfrozen, exactly as a read
// of the store's record of u answers it (appendChainUtxo): what event
// streams send for the outputs a change created or a rollback restored.
func AppendChainUtxo(dst []byte, u *chain.Utxo) []byte { return appendChainUtxo(dst, u) }

// AppendHexString appends b as a JSON string of lower-case hex.
func AppendHexString(dst, b []byte) []byte { return appendHexString(dst, b) }

// AppendJSONString appends s as a JSON string.
func AppendJSONString(dst []byte, s string) []byte { return appendString(dst, s) }

// storable reports whether the store reads u's record back: its flags are
// known and its fields within the contract's sizes. ValidateBlock holds
// every decoded block to those sizes; only an in-process producer that
// skips it can apply a larger output, whose listing then fails to read as
// corrupt. Such an output is not patched into a kept page: the page's
// invalidation stands, and its next read gets the store's error.
func storable(u *chain.Utxo) bool {
	if u.Flags&^(chain.FlagCoinbase|chain.FlagCollateralReturn) != 0 ||
		len(u.Address) > chain.MaxAddressLen || len(u.Datum) > chain.MaxDatumLen ||
		len(u.ScriptRef) > chain.MaxScriptRefLen {
		return false
	}
	for _, a := range u.Assets {
		if len(a.Policy) > chain.MaxPolicyLen || len(a.Name) > chain.MaxAssetNameLen {
			return false
		}
	}
	return true
}

// appendSpent appends the "spent" member's value of r: null while live.
func appendSpent(dst []byte, r *disk.UtxoRef) []byte {
	if !r.Spent {
		return append(dst, "null"...)
	}
	dst = append(dst, `{"tx_hash":`...)
	dst = appendHexString(dst, r.SpenderTxHash[:])
	dst = append(dst, `,"height":`...)
	dst = strconv.AppendUint(dst, r.SpentHeight, 10)
	return append(dst, '}')
}

func appendBalanceBody(dst []byte, address string, b *chain.Balance) []byte {
	dst = append(dst, `"address":`...)
	dst = appendString(dst, address)
	dst = append(dst, ',')
	return appendBalanceFields(dst, b)
}

// appendBalanceFields appends a balance's members and the closing brace:
// `"value":…,"assets":[…],"utxo_count":…}`.
func appendBalanceFields(dst []byte, b *chain.Balance) []byte {
	dst = append(dst, `"value":"`...)
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

// plainJSON marks the bytes a JSON string holds as they are: printable
// ASCII but the quote and the backslash.
var plainJSON = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// appendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD, as
// encoding/json does; control characters, quote and backslash are escaped.
// It takes the bytes of a stored address as they are, so that answers read
// in place need no string copy.
func appendString[S ~string | ~[]byte](dst []byte, s S) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if plainJSON[c] {
			i++
			continue
		}
		if c < utf8.RuneSelf {
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
		// A rune is at most UTFMax bytes: converting no more keeps the
		// []byte instantiation free of allocation.
		r, size := utf8.DecodeRuneInString(string(s[i:min(i+utf8.UTFMax, len(s))]))
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

// appendOutPointHead appends `{"tx_hash":"…","index":N` for op: the head of
// a result or list item that names its outpoint, left open for its other
// members.
func appendOutPointHead(dst []byte, op chain.OutPoint) []byte {
	dst = append(dst, `{"tx_hash":`...)
	dst = appendHexString(dst, op.TxHash[:])
	dst = append(dst, `,"index":`...)
	return strconv.AppendUint(dst, uint64(op.Index), 10)
}

// Package credential derives the credentials a Cardano address carries, for
// the store's credential indexes, and parses the strings wallets name
// credentials by. It knows Cardano's address header and CIP 5's prefixes and
// nothing else: no CBOR, no gouroboros, so the API and the assembly can
// import it without the block decoder.
//
// # Credentials of an address
//
// A Shelley address (header types 0..7) starts with a header byte, type in
// the high nibble and network id in the low one, then the 28-byte hash of
// its payment credential; bit 0 of the type says whether that credential is
// a key hash (0) or a script hash (1):
//
//	type  kind                 payment credential  stake credential
//	0..3  base                 bytes 1..29         bytes 29..57, bit 1: script
//	4, 5  pointer              bytes 1..29         none (a chain pointer)
//	6, 7  enterprise           bytes 1..29         none
//	8     Byron                none                none
//	14,15 reward (no outputs)  none                bytes 1..29, bit 0: script
//
// The credentials are read from the raw bytes at those offsets and nothing
// else is parsed: a pointer address whose pointer fields overflow (a real
// 219-byte one is in the cardano package's test data) still has its payment
// credential, and a pointer is never indexed as a stake credential (it
// names a certificate's position on the chain, which the store cannot
// resolve). Byron addresses carry no credential in this sense.
//
// # Index value
//
// A credential is indexed as 29 bytes, its kind then its hash:
//
//	kind  1 byte: 0 key hash, 1 script hash
//	hash  28 bytes
//
// so a key hash and a script hash with the same bytes are two values. The
// network id is not part of it: a store holds one network.
package credential

import (
	"errors"
	"fmt"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/internal/textenc"
)

// Kind says what a credential's hash is of.
type Kind byte

// The kinds, as the index value's first byte: persisted, never renumber.
const (
	KeyHash    Kind = 0
	ScriptHash Kind = 1
)

const (
	// HashLen is the length of a credential's hash (blake2b-224).
	HashLen = 28
	// ValueLen is the length of an index value: kind and hash.
	ValueLen = 1 + HashLen
)

// ErrInvalid is the class of every Parse error.
var ErrInvalid = errors.New("credential: not a credential")

// AppendValue appends the index value of the credential (kind, hash).
func AppendValue(dst []byte, kind Kind, hash []byte) []byte {
	return append(append(dst, byte(kind)), hash...)
}

// FromRaw returns the index values of the payment and stake credentials of
// the raw address bytes raw (the package doc's table), appended to dst: ok
// is false for each one raw does not carry. It never fails: bytes it cannot
// read carry no credential.
func FromRaw(raw []byte) (payment, stake []byte, okPayment, okStake bool) {
	if len(raw) < 1+HashLen {
		return nil, nil, false, false
	}
	typ := raw[0] >> 4
	switch {
	case typ <= 7:
		payment = AppendValue(make([]byte, 0, ValueLen), Kind(typ&1), raw[1:1+HashLen])
		okPayment = true
		if typ <= 3 && len(raw) >= 1+2*HashLen {
			stake = AppendValue(make([]byte, 0, ValueLen), Kind(typ>>1&1), raw[1+HashLen:1+2*HashLen])
			okStake = true
		}
	case typ == 14 || typ == 15:
		stake = AppendValue(make([]byte, 0, ValueLen), Kind(typ&1), raw[1:1+HashLen])
		okStake = true
	}
	return payment, stake, okPayment, okStake
}

// addressBytes decodes an output's address string into raw bytes, appended
// to dst: a bech32 "addr" or "addr_test" string of a Shelley address, as
// the cardano package renders types 0..7. Anything else (a Byron base58
// address, another chain's address) is not ok.
func addressBytes(address string, dst []byte) ([]byte, bool) {
	if len(address) < 5 || address[0] != 'a' {
		return nil, false // fast path: neither "addr1…" nor "addr_test1…"
	}
	hrp, raw, err := textenc.DecodeBech32(address, textenc.Bech32Const, dst)
	if err != nil || (hrp != "addr" && hrp != "addr_test") || len(raw) == 0 || raw[0]>>4 > 7 {
		return nil, false
	}
	return raw, true
}

// PaymentValues is the payment-credential index's function of an output
// (disk.ValuesFunc): it yields the payment credential of u's address, if it
// has one.
func PaymentValues(u *chain.Utxo, yield func(value []byte)) {
	var buf [128]byte
	raw, ok := addressBytes(u.Address, buf[:0])
	if !ok {
		return
	}
	if len(raw) >= 1+HashLen { // a Shelley type (addressBytes): it has one
		var v [ValueLen]byte
		yield(AppendValue(v[:0], Kind(raw[0]>>4&1), raw[1:1+HashLen]))
	}
}

// StakeValues is the stake-credential index's function of an output
// (disk.ValuesFunc): it yields the stake credential of u's address when it
// is a base address.
func StakeValues(u *chain.Utxo, yield func(value []byte)) {
	var buf [128]byte
	raw, ok := addressBytes(u.Address, buf[:0])
	if !ok {
		return
	}
	if raw[0]>>4 <= 3 && len(raw) >= 1+2*HashLen { // a base address
		var v [ValueLen]byte
		yield(AppendValue(v[:0], Kind(raw[0]>>5&1), raw[1+HashLen:1+2*HashLen]))
	}
}

// ParsePayment returns the index value of a payment credential named by its
// CIP 5 string: "addr_vkh1…" (a key hash) or "script1…" (a script hash),
// bech32 of the 28-byte hash. Any other string is an error matching
// ErrInvalid.
func ParsePayment(s string) ([]byte, error) {
	hrp, hash, err := decode(s)
	if err != nil {
		return nil, err
	}
	switch hrp {
	case "addr_vkh":
		return AppendValue(nil, KeyHash, hash), nil
	case "script":
		return AppendValue(nil, ScriptHash, hash), nil
	}
	return nil, fmt.Errorf("%w: prefix %q: a payment credential is addr_vkh1… or script1…", ErrInvalid, hrp)
}

// ParseStake returns the index value of a stake credential named by a
// reward address ("stake1…", "stake_test1…": header type 14 for a key hash,
// 15 for a script hash, then the hash) or by its CIP 5 string ("stake_vkh1…"
// for a key hash, "script1…" for a script hash). The reward address's
// network id is not checked against anything: the index value has none. Any
// other string is an error matching ErrInvalid.
func ParseStake(s string) ([]byte, error) {
	hrp, data, err := textenc.DecodeBech32(s, textenc.Bech32Const, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	switch hrp {
	case "stake", "stake_test":
		if len(data) != 1+HashLen || (data[0]>>4 != 14 && data[0]>>4 != 15) {
			return nil, fmt.Errorf("%w: a reward address is a header of type 14 or 15 and a 28-byte hash (%d bytes)", ErrInvalid, len(data))
		}
		_, st, _, _ := FromRaw(data)
		return st, nil
	case "stake_vkh", "script":
		if len(data) != HashLen {
			return nil, fmt.Errorf("%w: a %s credential is a 28-byte hash, not %d bytes", ErrInvalid, hrp, len(data))
		}
		kind := KeyHash
		if hrp == "script" {
			kind = ScriptHash
		}
		return AppendValue(nil, kind, data), nil
	}
	return nil, fmt.Errorf("%w: prefix %q: a stake credential is stake1…, stake_test1…, stake_vkh1… or script1…", ErrInvalid, hrp)
}

// decode reads a CIP 5 string of a 28-byte hash.
func decode(s string) (hrp string, hash []byte, err error) {
	hrp, hash, err = textenc.DecodeBech32(s, textenc.Bech32Const, nil)
	if err != nil {
		return "", nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if len(hash) != HashLen {
		return "", nil, fmt.Errorf("%w: a credential is a 28-byte hash, not %d bytes", ErrInvalid, len(hash))
	}
	return hrp, hash, nil
}

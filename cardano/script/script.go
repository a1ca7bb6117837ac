// Package script derives what the store indexes of a Cardano output's
// reference script and inline datum (their hashes), and reads a reference
// script for the Blockfrost front end (its language, its bytes, a native
// script as JSON). It knows the few CBOR shapes it reads and nothing else:
// no CBOR library, no gouroboros, so the assembly and the front end can
// import it without the block decoder.
//
// # Reference script
//
// An output's reference script (chain.Output.ScriptRef, the bytes inside
// its tag 24) is the CBOR array [language, script]:
//
//	language  script                              hashed bytes
//	0         a native script (a CBOR array)       0x00, then the script's CBOR as sent
//	1         Plutus V1: a CBOR byte string        0x01, then the byte string's content
//	2         Plutus V2: a CBOR byte string        0x02, then the byte string's content
//	3         Plutus V3: a CBOR byte string        0x03, then the byte string's content
//
// Its hash, the ledger's script hash, is blake2b-224 of the hashed bytes:
// the language tag, then the native script's own CBOR bytes, or the
// content of a Plutus script's byte string (itself the CBOR byte string of
// the flat-encoded program: Blockfrost's "cbor" of a Plutus script). Example:
// the native script [0, h'00…00'] (a signature by the all-zero key hash) is
// carried as 82 00 82 00 58 1c 00…00 and hashed over 00 82 00 58 1c 00…00.
//
// # Inline datum
//
// An inline datum (chain.Output.Datum) is the datum's CBOR as sent; its
// hash, the ledger's datum hash, is blake2b-256 of those bytes, never of a
// re-encoding.
//
// # Index values
//
// DimReferenceScriptHash's value is the 28-byte script hash, DimDatumHash's
// the 32-byte datum hash: the values are the hashes alone, as clients name
// them.
package script

import (
	"errors"
	"fmt"

	"golang.org/x/crypto/blake2b"

	"github.com/utxo-cache/utxo-cache/chain"
)

// ErrInvalid is the class of every error reading a reference script or a
// native script: the bytes are not the shape the package doc describes.
var ErrInvalid = errors.New("script: not a reference script")

// Language is a reference script's language tag (the ledger's, persisted in
// every reference script: never renumber).
type Language uint8

// The languages.
const (
	Native   Language = 0
	PlutusV1 Language = 1
	PlutusV2 Language = 2
	PlutusV3 Language = 3
)

// String returns Blockfrost's name of the language: timelock, plutusV1, …
func (l Language) String() string {
	switch l {
	case Native:
		return "timelock"
	case PlutusV1:
		return "plutusV1"
	case PlutusV2:
		return "plutusV2"
	case PlutusV3:
		return "plutusV3"
	}
	return fmt.Sprintf("language(%d)", uint8(l))
}

const (
	// HashLen is the length of a script hash (blake2b-224).
	HashLen = 28
	// DatumHashLen is the length of a datum hash (blake2b-256).
	DatumHashLen = 32
)

// Ref is a reference script read from its bytes. Body aliases the bytes it
// was read from: a native script's CBOR, or a Plutus script's byte-string
// content.
type Ref struct {
	Language Language
	Body     []byte
	Hash     [HashLen]byte
}

// maxNesting bounds the depth of a native script read (a fuzzer's input
// would otherwise recurse as deep as it is long).
const maxNesting = 64

// ParseRef reads a reference script (the package doc's table) and computes
// its hash. It is strict: trailing bytes, an unknown language, or a native
// script that is not one of the six forms are errors matching ErrInvalid.
func ParseRef(ref []byte) (Ref, error) {
	d := decoder{b: ref}
	n, ok := d.arrayHead()
	if !ok || n != 2 {
		return Ref{}, fmt.Errorf("%w: want the array [language, script]", ErrInvalid)
	}
	lang, ok := d.uint()
	if !ok || lang > uint64(PlutusV3) {
		return Ref{}, fmt.Errorf("%w: language tag", ErrInvalid)
	}
	r := Ref{Language: Language(lang)}
	start := d.off
	if r.Language == Native {
		if err := d.skipNative(0); err != nil {
			return Ref{}, err
		}
		r.Body = ref[start:d.off]
	} else {
		body, ok := d.bytes()
		if !ok {
			return Ref{}, fmt.Errorf("%w: a Plutus script is a byte string", ErrInvalid)
		}
		r.Body = body
	}
	if d.off != len(ref) {
		return Ref{}, fmt.Errorf("%w: %d trailing bytes", ErrInvalid, len(ref)-d.off)
	}
	r.Hash = Hash(r.Language, r.Body)
	return r, nil
}

// Hash returns the script hash of a script of language lang whose hashed
// body (the package doc's table) is body.
func Hash(lang Language, body []byte) [HashLen]byte {
	h, _ := blake2b.New(HashLen, nil) // a valid size: no error
	h.Write([]byte{byte(lang)})
	h.Write(body)
	var out [HashLen]byte
	h.Sum(out[:0])
	return out
}

// DatumHash returns the datum hash of a datum's CBOR bytes.
func DatumHash(datum []byte) [DatumHashLen]byte { return blake2b.Sum256(datum) }

// RefScriptValues is DimReferenceScriptHash's function of an output
// (disk.ValuesFunc): the hash of its reference script, when it carries one
// that reads. A reference script that does not read (which the ledger never
// accepts) has no value.
func RefScriptValues(u *chain.Utxo, yield func(value []byte)) {
	if len(u.ScriptRef) == 0 {
		return
	}
	r, err := ParseRef(u.ScriptRef)
	if err != nil {
		return
	}
	yield(r.Hash[:])
}

// DatumValues is DimDatumHash's function of an output (disk.ValuesFunc):
// the hash of its inline datum, when it carries one. An output that names a
// datum by hash only is not listed: the store does not hold that datum.
func DatumValues(u *chain.Utxo, yield func(value []byte)) {
	if len(u.Datum) == 0 {
		return
	}
	h := DatumHash(u.Datum)
	yield(h[:])
}

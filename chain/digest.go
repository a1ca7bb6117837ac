package chain

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/bits"
	"slices"
)

// Digest is the order-independent digest of a UTXO set (docs/digest.md): the sum
// modulo 2^256 of uint256_be(SHA-256(enc(u))) over the live UTXOs u. The zero
// value is the digest of the empty set. Adding and then subtracting the same
// UTXO restores the previous digest exactly, which is what makes rollbacks and
// incremental maintenance exact.
type Digest [32]byte

// String renders the digest as 64 lowercase hex characters.
func (d Digest) String() string { return hex.EncodeToString(d[:]) }

// ParseDigest parses the 64 hex characters String renders.
func ParseDigest(s string) (Digest, error) {
	h, err := ParseHash(s)
	if err != nil {
		return Digest{}, fmt.Errorf("digest: %w", err)
	}
	return Digest(h), nil
}

// MarshalText renders the digest as String does, so it is a JSON string.
func (d Digest) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText parses what MarshalText renders.
func (d *Digest) UnmarshalText(b []byte) error {
	v, err := ParseDigest(string(b))
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// Add adds u's term to the digest.
func (d *Digest) Add(u *Utxo) { d.addTerm(UtxoTerm(u), false) }

// Sub subtracts u's term from the digest.
func (d *Digest) Sub(u *Utxo) { d.addTerm(UtxoTerm(u), true) }

// AddTerm adds a term computed once by UtxoTerm: the same as Add of its UTXO.
func (d *Digest) AddTerm(t [32]byte) { d.addTerm(t, false) }

// SubTerm subtracts a term computed once by UtxoTerm: the same as Sub of its
// UTXO.
func (d *Digest) SubTerm(t [32]byte) { d.addTerm(t, true) }

// addTerm adds (or subtracts) a 256-bit big-endian term, modulo 2^256.
func (d *Digest) addTerm(t [32]byte, negate bool) {
	var carry uint64
	for i := 24; i >= 0; i -= 8 {
		a := binary.BigEndian.Uint64(d[i:])
		b := binary.BigEndian.Uint64(t[i:])
		var r uint64
		if negate {
			r, carry = bits.Sub64(a, b, carry)
		} else {
			r, carry = bits.Add64(a, b, carry)
		}
		binary.BigEndian.PutUint64(d[i:], r)
	}
}

// UtxoTerm returns SHA-256(enc(u)), the digest term of one UTXO.
func UtxoTerm(u *Utxo) [32]byte {
	var stack [256]byte
	return sha256.Sum256(AppendDigestEncoding(stack[:0], u))
}

// AppendDigestEncoding appends enc(u) of docs/digest.md to dst:
//
//	tx hash      32 bytes
//	output index uint32
//	address      bytes32(UTF-8 address)
//	value        uint64
//	assets       uint32 count, then per asset in (policy, name) byte order:
//	             bytes32(policy) bytes32(name) uint64 quantity
//	datum_hash   bytes32 (length 0 when absent)
//	datum        bytes32 (length 0 when absent)
//	script_ref   bytes32 (length 0 when absent)
//	height       uint64
//	flags        1 byte: bit 0 coinbase, bit 1 collateral return
//
// Integers are big-endian; bytes32(x) is a uint32 length, then x.
func AppendDigestEncoding(dst []byte, u *Utxo) []byte {
	dst = append(dst, u.TxHash[:]...)
	dst = binary.BigEndian.AppendUint32(dst, u.Index)
	dst = appendBytes32(dst, []byte(u.Address))
	dst = binary.BigEndian.AppendUint64(dst, u.Value)
	assets := u.Assets
	if !AssetsSorted(assets) {
		assets = slices.Clone(assets)
		SortAssets(assets)
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(assets)))
	for _, a := range assets {
		dst = appendBytes32(dst, a.Policy)
		dst = appendBytes32(dst, a.Name)
		dst = binary.BigEndian.AppendUint64(dst, a.Quantity)
	}
	if u.DatumHash != nil {
		dst = appendBytes32(dst, u.DatumHash[:])
	} else {
		dst = appendBytes32(dst, nil)
	}
	dst = appendBytes32(dst, u.Datum)
	dst = appendBytes32(dst, u.ScriptRef)
	dst = binary.BigEndian.AppendUint64(dst, u.Height)
	return append(dst, u.Flags)
}

func appendBytes32(dst, b []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(b)))
	return append(dst, b...)
}

// CompareAssets orders assets by policy bytes, then name bytes.
func CompareAssets(a, b Asset) int {
	if c := bytes.Compare(a.Policy, b.Policy); c != 0 {
		return c
	}
	return bytes.Compare(a.Name, b.Name)
}

// SortAssets sorts assets in (policy, name) byte order, in place.
func SortAssets(assets []Asset) { slices.SortFunc(assets, CompareAssets) }

// AssetsSorted reports whether assets are in strictly increasing (policy, name) order.
func AssetsSorted(assets []Asset) bool {
	for i := 1; i < len(assets); i++ {
		if CompareAssets(assets[i-1], assets[i]) >= 0 {
			return false
		}
	}
	return true
}

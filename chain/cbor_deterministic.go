package chain

import (
	"fmt"

	"github.com/fxamacker/cbor/v2"
)

// The deterministic CBOR encoder for the replication change-log records
// (each change is a CBOR map {seq, kind, after, block, target}; change.go and
// docs/replication.md#change-records give the layout).
// Replicas and backups compare and hash what the writer stored, so the same
// record must always encode to the same bytes, whatever Go map iteration
// order or struct field order produced it.
//
// It is fxamacker/cbor with RFC 8949 §4.2.1 core deterministic encoding
// (cbor.CoreDetEncOptions): shortest integer and length heads, definite
// lengths only, map keys (and struct fields, which encode as maps) in the
// bytewise order of their encoded form, so a shorter text key sorts first,
// then equal lengths alphabetically; floats in their shortest exact form.
// Example: map[string]uint64{"b": 1, "a": 2, "aa": 3} encodes as
//
//	a3        map(3)
//	   61 61  "a"
//	   02     2
//	   61 62  "b"
//	   01     1
//	   62 6161 "aa"
//	   03     3
//
// Block has no cbor tags: a record carries a block as its canonical encoding
// (AppendBlockCBOR, which follows the same rules), through a field whose type
// has a MarshalCBOR method returning those bytes; the encoder embeds them
// verbatim (TestMarshalDeterministic).

// detEncMode is immutable and safe for concurrent use.
var detEncMode = func() cbor.EncMode {
	em, err := cbor.CoreDetEncOptions().EncMode()
	if err != nil {
		panic(fmt.Sprintf("chain: core deterministic CBOR options: %v", err))
	}
	return em
}()

// MarshalDeterministic returns the RFC 8949 core deterministic CBOR encoding
// of v (see above): equal values always give equal bytes. It is the encoder
// for the replication change-log records, and safe for concurrent use. Struct
// fields are named by their `cbor` tags, as in fxamacker/cbor. It fails only
// for values CBOR cannot hold (channels, functions, cycles).
func MarshalDeterministic(v any) ([]byte, error) {
	b, err := detEncMode.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("chain: deterministic CBOR: %w", err)
	}
	return b, nil
}

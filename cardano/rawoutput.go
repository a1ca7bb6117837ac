package cardano

import (
	"fmt"

	"github.com/blinklabs-io/gouroboros/cbor"
)

// rawOutput holds the parts of an output that must stay byte-exact, cut from
// the output's own CBOR rather than re-encoded from a parsed form.
//
//	Byron            [address, amount]            address: the CBOR of the
//	                                              Byron address itself
//	Shelley..Mary    [address, value]             address: a byte string
//	Alonzo           [address, value, datum_hash]
//	Babbage, Conway  the array forms, or a map    0 address, 1 value,
//	                                              2 [0, datum_hash] |
//	                                                [1, #6.24(datum)],
//	                                              3 #6.24(script)
//
// datum and scriptRef are the bytes inside their tag 24: the datum's CBOR
// (what its hash is computed over) and the script's CBOR `[type, script]`.
type rawOutput struct {
	address   []byte
	datumHash *[32]byte
	datum     []byte
	scriptRef []byte
}

func parseRawOutput(data []byte, era Era) (rawOutput, error) {
	var r rawOutput
	if len(data) == 0 {
		return r, fmt.Errorf("no output bytes")
	}
	switch major := data[0] >> 5; major {
	case 4: // array
		var elems []cbor.RawMessage
		if err := decodeExact(data, &elems); err != nil {
			return r, fmt.Errorf("output: %w", err)
		}
		if len(elems) < 2 || len(elems) > 3 {
			return r, fmt.Errorf("output array of %d elements", len(elems))
		}
		if era <= EraByron {
			if len(elems) != 2 {
				return r, fmt.Errorf("byron output array of %d elements", len(elems))
			}
			r.address = append([]byte(nil), elems[0]...)
			return r, nil
		}
		if err := decodeExact(elems[0], &r.address); err != nil {
			return r, fmt.Errorf("address: %w", err)
		}
		if len(elems) == 3 {
			h, err := decodeHash32(elems[2])
			if err != nil {
				return r, fmt.Errorf("datum hash: %w", err)
			}
			r.datumHash = h
		}
		return r, nil
	case 5: // map (Babbage on)
		var m map[uint64]cbor.RawMessage
		if err := decodeExact(data, &m); err != nil {
			return r, fmt.Errorf("output: %w", err)
		}
		for k := range m {
			if k > 3 {
				return r, fmt.Errorf("output map key %d", k)
			}
		}
		a, ok := m[0]
		if !ok {
			return r, fmt.Errorf("output map without address")
		}
		if err := decodeExact(a, &r.address); err != nil {
			return r, fmt.Errorf("address: %w", err)
		}
		if d, ok := m[2]; ok {
			if err := r.parseDatumOption(d); err != nil {
				return r, fmt.Errorf("datum: %w", err)
			}
		}
		if s, ok := m[3]; ok {
			var w cbor.WrappedCbor
			if err := decodeExact(s, &w); err != nil {
				return r, fmt.Errorf("script ref: %w", err)
			}
			r.scriptRef = append([]byte{}, w...)
		}
		return r, nil
	default:
		return r, fmt.Errorf("output of CBOR major type %d", major)
	}
}

func (r *rawOutput) parseDatumOption(d []byte) error {
	var opt []cbor.RawMessage
	if err := decodeExact(d, &opt); err != nil {
		return err
	}
	var kind uint64
	if len(opt) != 2 {
		return fmt.Errorf("datum option of %d elements", len(opt))
	}
	if err := decodeExact(opt[0], &kind); err != nil {
		return err
	}
	switch kind {
	case 0:
		h, err := decodeHash32(opt[1])
		r.datumHash = h
		return err
	case 1:
		var w cbor.WrappedCbor
		if err := decodeExact(opt[1], &w); err != nil {
			return err
		}
		r.datum = append([]byte{}, w...)
		return nil
	default:
		return fmt.Errorf("datum option kind %d", kind)
	}
}

func decodeHash32(data []byte) (*[32]byte, error) {
	var b []byte
	if err := decodeExact(data, &b); err != nil {
		return nil, err
	}
	if len(b) != 32 {
		return nil, fmt.Errorf("hash of %d bytes", len(b))
	}
	return (*[32]byte)(b), nil
}

// decodeExact decodes one CBOR item that must span all of data.
func decodeExact(data []byte, dst any) error {
	n, err := cbor.Decode(data, dst)
	if err != nil {
		return err
	}
	if n != len(data) {
		return fmt.Errorf("%d trailing bytes", len(data)-n)
	}
	return nil
}

// splitTagged splits the era-tagged block `[tag, block]`.
func splitTagged(tagged []byte) (Era, []byte, error) {
	var parts []cbor.RawMessage
	if err := decodeExact(tagged, &parts); err != nil {
		return 0, nil, fmt.Errorf("%w: era-tagged block: %v", ErrCorrupt, err)
	}
	if len(parts) != 2 {
		return 0, nil, fmt.Errorf("%w: era-tagged block is an array of %d elements, want 2", ErrCorrupt, len(parts))
	}
	var tag uint64
	if err := decodeExact(parts[0], &tag); err != nil {
		return 0, nil, fmt.Errorf("%w: era tag: %v", ErrCorrupt, err)
	}
	if tag > uint64(EraConway) {
		return 0, nil, fmt.Errorf("%w: %d", ErrUnknownEra, tag)
	}
	return Era(tag), parts[1], nil
}

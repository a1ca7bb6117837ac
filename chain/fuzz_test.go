package chain

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

// fuzzLimits are small, so that fuzzed inputs reach every count limit.
var fuzzLimits = Limits{MaxBlockBytes: 1 << 20, MaxTxs: 8, MaxInputsPerTx: 4, MaxOutputsPerTx: 4, MaxAssetsPerOutput: 4}

func addSeeds(f *testing.F, encode func(any) ([]byte, bool)) {
	for _, tc := range codecCases() {
		if data, ok := encode(tc.doc); ok && len(data) <= 4<<10 {
			f.Add(data)
		}
	}
}

// FuzzDecodeBlockJSON: the decoder never panics; whatever it accepts survives
// encode → decode unchanged in both encodings, and its canonical encoding is
// a fixed point.
func FuzzDecodeBlockJSON(f *testing.F) {
	addSeeds(f, encJSON)
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := DecodeBlockJSON(data, fuzzLimits)
		if err != nil {
			if b != nil {
				t.Fatal("block returned with an error")
			}
			return
		}
		checkRoundTrip(t, b, fuzzLimits)
		// The JSONL reader agrees with the single-document decoder.
		if !bytes.ContainsAny(data, "\n") {
			b2, err := NewJSONLReader(bytes.NewReader(data), fuzzLimits).Next()
			if err != nil || !reflect.DeepEqual(b, b2) {
				t.Fatalf("JSONLReader: %v", err)
			}
		}
	})
}

// FuzzDecodeBlockCBOR: as FuzzDecodeBlockJSON, and everything the decoder
// accepts is well-formed CBOR without duplicate keys by fxamacker/cbor's
// strict mode (the decoder must never be laxer than the library).
func FuzzDecodeBlockCBOR(f *testing.F) {
	addSeeds(f, encCBOR)
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := DecodeBlockCBOR(data, fuzzLimits)
		if err != nil {
			if b != nil {
				t.Fatal("block returned with an error")
			}
			return
		}
		var v any
		if err := strictCBOR.Unmarshal(data, &v); err != nil {
			t.Fatalf("accepted input that fxamacker/cbor rejects: %v", err)
		}
		checkRoundTrip(t, b, fuzzLimits)
		// The CBOR sequence reader agrees with the single-item decoder.
		r := NewCBORSeqReader(bytes.NewReader(data), fuzzLimits)
		b2, err := r.Next()
		if err != nil || !reflect.DeepEqual(b, b2) {
			t.Fatalf("CBORSeqReader: %v", err)
		}
	})
}

// FuzzCBORDecodersAgree is the differential test of the two CBOR decoders:
// the hand walker (DecodeBlockCBOR) and the fxamacker reference
// (codec_cbor_fxamacker_test.go) accept the same inputs and decode them to
// the same block. Of an input both reject, only the rejection is compared:
// which of two defects is reported, and how a malformed item is named,
// differ by design (see decodeBlockCBORFxamacker).
func FuzzCBORDecodersAgree(f *testing.F) {
	addSeeds(f, encCBOR)
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := DecodeBlockCBOR(data, fuzzLimits)
		ref, refErr := decodeBlockCBORFxamacker(data, fuzzLimits)
		if (err == nil) != (refErr == nil) {
			t.Fatalf("the decoders disagree:\n walker:    %v\n fxamacker: %v", err, refErr)
		}
		if err == nil && !reflect.DeepEqual(b, ref) {
			t.Fatalf("decoded blocks differ:\n walker:    %+v\n fxamacker: %+v", b, ref)
		}
		for _, err := range []error{err, refErr} {
			if err != nil && errors.Is(err, ErrTooLarge) == errors.Is(err, ErrInvalidBlock) {
				t.Fatalf("error %q wraps neither or both sentinels", err)
			}
		}
	})
}

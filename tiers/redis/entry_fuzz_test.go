package redis

import (
	"bytes"
	"errors"
	"testing"

	"github.com/utxo-cache/utxo-cache/cache"
	"github.com/utxo-cache/utxo-cache/chain"
)

// FuzzDecodeEntry: bytes read back from Redis never panic the decoder; a
// failure is errCorruptEntry; a decoded entry encodes to bytes that decode
// to the same entry.
func FuzzDecodeEntry(f *testing.F) {
	for _, e := range []cache.Entry{
		{Seq: 1, Tip: chain.Tip{Empty: true}, Status: 200, ETag: `W/"x"`, Body: []byte(`"a":1}`)},
		{Seq: 1 << 60, Tip: chain.Tip{Height: 9, Hash: chain.Hash{9}}, Status: 404, Body: nil},
	} {
		f.Add(appendEntry(nil, &e))
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := decodeEntry(b)
		if err != nil {
			if !errors.Is(err, errCorruptEntry) {
				t.Fatalf("error %v is not errCorruptEntry", err)
			}
			return
		}
		again, err := decodeEntry(appendEntry(nil, &e))
		if err != nil {
			t.Fatalf("re-encoded entry does not decode: %v", err)
		}
		if again.Seq != e.Seq || again.Tip != e.Tip || again.Status != e.Status || again.ETag != e.ETag || !bytes.Equal(again.Body, e.Body) {
			t.Fatalf("round trip changed the entry: %+v, then %+v", e, again)
		}
	})
}

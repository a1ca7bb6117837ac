package script_test

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"golang.org/x/crypto/blake2b"

	"github.com/utxo-cache/utxo-cache/cardano/script"
	"github.com/utxo-cache/utxo-cache/chain"
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func blake224(b []byte) [script.HashLen]byte {
	h, _ := blake2b.New(script.HashLen, nil)
	h.Write(b)
	var out [script.HashLen]byte
	h.Sum(out[:0])
	return out
}

// TestParseRefGolden writes the package doc's example field by field: the
// native script [0, h'00…00'] carried as 82 00 82 00 58 1c 00…00, hashed
// over 00 82 00 58 1c 00…00; and a Plutus V2 script, hashed over 02 and
// its byte string's content.
func TestParseRefGolden(t *testing.T) {
	zero := strings.Repeat("00", 28)
	native := unhex(t, "82 00"+"82 00 58 1c"+zero)
	r, err := script.ParseRef(native)
	if err != nil {
		t.Fatal(err)
	}
	if r.Language != script.Native || hex.EncodeToString(r.Body) != "8200581c"+zero ||
		r.Hash != blake224(unhex(t, "00 82 00 58 1c"+zero)) {
		t.Fatalf("native: %+v", r)
	}
	js, err := script.NativeJSON(nil, r.Body)
	if err != nil || string(js) != `{"type":"sig","keyHash":"`+zero+`"}` {
		t.Fatalf("native JSON: %s %v", js, err)
	}
	plutus := unhex(t, "82 02 46 45 01 02 03 04 05")
	r, err = script.ParseRef(plutus)
	if err != nil {
		t.Fatal(err)
	}
	if r.Language != script.PlutusV2 || hex.EncodeToString(r.Body) != "450102030405" ||
		r.Hash != blake224(unhex(t, "02 45 01 02 03 04 05")) || r.Language.String() != "plutusV2" {
		t.Fatalf("plutus: %+v", r)
	}
	// An indefinite byte string hashes over its chunks' bytes.
	r2, err := script.ParseRef(unhex(t, "82 02 5f 43 45 01 02 43 03 04 05 ff"))
	if err != nil || r2.Hash != r.Hash {
		t.Fatalf("chunked plutus: %+v %v", r2, err)
	}
	// Indefinite arrays, as the ledger's decoder takes them.
	r3, err := script.ParseRef(unhex(t, "82 00 9f 01 9f 82 04 01 ff ff"))
	if err != nil || r3.Hash != blake224(unhex(t, "00 9f 01 9f 82 04 01 ff ff")) {
		t.Fatalf("indefinite native: %+v %v", r3, err)
	}
	if js, err := script.NativeJSON(nil, r3.Body); err != nil || string(js) != `{"type":"all","scripts":[{"type":"after","slot":1}]}` {
		t.Fatalf("indefinite native JSON: %s %v", js, err)
	}
	d := unhex(t, "d8 79 9f 01 ff")
	if h := script.DatumHash(d); h != blake2b.Sum256(d) {
		t.Fatalf("datum hash %x", h)
	}
}

// TestParseRefRefuses: every malformed reference script is ErrInvalid.
func TestParseRefRefuses(t *testing.T) {
	for _, s := range []string{
		"", "80", "81 00", "83 00 00 00", "82 04 41 00", "82 01 01", "82 02 41",
		"82 00 82 00 41 00",       // a key hash of 1 byte
		"82 00 82 06 00",          // an unknown native form
		"82 00 83 03 01 80 00",    // trailing bytes
		"82 02 41 00 00",          // trailing bytes
		"82 00 9f 04 01 02 ff",    // an indefinite script of 3 elements
		"82 00 82 01 9f 82 04 01", // an indefinite list, unended
		"82 00 82 01 81 82 04",    // cut short
	} {
		if _, err := script.ParseRef(unhex(t, s)); !errors.Is(err, script.ErrInvalid) {
			t.Errorf("%q: %v", s, err)
		}
	}
}

// TestValues: the index functions yield the hashes of what an output
// carries, and nothing for an output without it.
func TestValues(t *testing.T) {
	plutus := unhex(t, "82 01 42 aa bb")
	u := &chain.Utxo{Output: chain.Output{ScriptRef: plutus, Datum: []byte{0x01}}}
	var got [][]byte
	script.RefScriptValues(u, func(v []byte) { got = append(got, v) })
	script.DatumValues(u, func(v []byte) { got = append(got, v) })
	h := blake224(unhex(t, "01 aa bb"))
	d := blake2b.Sum256([]byte{0x01})
	if len(got) != 2 || string(got[0]) != string(h[:]) || string(got[1]) != string(d[:]) {
		t.Fatalf("values: %x", got)
	}
	got = nil
	e := &chain.Utxo{Output: chain.Output{DatumHash: &chain.Hash{1}}}
	script.RefScriptValues(e, func(v []byte) { got = append(got, v) })
	script.DatumValues(e, func(v []byte) { got = append(got, v) })
	if got != nil {
		t.Fatalf("an output without a script or inline datum: %x", got)
	}
}

// FuzzParseRef: ParseRef never panics; what it accepts hashes by the
// package doc's rule, and a native script's JSON is valid JSON.
func FuzzParseRef(f *testing.F) {
	for _, s := range []string{
		"8200 8200581c" + strings.Repeat("00", 28),
		"82024645 0102030405",
		"8200 8301 82 8200581c" + strings.Repeat("11", 28) + "820405",
		"8200 8303 02 82 8204 01 8205 02",
		"82025f434501024303040 5ff",
	} {
		b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
		if err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := script.ParseRef(b)
		if err != nil {
			if !errors.Is(err, script.ErrInvalid) {
				t.Fatalf("error of another class: %v", err)
			}
			return
		}
		if r.Hash != blake224(append([]byte{byte(r.Language)}, r.Body...)) {
			t.Fatalf("hash %x", r.Hash)
		}
		if r.Language == script.Native {
			js, err := script.NativeJSON(nil, r.Body)
			if err != nil || !json.Valid(js) {
				t.Fatalf("native JSON of an accepted script: %s %v", js, err)
			}
		}
	})
}

// FuzzNativeJSON: NativeJSON never panics, and what it renders is JSON.
func FuzzNativeJSON(f *testing.F) {
	f.Add(unhex(f, "8201 82 8200581c"+strings.Repeat("22", 28)+" 820507"))
	f.Fuzz(func(t *testing.T, b []byte) {
		js, err := script.NativeJSON(nil, b)
		if err != nil {
			if !errors.Is(err, script.ErrInvalid) {
				t.Fatalf("error of another class: %v", err)
			}
			return
		}
		if !json.Valid(js) {
			t.Fatalf("not JSON: %s", js)
		}
	})
}

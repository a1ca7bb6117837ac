package chain

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestDecodeRollbackJSON(t *testing.T) {
	h := Hash{0xab, 1}
	hs := h.String()
	for _, c := range []struct {
		in   string
		want RollbackTarget
	}{
		{`{"height":0}`, RollbackTarget{}},
		{`{"height":18446744073709551615}`, RollbackTarget{Height: 1<<64 - 1}},
		{` { "height" : 7 } `, RollbackTarget{Height: 7}},
		{`{"hash":"` + hs + `"}`, RollbackTarget{Hash: h, ByHash: true}},
		{`{"hash":"` + strings.ToUpper(hs) + `"}`, RollbackTarget{Hash: h, ByHash: true}},
	} {
		got, err := DecodeRollbackJSON([]byte(c.in))
		if err != nil || got != c.want {
			t.Errorf("%s: %+v, %v; want %+v", c.in, got, err, c.want)
		}
	}
	for _, in := range []string{
		`{"height":14146,"height":14136}`,
		`{"height":1,"\u0068eight":2}`,
		`{"hash":"` + hs + `","hash":"` + hs + `"}`,
		`{"height":null,"height":null}`,
		`{"height":1,"hash":"` + hs + `"}`,
		`{}`, `{"height":null}`, `{"hash":null}`, `{"hash":null,"height":null}`,
		`{"height":1,"hash":null}`, `{"height":null,"hash":"` + hs + `"}`,
		`{"Height":1}`, `{"height":1,"x":1}`,
		`{"height":18446744073709551616}`, `{"height":-1}`, `{"height":1.0}`, `{"height":1e3}`,
		`{"height":01}`, `{"height":"1"}`, `{"height":true}`,
		`{"hash":"` + hs[:62] + `"}`, `{"hash":"` + hs + `0"}`, `{"hash":1}`,
		`{"height":1}{}`, `{"height":1},`, `{"height":1`, ``, `null`, `[]`, `"height"`,
	} {
		got, err := DecodeRollbackJSON([]byte(in))
		if !errors.Is(err, ErrInvalidArgument) || errors.Is(err, ErrInvalidBlock) || errors.Is(err, ErrTooLarge) {
			t.Errorf("%s: %+v, %v; want an ErrInvalidArgument", in, got, err)
		}
	}
	_, err := DecodeRollbackJSON([]byte(`{"height":1,"height":2}`))
	if want := "height: duplicate field"; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("duplicate height: %v, want it to start with %q", err, want)
	}
}

func TestDecodeLookupJSON(t *testing.T) {
	h := Hash{0xcd, 2}
	op := func(i int) string { return fmt.Sprintf(`{"tx_hash":"%s","index":%d}`, h, i) }
	ops := func(n int) string {
		items := make([]string, n)
		for i := range items {
			items[i] = op(i)
		}
		return `{"outpoints":[` + strings.Join(items, ",") + `]}`
	}
	got, err := DecodeLookupJSON([]byte(`{"outpoints":[`+op(4294967295)+`,`+op(0)+`]}`), 3)
	if err != nil || len(got) != 2 || got[0] != (OutPoint{TxHash: h, Index: 4294967295}) || got[1] != (OutPoint{TxHash: h}) {
		t.Fatalf("two outpoints: %v, %v", got, err)
	}
	if got, err := DecodeLookupJSON([]byte(ops(3)), 3); err != nil || len(got) != 3 {
		t.Fatalf("three of at most three: %v, %v", got, err)
	}
	for _, in := range []string{
		ops(4), ops(0),
		`{"outpoints":[` + op(0) + `],"outpoints":[` + op(1) + `]}`,
		`{"outpoints":[{"tx_hash":"` + h.String() + `","index":0,"index":1}]}`,
		`{"outpoints":[{"tx_hash":"` + h.String() + `"}]}`,
		`{"outpoints":[{"index":0}]}`,
		`{"outpoints":[{"tx_hash":null,"index":0}]}`,
		`{"outpoints":[{"tx_hash":"` + h.String() + `","index":4294967296}]}`,
		`{"outpoints":[{"tx_hash":"` + h.String() + `","index":1.0}]}`,
		`{"outpoints":null}`, `{}`, `{"OutPoints":[` + op(0) + `]}`, `{"outpoints":[` + op(0) + `],"x":1}`,
		ops(1) + ` x`, ``, `[]`,
	} {
		got, err := DecodeLookupJSON([]byte(in), 3)
		if !errors.Is(err, ErrInvalidArgument) || errors.Is(err, ErrInvalidBlock) || errors.Is(err, ErrTooLarge) {
			t.Errorf("%.90s: %v, %v; want an ErrInvalidArgument", in, got, err)
		}
	}
}

func FuzzDecodeRequestJSON(f *testing.F) {
	f.Add([]byte(`{"height":1}`))
	f.Add([]byte(`{"outpoints":[{"tx_hash":"` + strings.Repeat("ab", 32) + `","index":0}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, err := DecodeRollbackJSON(data); err != nil && !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("rollback: %v does not wrap ErrInvalidArgument", err)
		}
		if _, err := DecodeLookupJSON(data, 10); err != nil && !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("lookup: %v does not wrap ErrInvalidArgument", err)
		}
	})
}

// FuzzDecodeFreezeJSON: a freeze or unfreeze body decodes to a Freeze
// within its bounds, or to an ErrInvalidArgument; never a panic.
func FuzzDecodeFreezeJSON(f *testing.F) {
	h := strings.Repeat("ab", 32)
	f.Add([]byte(`{"outpoints":[{"tx_hash":"`+h+`","index":0}],"reason":"fraud"}`), true)
	f.Add([]byte(`{"outpoints":[{"tx_hash":"`+h+`","index":0},{"tx_hash":"`+h+`","index":1}]}`), false)
	f.Fuzz(func(t *testing.T, data []byte, reason bool) {
		fz, err := DecodeFreezeJSON(data, reason)
		if err != nil {
			if !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("%v does not wrap ErrInvalidArgument", err)
			}
			return
		}
		if err := fz.Validate(reason); err != nil {
			t.Fatalf("decoded %+v, which Validate refuses: %v", fz, err)
		}
	})
}

// TestDecodeFreezeJSON: the bodies of the freeze routes, good and bad.
func TestDecodeFreezeJSON(t *testing.T) {
	h := strings.Repeat("ab", 32)
	item := `{"tx_hash":"` + h + `","index":7}`
	fz, err := DecodeFreezeJSON([]byte(`{"reason":"court order","outpoints":[`+item+`]}`), true)
	if err != nil || fz.Reason != "court order" || len(fz.OutPoints) != 1 || fz.OutPoints[0].Index != 7 || fz.OutPoints[0].TxHash.String() != h {
		t.Fatalf("freeze: %+v, %v", fz, err)
	}
	for _, c := range []struct {
		body   string
		reason bool
	}{
		{`{"outpoints":[` + item + `]}`, true},                           // no reason
		{`{"outpoints":[` + item + `],"reason":"x"}`, false},             // a reason in an unfreeze
		{`{"outpoints":[` + item + `,` + item + `],"reason":"x"}`, true}, // twice
		{`{"outpoints":[],"reason":"x"}`, true},
		{`{"outpoints":[` + item + `],"reason":"` + strings.Repeat("é", 129) + `"}`, true}, // 258 bytes
		{`{"outpoints":[` + item + `],"reason":"a	b"}`, true},
		{`{"outpoints":[` + item + `],"reason":"x"} x`, true},
	} {
		if _, err := DecodeFreezeJSON([]byte(c.body), c.reason); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", c.body, err)
		}
	}
}

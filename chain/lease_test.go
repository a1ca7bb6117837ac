package chain

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestDecodeLeaseJSON: the body of POST /v1/leases, good and bad; every
// refusal is ErrInvalidArgument.
func TestDecodeLeaseJSON(t *testing.T) {
	h := strings.Repeat("ab", 32)
	item := func(i int) string { return fmt.Sprintf(`{"tx_hash":"%s","index":%d}`, h, i) }
	many := make([]string, MaxLeaseOutPoints+1)
	for i := range many {
		many[i] = item(i)
	}
	r, err := DecodeLeaseJSON([]byte(`{"outpoints":[` + item(1) + `,` + item(2) + `],"lease_id":"ab-C_9","ttl_seconds":86400}`))
	if err != nil || r.ID != "ab-C_9" || r.TTL != 86400 || len(r.OutPoints) != 2 || r.OutPoints[1].Index != 2 || r.OutPoints[0].TxHash.String() != h {
		t.Fatalf("good body: %+v %v", r, err)
	}
	if r, err := DecodeLeaseJSON([]byte(`{"outpoints":[` + item(0) + `]}`)); err != nil || r.ID != "" || r.TTL != 0 {
		t.Fatalf("minimal body: %+v %v", r, err)
	}
	for name, body := range map[string]string{
		"no outpoints":       `{"lease_id":"a"}`,
		"empty outpoints":    `{"outpoints":[]}`,
		"too many":           `{"outpoints":[` + strings.Join(many, ",") + `]}`,
		"twice":              `{"outpoints":[` + item(1) + `,` + item(1) + `]}`,
		"ttl 0":              `{"outpoints":[` + item(1) + `],"ttl_seconds":0}`,
		"ttl over a day":     `{"outpoints":[` + item(1) + `],"ttl_seconds":86401}`,
		"ttl negative":       `{"outpoints":[` + item(1) + `],"ttl_seconds":-1}`,
		"ttl fraction":       `{"outpoints":[` + item(1) + `],"ttl_seconds":1.5}`,
		"ttl string":         `{"outpoints":[` + item(1) + `],"ttl_seconds":"60"}`,
		"empty id":           `{"outpoints":[` + item(1) + `],"lease_id":""}`,
		"id with a space":    `{"outpoints":[` + item(1) + `],"lease_id":"a b"}`,
		"id with a slash":    `{"outpoints":[` + item(1) + `],"lease_id":"a/b"}`,
		"id too long":        `{"outpoints":[` + item(1) + `],"lease_id":"` + strings.Repeat("x", MaxLeaseIDLen+1) + `"}`,
		"id not a string":    `{"outpoints":[` + item(1) + `],"lease_id":7}`,
		"unknown field":      `{"outpoints":[` + item(1) + `],"owner":"me"}`,
		"duplicate field":    `{"outpoints":[` + item(1) + `],"outpoints":[` + item(2) + `]}`,
		"bad hash":           `{"outpoints":[{"tx_hash":"zz","index":0}]}`,
		"trailing bytes":     `{"outpoints":[` + item(1) + `]} x`,
		"not an object":      `[]`,
		"index out of range": `{"outpoints":[{"tx_hash":"` + h + `","index":4294967296}]}`,
	} {
		if r, err := DecodeLeaseJSON([]byte(body)); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: %+v, %v; want ErrInvalidArgument", name, r, err)
		}
	}
	if id := strings.Repeat("x", MaxLeaseIDLen); CheckLeaseID(id) != nil {
		t.Fatalf("an id of %d characters is refused", MaxLeaseIDLen)
	}
	for range 100 {
		if id := NewLeaseID(); CheckLeaseID(id) != nil || len(id) != 22 {
			t.Fatalf("generated id %q", id)
		}
	}
}

// FuzzDecodeLeaseJSON: a lease body decodes to a request within its bounds,
// or to an ErrInvalidArgument; never a panic.
func FuzzDecodeLeaseJSON(f *testing.F) {
	h := strings.Repeat("ab", 32)
	f.Add([]byte(`{"outpoints":[{"tx_hash":"` + h + `","index":0}],"lease_id":"w-1","ttl_seconds":60}`))
	f.Add([]byte(`{"outpoints":[{"tx_hash":"` + h + `","index":0},{"tx_hash":"` + h + `","index":1}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := DecodeLeaseJSON(data)
		if err != nil {
			if !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("%v does not wrap ErrInvalidArgument", err)
			}
			return
		}
		if err := r.Validate(); err != nil {
			t.Fatalf("decoded %+v, which Validate refuses: %v", r, err)
		}
	})
}

package jetstream

import (
	"errors"
	"strconv"
	"testing"

	"github.com/nats-io/nats.go"
)

// TestPointerHeaders: the example of body.go's doc, its digest computed by
// another tool (Python's hashlib over 3 MiB of zeros), parses back to
// what was set; and every malformed pointer is errBody.
func TestPointerHeaders(t *testing.T) {
	rec := make([]byte, 3<<20)
	h := nats.Header{}
	setPointer(h, 1234, rec)
	want := map[string]string{
		headerBodyObject: "00000000000000001234",
		headerBodyBytes:  "3145728",
		headerBodySha256: "bbd05cf6097ac9b1f89ea29d2542c1b7b67ee46848393895f5a9e43fa1f621e5",
	}
	for k, v := range want {
		if got := h.Get(k); got != v {
			t.Fatalf("%s: %q, want %q", k, got, v)
		}
	}
	ref, ok, err := parsePointer(h.Get, 1234, 0, 4<<20)
	if err != nil || !ok || ref.name != want[headerBodyObject] || ref.size != 3<<20 {
		t.Fatalf("parse: %+v %v %v", ref, ok, err)
	}
	if _, ok, err := parsePointer(nats.Header{}.Get, 1, 10, 100); ok || err != nil {
		t.Fatalf("a message without pointer headers: %v %v", ok, err)
	}
	bad := []struct {
		name     string
		key, val string
		seq      uint64
		dataLen  int
		maxBytes int64
	}{
		{name: "other seq", seq: 1235},
		{name: "short name", key: headerBodyObject, val: "1234"},
		{name: "size over max", maxBytes: 3<<20 - 1},
		{name: "size zero", key: headerBodyBytes, val: "0"},
		{name: "size signed", key: headerBodyBytes, val: "+3145728"},
		{name: "size leading zero", key: headerBodyBytes, val: "03145728"},
		{name: "size missing", key: headerBodyBytes, val: ""},
		{name: "digest upper case", key: headerBodySha256, val: "BBD05CF6097AC9B1F89EA29D2542C1B7B67EE46848393895F5A9E43FA1F621E5"},
		{name: "digest short", key: headerBodySha256, val: "bbd05cf6"},
		{name: "digest not hex", key: headerBodySha256, val: "zz" + want[headerBodySha256][2:]},
		{name: "a body", dataLen: 1},
	}
	for _, c := range bad {
		hh := nats.Header{}
		for k, v := range want {
			hh.Set(k, v)
		}
		if c.key != "" {
			hh.Set(c.key, c.val)
			if c.val == "" {
				hh.Del(c.key)
			}
		}
		seq, maxBytes := uint64(1234), int64(4<<20)
		if c.seq != 0 {
			seq = c.seq
		}
		if c.maxBytes != 0 {
			maxBytes = c.maxBytes
		}
		if _, ok, err := parsePointer(hh.Get, seq, c.dataLen, maxBytes); !ok || !errors.Is(err, errBody) {
			t.Errorf("%s: %v %v, want errBody", c.name, ok, err)
		}
	}
}

// FuzzPointerHeaders: parsePointer never panics, and a pointer it accepts
// is exactly the one setPointer writes for its fields.
func FuzzPointerHeaders(f *testing.F) {
	h := nats.Header{}
	setPointer(h, 7, []byte("change"))
	f.Add(h.Get(headerBodyObject), h.Get(headerBodyBytes), h.Get(headerBodySha256), uint64(7), 0)
	f.Add("", "", "", uint64(1), 5)
	f.Add("00000000000000000007", "-1", "", uint64(7), 0)
	f.Fuzz(func(t *testing.T, name, size, sum string, seq uint64, dataLen int) {
		hh := nats.Header{}
		for k, v := range map[string]string{headerBodyObject: name, headerBodyBytes: size, headerBodySha256: sum} {
			if v != "" {
				hh.Set(k, v)
			}
		}
		ref, ok, err := parsePointer(hh.Get, seq, dataLen, 1<<20)
		if err != nil && !errors.Is(err, errBody) {
			t.Fatalf("error not errBody: %v", err)
		}
		if !ok && err != nil {
			t.Fatal("an error for a message that is no pointer")
		}
		if ok && err == nil {
			if ref.name != changeObject(seq) || strconv.FormatInt(ref.size, 10) != size || dataLen != 0 ||
				ref.size < 1 || ref.size > 1<<20 {
				t.Fatalf("accepted %+v from %q %q %q", ref, name, size, sum)
			}
		}
	})
}

package testredis

import (
	"bufio"
	"reflect"
	"strings"
	"testing"
)

// TestReadReply decodes each RESP2 reply type, nested arrays with an error
// element included.
func TestReadReply(t *testing.T) {
	for _, c := range []struct {
		in   string
		want any
		err  string
	}{
		{"+OK\r\n", "OK", ""},
		{"-ERR bad\r\n", nil, "ERR bad"},
		{":-42\r\n", int64(-42), ""},
		{"$3\r\nabc\r\n", "abc", ""},
		{"$-1\r\n", nil, ""},
		{"*-1\r\n", nil, ""},
		{"*3\r\n$1\r\na\r\n*1\r\n:1\r\n-MOVED 1 x\r\n", []any{"a", []any{int64(1)}, ReplyError("MOVED 1 x")}, ""},
		{"$5\r\nab\r\n", nil, "EOF"},
		{"?x\r\n", nil, "unknown reply type"},
		{"$-2\r\n", nil, "bad bulk length"},
	} {
		got, err := readReply(bufio.NewReader(strings.NewReader(c.in)))
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: %v, %v, want error %q", c.in, got, err, c.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q: %#v, %v, want %#v", c.in, got, err, c.want)
		}
	}
}

// FuzzReadReply: any input decodes or fails, without panicking.
func FuzzReadReply(f *testing.F) {
	for _, s := range []string{"+OK\r\n", "*2\r\n$1\r\na\r\n:1\r\n", "$-1\r\n", "-ERR x\r\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		_, _ = readReply(bufio.NewReader(strings.NewReader(in)))
	})
}

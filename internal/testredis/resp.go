package testredis

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// ReplyError is an error reply (-ERR …, -MOVED …) of a server.
type ReplyError string

func (e ReplyError) Error() string { return string(e) }

// Do sends one command to addr on a fresh connection and returns its reply
// within d: a string (simple or bulk), an int64, nil (a null bulk or
// array), a []any, or a ReplyError.
func Do(addr string, d time.Duration, args ...string) (any, error) {
	c, err := net.DialTimeout("tcp", addr, d)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(d))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(c, b.String()); err != nil {
		return nil, err
	}
	return readReply(bufio.NewReader(c))
}

// Do sends one command to s within d (see Do).
func (s *Server) Do(d time.Duration, args ...string) (any, error) { return Do(s.Addr(), d, args...) }

// DoString is Do for a command that answers a string, failing the test on
// any other reply.
func (s *Server) DoString(args ...string) string {
	s.t.Helper()
	v, err := s.Do(10*time.Second, args...)
	if err != nil {
		s.t.Fatalf("%s on %s: %v", strings.Join(args, " "), s.Addr(), err)
	}
	str, ok := v.(string)
	if !ok {
		s.t.Fatalf("%s on %s: reply %v, want a string", strings.Join(args, " "), s.Addr(), v)
	}
	return str
}

// Bounds of a reply, far above what the helpers ask for: a garbled length
// fails instead of allocating without end.
const (
	maxBulk  = 64 << 20
	maxArray = 1 << 20
)

func readReply(r *bufio.Reader) (any, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	if len(line) < 3 || !strings.HasSuffix(line, "\r\n") {
		return nil, fmt.Errorf("bad reply line %q", line)
	}
	kind, body := line[0], line[1:len(line)-2]
	switch kind {
	case '+':
		return body, nil
	case '-':
		return nil, ReplyError(body)
	case ':':
		return strconv.ParseInt(body, 10, 64)
	case '$':
		n, err := strconv.Atoi(body)
		if err != nil || n < -1 || n > maxBulk {
			return nil, fmt.Errorf("bad bulk length %q", body)
		}
		if n == -1 {
			return nil, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(body)
		if err != nil || n < -1 || n > maxArray {
			return nil, fmt.Errorf("bad array length %q", body)
		}
		if n == -1 {
			return nil, nil
		}
		out := make([]any, n)
		for i := range out {
			v, err := readReply(r)
			if err != nil {
				if _, ok := err.(ReplyError); !ok {
					return nil, err
				}
				v = err
			}
			out[i] = v
		}
		return out, nil
	default:
		return nil, fmt.Errorf("unknown reply type %q", kind)
	}
}

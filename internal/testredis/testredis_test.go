package testredis

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

// TestServer checks the helper itself: it answers, a paused server does
// not, and it answers again after Resume and after Restart.
func TestServer(t *testing.T) {
	s := Start(t)
	if err := s.Ping(time.Second); err != nil {
		t.Fatal(err)
	}
	s.Pause()
	if err := s.Ping(50 * time.Millisecond); err == nil {
		t.Fatal("a paused server answered PING")
	}
	s.Resume()
	if err := s.Ping(time.Second); err != nil {
		t.Fatalf("after resume: %v", err)
	}
	s.Restart()
	if err := s.Ping(time.Second); err != nil {
		t.Fatalf("after restart: %v", err)
	}
	s.Kill()
	if err := s.Ping(50 * time.Millisecond); err == nil {
		t.Fatal("a killed server answered PING")
	}
}

// TestServerRestartFromDump: RestartFromDump comes back with the data of the last
// Save, not the latest; Restart comes back empty even after a Save.
func TestServerRestartFromDump(t *testing.T) {
	s := Start(t)
	do(t, s, "SET", "k", "saved")
	s.Save()
	do(t, s, "SET", "k", "lost")
	s.RestartFromDump()
	if got := do(t, s, "GET", "k"); got != "$5\r\nsaved\r\n" {
		t.Fatalf("after RestartFromDump: GET k answered %q, want the saved value", got)
	}
	s.Restart()
	if got := do(t, s, "GET", "k"); got != "$-1\r\n" {
		t.Fatalf("after Restart: GET k answered %q, want nil (empty)", got)
	}
}

// do sends one command over raw RESP and returns the reply: its first line,
// and for a bulk string the line after it.
func do(t *testing.T, s *Server, args ...string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", s.Addr(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	req := fmt.Sprintf("*%d\r\n", len(args))
	for _, a := range args {
		req += fmt.Sprintf("$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := c.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasPrefix(line, "$") && line != "$-1\r\n" {
		rest, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		line += rest
	}
	return line
}

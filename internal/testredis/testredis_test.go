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

// TestCluster starts a cluster and checks what its helpers claim: three
// masters with a replica each, a coordinated failover and a crash each
// promote the replica, and a slot with keys moves with them.
func TestCluster(t *testing.T) {
	c := StartCluster(t)
	if n := len(c.Masters()); n != 3 {
		t.Fatalf("%d masters, want 3", n)
	}
	slot := c.Slot("{k}")
	m := c.MasterOf(slot)
	if v := m.DoString("SET", "{k}a", "1"); v != "OK" {
		t.Fatalf("SET: %s", v)
	}
	var to *Server
	for _, o := range c.Masters() {
		if o != m {
			to = o
			break
		}
	}
	midway := false
	c.MoveSlot(slot, to, func() { midway = true })
	if !midway {
		t.Fatal("MoveSlot did not call midway")
	}
	if v := to.DoString("GET", "{k}a"); v != "1" {
		t.Fatalf("moved key: %q", v)
	}
	promoted := c.Failover(to)
	if c.MasterOf(slot) != promoted {
		t.Fatal("the slot did not follow the failover")
	}
	crashed := c.KillMaster(promoted)
	if c.MasterOf(slot) != crashed || len(c.Masters()) != 3 {
		t.Fatalf("after the crash: slot on %s, %d masters", c.MasterOf(slot).Addr(), len(c.Masters()))
	}
	if v := crashed.DoString("GET", "{k}a"); v != "1" {
		t.Fatalf("key after two failovers: %q", v)
	}
}

// TestSentinel starts a Sentinel set and fails it over.
func TestSentinel(t *testing.T) {
	st := StartSentinel(t)
	old := st.Primary()
	if v := old.DoString("SET", "k", "1"); v != "OK" {
		t.Fatalf("SET: %s", v)
	}
	next := st.Failover()
	if next == old || st.Primary() != next {
		t.Fatal("the primary did not change")
	}
	if v := next.DoString("GET", "k"); v != "1" {
		t.Fatalf("key after the failover: %q", v)
	}
}

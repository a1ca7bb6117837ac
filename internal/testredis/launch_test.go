package testredis

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestLaunchOnATakenPort checks what launch does when its port is taken by
// another Redis: the PONG that Redis answers is not the new server's (its
// process_id differs), so launch waits for the new server, which exits on
// its failed bind, and reports that with the log StartConfig looks for to
// start again on another port.
func TestLaunchOnATakenPort(t *testing.T) {
	first := Start(t)
	s := &Server{t: t, bin: first.bin, dir: t.TempDir(), port: first.port}
	s.args = []string{"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--dir", s.dir,
		"--logfile", s.logPath(), "--save", "", "--appendonly", "no"}
	err := s.launch()
	if err == nil {
		t.Fatal("launch on the port of another Redis succeeded")
	}
	if !strings.Contains(err.Error(), "exited") {
		t.Fatalf("launch: %v; want the server's exit", err)
	}
	log, _ := os.ReadFile(s.logPath())
	if !bytes.Contains(log, []byte("Address already in use")) {
		t.Fatalf("the log of a server that lost its port lacks what StartConfig looks for:\n%s", log)
	}
	s.Kill() // nothing to wait for: a no-op
	if err := first.Ping(time.Second); err != nil {
		t.Fatalf("the first server stopped answering: %v", err)
	}
}

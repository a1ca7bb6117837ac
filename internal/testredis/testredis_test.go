package testredis

import (
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

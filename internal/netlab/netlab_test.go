package netlab

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

// echo serves, inside h on port, one line back for every line read.
func echo(t *testing.T, h *Host, port uint16) (addr string, served chan net.Conn) {
	t.Helper()
	ln, err := h.Listen("tcp", h.AddrPort(port))
	if err != nil {
		t.Fatal(err)
	}
	served = make(chan net.Conn, 64)
	done := make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			served <- c
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := io.WriteString(c, line); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String(), served
}

// roundTrip writes a line on c and reads it back within d.
func roundTrip(c net.Conn, r *bufio.Reader, d time.Duration) error {
	_ = c.SetDeadline(time.Now().Add(d))
	defer c.SetDeadline(time.Time{})
	if _, err := io.WriteString(c, "ping\n"); err != nil {
		return err
	}
	line, err := r.ReadString('\n')
	if err == nil && line != "ping\n" {
		return errors.New("echoed " + line)
	}
	return err
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestLinks: hosts reach each other by address; a cut link drops packets
// silently (a connection hangs, a dial times out rather than being
// refused) until healed, and then the same connection goes on; a block cuts
// two hosts apart and no one else; the lab's cleanup leaves no namespace
// and no process behind.
func TestLinks(t *testing.T) {
	t.Parallel()
	var (
		lab     *Lab
		sleeper = make(chan error, 1)
	)
	t.Run("lab", func(t *testing.T) {
		lab = New(t)
		a, b, c := lab.Host("a"), lab.Host("b"), lab.Host("c")
		addr, _ := echo(t, b, 7000)
		if !lab.Prefix().Contains(a.Addr) || a.Addr == b.Addr {
			t.Fatalf("addresses %s %s outside %s or equal", a.Addr, b.Addr, lab.Prefix())
		}
		conn, err := a.DialContext(t.Context(), "tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		r := bufio.NewReader(conn)
		if err := roundTrip(conn, r, 5*time.Second); err != nil {
			t.Fatalf("a -> b: %v", err)
		}

		a.Cut()
		if err := roundTrip(conn, r, 500*time.Millisecond); !isTimeout(err) {
			t.Fatalf("a -> b over a cut link: %v, want a timeout", err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
		_, err = a.DialContext(ctx, "tcp", addr)
		cancel()
		if !isTimeout(err) && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("dial over a cut link: %v, want a timeout", err)
		}
		a.Heal()
		// The line written while cut is retransmitted: the connection goes
		// on (read what is owed, then a fresh round trip).
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		if line, err := r.ReadString('\n'); err != nil || line != "ping\n" {
			t.Fatalf("after healing: %q %v", line, err)
		}
		if err := roundTrip(conn, r, 10*time.Second); err != nil {
			t.Fatalf("after healing: %v", err)
		}

		a.Block(b)
		ctx, cancel = context.WithTimeout(t.Context(), 500*time.Millisecond)
		_, err = a.DialContext(ctx, "tcp", addr)
		cancel()
		if err == nil || strings.Contains(err.Error(), "refused") {
			t.Fatalf("dial across a block: %v, want a timeout", err)
		}
		cc, err := c.DialContext(t.Context(), "tcp", addr)
		if err != nil {
			t.Fatalf("c -> b while a blocks b: %v", err)
		}
		if err := roundTrip(cc, bufio.NewReader(cc), 5*time.Second); err != nil {
			t.Fatalf("c -> b while a blocks b: %v", err)
		}
		cc.Close()
		a.Unblock(b)
		if err := roundTrip(conn, r, 10*time.Second); err != nil {
			t.Fatalf("after unblocking: %v", err)
		}

		// A process left running in a host is the lab's cleanup's to kill.
		cmd := b.Command("sleep", "600")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { sleeper <- cmd.Wait() }()
	})
	if lab == nil {
		return
	}
	select {
	case err := <-sleeper:
		if err == nil {
			t.Fatal("sleep 600 exited 0 at once")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the lab's cleanup left a process running in its host")
	}
	entries, err := os.ReadDir("/run/netns")
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), lab.name) {
			t.Errorf("namespace %s left behind", e.Name())
		}
	}
}

// TestProxy: the proxy adds its delay each way (a round trip takes at
// least twice of it, and not much more), and drops connections, closing
// both sides.
func TestProxy(t *testing.T) {
	t.Parallel()
	lab := New(t)
	client, server := lab.Host("client"), lab.Host("server")
	addr, served := echo(t, server, 7000)

	const delay = 100 * time.Millisecond
	p := StartProxy(t, client, "127.0.0.1:0", client, addr, ProxyOptions{Delay: delay})
	c, err := client.DialContext(t.Context(), "tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	for range 5 {
		start := time.Now()
		if err := roundTrip(c, r, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		if rtt := time.Since(start); rtt < 2*delay || rtt > 2*delay+time.Second {
			t.Fatalf("round trip through the proxy took %v, want 2 x %v and little more", rtt, delay)
		}
	}
	p.Close()
	if _, err := r.ReadString('\n'); err == nil {
		t.Fatal("a connection outlived its proxy")
	}

	// Drops: a connection in use is closed on both sides, soon.
	p = StartProxy(t, client, "127.0.0.1:0", client, addr, ProxyOptions{DropMean: 50 * time.Millisecond})
	for range 3 {
		c, err := client.DialContext(t.Context(), "tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		s := <-served // the proxy's connection to the server
		r := bufio.NewReader(c)
		deadline := time.Now().Add(10 * time.Second)
		var rtErr error
		for rtErr == nil && time.Now().Before(deadline) {
			rtErr = roundTrip(c, r, 5*time.Second)
		}
		if rtErr == nil || isTimeout(rtErr) {
			t.Fatalf("a connection with a drop mean of 50ms was not dropped: %v", rtErr)
		}
		c.Close()
		// The server's side ends too (its echo loop closes s on the error).
		_ = s.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := s.Read(make([]byte, 64)); isTimeout(err) {
			t.Fatal("the server's side of a dropped connection stayed open")
		}
	}
	if st := p.Stats(); st.Dropped < 3 || st.Accepted < 3 {
		t.Fatalf("stats %+v, want 3 dropped", st)
	}
}

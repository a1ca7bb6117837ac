// Package testredis runs a real redis-server for tests: a subprocess on a
// free loopback port, owned by one test and killed by its cleanup. It saves
// nothing on its own (no save points, no AOF): a test that wants a snapshot
// takes one with Save and restarts from it with RestartFromDump. It is the helper of tiers/redis's tests, copied here so that
// tests of other packages (api, cmd/utxo-cache) can use it; test files cannot
// be imported across packages.
//
// It speaks to Redis over raw RESP only, so it does not import go-redis,
// which stays confined to tiers/redis (CONTRIBUTING.md, one library, one package).
package testredis

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Server is a redis-server subprocess on a loopback port, owned by one test.
// Kill, Restart, RestartFromDump, Pause and Resume act on the same port; the
// test's cleanup kills it. Safe for concurrent use.
type Server struct {
	t    testing.TB
	bin  string
	port int
	dir  string
	args []string

	mu   sync.Mutex
	cmd  *exec.Cmd
	exit chan error // receives the process's exit
}

// Start starts a redis-server for t and waits until it answers PING. It
// fails t when redis-server is not installed.
func Start(t testing.TB) *Server {
	t.Helper()
	return StartConfig(t, "")
}

// StartConfig is Start with the settings of a redis.conf file (none if file
// is ""): Start's port, address and directory override the file's, and its
// persistence (none) applies only without a file.
func StartConfig(t testing.TB, file string) *Server {
	t.Helper()
	return startArgs(t, func(s *Server) []string {
		var args []string
		if file != "" {
			args = append(args, file)
		}
		args = append(args, "--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
			"--dir", s.dir, "--dbfilename", "dump.rdb", "--logfile", s.logPath())
		if file == "" {
			args = append(args, "--save", "", "--appendonly", "no")
		}
		if s.Major() >= 7 { // DEBUG (SLEEP: a slow server) is off by default since Redis 7
			args = append(args, "--enable-debug-command", "local")
		}
		return args
	})
}

// startArgs starts a redis-server with the arguments args returns for a
// server on a free port, in its own directory, and waits until it answers
// PING. It fails t when redis-server is not installed.
func startArgs(t testing.TB, args func(s *Server) []string) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal("redis-server not found: install it with `apt-get install redis-server redis-tools`")
	}
	s := &Server{t: t, bin: bin, dir: t.TempDir()}
	// Another program may take the free port before redis-server binds it:
	// then it starts again on another, up to 3 times.
	for attempt := 1; ; attempt++ {
		s.port = FreePort(t)
		s.args = args(s)
		_ = os.Remove(s.logPath())
		err := s.launch()
		if err == nil {
			break
		}
		if log, _ := os.ReadFile(s.logPath()); attempt == 3 || !bytes.Contains(log, []byte("Address already in use")) {
			t.Fatal(err)
		}
	}
	t.Cleanup(s.Kill)
	return s
}

func (s *Server) logPath() string { return filepath.Join(s.dir, "redis.log") }

// FreePort returns a loopback port that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		t.Fatalf("free port: %v", err)
	}
	return port
}

var versionRE = regexp.MustCompile(`v=(\d+)\.`)

// Major returns the major version of redis-server, 0 when unknown.
func (s *Server) Major() int {
	out, err := exec.Command(s.bin, "--version").Output()
	if err != nil {
		return 0
	}
	m := versionRE.FindSubmatch(out)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// start is launch on s.port, failing the test if it fails.
func (s *Server) start() {
	s.t.Helper()
	if err := s.launch(); err != nil {
		s.t.Fatal(err)
	}
}

// launch starts redis-server with s.args and waits until it answers PING
// as itself: INFO's process_id must be its pid, so that a PONG from another
// program's Redis on the port does not count. If it exits first, launch
// returns its exit and log, and the server is left stopped.
func (s *Server) launch() error {
	cmd := exec.Command(s.bin, s.args...)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start redis-server: %w", err)
	}
	exit := make(chan error, 1)
	go func() { exit <- cmd.Wait() }()
	s.mu.Lock()
	s.cmd, s.exit = cmd, exit
	s.mu.Unlock()

	deadline := time.Now().Add(10 * time.Second)
	for {
		if s.Ping(100*time.Millisecond) == nil && s.pid(100*time.Millisecond) == cmd.Process.Pid {
			return nil
		}
		select {
		case err := <-exit:
			s.mu.Lock()
			s.cmd = nil // its exit is consumed: Kill has nothing to wait for
			s.mu.Unlock()
			log, _ := os.ReadFile(s.logPath())
			return fmt.Errorf("redis-server on port %d exited: %v\n%s", s.port, err, log)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server on port %d: no PONG from it within 10s", s.port)
		}
	}
}

// pid is the process_id the server on s's port reports (INFO server), 0
// when it cannot be read within d.
func (s *Server) pid(d time.Duration) int {
	c, err := net.DialTimeout("tcp", s.Addr(), d)
	if err != nil {
		return 0
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(d))
	if _, err := c.Write([]byte("*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n")); err != nil {
		return 0
	}
	r := bufio.NewReader(c)
	head, err := r.ReadString('\n')
	if err != nil || len(head) < 4 || head[0] != '$' {
		return 0
	}
	n, err := strconv.Atoi(head[1 : len(head)-2])
	if err != nil || n < 0 {
		return 0
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return 0
	}
	for _, line := range strings.Split(string(body), "\r\n") {
		if v, ok := strings.CutPrefix(line, "process_id:"); ok {
			pid, _ := strconv.Atoi(v)
			return pid
		}
	}
	return 0
}

// Ping sends PING on a fresh connection and expects +PONG within d.
func (s *Server) Ping(d time.Duration) error {
	c, err := net.DialTimeout("tcp", s.Addr(), d)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(d))
	if _, err := c.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+PONG\r\n" {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}

// Addr is host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// URL is the redis:// URL of database 0.
func (s *Server) URL() string { return "redis://" + s.Addr() + "/0" }

// Kill sends SIGKILL and waits for the process; a no-op if it is not running.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd, exit := s.cmd, s.exit
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGCONT) // a paused process dies too, but be explicit
	_ = cmd.Process.Kill()
	<-exit
}

// Restart kills the server and starts it again on the same port, empty:
// a snapshot taken by Save is deleted first.
func (s *Server) Restart() {
	s.t.Helper()
	s.Kill()
	if err := os.Remove(s.dumpPath()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.t.Fatalf("remove the snapshot: %v", err)
	}
	s.start()
}

// RestartFromDump kills the server (SIGKILL, as a crash) and starts it
// again on the same port from the snapshot the last Save wrote: what a
// default-configured Redis (RDB save points) does after a crash, coming back
// with the data of an earlier moment. It fails the test when there is no
// snapshot.
func (s *Server) RestartFromDump() {
	s.t.Helper()
	s.Kill()
	if _, err := os.Stat(s.dumpPath()); err != nil {
		s.t.Fatalf("restart from the snapshot: %v (call Save first)", err)
	}
	s.start()
}

// Save makes the server write its snapshot (SAVE, synchronous), which
// RestartFromDump then loads.
func (s *Server) Save() {
	s.t.Helper()
	c, err := net.DialTimeout("tcp", s.Addr(), 5*time.Second)
	if err != nil {
		s.t.Fatalf("SAVE: %v", err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.Write([]byte("*1\r\n$4\r\nSAVE\r\n")); err != nil {
		s.t.Fatalf("SAVE: %v", err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		s.t.Fatalf("SAVE: %v", err)
	}
	if line != "+OK\r\n" {
		s.t.Fatalf("SAVE answered %q", line)
	}
}

func (s *Server) dumpPath() string { return filepath.Join(s.dir, "dump.rdb") }

// Pause stops the process (SIGSTOP): connections are accepted by the kernel,
// nothing is answered, and nothing is lost.
func (s *Server) Pause() { s.signal(syscall.SIGSTOP) }

// Resume continues a paused process (SIGCONT).
func (s *Server) Resume() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) {
	s.t.Helper()
	s.mu.Lock()
	cmd := s.cmd
	s.mu.Unlock()
	if cmd == nil {
		s.t.Fatalf("redis-server is not running")
	}
	if err := cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("signal %v: %v", sig, err)
	}
}

// Package testnats runs real nats-server processes with JetStream on
// loopback for tests: one server, or a cluster of three joined by routes,
// each with its store in the test's temporary directory, killed by the
// test's cleanup. A test fails, with the install command, when nats-server
// is not installed.
package testnats

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Server is one nats-server process. Its methods are safe for concurrent
// use.
type Server struct {
	t       testing.TB
	bin     string
	name    string
	dir     string
	port    int
	cluster int   // the route port; 0: not clustered
	routes  []int // the other servers' route ports
	payload int   // max_payload; 0: the server's default (1 MiB)
	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{}
}

// Cluster is three servers joined by routes.
type Cluster struct {
	Servers []*Server
}

func binary(t testing.TB) string {
	t.Helper()
	if p, err := exec.LookPath("nats-server"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/sbin/nats-server"); err == nil {
		return "/usr/sbin/nats-server"
	}
	t.Fatal("nats-server not found: install it with `apt-get install nats-server`")
	return ""
}

// FreePort returns a TCP port free on 127.0.0.1 at the time of the call.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Start starts one server with JetStream and waits until it accepts
// connections.
func Start(t testing.TB) *Server {
	t.Helper()
	s := &Server{t: t, bin: binary(t), name: "n0", dir: t.TempDir(), port: FreePort(t)}
	s.Start()
	t.Cleanup(s.Kill)
	return s
}

// StartMaxPayload starts one server as Start does, with max_payload set to
// n bytes (the largest message a client may publish).
func StartMaxPayload(t testing.TB, n int) *Server {
	t.Helper()
	s := &Server{t: t, bin: binary(t), name: "n0", dir: t.TempDir(), port: FreePort(t), payload: n}
	s.Start()
	t.Cleanup(s.Kill)
	return s
}

// StartCluster starts three servers with JetStream joined in one cluster
// and waits until each accepts connections and JetStream has a meta leader.
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	bin := binary(t)
	c := &Cluster{}
	var routePorts []int
	for i := range 3 {
		s := &Server{t: t, bin: bin, name: "n" + strconv.Itoa(i), dir: t.TempDir(), port: FreePort(t), cluster: FreePort(t)}
		c.Servers = append(c.Servers, s)
		routePorts = append(routePorts, s.cluster)
	}
	for _, s := range c.Servers {
		for _, p := range routePorts {
			if p != s.cluster {
				s.routes = append(s.routes, p)
			}
		}
		s.Start()
		t.Cleanup(s.Kill)
	}
	return c
}

// URL is the server's client URL.
func (s *Server) URL() string { return "nats://127.0.0.1:" + strconv.Itoa(s.port) }

// URLs are every server's client URL, comma separated.
func (c *Cluster) URLs() string {
	var out []string
	for _, s := range c.Servers {
		out = append(out, s.URL())
	}
	return strings.Join(out, ",")
}

func (s *Server) args() []string {
	args := []string{"-a", "127.0.0.1", "-p", strconv.Itoa(s.port), "-n", s.name, "-js", "-sd", filepath.Join(s.dir, "js")}
	if s.payload > 0 {
		// No command-line flag sets it: a configuration file does.
		conf := filepath.Join(s.dir, "nats.conf")
		if err := os.WriteFile(conf, []byte("max_payload: "+strconv.Itoa(s.payload)+"\n"), 0o644); err != nil {
			s.t.Fatal(err)
		}
		args = append(args, "-c", conf)
	}
	if s.cluster != 0 {
		var routes []string
		for _, p := range s.routes {
			routes = append(routes, "nats-route://127.0.0.1:"+strconv.Itoa(p))
		}
		args = append(args, "--cluster_name", "utxo", "--cluster", "nats://127.0.0.1:"+strconv.Itoa(s.cluster),
			"--routes", strings.Join(routes, ","))
	}
	return args
}

// Start starts the server (again, after Kill, on the same port and store)
// and waits until it accepts connections.
func (s *Server) Start() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return
	}
	log, err := os.OpenFile(filepath.Join(s.dir, "nats.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		s.t.Fatal(err)
	}
	cmd := exec.Command(s.bin, s.args()...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		s.t.Fatalf("start nats-server: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); log.Close(); close(done) }()
	s.cmd, s.done = cmd, done
	deadline := time.Now().Add(20 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(s.port), time.Second)
		if err == nil {
			conn.Close()
			return
		}
		select {
		case <-done:
			s.t.Fatalf("nats-server exited at start; its log: %s", s.logTail())
		default:
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("nats-server does not accept connections on %d; its log: %s", s.port, s.logTail())
		}
		time.Sleep(20 * time.Millisecond) // polling a port: nothing to wait on
	}
}

// Kill kills the server (SIGKILL) and waits for it to exit; a killed server
// may be started again.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
	s.cmd = nil
}

func (s *Server) logTail() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "nats.log"))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return fmt.Sprintf("\n%s", b)
}

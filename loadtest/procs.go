package loadtest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/utxo-cache/utxo-cache/api/bare"
	"github.com/utxo-cache/utxo-cache/node"
)

// process is a subprocess the harness started (the service, redis-server,
// the bare server) with its output in a log file. stop ends it by its own
// pid, never by name.
type process struct {
	name   string
	cmd    *exec.Cmd
	log    *os.File
	exited chan struct{}
	err    error // set before exited is closed
}

func startProcess(name, logPath, bin string, args ...string) (*process, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = childEnv()
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group: a Ctrl-C at the terminal reaches the harness,
	// which stops its children in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, log: logf, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// childEnv is the harness's environment without UTXO_CACHE_* variables: a
// child's settings are the flags the harness gives it and the contract's
// defaults (the model assumes them), whatever the operator's shell exports.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "UTXO_CACHE_") {
			env = append(env, kv)
		}
	}
	return env
}

func (p *process) pid() int { return p.cmd.Process.Pid }

// ProcessInfo names a process the harness started, for the report.
type ProcessInfo struct {
	Role string `json:"role"`
	PID  int    `json:"pid"`
	Log  string `json:"log"` // the log file's name in the results directory
}

func (p *process) info(role string) ProcessInfo {
	return ProcessInfo{Role: role, PID: p.pid(), Log: filepath.Base(p.log.Name())}
}

func (p *process) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM, waits up to grace for a clean exit, then kills.
func (p *process) stop(grace time.Duration) error {
	if p == nil {
		return nil
	}
	defer p.log.Close()
	if !p.running() {
		return p.exitErr()
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return p.exitErr()
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("%s did not stop within %s and was killed", p.name, grace)
	}
}

// exitErr is the process's exit error, ignoring an exit by the SIGTERM the
// harness sent (status 143 or the signal itself).
func (p *process) exitErr() error {
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok &&
			((ws.Signaled() && ws.Signal() == syscall.SIGTERM) || ws.ExitStatus() == 143) {
			return nil
		}
	}
	if p.err != nil {
		return fmt.Errorf("%s: %w (see %s)", p.name, p.err, p.log.Name())
	}
	return nil
}

// portsGiven are the ports freePort has returned in this process.
var portsGiven struct {
	sync.Mutex
	m map[int]bool
}

// freePort returns a loopback port that was free a moment ago, and that it
// has not returned before in this process: the kernel may hand a port just
// closed to the next caller, and two processes started at once (a set's
// replicas) must not be given the same one. Another program may still take
// it before the child binds it; startServe retries that case.
func freePort() (int, error) {
	portsGiven.Lock()
	defer portsGiven.Unlock()
	if portsGiven.m == nil {
		portsGiven.m = make(map[int]bool)
	}
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !portsGiven.m[port] {
			portsGiven.m[port] = true
			return port, nil
		}
	}
	return 0, errors.New("no loopback port not handed out before")
}

// lostPort reports whether the process logged at path failed to bind its
// port: another program took it between freePort and the bind.
func lostPort(path string) bool {
	b, err := os.ReadFile(path)
	return err == nil && bytes.Contains(b, []byte("address already in use"))
}

// waitHTTP polls url until it answers 200, the process exits or the
// timeout passes.
func waitHTTP(ctx context.Context, c *http.Client, url string, p *process, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if !p.running() {
			return fmt.Errorf("%s exited before it was ready: %v (see %s)", p.name, p.err, p.log.Name())
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%s not ready at %s after %s (see %s)", p.name, url, timeout, p.log.Name())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// redisServer is a redis-server on a free loopback port without
// persistence, as the Redis tier's tests run it.
type redisServer struct {
	*process
	addr     string
	port     int
	bin, dir string
	restarts int
}

// startRedis starts redis-server on the load's CPUs of cpus (it serves the
// service, but it is not what a configuration measures).
func startRedis(cpus cpuPlan, bin, dir string) (*redisServer, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	r := &redisServer{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), port: port, bin: bin, dir: dir}
	if err := r.start(cpus, "redis.log", 10*time.Second); err != nil {
		return nil, err
	}
	return r, nil
}

// start runs redis-server on r's port and waits up to timeout for its PONG.
func (r *redisServer) start(cpus cpuPlan, logName string, timeout time.Duration) error {
	bin, args := cpus.command(cpus.load, r.bin, []string{"--port", strconv.Itoa(r.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", r.dir, "--protected-mode", "yes"})
	p, err := startProcess("redis-server", filepath.Join(r.dir, logName), bin, args...)
	if err != nil {
		return err
	}
	r.process = p
	deadline := time.Now().Add(timeout)
	for {
		if err := r.command("PING", "+PONG"); err == nil {
			return nil
		}
		if !p.running() || time.Now().After(deadline) {
			_ = p.stop(time.Second)
			return fmt.Errorf("redis-server did not answer PING on %s (see %s)", r.addr, p.log.Name())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// restart kills redis-server (SIGKILL: a crash, not a shutdown) and starts
// a new one on the same port, empty (no persistence), as a crashed and
// restarted Redis; it returns how long Redis was down, from the kill to the
// new one's PONG.
func (r *redisServer) restart(cpus cpuPlan, timeout time.Duration) (time.Duration, error) {
	t0 := time.Now()
	if r.running() {
		_ = r.cmd.Process.Kill()
	}
	<-r.exited
	r.log.Close()
	r.restarts++
	// The port is free again once the old process is gone; the new one
	// binds it with SO_REUSEADDR, like any redis-server.
	err := r.start(cpus, fmt.Sprintf("redis-%d.log", r.restarts), timeout)
	return time.Since(t0), err
}

// command sends one argument-less command in RESP and expects a reply
// line. The harness needs PING and FLUSHALL only; the Redis client library
// belongs to tiers/redis (CONTRIBUTING.md, one library, one package).
func (r *redisServer) command(cmd, want string) error {
	c, err := net.DialTimeout("tcp", r.addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := fmt.Fprintf(c, "*1\r\n$%d\r\n%s\r\n", len(cmd), cmd); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if strings.TrimSpace(line) != want {
		return fmt.Errorf("redis %s: %q", cmd, strings.TrimSpace(line))
	}
	return nil
}

func (r *redisServer) url() string { return "redis://" + r.addr + "/0" }

// ServeBare runs the bare handler (bare.NewHandler) on addr with the
// bodies of the JSON file at bodiesPath (an object of route → base64 body,
// as the harness writes it) until ctx is done. `utxo-loadtest
// --bare-serve` runs it as a subprocess, so the ceiling is measured in a
// process of its own, like the service.
func ServeBare(ctx context.Context, addr, bodiesPath string) error {
	raw, err := os.ReadFile(bodiesPath)
	if err != nil {
		return err
	}
	var bodies map[string][]byte
	if err := json.Unmarshal(raw, &bodies); err != nil {
		return fmt.Errorf("loadtest: bare bodies %s: %w", bodiesPath, err)
	}
	bodies["GET /readyz"] = []byte(`{"status":"ready"}`)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	// The service's own server settings, so that the ceiling is served
	// the way the service is.
	srv := node.NewHTTPServer(bare.NewHandler(bodies), slog.New(slog.DiscardHandler))
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}

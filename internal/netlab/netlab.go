// Package netlab builds small networks of real hosts for tests: each host is
// a Linux network namespace with its own address on a private switch, so
// that a writer, its replicas and anything else a test runs talk over real
// links that the test can cut, block and heal, instead of over one loopback
// where no link is ever cut. It is a test helper, like internal/testredis:
// it needs root (CAP_NET_ADMIN), `ip` from iproute2, and `iptables` for
// Block, and fails the test with the install command when a tool is missing.
//
// # Topology
//
// A Lab is one switch: a namespace of its own holding a Linux bridge, so
// that nothing of the lab touches the machine's own network namespace. Each
// Host is a namespace with its loopback up and one veth pair: eth0 inside
// the host, with the host's address (10.213.N.i/24, N picked per lab, i the
// host's number from 1), and the peer end a port of the bridge. Labs are
// isolated from each other and from the machine, so parallel tests, and
// parallel test binaries, never see each other's addresses or ports. Names
// are unique per process and lab (netlab-<pid>-<nonce>-<lab>-<host>), and a
// new lab removes the namespaces that a killed test process left behind.
//
// # Faults
//
//   - Cut takes the host's switch port down: a cable pulled at the switch.
//     Both ends keep their addresses; every packet to or from the host is
//     dropped silently, so open connections hang, as over a real cut link,
//     rather than being refused. Heal puts the port back up.
//   - Block drops, inside the host (iptables INPUT and OUTPUT rules), every
//     packet exchanged with one peer: a partition between two hosts that
//     leaves the others reachable. Unblock removes the rules.
//   - Delay and connection drops go through a Proxy (proxy.go): the kernel
//     here has no netem qdisc.
//
// # Processes and sockets
//
// Host.Command runs a program inside the host (`ip netns exec`, which execs
// the program: the Cmd's process is the program itself, so signals reach
// it). The test process itself stays in its own namespace; Host.Dial,
// Host.Listen and Host.HTTPClient make sockets inside the host (on a locked
// thread switched into the namespace for the socket's creation only).
//
// # Servers of other kinds
//
// Anything that listens on an address runs on a host the same way: a
// redis-server or a cluster of nats-server nodes started with
// host.Command, listening on host.AddrPort(port), their routes naming the
// other hosts' addresses; Cut, Block and StartProxy then act on the links
// between them as on any other. A helper that starts such a server on
// loopback (internal/testredis) needs only the command prefix and the
// address to listen on to start it on a host instead.
//
// # Cleanup
//
// The lab's cleanup (registered with t.Cleanup when the lab is created, so
// it runs after the cleanups of everything started on it) kills every
// process still running in its namespaces (`ip netns pids`: only what the
// test started there), then deletes the namespaces: their veths, bridge
// and iptables rules go with them. It runs on failure as on success.
package netlab

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Lab is one switch and the hosts on it, owned by one test. Its methods fail
// the test when the kernel refuses what they ask. Safe for concurrent use.
type Lab struct {
	t      testing.TB
	name   string       // namespace prefix of the lab: netlab-<pid>-<nonce>-<n>
	sw     string       // the switch's namespace
	prefix netip.Prefix // the hosts' subnet, a /24

	mu    sync.Mutex
	hosts []*Host
}

// Host is one namespace on a lab's switch.
type Host struct {
	// Name is the name the test gave the host.
	Name string
	// NS is the network namespace (`ip netns` name), for `ip -n NS …`.
	NS string
	// Addr is the host's address on the switch.
	Addr netip.Addr

	lab  *Lab
	port string // the host's port on the switch (in the switch's namespace)
	mu   sync.Mutex
	// blocked counts Block calls per peer address, so that Unblock removes
	// exactly the rules Block added.
	blocked map[netip.Addr]int
}

// nsPrefix starts every namespace netlab creates; the pid after it tells a
// new lab which leftovers belong to a dead process.
const nsPrefix = "netlab-"

var (
	nonce   = randomHex(3) // tells apart processes that reuse a pid
	labs    atomic.Uint64
	sweepMu sync.Mutex
)

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// Requirements fails t unless the lab can be built here: root, and the
// tools on PATH. New calls it; a test that needs iptables (Block) before
// building anything may call it too.
func Requirements(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("ip"); err != nil {
		t.Fatal("netlab: `ip` not found: install it with `apt-get install iproute2`")
	}
	if _, err := exec.LookPath("iptables"); err != nil {
		t.Fatal("netlab: `iptables` not found: install it with `apt-get install iptables`")
	}
	if os.Geteuid() != 0 {
		t.Fatal("netlab: network namespaces need root (CAP_NET_ADMIN): run the test as root, as CI does")
	}
}

// New builds an empty lab (its switch) for t and registers its cleanup.
func New(t testing.TB) *Lab {
	t.Helper()
	Requirements(t)
	sweep(t)
	n := labs.Add(1)
	b := make([]byte, 1)
	_, _ = rand.Read(b)
	l := &Lab{t: t, name: fmt.Sprintf("%s%d-%s-%d", nsPrefix, os.Getpid(), nonce, n),
		prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 213, b[0], 0}), 24)}
	l.sw = l.name + "-sw"
	t.Cleanup(l.close)
	l.ip("netns", "add", l.sw)
	l.ip("-n", l.sw, "link", "set", "lo", "up")
	l.ip("-n", l.sw, "link", "add", "br0", "type", "bridge")
	l.ip("-n", l.sw, "link", "set", "br0", "up")
	return l
}

// Prefix is the hosts' subnet.
func (l *Lab) Prefix() netip.Prefix { return l.prefix }

// Host adds a host named name (letters, digits, '-'; unique in the lab) to
// the switch, with the lab's next address, and returns once its link is up.
func (l *Lab) Host(name string) *Host {
	l.t.Helper()
	l.mu.Lock()
	i := len(l.hosts) + 1
	if i > 250 {
		l.mu.Unlock()
		l.t.Fatal("netlab: at most 250 hosts on a lab")
	}
	a := l.prefix.Addr().As4()
	a[3] = byte(i)
	h := &Host{Name: name, NS: l.name + "-" + name, Addr: netip.AddrFrom4(a), lab: l,
		port: "p" + strconv.Itoa(i), blocked: map[netip.Addr]int{}}
	l.hosts = append(l.hosts, h)
	l.mu.Unlock()

	l.ip("netns", "add", h.NS)
	l.ip("-n", h.NS, "link", "set", "lo", "up")
	// Both ends are created in their namespaces directly: no name is ever
	// taken in the machine's own namespace.
	l.ip("link", "add", "eth0", "netns", h.NS, "type", "veth", "peer", "name", h.port, "netns", l.sw)
	l.ip("-n", l.sw, "link", "set", h.port, "master", "br0", "up")
	l.ip("-n", h.NS, "addr", "add", netip.PrefixFrom(h.Addr, l.prefix.Bits()).String(), "dev", "eth0")
	l.ip("-n", h.NS, "link", "set", "eth0", "up")
	h.waitUp()
	return h
}

// waitUp waits until both ends of h's link are operationally up. The
// kernel brings a device's carrier up asynchronously (up to a second
// later): until then it drops what is sent through it, so the first
// packets of a test would be lost and retransmitted a second later.
func (h *Host) waitUp() {
	h.lab.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for _, end := range [][2]string{{h.NS, "eth0"}, {h.lab.sw, h.port}} {
		for {
			out, err := exec.Command("ip", "-n", end[0], "-j", "link", "show", "dev", end[1]).Output()
			if err == nil && strings.Contains(string(out), `"operstate":"UP"`) {
				break
			}
			if time.Now().After(deadline) {
				h.lab.t.Fatalf("netlab: %s: %s in %s not up within 10s: %s %v", h, end[1], end[0], out, err)
			}
			time.Sleep(5 * time.Millisecond) // the kernel's link event: nothing to wait on but the state
		}
	}
}

// ip runs `ip args…`, failing the test on an error.
func (l *Lab) ip(args ...string) {
	l.t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		l.t.Fatalf("netlab: ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// close kills what still runs in the lab's namespaces and deletes them.
// Errors are reported, not fatal: the rest is cleaned up regardless.
func (l *Lab) close() {
	l.mu.Lock()
	hosts := l.hosts
	l.mu.Unlock()
	names := []string{l.sw}
	for _, h := range hosts {
		names = append(names, h.NS)
	}
	for _, ns := range names {
		if err := deleteNS(ns); err != nil {
			l.t.Errorf("netlab: %v", err)
		}
	}
}

// deleteNS kills the processes in ns (all of them started there by a test
// of this package's user) and deletes it. A namespace that is already gone
// is no error.
func deleteNS(ns string) error {
	if _, err := os.Stat("/run/netns/" + ns); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, err := exec.Command("ip", "netns", "pids", ns).Output()
		if err != nil {
			return fmt.Errorf("ip netns pids %s: %v", ns, err)
		}
		pids := strings.Fields(string(out))
		if len(pids) == 0 {
			break
		}
		for _, p := range pids {
			if pid, err := strconv.Atoi(p); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v still in namespace %s after SIGKILL", pids, ns)
		}
		time.Sleep(10 * time.Millisecond) // the killed processes' exit: nothing to wait on but the list
	}
	if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
		return fmt.Errorf("ip netns del %s: %v: %s", ns, err, out)
	}
	return nil
}

// sweep deletes the namespaces of labs whose test process is gone (killed
// before its cleanup ran). Those of live processes are left alone.
func sweep(t testing.TB) {
	sweepMu.Lock()
	defer sweepMu.Unlock()
	entries, err := os.ReadDir("/run/netns")
	if err != nil {
		return // none yet
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), nsPrefix)
		if !ok {
			continue
		}
		pidStr, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidStr)
		if err != nil || pid <= 0 || !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
			continue // not one of ours, or its process is alive
		}
		if err := deleteNS(e.Name()); err != nil {
			t.Logf("netlab: removing a dead test's namespace: %v", err)
		}
	}
}

// String is the host's name and address.
func (h *Host) String() string { return h.Name + " (" + h.Addr.String() + ")" }

// AddrPort is the host's address with port.
func (h *Host) AddrPort(port uint16) string { return netip.AddrPortFrom(h.Addr, port).String() }

// Command is exec.Command of a program run inside the host. The program
// must not outlive the test: the lab's cleanup kills it if it does.
func (h *Host) Command(name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", h.NS, name}, args...)...)
}

// Cut takes the host's link down at the switch: from now on every packet to
// or from the host is dropped, silently.
func (h *Host) Cut() {
	h.lab.t.Helper()
	h.lab.ip("-n", h.lab.sw, "link", "set", h.port, "down")
}

// Heal puts the host's link back up and returns once it carries packets.
func (h *Host) Heal() {
	h.lab.t.Helper()
	h.lab.ip("-n", h.lab.sw, "link", "set", h.port, "up")
	h.waitUp()
}

// Block drops every packet between h and peer, inside h (iptables rules in
// h's namespace, both directions). Other hosts still reach both.
func (h *Host) Block(peer *Host) {
	h.lab.t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.iptables("-A", peer.Addr)
	h.blocked[peer.Addr]++
}

// Unblock removes the rules of one Block of peer.
func (h *Host) Unblock(peer *Host) {
	h.lab.t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.blocked[peer.Addr] == 0 {
		h.lab.t.Fatalf("netlab: %s: Unblock(%s) without Block", h, peer)
	}
	h.iptables("-D", peer.Addr)
	h.blocked[peer.Addr]--
}

func (h *Host) iptables(op string, peer netip.Addr) {
	h.lab.t.Helper()
	for _, rule := range [][]string{{"INPUT", "-s"}, {"OUTPUT", "-d"}} {
		args := []string{"netns", "exec", h.NS, "iptables", "-w", op, rule[0], rule[1], peer.String(), "-j", "DROP"}
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			h.lab.t.Fatalf("netlab: ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
}

// inside runs fn on a thread switched into h's namespace, so that the
// sockets fn creates belong to h. A socket keeps its namespace for life,
// whichever thread uses it later. The thread is switched back before it
// serves anything else; if that fails it is discarded (its goroutine exits
// locked to it).
func (h *Host) inside(fn func()) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		self, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			errc <- fmt.Errorf("netlab: %w", err)
			return
		}
		defer self.Close()
		target, err := os.Open("/run/netns/" + h.NS)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("netlab: host %s: %w", h, err)
			return
		}
		defer target.Close()
		if err := setns(target); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("netlab: enter %s: %w", h.NS, err)
			return
		}
		fn()
		if err := setns(self); err != nil {
			errc <- fmt.Errorf("netlab: leave %s: %w", h.NS, err) // the thread dies with its goroutine
			return
		}
		runtime.UnlockOSThread()
		errc <- nil
	}()
	return <-errc
}

func setns(f *os.File) error {
	num := sysSetns // a variable: -1 (unknown) converts at run time only
	if num < 0 {
		return syscall.ENOSYS
	}
	if _, _, e := syscall.RawSyscall(uintptr(num), f.Fd(), syscall.CLONE_NEWNET, 0); e != 0 {
		return e
	}
	return nil
}

// Listen is net.Listen inside the host (address "127.0.0.1:0" is the host's
// own loopback, ":0" or h.AddrPort(0) its switch address too).
func (h *Host) Listen(network, address string) (net.Listener, error) {
	var (
		ln  net.Listener
		err error
	)
	if ierr := h.inside(func() { ln, err = net.Listen(network, address) }); ierr != nil {
		return nil, ierr
	}
	return ln, err
}

// DialContext dials from inside the host: a connection to another host goes
// over the host's link, one to the host's own address or loopback stays in
// it. It has the shape of net.Dialer.DialContext, for http.Transport.
func (h *Host) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	var (
		c   net.Conn
		err error
	)
	d := net.Dialer{Timeout: 10 * time.Second}
	if ierr := h.inside(func() { c, err = d.DialContext(ctx, network, address) }); ierr != nil {
		return nil, ierr
	}
	return c, err
}

// HTTPClient is a client whose connections are made inside the host, with
// the given overall timeout per request (0: none). Close its idle
// connections when done (CloseIdleConnections).
func (h *Host) HTTPClient(timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: &http.Transport{
		Proxy: nil, DialContext: h.DialContext, MaxIdleConnsPerHost: 4,
	}}
}

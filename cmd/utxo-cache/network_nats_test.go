package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/utxo-cache/utxo-cache/internal/netlab"
)

// The NATS cases of the network tests: the writer publishes to a cluster
// of three nats-server nodes, each on a host of its own with routes to the
// other two hosts, and replicas on hosts of their own follow it through
// JetStream alone (--replica-of nats://…).

const (
	natsClientPort  = 4222
	natsRoutePort   = 6222
	natsMonitorPort = 8222
)

// netNATSNode is one nats-server on a host.
type netNATSNode struct {
	host   *netlab.Host
	dir    string
	client *http.Client // to its monitoring port, from inside its host
}

// natsBinary is nats-server's path; it fails the test when it is not
// installed.
func natsBinary(t *testing.T) string {
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

// netNATS starts a nats-server with JetStream on each host, clustered by
// routes to the others' addresses, and returns the nodes and the client
// URLs (comma separated) once every node reports itself healthy (JetStream
// up, with a meta leader).
func netNATS(t *testing.T, hosts []*netlab.Host) ([]*netNATSNode, string) {
	t.Helper()
	bin := natsBinary(t)
	var routes, urls []string
	for _, h := range hosts {
		routes = append(routes, "nats-route://"+h.AddrPort(natsRoutePort))
		urls = append(urls, "nats://"+h.AddrPort(natsClientPort))
	}
	var nodes []*netNATSNode
	for i, h := range hosts {
		n := &netNATSNode{host: h, dir: t.TempDir(), client: h.HTTPClient(5 * time.Second)}
		t.Cleanup(n.client.CloseIdleConnections)
		var others []string
		for j, r := range routes {
			if j != i {
				others = append(others, r)
			}
		}
		log, err := os.Create(filepath.Join(n.dir, "nats.log"))
		if err != nil {
			t.Fatal(err)
		}
		cmd := h.Command(bin, "-a", h.Addr.String(), "-p", strconv.Itoa(natsClientPort), "-n", h.Name,
			"-m", strconv.Itoa(natsMonitorPort), "-js", "-sd", filepath.Join(n.dir, "js"),
			"--cluster_name", "utxo", "--cluster", "nats://"+h.AddrPort(natsRoutePort), "--routes", strings.Join(others, ","))
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Start(); err != nil {
			log.Close()
			t.Fatalf("start nats-server on %s: %v", h, err)
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); log.Close(); close(exited) }()
		t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
		nodes = append(nodes, n)
	}
	for _, n := range nodes {
		n.waitHealth(t, true, 30*time.Second)
	}
	return nodes, strings.Join(urls, ",")
}

// health is the node's GET /healthz (JetStream current with its cluster:
// 200 {"status":"ok"}; else 503 with the reason), as code and body.
func (n *netNATSNode) health() (int, string, error) {
	res, err := n.client.Get("http://" + n.host.AddrPort(natsMonitorPort) + "/healthz")
	if err != nil {
		return 0, "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, strings.TrimSpace(string(b)), err
}

// monitor decodes the node's monitoring endpoint path (/jsz, /connz…)
// into v.
func (n *netNATSNode) monitor(path string, v any) error {
	res, err := n.client.Get("http://" + n.host.AddrPort(natsMonitorPort) + path)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, res.Status)
	}
	return json.NewDecoder(res.Body).Decode(v)
}

// serves reports whether a client on h is connected to the node.
func (n *netNATSNode) serves(t *testing.T, h *netlab.Host) bool {
	t.Helper()
	var c struct {
		Connections []struct {
			IP string `json:"ip"`
		} `json:"connections"`
	}
	if err := n.monitor("/connz", &c); err != nil {
		t.Fatalf("nats-server on %s: %v", n.host, err)
	}
	for _, conn := range c.Connections {
		if conn.IP == h.Addr.String() {
			return true
		}
	}
	return false
}

// leaders are the JetStream meta leader and the leader of every stream as
// the node sees them ("" while it knows none).
func (n *netNATSNode) leaders() (meta string, streams []string, err error) {
	var j struct {
		Meta *struct {
			Leader string `json:"leader"`
		} `json:"meta_cluster"`
		Accounts []struct {
			Streams []struct {
				Cluster *struct {
					Leader string `json:"leader"`
				} `json:"cluster"`
			} `json:"stream_detail"`
		} `json:"account_details"`
	}
	if err := n.monitor("/jsz?accounts=true&streams=true", &j); err != nil {
		return "", nil, err
	}
	if j.Meta != nil {
		meta = j.Meta.Leader
	}
	for _, a := range j.Accounts {
		for _, s := range a.Streams {
			l := ""
			if s.Cluster != nil {
				l = s.Cluster.Leader
			}
			streams = append(streams, l)
		}
	}
	return meta, streams, nil
}

// waitHealth waits until the node reports itself healthy (ok) or not.
func (n *netNATSNode) waitHealth(t *testing.T, ok bool, within time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(within)
	tick := time.NewTicker(50 * time.Millisecond) // pacing of the polls
	defer tick.Stop()
	for {
		code, body, err := n.health()
		if err == nil && (code == http.StatusOK) == ok {
			return body
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(n.dir, "nats.log"))
			if len(b) > 3000 {
				b = b[len(b)-3000:]
			}
			t.Fatalf("nats-server on %s: healthy %v not reached within %v: %d %s %v; its log:\n%s", n.host, ok, within, code, body, err, b)
		}
		<-tick.C
	}
}

// TestJetStreamPartitioned: a writer publishes to a three-node NATS cluster
// (the stream kept on all three), and two replicas follow it through
// JetStream, every process on a host of its own. First nats3, the node
// replica r1 is connected to, is cut off from the other two (its packets to
// and from them dropped; its clients still reach it) while the writer moves
// on, until nats3 reports that it lost its cluster and the other two lead
// the cluster and every stream; r2, on the majority's side with the writer,
// must follow the writer meanwhile. Then r2 is cut off from all three NATS
// nodes while the writer moves on by 20 changes and r1 follows, until r2
// has not heard from the writer for 5 s. Throughout, each replica's
// X-Commit-Seq never goes back and every answer is the model's at its seq;
// the cut-off replica answers from the state it had; after each heal every
// replica reaches the writer's seq, with its state and digest.
//
// On failure it logs each side's state and the NATS logs; with
// UTXO_CACHE_TEST_DUMP=1 in the environment, every utxo-cache process's
// goroutines too (SIGQUIT).
func TestJetStreamPartitioned(t *testing.T) {
	t.Parallel()
	nt, hosts := netLab(t, "nats1", "nats2", "nats3", "r1", "r2")
	nodes, _ := netNATS(t, hosts[:3])
	// Each client is given one node to start from (it learns the others
	// from it), so that the partition below is the same on every run: the
	// writer on nats1, r2 on nats2, and r1 on nats3, the node then cut off.
	url := func(i int) string { return "nats://" + nodes[i].host.AddrPort(natsClientPort) }
	nt.startWriter("--jetstream", url(0), "--jetstream-replicas", "3")
	r1 := nt.replica(hosts[3], url(2))
	r2 := nt.replica(hosts[4], url(1))
	reps := []*netReplica{r1, r2}
	// On failure, what each side knew.
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, rp := range reps {
			if res, err := rp.p.try(http.MethodGet, "/v1/tip"); err == nil {
				t.Logf("%s: tip %s", rp.name, res.body)
			}
		}
		if res, err := nt.r.p.try(http.MethodGet, "/metrics"); err == nil {
			for _, l := range strings.Split(string(res.body), "\n") {
				if strings.Contains(l, "jetstream") && !strings.HasPrefix(l, "#") {
					t.Logf("writer: %s", l)
				}
			}
		}
		for _, n := range nodes {
			var v any
			err := n.monitor("/jsz?accounts=true&streams=true&consumer=true", &v)
			t.Logf("%s: /jsz %s %v", n.host, jsonOf(v), err)
			if b, err := os.ReadFile(filepath.Join(n.dir, "nats.log")); err == nil {
				if len(b) > 6000 {
					b = b[len(b)-6000:]
				}
				t.Logf("%s: log:\n%s", n.host, b)
			}
		}
		// Every process's goroutines, in its output below.
		if os.Getenv("UTXO_CACHE_TEST_DUMP") != "" {
			for _, p := range []*serveProc{r1.p, r2.p, nt.r.p} {
				_ = p.cmd.Process.Signal(syscall.SIGQUIT)
				<-p.exited
			}
		}
	})
	began := time.Now()
	phase := func(name string) {
		t.Logf("%4.1fs %s: seq %d, tip %s", time.Since(began).Seconds(), name, nt.r.seq, nt.r.m.Tip())
	}
	// check reads every balance and the tip on rp, each compared with the
	// model at the X-Commit-Seq it names, which may not go back from last.
	check := func(rp *netReplica, last uint64) uint64 {
		t.Helper()
		st := rp.tip(t)
		if want, ok := nt.hist[st.seq]; !ok || jsonOf(st.e2eState) != jsonOf(want) || st.seq < last {
			t.Fatalf("%s: GET /v1/tip at X-Commit-Seq %d (after %d): %s; the writer had %s", rp.name, st.seq, last, jsonOf(st), jsonOf(want))
		}
		last = st.seq
		for _, a := range nt.r.gen.Addresses() {
			res := rp.p.get("/v1/addresses/" + escapePath(a) + "/balance")
			var got e2eBalance
			strictDecode(t, "balance", res, &got)
			seq, err := strconv.ParseUint(res.hdr.Get("X-Commit-Seq"), 10, 64)
			if err != nil || seq < last || jsonOf(got) != jsonOf(nt.bals[seq][a]) {
				t.Fatalf("%s: balance of %s at X-Commit-Seq %s (after %d): %s; the writer had %s",
					rp.name, a, res.hdr.Get("X-Commit-Seq"), last, res.body, jsonOf(nt.bals[seq][a]))
			}
			last = seq
		}
		return last
	}

	// on is the NATS node a client on h is connected to (-1: none yet).
	on := func(h *netlab.Host) int {
		for i, n := range nodes {
			if n.serves(t, h) {
				return i
			}
		}
		return -1
	}
	// pace is the writer's feed while a link is down: a change every
	// 100 ms, the replicas read after each.
	pace := time.NewTicker(100 * time.Millisecond)
	defer pace.Stop()
	last := make([]uint64, len(reps))
	feed := func() {
		<-pace.C
		nt.steps(1, nil)
		for i, rp := range reps {
			last[i] = check(rp, last[i])
		}
	}

	phase("chain")
	nt.steps(10, nil)
	nt.converged(true)

	// nats3, the node r1 is connected to, cut off from the other two: the
	// writer and r2 are on the majority's side.
	const li = 2
	lone := nodes[li]
	if wi, r1i, r2i := on(nt.writer), on(r1.host), on(r2.host); wi != 0 || r1i != li || r2i != 1 {
		t.Fatalf("connected to NATS nodes %d (writer), %d (r1), %d (r2); want 0, %d, 1", wi, r1i, r2i, li)
	}
	phase(fmt.Sprintf("NATS node %s cut off from the other two", lone.host))
	var majority []*netNATSNode
	for i, n := range nodes {
		if i != li {
			majority = append(majority, n)
			lone.host.Block(n.host)
		}
	}
	cut, atCut := time.Now(), nt.r.seq
	// The writer moves on, and the replicas are read all along, until the
	// lone node reports that it lost its cluster (JetStream not current)
	// and the other two lead the cluster and the stream without it.
	lost, led := false, false
	for !lost || !led || nt.r.seq < atCut+6 {
		feed()
		if !lost {
			if code, body, err := lone.health(); err == nil && code != http.StatusOK {
				lost = true
				t.Logf("%s unhealthy %.1fs after the cut: %s", lone.host, time.Since(cut).Seconds(), body)
			}
		}
		if !led {
			meta, streams, err := majority[0].leaders()
			led = err == nil && meta != "" && meta != lone.host.Name && len(streams) > 0
			for _, l := range streams {
				led = led && l != "" && l != lone.host.Name
			}
			if led {
				t.Logf("%.1fs after the cut, %s sees meta leader %s, stream leaders %v", time.Since(cut).Seconds(), majority[0].host, meta, streams)
			}
		}
		if time.Since(cut) > replDeadline {
			t.Fatalf("%v after %s was cut off from its cluster: unhealthy %v, the others leading %v", replDeadline, lone.host, lost, led)
		}
	}
	// The writer publishes to the majority, and the replica there follows
	// it; the one on the lone node keeps answering from what it had.
	nt.converge(r2.testReplica)
	last[0] = check(r1, last[0])
	t.Logf("%s followed the writer to seq %d through the majority; %s, on the lone node, at seq %d", r2.name, nt.r.seq, r1.name, last[0])
	t.Logf("while %s was cut off: replicas at seqs %v, the writer at %d", lone.host, last, nt.r.seq)
	phase("NATS node healed")
	for _, n := range majority {
		lone.host.Unblock(n.host)
	}
	healed := time.Now()
	for _, rp := range reps {
		nt.converge(rp.testReplica)
		t.Logf("%s: at the writer's seq %d %.1fs after the heal", rp.name, nt.r.seq, time.Since(healed).Seconds())
	}
	nt.converged(true)
	body := lone.waitHealth(t, true, replDeadline)
	t.Logf("%s healthy again %.1fs after the heal: %s", lone.host, time.Since(healed).Seconds(), body)

	// A replica cut off from NATS, until the writer has moved on by 20
	// changes and the replica has not heard from it for 5 s (the writer's
	// status comes every second, its consumer's heartbeat every 2 s: both
	// missed).
	phase("replica cut off from NATS")
	t.Logf("%s before the cut: %s", r2.name, jsonOf(r2.tip(t).Replication))
	for _, n := range nodes {
		r2.host.Block(n.host)
	}
	cut, held := time.Now(), nt.r.seq
	for {
		feed()
		if last[1] != held {
			t.Fatalf("%s, cut off from NATS at seq %d, answered at seq %d", r2.name, held, last[1])
		}
		if st := r2.tip(t); st.Replication.LastContactMs >= 5000 && nt.r.seq >= held+20 {
			break
		}
		if time.Since(cut) > replDeadline {
			t.Fatalf("%s: still in contact %v after it was cut off from NATS", r2.name, replDeadline)
		}
	}
	// The other replica follows the writer all along.
	nt.converge(r1.testReplica)
	t.Logf("%s followed the writer to seq %d while %s stayed at %d", r1.name, nt.r.seq, r2.name, held)
	phase("replica healed")
	for _, n := range nodes {
		r2.host.Unblock(n.host)
	}
	healed = time.Now()
	nt.converge(r2.testReplica)
	t.Logf("%s: at the writer's seq %d %.1fs after the heal (%v contact errors counted)", r2.name, nt.r.seq,
		time.Since(healed).Seconds(), r2.p.metric("utxo_cache_replica_contact_errors_total"))
	nt.converged(true)
	for _, rp := range reps {
		rp.p.waitReady(time.Now().Add(replDeadline))
	}
	nt.steps(4, nil)
	nt.converged(false)

	phase("final")
	for _, rp := range reps {
		rp.p.stop()
		rp.watch.close()
		rp.watch.checkHistory(t, nt.hist)
	}
	nt.r.p.stop()
}

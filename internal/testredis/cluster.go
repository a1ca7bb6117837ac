package testredis

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Cluster is a Redis Cluster on loopback for one test: three masters with a
// replica each, six redis-server processes, killed by the test's cleanup.
// Its methods fail the test when the cluster does not do what they ask
// within a deadline.
type Cluster struct {
	t     testing.TB
	nodes []*Server
}

// clusterNodeTimeout is the cluster's node timeout: a killed master is
// failed over after about two of them.
const clusterNodeTimeout = 1000 * time.Millisecond

// StartCluster starts six cluster-enabled servers, joins them with
// `redis-cli --cluster create … --cluster-replicas 1`, and waits until every
// node agrees on the slots and every replica is in sync. It fails t when
// redis-server or redis-cli is not installed.
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Fatal("redis-cli not found: install it with `apt-get install redis-server redis-tools`")
	}
	c := &Cluster{t: t}
	addrs := make([]string, 0, 6)
	for range 6 {
		s := startArgs(t, func(s *Server) []string {
			return []string{"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--dir", s.dir,
				"--logfile", s.logPath(), "--save", "", "--appendonly", "no",
				"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
				"--cluster-node-timeout", strconv.Itoa(int(clusterNodeTimeout.Milliseconds()))}
		})
		c.nodes = append(c.nodes, s)
		addrs = append(addrs, s.Addr())
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	args := append(append([]string{"--cluster", "create"}, addrs...), "--cluster-replicas", "1", "--cluster-yes")
	if out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	c.WaitStable()
	return c
}

// Addrs are the addresses of every node, a seed list for a client.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.nodes))
	for i, s := range c.nodes {
		out[i] = s.Addr()
	}
	return out
}

// ClusterNode is one line of CLUSTER NODES.
type ClusterNode struct {
	ID, Addr string
	Master   bool
	MasterID string // a replica's master
	Failed   bool   // flagged fail or fail? by the node asked
	Slots    []string
}

// running reports whether s's process is up (not killed by the test).
func (s *Server) running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd != nil
}

// live are the nodes the test has not killed.
func (c *Cluster) live() []*Server {
	var out []*Server
	for _, s := range c.nodes {
		if s.running() {
			out = append(out, s)
		}
	}
	return out
}

// view is CLUSTER NODES as s sees it.
func (c *Cluster) view(s *Server) ([]ClusterNode, error) {
	v, err := s.Do(5*time.Second, "CLUSTER", "NODES")
	if err != nil {
		return nil, err
	}
	text, ok := v.(string)
	if !ok {
		return nil, fmt.Errorf("CLUSTER NODES answered %v", v)
	}
	var out []ClusterNode
	for line := range strings.Lines(text) {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		n := ClusterNode{ID: f[0], Addr: addr, MasterID: f[3], Slots: f[8:]}
		for flag := range strings.SplitSeq(f[2], ",") {
			switch flag {
			case "master":
				n.Master = true
			case "fail", "fail?":
				n.Failed = true
			}
		}
		out = append(out, n)
	}
	return out, nil
}

// Nodes is CLUSTER NODES as a live node sees it.
func (c *Cluster) Nodes() []ClusterNode {
	c.t.Helper()
	v, err := c.view(c.live()[0])
	if err != nil {
		c.t.Fatal(err)
	}
	return v
}

func (c *Cluster) server(addr string) *Server {
	for _, s := range c.nodes {
		if s.Addr() == addr {
			return s
		}
	}
	c.t.Fatalf("no node at %s", addr)
	return nil
}

// Slot is the hash slot of key (CLUSTER KEYSLOT).
func (c *Cluster) Slot(key string) int {
	c.t.Helper()
	v, err := c.live()[0].Do(5*time.Second, "CLUSTER", "KEYSLOT", key)
	n, ok := v.(int64)
	if err != nil || !ok {
		c.t.Fatalf("CLUSTER KEYSLOT %s: %v %v", key, v, err)
	}
	return int(n)
}

// ownerIn is the master that serves slot in nodes, or nil.
func ownerIn(nodes []ClusterNode, slot int) *ClusterNode {
	for i, n := range nodes {
		if !n.Master || n.Failed {
			continue
		}
		for _, r := range n.Slots {
			if a, b, ok := slotRange(r); ok && a <= slot && slot <= b {
				return &nodes[i]
			}
		}
	}
	return nil
}

// owners is the ID of the master serving each slot in nodes ("" for none).
func owners(nodes []ClusterNode) []string {
	out := make([]string, 16384)
	for _, n := range nodes {
		if !n.Master || n.Failed {
			continue
		}
		for _, r := range n.Slots {
			if a, b, ok := slotRange(r); ok {
				for s := max(a, 0); s <= min(b, 16383); s++ {
					out[s] = n.ID
				}
			}
		}
	}
	return out
}

// slotRange parses a slot field of CLUSTER NODES ("5" or "0-5460"); a
// field of a slot being migrated or imported ("[…]") is not one.
func slotRange(r string) (lo, hi int, ok bool) {
	if strings.HasPrefix(r, "[") {
		return 0, 0, false
	}
	a, b, isRange := strings.Cut(r, "-")
	lo, err := strconv.Atoi(a)
	if err != nil {
		return 0, 0, false
	}
	hi = lo
	if isRange {
		if hi, err = strconv.Atoi(b); err != nil {
			return 0, 0, false
		}
	}
	return lo, hi, true
}

// MasterOf is the master serving slot.
func (c *Cluster) MasterOf(slot int) *Server {
	c.t.Helper()
	n := ownerIn(c.Nodes(), slot)
	if n == nil {
		c.t.Fatalf("no master serves slot %d", slot)
	}
	return c.server(n.Addr)
}

// Masters are the live masters.
func (c *Cluster) Masters() []*Server {
	c.t.Helper()
	var out []*Server
	for _, n := range c.Nodes() {
		if n.Master && !n.Failed {
			out = append(out, c.server(n.Addr))
		}
	}
	return out
}

// ReplicaOf is a live replica of master: one that master lists as online
// (INFO replication) and that every live node knows as master's replica
// (after a failover the nodes learn the new roles by gossip). It waits for
// one up to 30s.
func (c *Cluster) ReplicaOf(master *Server) *Server {
	c.t.Helper()
	id := master.DoString("CLUSTER", "MYID")
	deadline := time.Now().Add(30 * time.Second)
	for {
		if r := c.replicaOf(master, id); r != nil {
			return r
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("master %s has no live replica within 30s", master.Addr())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (c *Cluster) replicaOf(master *Server, id string) *Server {
	v, err := master.Do(5*time.Second, "INFO", "replication")
	info, _ := v.(string)
	if err != nil {
		return nil
	}
	for line := range strings.Lines(info) {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "slave") || !strings.Contains(line, "state=online") {
			continue
		}
		var ip, port string
		for f := range strings.SplitSeq(line[strings.IndexByte(line, ':')+1:], ",") {
			if v, ok := strings.CutPrefix(f, "ip="); ok {
				ip = v
			}
			if v, ok := strings.CutPrefix(f, "port="); ok {
				port = v
			}
		}
		addr := ip + ":" + port
		known := true
		for _, s := range c.live() {
			nodes, err := c.view(s)
			if err != nil || !slices.ContainsFunc(nodes, func(n ClusterNode) bool {
				return n.Addr == addr && !n.Master && n.MasterID == id && !n.Failed
			}) {
				known = false
				break
			}
		}
		if known {
			for _, s := range c.live() {
				if s.Addr() == addr {
					return s
				}
			}
		}
	}
	return nil
}

// stable reports, with the reason it is not, whether every live node says
// the cluster is ok, all agree on the owner of every slot, no slot is being
// migrated, and every live replica's link to its master is up.
func (c *Cluster) stable() (bool, string) {
	var first []string
	for _, s := range c.live() {
		info, err := s.Do(5*time.Second, "CLUSTER", "INFO")
		if err != nil {
			return false, err.Error()
		}
		if str, _ := info.(string); !strings.Contains(str, "cluster_state:ok") {
			return false, s.Addr() + " not ok"
		}
		v, err := c.view(s)
		if err != nil {
			return false, err.Error()
		}
		for _, n := range v {
			if slices.ContainsFunc(n.Slots, func(r string) bool { return strings.HasPrefix(r, "[") }) {
				return false, "slot migration under way"
			}
		}
		own := owners(v)
		for slot, id := range own {
			if id == "" || (first != nil && first[slot] != id) {
				return false, fmt.Sprintf("slot %d: unserved, or the nodes disagree", slot)
			}
		}
		first = own
		repl, err := s.Do(5*time.Second, "INFO", "replication")
		if err != nil {
			return false, err.Error()
		}
		str, _ := repl.(string)
		if strings.Contains(str, "role:slave") && !strings.Contains(str, "master_link_status:up") {
			return false, s.Addr() + ": replica not in sync"
		}
	}
	return true, ""
}

// WaitStable waits until the cluster is stable (see stable), up to 30s.
func (c *Cluster) WaitStable() {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok, why := c.stable()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("cluster not stable within 30s: %s", why)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Failover promotes master's replica with CLUSTER FAILOVER (a coordinated
// failover: the replica catches up first) and waits until the cluster is
// stable with it as the master. It returns the new master.
func (c *Cluster) Failover(master *Server) *Server {
	c.t.Helper()
	replica := c.ReplicaOf(master)
	if v := replica.DoString("CLUSTER", "FAILOVER"); v != "OK" {
		c.t.Fatalf("CLUSTER FAILOVER: %s", v)
	}
	c.WaitMaster(replica)
	return replica
}

// KillMaster kills master (SIGKILL) and waits until the cluster has
// promoted its replica by itself (after about two node timeouts) and is
// stable again without it. Writes the replica had not received are lost,
// as in a real crash. It returns the new master.
func (c *Cluster) KillMaster(master *Server) *Server {
	c.t.Helper()
	replica := c.ReplicaOf(master)
	master.Kill()
	c.WaitMaster(replica)
	return replica
}

// WaitMaster waits until s says it is a master and the cluster is stable.
func (c *Cluster) WaitMaster(s *Server) {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		v, err := s.Do(5*time.Second, "INFO", "replication")
		if str, _ := v.(string); err == nil && strings.Contains(str, "role:master") {
			if ok, _ := c.stable(); ok {
				return
			}
		}
		if time.Now().After(deadline) {
			_, why := c.stable()
			c.t.Fatalf("%s not a master of a stable cluster within 30s: %s", s.Addr(), why)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// MoveSlot moves slot to the master to, as redis-cli --cluster reshard
// does: IMPORTING on to, MIGRATING on its owner, MIGRATE of its keys one
// at a time, then SETSLOT NODE on every master. Halfway through the keys
// (with at least one moved when the slot has any) it calls midway, so that
// a test can run calls against a slot whose keys are on two nodes.
func (c *Cluster) MoveSlot(slot int, to *Server, midway func()) {
	c.t.Helper()
	from := c.MasterOf(slot)
	if from == to {
		c.t.Fatalf("slot %d is already on %s", slot, to.Addr())
	}
	fromID, toID := from.DoString("CLUSTER", "MYID"), to.DoString("CLUSTER", "MYID")
	sl := strconv.Itoa(slot)
	to.DoString("CLUSTER", "SETSLOT", sl, "IMPORTING", fromID)
	from.DoString("CLUSTER", "SETSLOT", sl, "MIGRATING", toID)
	v, err := from.Do(10*time.Second, "CLUSTER", "GETKEYSINSLOT", sl, "100000")
	keys, ok := v.([]any)
	if err != nil || !ok {
		c.t.Fatalf("CLUSTER GETKEYSINSLOT: %v %v", v, err)
	}
	host, port, _ := strings.Cut(to.Addr(), ":")
	migrate := func(k string) {
		// A key that expired meanwhile answers +NOKEY.
		if _, err := from.Do(10*time.Second, "MIGRATE", host, port, k, "0", "5000"); err != nil {
			c.t.Fatalf("MIGRATE %s: %v", k, err)
		}
	}
	half := (len(keys) + 1) / 2
	for _, k := range keys[:half] {
		migrate(k.(string))
	}
	if midway != nil {
		midway()
	}
	// Keys written to the slot on the old owner meanwhile move too.
	for {
		v, err := from.Do(10*time.Second, "CLUSTER", "GETKEYSINSLOT", sl, "100")
		rest, ok := v.([]any)
		if err != nil || !ok {
			c.t.Fatalf("CLUSTER GETKEYSINSLOT: %v %v", v, err)
		}
		if len(rest) == 0 {
			break
		}
		for _, k := range rest {
			migrate(k.(string))
		}
	}
	to.DoString("CLUSTER", "SETSLOT", sl, "NODE", toID)
	from.DoString("CLUSTER", "SETSLOT", sl, "NODE", toID)
	for _, m := range c.Masters() {
		if m != to && m != from {
			m.DoString("CLUSTER", "SETSLOT", sl, "NODE", toID)
		}
	}
	c.WaitStable()
	if got := c.MasterOf(slot); got != to {
		c.t.Fatalf("slot %d is on %s after the move, want %s", slot, got.Addr(), to.Addr())
	}
}

// WaitReplicated waits until every replica of master has acknowledged
// master's whole replication stream (their offsets in INFO replication).
func (c *Cluster) WaitReplicated(master *Server) {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		v, err := master.Do(5*time.Second, "INFO", "replication")
		str, _ := v.(string)
		if err == nil && replicasCaughtUp(str) {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("replicas of %s not caught up within 30s:\n%s", master.Addr(), str)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// replicasCaughtUp reads INFO replication of a master: at least one
// replica, and every replica's offset at master_repl_offset.
func replicasCaughtUp(info string) bool {
	var offset string
	var replicas []string
	for line := range strings.Lines(info) {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "master_repl_offset:"); ok {
			offset = v
		}
		if strings.HasPrefix(line, "slave") && strings.Contains(line, "offset=") {
			for f := range strings.SplitSeq(line[strings.IndexByte(line, ':')+1:], ",") {
				if v, ok := strings.CutPrefix(f, "offset="); ok {
					replicas = append(replicas, v)
				}
			}
		}
	}
	if offset == "" || len(replicas) == 0 {
		return false
	}
	for _, r := range replicas {
		if r != offset {
			return false
		}
	}
	return true
}

// CutReplica cuts replica off its master's replication stream and keeps it
// off (a wrong masterauth fails every reconnection), as a network partition
// would: writes the master acknowledges from now on never reach it. The
// cluster bus is untouched, so the replica can still be promoted.
func (c *Cluster) CutReplica(replica *Server) {
	c.t.Helper()
	replica.DoString("CONFIG", "SET", "masterauth", "cut-off-by-the-test")
	if _, err := replica.Do(5*time.Second, "CLIENT", "KILL", "TYPE", "master"); err != nil {
		c.t.Fatalf("CLIENT KILL TYPE master: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		v, err := replica.Do(5*time.Second, "INFO", "replication")
		if str, _ := v.(string); err == nil && strings.Contains(str, "master_link_status:down") {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s still replicating after 30s", replica.Addr())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

package testredis

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// SentinelMaster is the name under which a Sentinel set watches its master.
const SentinelMaster = "mymaster"

// Sentinel is a Sentinel deployment on loopback for one test: a master, a
// replica, and three Sentinels watching them, killed by the test's cleanup.
type Sentinel struct {
	t         testing.TB
	servers   [2]*Server // the master and the replica, in the order started
	sentinels []*Server
}

// StartSentinel starts a master, its replica and three Sentinels
// (redis-server --sentinel) with a quorum of 2 and a down-after of 1s, and
// waits until the replica is in sync and every Sentinel knows the replica
// and the other Sentinels.
func StartSentinel(t testing.TB) *Sentinel {
	t.Helper()
	st := &Sentinel{t: t}
	st.servers[0] = Start(t)
	st.servers[1] = startArgs(t, func(s *Server) []string {
		return []string{"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--dir", s.dir,
			"--logfile", s.logPath(), "--save", "", "--appendonly", "no",
			"--replicaof", "127.0.0.1", strconv.Itoa(st.servers[0].port)}
	})
	for range 3 {
		st.sentinels = append(st.sentinels, startArgs(t, func(s *Server) []string {
			conf := filepath.Join(s.dir, "sentinel.conf")
			text := fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d 2\n"+
				"sentinel down-after-milliseconds %[1]s 1000\n"+
				"sentinel failover-timeout %[1]s 10000\n"+
				"sentinel parallel-syncs %[1]s 1\n", SentinelMaster, st.servers[0].port)
			if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
			return []string{conf, "--sentinel", "--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
				"--dir", s.dir, "--logfile", s.logPath()}
		}))
	}
	st.waitFor(func() (bool, string) {
		if ok, why := st.synced(st.servers[0], st.servers[1]); !ok {
			return false, why
		}
		for _, s := range st.sentinels {
			v, err := s.Do(5*time.Second, "SENTINEL", "MASTER", SentinelMaster)
			f, _ := v.([]any)
			if err != nil {
				return false, err.Error()
			}
			fields := map[string]string{}
			for i := 0; i+1 < len(f); i += 2 {
				k, _ := f[i].(string)
				v, _ := f[i+1].(string)
				fields[k] = v
			}
			if fields["num-slaves"] != "1" || fields["num-other-sentinels"] != "2" {
				return false, fmt.Sprintf("sentinel %s: %s replicas, %s other sentinels", s.Addr(), fields["num-slaves"], fields["num-other-sentinels"])
			}
		}
		return true, ""
	})
	return st
}

// Addrs are the Sentinels' addresses.
func (st *Sentinel) Addrs() []string {
	out := make([]string, len(st.sentinels))
	for i, s := range st.sentinels {
		out[i] = s.Addr()
	}
	return out
}

// Primary is the server the Sentinels name as the master now.
func (st *Sentinel) Primary() *Server {
	st.t.Helper()
	v, err := st.sentinels[0].Do(5*time.Second, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", SentinelMaster)
	f, _ := v.([]any)
	if err != nil || len(f) != 2 {
		st.t.Fatalf("SENTINEL GET-MASTER-ADDR-BY-NAME: %v %v", v, err)
	}
	addr := f[0].(string) + ":" + f[1].(string)
	for _, s := range st.servers {
		if s.Addr() == addr {
			return s
		}
	}
	st.t.Fatalf("the Sentinels name %s, not one of the servers", addr)
	return nil
}

// Failover asks a Sentinel for a failover (SENTINEL FAILOVER) and waits
// until every Sentinel names the replica as the master, it says it is one,
// and the old master is its replica, in sync. It returns the new master.
func (st *Sentinel) Failover() *Server {
	st.t.Helper()
	old := st.Primary()
	next := st.servers[0]
	if next == old {
		next = st.servers[1]
	}
	if v := st.sentinels[0].DoString("SENTINEL", "FAILOVER", SentinelMaster); v != "OK" {
		st.t.Fatalf("SENTINEL FAILOVER: %s", v)
	}
	st.waitFor(func() (bool, string) {
		for _, s := range st.sentinels {
			v, err := s.Do(5*time.Second, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", SentinelMaster)
			f, _ := v.([]any)
			if err != nil || len(f) != 2 || f[0].(string)+":"+f[1].(string) != next.Addr() {
				return false, fmt.Sprintf("sentinel %s names %v", s.Addr(), v)
			}
		}
		return st.synced(next, old)
	})
	return next
}

// synced reports whether master says it is a master and replica that it
// replicates it, with its link up.
func (st *Sentinel) synced(master, replica *Server) (bool, string) {
	v, err := master.Do(5*time.Second, "INFO", "replication")
	if str, _ := v.(string); err != nil || !strings.Contains(str, "role:master") {
		return false, master.Addr() + " is not a master"
	}
	v, err = replica.Do(5*time.Second, "INFO", "replication")
	str, _ := v.(string)
	if err != nil || !strings.Contains(str, "master_port:"+strconv.Itoa(master.port)) || !strings.Contains(str, "master_link_status:up") {
		return false, replica.Addr() + " is not in sync with " + master.Addr()
	}
	return true, ""
}

// waitFor polls cond until it holds, or fails the test after 30s.
func (st *Sentinel) waitFor(cond func() (bool, string)) {
	st.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			st.t.Fatalf("sentinel set: not within 30s: %s", why)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

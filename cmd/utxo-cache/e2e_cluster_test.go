package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/utxo-cache/utxo-cache/internal/testredis"
)

// serveOnRedis runs the model chain of TestServeEndToEndRedis on a server
// whose Redis tier is given by flags, calling disturb between rounds of
// steps, each step checked against the model (every answer 200 and the
// model's, also while the tier is degraded).
func serveOnRedis(t *testing.T, flags []string, disturbances []func(steps func(int))) {
	dir := filepath.Join(t.TempDir(), "store")
	r := newE2ERun(t, e2eSeedFor(t))
	args := append([]string{"--memory-cache-bytes", "0", "--redis-timeout", "250ms", "--redis-admission", "all"}, flags...)
	r.p = startServe(t, dir, args...)
	steps := func(n int) {
		for range n {
			r.randomStep()
			r.check()
			r.check() // the second reads what the first filled
		}
	}
	serving := func(what string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for hits := r.p.redisHits(); r.p.redisHits() == hits; {
			if time.Now().After(deadline) {
				t.Fatalf("no read hit Redis within 30s %s", what)
			}
			r.check()
			time.Sleep(50 * time.Millisecond)
		}
	}
	serving("of the start")
	steps(8)
	for i, d := range disturbances {
		d(steps)
		steps(4)
		serving("after disturbance " + string(rune('1'+i)))
		steps(4)
	}
	r.p.stop()
}

// TestServeEndToEndRedisCluster runs the model chain on a Redis Cluster
// (three masters, three replicas) given by --redis-cluster, while a
// master is failed over, a bucket's slot is moved to another master (with
// steps run while its keys are on both), and a master is killed and its
// replica promoted: every answer is the model's, and reads hit Redis again
// after each.
func TestServeEndToEndRedisCluster(t *testing.T) {
	t.Parallel()
	c := testredis.StartCluster(t)
	slot := c.Slot("{utxo-cache:64.0}:F") // the default namespace's bucket 0
	serveOnRedis(t, []string{"--redis-cluster", strings.Join(c.Addrs()[:2], ",")}, []func(func(int)){
		func(steps func(int)) { c.Failover(c.MasterOf(slot)) },
		func(steps func(int)) {
			var to *testredis.Server
			for _, m := range c.Masters() {
				if m != c.MasterOf(slot) {
					to = m
				}
			}
			c.MoveSlot(slot, to, func() { steps(3) })
		},
		func(steps func(int)) {
			c.KillMaster(c.MasterOf(slot))
			steps(2)
		},
	})
}

// TestServeEndToEndRedisSentinel runs the model chain on a primary found
// through Sentinels (--redis-sentinel-master, --redis-sentinels) while the
// Sentinels fail it over: every answer is the model's, and reads hit Redis
// again after.
func TestServeEndToEndRedisSentinel(t *testing.T) {
	t.Parallel()
	st := testredis.StartSentinel(t)
	serveOnRedis(t, []string{"--redis-sentinel-master", testredis.SentinelMaster, "--redis-sentinels", strings.Join(st.Addrs(), ",")},
		[]func(func(int)){func(steps func(int)) { st.Failover() }})
}

package main

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/utxo-cache/utxo-cache/internal/netlab"
)

// The network tests run the writer and its replicas on hosts of their own
// (internal/netlab: network namespaces on a private switch, each process run
// inside its host with `ip netns exec`), so that the replication link is a
// real one the test can cut, block, slow down and break: a replica cut off
// from its writer (its link down at the switch, or the writer's packets
// dropped by iptables inside it), and replicas that follow their writer
// through a fault-injecting proxy (100 ms added each way, connections
// dropped at random moments); a Redis tier the writer shares with a
// partitioned replica on a host of its own. Reads are checked against
// internal/model at the seq each answer names, and a reader of every replica
// checks that its X-Commit-Seq never goes back (seqWatch).
//
// To add a case over another transport (a replica following a distributed
// log rather than the writer's HTTP change log): netLab with more hosts,
// startWriter, run the log's servers on some of them, as netRedis runs
// redis-server (host.Command(path, args…), listening on host.AddrPort(port),
// their cluster routes naming the other hosts' addresses), start each
// replica with nt.replica(host, URL of the log, extra flags…), and cut
// (host.Cut), block (a.Block(b): a node cut off from the other two, a
// replica cut off from the log) or proxy (netlab.StartProxy) the links
// between them; converged, seqWatch and the model checks do not care where
// the changes came from.
// network_nats_test.go does so for NATS JetStream.

// netPort is the port every process listens on inside its own host.
const netPort = 8080

// netTest is a writer on a host of a lab and its replicas, each on a host of
// its own, with the model of the chain fed to the writer.
type netTest struct {
	*replicaTest
	lab    *netlab.Lab
	writer *netlab.Host
	// bals is the writer's balance of every address at every seq, as the
	// model computed it (answers read at a past seq are compared with it).
	bals map[uint64]map[string]e2eBalance
}

// netReplica is a replica on a host.
type netReplica struct {
	*testReplica
	host *netlab.Host
}

// netLab builds a lab with a host for the writer and one for each name.
func netLab(t *testing.T, names ...string) (*netTest, []*netlab.Host) {
	t.Helper()
	seed := e2eSeedFor(t)
	lab := netlab.New(t)
	nt := &netTest{lab: lab, writer: lab.Host("writer"), bals: map[uint64]map[string]e2eBalance{}}
	var hs []*netlab.Host
	for _, name := range names {
		hs = append(hs, lab.Host(name))
	}
	nt.replicaTest = &replicaTest{t: t, r: newE2ERun(t, seed), wdir: filepath.Join(t.TempDir(), "writer"),
		faults: rand.New(rand.NewPCG(seed, 0xfa)), hist: map[uint64]e2eState{}}
	nt.record()
	return nt, hs
}

// startWriter starts the writer on its host, with extra flags, and waits
// until it is ready.
func (nt *netTest) startWriter(extra ...string) {
	nt.t.Helper()
	args := append([]string{"serve", "--listen", nt.writer.AddrPort(netPort), "--data-dir", nt.wdir,
		"--prune-depth", strconv.Itoa(e2ePruneDepth), "--rollback-window", strconv.Itoa(e2eRollbackWindow),
		"--shutdown-timeout", e2eShutdownTimeout.String(), "--log-level", "warn",
		"--admin-token", e2eToken, "--replication-token", replToken,
		// The change log keeps far more than a partition or a dropped
		// connection makes a replica miss: it resumes, never bootstraps again.
		"--replication-retention", "100000"}, extra...)
	nt.r.p = launchServeCmd(nt.t, nt.writer.Command(binary, args...), nt.writer.HTTPClient(20*time.Second), args)
	nt.r.p.waitReady(time.Now().Add(60 * time.Second))
}

// netRedis starts a redis-server on h (nothing saved) and returns its URL
// once it answers PING from inside h. It fails the test when redis-server
// is not installed.
func netRedis(t *testing.T, h *netlab.Host) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal("redis-server not found: install it with `apt-get install redis-server redis-tools`")
	}
	dir := t.TempDir()
	cmd := h.Command(bin, "--port", "6379", "--bind", h.Addr.String(), "--protected-mode", "no",
		"--dir", dir, "--save", "", "--appendonly", "no", "--logfile", filepath.Join(dir, "redis.log"))
	if err := cmd.Start(); err != nil {
		t.Fatalf("start redis-server on %s: %v", h, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		c, err := h.DialContext(ctx, "tcp", h.AddrPort(6379))
		cancel()
		if err == nil {
			_ = c.SetDeadline(time.Now().Add(time.Second))
			buf := make([]byte, 7)
			_, err = c.Write([]byte("*1\r\n$4\r\nPING\r\n"))
			if err == nil {
				_, err = io.ReadFull(c, buf)
			}
			c.Close()
			if err == nil && string(buf) == "+PONG\r\n" {
				return "redis://" + h.AddrPort(6379)
			}
		}
		select {
		case <-exited:
			log, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
			t.Fatalf("redis-server on %s exited:\n%s", h, log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server on %s: no PONG within 10s: %v", h, err)
		}
		time.Sleep(10 * time.Millisecond) // not listening yet: nothing to wait on but a retry
	}
}

// record notes the writer's state and balances at the model's seq.
func (nt *netTest) record() {
	nt.replicaTest.record()
	m := nt.r.m
	bals := map[string]e2eBalance{}
	for _, a := range nt.r.gen.Addresses() {
		mb := m.Balance(a)
		b := e2eBalance{Tip: tipOf(m.Tip()), Address: a, Value: mb.Value.String(), Assets: []e2eAsset{}, UtxoCount: mb.Count}
		for _, s := range mb.Assets {
			b.Assets = append(b.Assets, e2eAsset{hex.EncodeToString(s.Policy), hex.EncodeToString(s.Name), s.Quantity.String()})
		}
		bals[a] = b
	}
	nt.bals[nt.r.seq] = bals
}

// steps takes n random steps on the writer, calling acked with the seq
// and the moment of every change's acknowledgement.
func (nt *netTest) steps(n int, acked func(seq uint64, at time.Time)) {
	for range n {
		before := nt.r.seq
		nt.r.randomStep()
		at := time.Now()
		nt.record()
		if nt.r.seq != before && acked != nil {
			acked(nt.r.seq, at)
		}
	}
}

// replica starts a replica on host h following writerURL and waits
// until it is ready; its reader (seqWatch) follows it from inside h.
func (nt *netTest) replica(h *netlab.Host, writerURL string, extra ...string) *netReplica {
	nt.t.Helper()
	rp := &netReplica{testReplica: &testReplica{name: "replica " + h.Name, dir: filepath.Join(nt.t.TempDir(), h.Name)}, host: h}
	rp.watch = newSeqWatchClient(nt.t, rp.name, h.HTTPClient(10*time.Second))
	args := append([]string{"serve", "--replica-of", writerURL, "--replication-token", replToken,
		"--data-dir", rp.dir, "--listen", h.AddrPort(netPort), "--shutdown-timeout", e2eShutdownTimeout.String(),
		"--log-level", "info"}, extra...)
	rp.p = launchServeCmd(nt.t, h.Command(binary, args...), h.HTTPClient(20*time.Second), args)
	rp.watch.follow(rp.p.base)
	rp.p.waitReady(time.Now().Add(replDeadline))
	nt.replicas = append(nt.replicas, rp.testReplica)
	return rp
}

// netTip is GET /v1/tip on a replica, decoded.
type netTip struct {
	seq uint64
	e2eState
	Replication e2eReplication `json:"replication"`
}

func (rp *netReplica) tip(t *testing.T) netTip {
	t.Helper()
	res, err := rp.p.try(http.MethodGet, "/v1/tip")
	if err != nil || res.code != http.StatusOK {
		t.Fatalf("%s: GET /v1/tip: %v %v", rp.name, res, err)
	}
	var st netTip
	strictDecode(t, rp.name+" tip", res, &st)
	if st.seq, err = strconv.ParseUint(res.hdr.Get("X-Commit-Seq"), 10, 64); err != nil {
		t.Fatalf("%s: GET /v1/tip: X-Commit-Seq %q", rp.name, res.hdr.Get("X-Commit-Seq"))
	}
	return st
}

// TestReplicaPartitioned: two replicas on hosts of their own are cut off
// from their writer, one by its link going down at the switch, the other by
// dropping the writer's packets (iptables, inside it), while the writer
// moves on. Each keeps answering reads from its last state (X-Commit-Seq
// steady, every read the model's at that seq), stays ready until it has
// not heard from the writer for 30 s (docs/replication.md, readiness), then
// answers /readyz 503 saying so; once its link heals it follows again by
// itself and converges to the writer's state and digest.
func TestReplicaPartitioned(t *testing.T) {
	t.Parallel()
	nt, hosts := netLab(t, "cut", "blocked", "redis")
	// The writer and the blocked replica share a Redis tier on a host of
	// its own, which the partition leaves reachable: while the writer
	// fills it with newer answers, the replica must not serve them.
	redisURL := netRedis(t, hosts[2])
	nt.startWriter("--redis-url", redisURL, "--redis-timeout", "250ms", "--redis-admission", "all")
	wurl := "http://" + nt.writer.AddrPort(netPort)
	cut := nt.replica(hosts[0], wurl)
	blocked := nt.replica(hosts[1], wurl, "--redis-url", redisURL, "--redis-timeout", "250ms", "--redis-admission", "all", "--memory-cache-bytes", "0")
	reps := []*netReplica{cut, blocked}
	began := time.Now()
	phase := func(name string) {
		t.Logf("%4.1fs %s: seq %d, tip %s", time.Since(began).Seconds(), name, nt.r.seq, nt.r.m.Tip())
	}

	phase("chain")
	nt.steps(12, nil)
	nt.converged(true)

	phase("partition")
	cut.host.Cut()
	blocked.host.Block(nt.writer)
	partitioned := time.Now()
	held := nt.r.seq
	// Both still answer every read, from the state they had.
	nt.converged(false)
	// The writer moves on; they cannot know.
	for nt.r.seq < held+3 {
		nt.steps(1, nil)
	}
	want := nt.hist[held]
	// The writer's reads fill the shared tier at its new seq; the blocked
	// replica's balances stay those of its own state.
	nt.sample()
	hits := blocked.p.redisHits()
	for _, a := range nt.r.gen.Addresses() {
		res := blocked.p.get("/v1/addresses/" + escapePath(a) + "/balance")
		var got e2eBalance
		strictDecode(t, "balance", res, &got)
		if seq := res.hdr.Get("X-Commit-Seq"); res.code != http.StatusOK || seq != strconv.FormatUint(held, 10) || jsonOf(got) != jsonOf(nt.bals[held][a]) {
			t.Fatalf("%s, partitioned at seq %d, sharing the writer's Redis: balance of %s %s at X-Commit-Seq %s; the writer had %s",
				blocked.name, held, a, res, seq, jsonOf(nt.bals[held][a]))
		}
	}
	t.Logf("%s: balances of its own state while the writer filled the shared tier (%v Redis hits before, %v after)",
		blocked.name, hits, blocked.p.redisHits())
	// Each stays ready while it heard from the writer within the last 30 s
	// (read before /readyz: the contact it reports can only be older
	// there), and is not ready once it has not for longer (read after).
	const contactTimeout = 30 * time.Second
	for _, rp := range reps {
		tick := time.NewTicker(100 * time.Millisecond) // pacing of the polls
		for unready := false; !unready; {
			st := rp.tip(t)
			if st.seq != held || jsonOf(st.e2eState) != jsonOf(want) || st.Replication.Seq != held || st.Replication.WriterSeq != held {
				t.Fatalf("%s, partitioned at seq %d: answered %s at X-Commit-Seq %d; the writer had %s", rp.name, held, jsonOf(st), st.seq, jsonOf(want))
			}
			res, err := rp.p.try(http.MethodGet, "/readyz")
			if err != nil {
				t.Fatalf("%s: /readyz: %v", rp.name, err)
			}
			switch res.code {
			case http.StatusOK:
				if st.Replication.LastContactMs > contactTimeout.Milliseconds() {
					t.Fatalf("%s: ready, having not heard from the writer for %d ms", rp.name, st.Replication.LastContactMs)
				}
			case http.StatusServiceUnavailable:
				after := rp.tip(t)
				if !strings.Contains(string(res.body), "has not heard from the writer for") || after.Replication.LastContactMs < contactTimeout.Milliseconds() {
					t.Fatalf("%s: /readyz %s with last contact %d ms", rp.name, res, after.Replication.LastContactMs)
				}
				t.Logf("%s: not ready %.1fs after the partition, last contact %d ms ago: %s",
					rp.name, time.Since(partitioned).Seconds(), after.Replication.LastContactMs, res.body)
				unready = true
			default:
				t.Fatalf("%s: /readyz %s", rp.name, res)
			}
			// The last contact came before the partition: a replica still
			// ready well past 30 s after it would be a failure.
			if !unready && time.Since(partitioned) > contactTimeout+15*time.Second {
				t.Fatalf("%s still ready %v after the partition: %s", rp.name, time.Since(partitioned), res)
			}
			if !unready {
				<-tick.C
			}
		}
		tick.Stop()
	}

	phase("heal")
	cut.host.Heal()
	blocked.host.Unblock(nt.writer)
	healed := time.Now()
	for _, rp := range reps {
		nt.converge(rp.testReplica)
		t.Logf("%s: at the writer's seq %d %.1fs after the link healed (%v contact errors counted)", rp.name, nt.r.seq,
			time.Since(healed).Seconds(), rp.p.metric("utxo_cache_replica_contact_errors_total"))
		rp.p.waitReady(time.Now().Add(replDeadline))
	}
	nt.converged(true)
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

// writeLag is one write's replication lag on one replica: from the writer's
// acknowledgement to the replica's answer to a read with its seq as
// min_seq.
type writeLag struct {
	seq         uint64
	acked, seen time.Time
}

// lagBoundWith is the lag a write may take over a link of delay whose
// connection was dropped drops times meanwhile: bound, plus for each drop
// the replica's documented retry (a jittered delay of 0.1 s doubling on
// each failure in a row: at most 1.5 times it) and a new connection's
// request and answer (twice the delay, and some for the connection).
func lagBoundWith(bound, delay time.Duration, drops int) time.Duration {
	retry := 100 * time.Millisecond
	for range drops {
		bound += retry*3/2 + 2*delay + 50*time.Millisecond
		retry = min(2*retry, 5*time.Second)
	}
	return bound
}

// netObs is one read answered by a replica.
type netObs struct {
	seq  uint64
	addr string // "" for GET /v1/tip
	res  httpResult
}

// TestReplicasOverAFaultyLink: two replicas follow their writer through a
// proxy each (on the replica's host) that adds 100 ms each way and drops
// connections at random moments, mid-request or mid-answer, while the writer
// is fed a change every 100 ms and readers read the replicas all along.
// Every write is visible on every replica (a read with its seq as min_seq)
// within the replica's lag bound plus the link's delay, plus the retry of
// each connection dropped meanwhile and the lag of a control replica on a
// link without faults for the same write (what the machine's own load cost
// it); every answer is the model's at its X-Commit-Seq; each replica's
// X-Commit-Seq never goes back; each stays ready; and all converge to the
// writer's state and digest.
func TestReplicasOverAFaultyLink(t *testing.T) {
	t.Parallel()
	const (
		delay     = 100 * time.Millisecond
		dropMean  = time.Second
		interval  = 100 * time.Millisecond // the feed: a step every interval
		feedSteps = 80
		// maxLagBlocks is the replicas' --max-lag-blocks (the default): at
		// one change per interval, a replica ready by it is at most this
		// many intervals behind.
		maxLagBlocks = 10
		lagBound     = maxLagBlocks*interval + delay
		// schedSlack is what a busy 2-core machine may add to one
		// process's timing beyond what the control sees (each process is
		// scheduled on its own): half a second.
		schedSlack = 500 * time.Millisecond
	)
	nt, hosts := netLab(t, "a", "b", "direct")
	nt.startWriter()
	var reps []*netReplica
	var proxies []*netlab.Proxy
	for _, h := range hosts[:2] {
		p := netlab.StartProxy(t, h, "127.0.0.1:0", h, nt.writer.AddrPort(netPort),
			netlab.ProxyOptions{Delay: delay, DropMean: dropMean, Seed: nt.faults.Uint64() | 1})
		proxies = append(proxies, p)
		reps = append(reps, nt.replica(h, "http://"+p.Addr(), "--max-lag-blocks", strconv.Itoa(maxLagBlocks)))
	}
	// The control: a replica on a link of its own with no fault. Its lag
	// is what the machine itself costs a write at that moment (a busy
	// machine can stall every process for seconds), which the others' bound
	// adds: the link's faults are judged, not the machine's load.
	reps = append(reps, nt.replica(hosts[2], "http://"+nt.writer.AddrPort(netPort), "--max-lag-blocks", strconv.Itoa(maxLagBlocks)))
	control := len(reps) - 1
	nt.steps(6, nil)
	nt.converged(false)

	// What each replica's prober and reader saw.
	type seen struct {
		mu       sync.Mutex
		lags     []writeLag
		obs      []netObs
		unready  []string
		problems []string
	}
	type lagged struct {
		seq uint64
		at  time.Time
	}
	stop := make(chan struct{})
	var probers, readers sync.WaitGroup
	acks := make([]chan lagged, len(reps))
	saw := make([]*seen, len(reps))
	for i, rp := range reps {
		acks[i] = make(chan lagged, feedSteps+1)
		sw := &seen{}
		saw[i] = sw
		problem := func(format string, args ...any) {
			sw.mu.Lock()
			defer sw.mu.Unlock()
			sw.problems = append(sw.problems, fmt.Sprintf(format, args...))
		}
		// The lag of each write: from its acknowledgement by the writer to
		// the replica's answer to a read with min_seq = its seq.
		probers.Add(1)
		go func() {
			defer probers.Done()
			for a := range acks[i] {
				// A replica still behind after --max-wait (2 s) answers 503
				// behind: ask again, up to a deadline far past any bound.
				var (
					res httpResult
					err error
				)
				for deadline := time.Now().Add(replDeadline); ; {
					res, err = rp.p.try(http.MethodGet, fmt.Sprintf("/v1/tip?min_seq=%d", a.seq))
					if err != nil || res.code != http.StatusServiceUnavailable || !strings.Contains(string(res.body), `"behind"`) || time.Now().After(deadline) {
						break
					}
				}
				lag := writeLag{seq: a.seq, acked: a.at, seen: time.Now()}
				seq, _ := strconv.ParseUint(res.hdr.Get("X-Commit-Seq"), 10, 64)
				if err != nil || res.code != http.StatusOK || seq < a.seq {
					problem("min_seq=%d: %v %v at X-Commit-Seq %d", a.seq, res, err, seq)
					continue
				}
				sw.mu.Lock()
				sw.lags = append(sw.lags, lag)
				sw.obs = append(sw.obs, netObs{seq: seq, res: res})
				sw.mu.Unlock()
			}
		}()
		if i == control {
			continue
		}
		// A reader: balances of random addresses and the tip, one after
		// the other; its X-Commit-Seq must never go back.
		readers.Add(1)
		go func() {
			defer readers.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			addrs := nt.r.gen.Addresses()
			// Pacing: a read every 20 ms per replica is enough to sample
			// every state, and leaves the two cores to the replicas (a
			// starved replica would measure the machine, not the link).
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			var last uint64
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				o := netObs{}
				path := "/v1/tip"
				if rng.IntN(4) > 0 {
					o.addr = addrs[rng.IntN(len(addrs))]
					path = "/v1/addresses/" + escapePath(o.addr) + "/balance"
				}
				res, err := rp.p.try(http.MethodGet, path)
				if err != nil || res.code != http.StatusOK {
					problem("GET %s: %v %v", path, res, err)
					continue
				}
				o.res = res
				o.seq, err = strconv.ParseUint(res.hdr.Get("X-Commit-Seq"), 10, 64)
				if err != nil || o.seq < last {
					problem("GET %s: X-Commit-Seq %q after %d", path, res.hdr.Get("X-Commit-Seq"), last)
				}
				last = max(last, o.seq)
				sw.mu.Lock()
				sw.obs = append(sw.obs, o)
				sw.mu.Unlock()
				// Readiness: a replica within its lag bound, in contact.
				if rng.IntN(10) == 0 {
					// Lag is counted in blocks, from the tips' heights: a
					// replica at the empty state while the writer's chain
					// restarts at height H (the generator's chains may) is
					// "H blocks behind" for that one change. That is no
					// matter of the link.
					r, err := rp.p.try(http.MethodGet, "/readyz")
					emptyTip := err == nil && strings.Contains(string(r.body), `"tip":null`) && strings.Contains(string(r.body), "blocks behind")
					if (err != nil || r.code != http.StatusOK) && !emptyTip {
						sw.mu.Lock()
						sw.unready = append(sw.unready, fmt.Sprintf("%v %v", r, err))
						sw.mu.Unlock()
					}
				}
			}
		}()
	}

	feed := time.NewTicker(interval)
	for range feedSteps {
		<-feed.C
		nt.steps(1, func(seq uint64, at time.Time) {
			for i := range acks {
				acks[i] <- lagged{seq, at}
			}
		})
	}
	feed.Stop()
	for i := range acks {
		close(acks[i])
	}
	probers.Wait() // every write waited for (min_seq) while the readers go on
	close(stop)
	readers.Wait()
	nt.converged(true)

	controlLag := map[uint64]time.Duration{}
	for _, w := range saw[control].lags {
		controlLag[w.seq] = w.seen.Sub(w.acked)
	}
	for i, rp := range reps {
		sw := saw[i]
		if len(sw.problems) > 0 {
			t.Fatalf("%s:\n%s", rp.name, strings.Join(sw.problems, "\n"))
		}
		// Every answer is the model's at the seq it names.
		for _, o := range sw.obs {
			if o.addr == "" {
				var st struct {
					e2eState
					Replication e2eReplication `json:"replication"`
				}
				strictDecode(t, "tip", o.res, &st)
				if want, ok := nt.hist[o.seq]; !ok || jsonOf(st.e2eState) != jsonOf(want) {
					t.Fatalf("%s: GET /v1/tip at seq %d: %s; the writer had %s", rp.name, o.seq, o.res.body, jsonOf(want))
				}
				continue
			}
			var got e2eBalance
			strictDecode(t, "balance", o.res, &got)
			if want := nt.bals[o.seq][o.addr]; jsonOf(got) != jsonOf(want) {
				t.Fatalf("%s: balance of %s at seq %d: %s; the writer had %s", rp.name, o.addr, o.seq, o.res.body, jsonOf(want))
			}
		}
		if len(sw.lags) == 0 {
			t.Fatalf("%s: no write measured", rp.name)
		}
		var l []time.Duration
		if i == control {
			for _, w := range sw.lags {
				l = append(l, w.seen.Sub(w.acked))
			}
			slices.Sort(l)
			t.Logf("%s (the control, no proxy): lag of %d writes p50 %v p99 %v max %v", rp.name, len(l), l[len(l)/2], l[len(l)*99/100], l[len(l)-1])
			continue
		}
		hit := 0
		for _, w := range sw.lags {
			lag := w.seen.Sub(w.acked)
			l = append(l, lag)
			// The drops that may have delayed it: from two seconds before
			// its acknowledgement (the replica may still be waiting to
			// retry then) to its answer.
			drops := proxies[i].DropsBetween(w.acked.Add(-2*time.Second), w.seen)
			if drops > 0 {
				hit++
			}
			if bound := lagBoundWith(lagBound+controlLag[w.seq]+schedSlack, delay, drops); lag > bound {
				t.Errorf("%s: write %d took %v to be visible, over its bound %v (%d blocks at one per %v, plus the link's delay %v, plus the control's lag %v and %v of scheduling, plus the retry of %d dropped connections)",
					rp.name, w.seq, lag, bound, maxLagBlocks, interval, delay, controlLag[w.seq], schedSlack, drops)
			}
		}
		slices.Sort(l)
		st := proxies[i].Stats()
		t.Logf("%s: %d answers checked; lag of %d writes (%d near a drop) p50 %v p99 %v max %v (bound without drops %v); proxy %+v; %d of its /readyz samples not 200",
			rp.name, len(sw.obs), len(l), hit, l[len(l)/2], l[len(l)*99/100], l[len(l)-1], lagBound, st, len(sw.unready))
		if len(sw.unready) > 0 {
			t.Errorf("%s: not ready over a slow, flaky link:\n%s", rp.name, strings.Join(sw.unready, "\n"))
		}
		if st.Dropped == 0 {
			t.Errorf("%s: the proxy dropped no connection: the faults were not exercised", rp.name)
		}
	}
	for _, rp := range reps {
		rp.p.stop()
		rp.watch.close()
		rp.watch.checkHistory(t, nt.hist)
	}
	nt.r.p.stop()
}

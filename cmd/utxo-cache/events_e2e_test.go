package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The event-stream test runs a writer and a replica as real processes,
// subscribers on the replica, and kills the replica with SIGKILL while it
// streams: each subscriber resumes on the writer with Last-Event-ID, later
// some move back to the restarted replica. Every subscriber rebuilds the
// live sets of its addresses from the events alone; after each event they
// must equal the model's at the event's seq, every seq that changed them
// must have come as an event, and no id may come twice or out of order.

// liveSets are the live outputs of addresses, outpoint → value@height.
type liveSets map[string]map[string]string

// eventSubscriber is one client of the streams.
type eventSubscriber struct {
	name  string
	addrs []string

	mu     sync.Mutex
	base   string             // where it connects next
	cancel context.CancelFunc // ends the current connection
	live   liveSets
	last   uint64
	ids    []uint64
	hist   map[uint64]liveSets // its sets after each event
	conns  int
	err    error
	raw    []string // the events' names and data, for a failure's message
}

func newEventSubscriber(name, base string, addrs []string) *eventSubscriber {
	s := &eventSubscriber{name: name, addrs: addrs, base: base, live: liveSets{}, hist: map[uint64]liveSets{}}
	for _, a := range addrs {
		s.live[a] = map[string]string{}
	}
	return s
}

// move makes the subscriber resume on base: its connection is dropped.
func (s *eventSubscriber) move(base string) {
	s.mu.Lock()
	s.base = base
	cancel := s.cancel
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

func (s *eventSubscriber) lastSeq() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last, s.err
}

// run connects, reads and applies events until ctx ends; after a dropped
// connection it resumes with Last-Event-ID on fallback (the writer) unless
// moved elsewhere.
func (s *eventSubscriber) run(ctx context.Context, fallback string) {
	client := &http.Client{Transport: &http.Transport{Proxy: nil}}
	defer client.CloseIdleConnections()
	q := url.Values{}
	for _, a := range s.addrs {
		q.Add("address", a)
	}
	for ctx.Err() == nil {
		cctx, cancel := context.WithCancel(ctx)
		s.mu.Lock()
		base, last := s.base, s.last
		s.cancel = cancel
		s.conns++
		s.mu.Unlock()
		moved, err := s.stream(cctx, client, base+"/v1/events?"+q.Encode(), last)
		cancel()
		if ctx.Err() != nil {
			return
		}
		var fatal *fatalStreamError
		if errors.As(err, &fatal) {
			s.mu.Lock()
			s.err = fmt.Errorf("%s on %s: %w", s.name, base, err)
			s.mu.Unlock()
			return
		}
		if !moved {
			// The node went away (or refused the connection): resume on
			// the writer.
			s.mu.Lock()
			if s.base == base {
				s.base = fallback
			}
			s.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Millisecond): // not in a tight loop while a node is down
			}
		}
	}
}

type fatalStreamError struct{ err error }

func (e *fatalStreamError) Error() string { return e.err.Error() }

// stream reads one connection. moved reports that move ended it.
func (s *eventSubscriber) stream(ctx context.Context, client *http.Client, u string, last uint64) (moved bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return false, &fatalStreamError{err}
	}
	if last > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatUint(last, 10))
	} else {
		req.URL.RawQuery += "&after_seq=0"
	}
	resp, err := client.Do(req)
	if err != nil {
		return ctx.Err() != nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusServiceUnavailable {
		return false, errors.New("503") // a replica that is not ready: resume elsewhere
	}
	if resp.StatusCode != http.StatusOK {
		return false, &fatalStreamError{fmt.Errorf("status %d resuming after %d", resp.StatusCode, last)}
	}
	err = readEvents(bufio.NewReader(resp.Body), func(ev sseEvent) (bool, error) {
		if err := s.apply(ev); err != nil {
			return false, &fatalStreamError{err}
		}
		return true, nil
	})
	return ctx.Err() != nil, err
}

// sseEvent is one Server-Sent Event as a client reads it.
type sseEvent struct{ id, event, data string }

// readEvents reads events until fn stops or the body ends; comments are
// skipped, as an EventSource does.
func readEvents(body *bufio.Reader, fn func(sseEvent) (bool, error)) error {
	var ev sseEvent
	for {
		line, err := body.ReadString('\n')
		if err != nil {
			return err
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if ev.event != "" || ev.data != "" {
				if ok, err := fn(ev); !ok {
					return err
				}
			}
			ev = sseEvent{}
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "id: "):
			ev.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			ev.event = line[7:]
		case strings.HasPrefix(line, "data: "):
			ev.data = line[6:]
		default:
			return &fatalStreamError{fmt.Errorf("unexpected line %q", line)}
		}
	}
}

type eventOut struct {
	TxHash string `json:"tx_hash"`
	Index  uint32 `json:"index"`
}

type eventUtxo struct {
	TxHash  string `json:"tx_hash"`
	Index   uint32 `json:"index"`
	Address string `json:"address"`
	Value   string `json:"value"`
	Height  uint64 `json:"height"`
}

// apply applies one event: its id must be the next, and its keys watched.
func (s *eventSubscriber) apply(ev sseEvent) error {
	seq, err := strconv.ParseUint(ev.id, 10, 64)
	if err != nil {
		return fmt.Errorf("event id %q: %v", ev.id, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if seq <= s.last {
		return fmt.Errorf("event %d after %d: twice or out of order", seq, s.last)
	}
	var b struct {
		Seq  uint64 `json:"seq"`
		Keys []struct {
			Key      map[string]string `json:"key"`
			Created  []eventUtxo       `json:"created"`
			Spent    []eventOut        `json:"spent"`
			Removed  []eventOut        `json:"removed"`
			Restored []eventUtxo       `json:"restored"`
		} `json:"keys"`
	}
	if err := json.Unmarshal([]byte(ev.data), &b); err != nil || b.Seq != seq || len(b.Keys) == 0 {
		return fmt.Errorf("event %d (%s): %v: %s", seq, ev.event, err, ev.data)
	}
	op := func(h string, i uint32) string { return h + ":" + strconv.FormatUint(uint64(i), 10) }
	for _, k := range b.Keys {
		a := k.Key["address"]
		set := s.live[a]
		if set == nil || len(k.Key) != 1 {
			return fmt.Errorf("event %d: key %v not watched", seq, k.Key)
		}
		switch ev.event {
		case "apply":
			for _, u := range k.Created {
				if u.Address != a {
					return fmt.Errorf("event %d: created %s of %s under %s", seq, op(u.TxHash, u.Index), u.Address, a)
				}
				set[op(u.TxHash, u.Index)] = u.Value + "@" + strconv.FormatUint(u.Height, 10)
			}
			for _, o := range k.Spent {
				delete(set, op(o.TxHash, o.Index))
			}
		case "rollback":
			for _, o := range k.Removed {
				if _, ok := set[op(o.TxHash, o.Index)]; !ok {
					return fmt.Errorf("event %d: removed %s, which %s does not hold", seq, op(o.TxHash, o.Index), a)
				}
				delete(set, op(o.TxHash, o.Index))
			}
			for _, u := range k.Restored {
				set[op(u.TxHash, u.Index)] = u.Value + "@" + strconv.FormatUint(u.Height, 10)
			}
		default:
			return fmt.Errorf("event %d: kind %q", seq, ev.event)
		}
	}
	s.last = seq
	s.ids = append(s.ids, seq)
	s.raw = append(s.raw, ev.event+" "+ev.data)
	snap := liveSets{}
	for a, set := range s.live {
		snap[a] = maps.Clone(set)
	}
	s.hist[seq] = snap
	return nil
}

// modelSets are the model's live sets of addrs now.
func (rt *replicaTest) modelSets(addrs []string) liveSets {
	out := liveSets{}
	for _, a := range addrs {
		set := map[string]string{}
		for _, u := range rt.r.m.List(a, false) {
			set[u.OutPoint.String()] = strconv.FormatUint(u.Value, 10) + "@" + strconv.FormatUint(u.Height, 10)
		}
		out[a] = set
	}
	return out
}

func (l liveSets) of(addrs []string) string {
	var b strings.Builder
	for _, a := range addrs {
		fmt.Fprintf(&b, "%s=%v;", a, l[a])
	}
	return b.String()
}

func TestEventStreamsReplicaKilled(t *testing.T) {
	t.Parallel()
	seed := e2eSeedFor(t)
	rt := &replicaTest{
		t: t, r: newE2ERun(t, seed), wdir: filepath.Join(t.TempDir(), "writer"),
		// The writer's log keeps every change of the test: any resume
		// point is within its retention.
		wextra: []string{"--replication-token", replToken, "--replication-retention", "10000", "--memory-cache-bytes", "16MiB"},
		faults: rand.New(rand.NewPCG(seed, 0xe7)),
		hist:   map[uint64]e2eState{},
	}
	rt.startWriter()
	rp := &testReplica{name: "replica", dir: filepath.Join(t.TempDir(), "replica"),
		extra: []string{"--memory-cache-bytes", "16MiB", "--replication-retention", "10000"}}
	rp.watch = newSeqWatch(t, rp.name)
	rt.replicas = append(rt.replicas, rp)
	rt.start(rp)

	all := rt.r.gen.Addresses()
	snaps := map[uint64]liveSets{rt.r.seq: rt.modelSets(all)}
	step := func(n int) {
		for range n {
			rt.r.randomStep()
			snaps[rt.r.seq] = rt.modelSets(all)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	var subs []*eventSubscriber
	for i := range 4 {
		addrs := make([]string, 0, len(all))
		for _, j := range rt.faults.Perm(len(all))[:2+rt.faults.IntN(len(all)-2)] {
			addrs = append(addrs, all[j])
		}
		s := newEventSubscriber(fmt.Sprintf("subscriber %d", i), rp.p.base, addrs)
		subs = append(subs, s)
		wg.Add(1)
		go func() { defer wg.Done(); s.run(ctx, rt.r.p.base) }()
	}

	// The chain, streamed by the replica; then more of it, and the replica
	// killed while it applies and streams the last steps.
	step(15)
	rt.converge(rp)
	step(5 + rt.faults.IntN(5))
	time.Sleep(time.Duration(rt.faults.IntN(20)) * time.Millisecond) // the fault's random moment
	rt.kill(rp)
	// Its subscribers resume on the writer, which goes on.
	step(20)
	// The replica restarts from its store; half the subscribers move back
	// to it (resuming from their last id on its own log).
	rt.start(rp)
	rt.converge(rp)
	for i, s := range subs {
		if i%2 == 0 {
			s.move(rp.p.base)
		}
	}
	step(20)
	rt.converge(rp)

	// Wait until every subscriber has the last seq that changed its sets.
	final := rt.r.seq
	deadline := time.Now().Add(replDeadline)
	for _, s := range subs {
		want := uint64(0)
		for seq := uint64(1); seq <= final; seq++ {
			if snaps[seq].of(s.addrs) != snaps[seq-1].of(s.addrs) {
				want = seq
			}
		}
		for {
			last, err := s.lastSeq()
			if err != nil {
				t.Fatal(err)
			}
			if last >= want {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s is at seq %d, its addresses last changed at %d", s.name, last, want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	cancel()
	wg.Wait()
	for _, s := range subs {
		if s.err != nil {
			t.Fatal(s.err)
		}
		got := map[uint64]bool{}
		for _, seq := range s.ids {
			got[seq] = true
			if have, want := s.hist[seq].of(s.addrs), snaps[seq].of(s.addrs); have != want {
				t.Fatalf("%s after event %d: events give %s, the model %s; its events:\n%s", s.name, seq, have, want, strings.Join(s.raw, "\n"))
			}
		}
		for seq := uint64(1); seq <= final; seq++ {
			if snaps[seq].of(s.addrs) != snaps[seq-1].of(s.addrs) && !got[seq] {
				t.Fatalf("%s: change %d changed its addresses and sent no event", s.name, seq)
			}
		}
		if s.conns < 2 {
			t.Fatalf("%s connected %d times: it never resumed", s.name, s.conns)
		}
		t.Logf("%s (%d addresses): %d events up to seq %d over %d connections", s.name, len(s.addrs), len(s.ids), s.last, s.conns)
	}
}

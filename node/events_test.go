package node_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/internal/model"
	"github.com/utxo-cache/utxo-cache/node"
)

// sseEvent is one Server-Sent Event as a client reads it.
type sseEvent struct {
	id, event, data string
}

// readEvents reads events from an SSE body until fn returns false or the
// body ends; comment lines are skipped, as an EventSource does.
func readEvents(body *bufio.Reader, fn func(ev sseEvent) bool) error {
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
				if !fn(ev) {
					return nil
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
			return fmt.Errorf("unexpected line %q", line)
		}
	}
}

// eventBody is the data of an apply or rollback event.
type eventBody struct {
	Seq  uint64 `json:"seq"`
	Keys []struct {
		Key      map[string]string `json:"key"`
		Created  []eventUtxo       `json:"created"`
		Spent    []eventOutPoint   `json:"spent"`
		Removed  []eventOutPoint   `json:"removed"`
		Restored []eventUtxo       `json:"restored"`
	} `json:"keys"`
}

type eventOutPoint struct {
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

func (u eventUtxo) op() string { return fmt.Sprintf("%s:%d", u.TxHash, u.Index) }

// liveOf renders a model listing as a watcher keeps it: outpoint → the
// output's value and height.
func liveOf(us []chain.Utxo) map[string]string {
	m := map[string]string{}
	for _, u := range us {
		m[u.OutPoint.String()] = fmt.Sprintf("%d@%d", u.Value, u.Height)
	}
	return m
}

// snapshots are the model's listing of every address after each seq,
// recorded before the change is made, so a subscriber never finds one
// missing.
type snapshots struct {
	mu sync.Mutex
	at map[uint64]map[string]map[string]string
}

func (s *snapshots) put(seq uint64, m *model.Model, addrs []string) {
	snap := map[string]map[string]string{}
	for _, a := range addrs {
		snap[a] = liveOf(m.List(a, false))
	}
	s.mu.Lock()
	s.at[seq] = snap
	s.mu.Unlock()
}

func (s *snapshots) get(seq uint64) map[string]map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.at[seq]
}

// watcher rebuilds the live sets of its addresses from events alone.
type watcher struct {
	// events, rollbacks and conns count what the watcher saw.
	events, rollbacks, conns int
	addrs                    []string
	live                     map[string]map[string]string
	last                     uint64
}

// apply applies one event and checks it is the next one.
func (w *watcher) apply(ev sseEvent) error {
	seq, err := strconv.ParseUint(ev.id, 10, 64)
	if err != nil {
		return fmt.Errorf("event id %q: %v", ev.id, err)
	}
	if seq <= w.last {
		return fmt.Errorf("event %d after %d: out of order or twice", seq, w.last)
	}
	var b eventBody
	if err := json.Unmarshal([]byte(ev.data), &b); err != nil {
		return fmt.Errorf("event %d: %v: %s", seq, err, ev.data)
	}
	if b.Seq != seq || len(b.Keys) == 0 {
		return fmt.Errorf("event %d: seq %d, %d keys", seq, b.Seq, len(b.Keys))
	}
	for _, k := range b.Keys {
		a := k.Key["address"]
		set := w.live[a]
		if set == nil || len(k.Key) != 1 {
			return fmt.Errorf("event %d: key %v not watched", seq, k.Key)
		}
		switch ev.event {
		case "apply":
			for _, u := range k.Created {
				if u.Address != a {
					return fmt.Errorf("event %d: created %s of %s under %s", seq, u.op(), u.Address, a)
				}
				set[u.op()] = u.Value + "@" + strconv.FormatUint(u.Height, 10)
			}
			for _, s := range k.Spent {
				delete(set, fmt.Sprintf("%s:%d", s.TxHash, s.Index))
			}
		case "rollback":
			for _, s := range k.Removed {
				op := fmt.Sprintf("%s:%d", s.TxHash, s.Index)
				if _, ok := set[op]; !ok {
					return fmt.Errorf("event %d: removed %s which %s does not hold", seq, op, a)
				}
				delete(set, op)
			}
			for _, u := range k.Restored {
				set[u.op()] = u.Value + "@" + strconv.FormatUint(u.Height, 10)
			}
		default:
			return fmt.Errorf("event %d: kind %q", seq, ev.event)
		}
	}
	w.last = seq
	w.events++
	if ev.event == "rollback" {
		w.rollbacks++
	}
	return nil
}

// check compares the watcher's sets with the model's at its last seq.
func (w *watcher) check(snaps *snapshots) error {
	snap := snaps.get(w.last)
	if snap == nil {
		return fmt.Errorf("no model state at seq %d", w.last)
	}
	for _, a := range w.addrs {
		if fmt.Sprint(w.live[a]) != fmt.Sprint(snap[a]) {
			return fmt.Errorf("seq %d, address %s: events give %v, the model %v", w.last, a, w.live[a], snap[a])
		}
	}
	return nil
}

// TestEventsMatchModel: a writer and its replica serve event streams while
// the writer applies a random chain with rollbacks, freezes and unfreezes.
// Watchers of random address sets rebuild each address's live set from
// events alone and equal the model after every event; they disconnect at
// random points and resume with Last-Event-ID (or after_seq), on either
// node; every event arrives once, in order.
func TestEventsMatchModel(t *testing.T) {
	ctx := context.Background()
	wn, err := node.Start(ctx, writerConfig(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	wsrv := httptest.NewServer(wn.Handler())
	defer func() { wsrv.CloseClientConnections(); wsrv.Close(); _ = wn.Close(ctx) }()
	rn, err := node.Start(ctx, node.Config{DataDir: t.TempDir(), ReplicaOf: wsrv.URL, ReplicationToken: "repl", MemoryCacheBytes: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	rsrv := httptest.NewServer(rn.Handler())
	defer func() { rsrv.CloseClientConnections(); rsrv.Close(); _ = rn.Close(ctx) }()

	o := wn.Store().Options()
	m := model.New(o.PruneDepth, o.RollbackWindow)
	g := model.NewGen(7, model.GenOptions{Addresses: 6})
	addrs := g.Addresses()
	snaps := &snapshots{at: map[uint64]map[string]map[string]string{}}
	snaps.put(0, m, addrs)

	// The replica serves once it has bootstrapped (at the writer's empty
	// state, before any change).
	waitFor(t, "the replica serves", func() bool {
		code, _ := do(t, rsrv, http.MethodGet, "/v1/tip", "", nil)
		return code == http.StatusOK
	})

	const watchers = 6
	var ws []*watcher
	final := make(chan uint64, watchers) // the seq every watcher must reach
	errs := make(chan error, watchers)
	for i := range watchers {
		rng := rand.New(rand.NewPCG(uint64(i), 99))
		w := &watcher{live: map[string]map[string]string{}}
		for _, a := range addrs {
			if rng.IntN(2) == 0 || len(w.addrs) == 0 && a == addrs[len(addrs)-1] {
				w.addrs = append(w.addrs, a)
				w.live[a] = map[string]string{}
			}
		}
		ws = append(ws, w)
		go func() { errs <- w.run(t, rng, []string{wsrv.URL, rsrv.URL}, snaps, final) }()
	}

	seq := uint64(0)
	rng := g.Rand()
	var frozen []chain.OutPoint
	for step := 0; step < 120; step++ {
		// A spend or a rollback ends a freeze.
		frozen = slices.DeleteFunc(frozen, func(op chain.OutPoint) bool { _, f := m.Frozen(op); return !f })
		switch r := rng.IntN(20); {
		case r == 0 && !m.Tip().Empty && m.Tip().Height >= 2:
			target := m.Tip().Height - 1 - uint64(rng.IntN(2))
			if err := m.Rollback(target); err != nil {
				t.Fatal(err)
			}
			seq++
			snaps.put(seq, m, addrs)
			if res, err := wn.Writer().Rollback(ctx, target); err != nil || res.Seq != seq {
				t.Fatalf("rollback to %d: seq %d (want %d), %v", target, res.Seq, seq, err)
			}
		case r == 1 && len(m.Live()) > 0:
			op := m.Live()[rng.IntN(len(m.Live()))].OutPoint
			if _, f := m.Frozen(op); f {
				continue
			}
			f := chain.Freeze{OutPoints: []chain.OutPoint{op}, Reason: "test"}
			if _, err := m.Freeze(f); err != nil {
				t.Fatal(err)
			}
			seq++
			snaps.put(seq, m, addrs)
			if res, err := wn.Writer().Freeze(ctx, f); err != nil || res.Seq != seq {
				t.Fatalf("freeze: seq %d (want %d), %v", res.Seq, seq, err)
			}
			frozen = append(frozen, op)
		case r == 2 && len(frozen) > 0:
			f := chain.Freeze{OutPoints: frozen[:1]}
			frozen = frozen[1:]
			if _, err := m.Unfreeze(f); err != nil {
				t.Fatal(err)
			}
			seq++
			snaps.put(seq, m, addrs)
			if res, err := wn.Writer().Unfreeze(ctx, f); err != nil || res.Seq != seq {
				t.Fatalf("unfreeze: seq %d (want %d), %v", res.Seq, seq, err)
			}
		default:
			b := g.Block(m)
			if _, err := m.Apply(b, false); err != nil {
				t.Fatal(err)
			}
			seq++
			snaps.put(seq, m, addrs)
			if res, err := wn.Writer().Apply(ctx, b); err != nil || res.Seq != seq {
				t.Fatalf("block %d: seq %d (want %d), %v", b.Height, res.Seq, seq, err)
			}
		}
	}
	// A last block pays every address, so every watcher gets its event.
	last := g.Block(m)
	tx := chain.Tx{Hash: g.Hash()}
	for _, a := range addrs {
		tx.Outputs = append(tx.Outputs, chain.Output{Address: a, Value: 1})
	}
	last.Txs = append(last.Txs, tx)
	if _, err := m.Apply(last, false); err != nil {
		t.Fatal(err)
	}
	seq++
	snaps.put(seq, m, addrs)
	for range watchers {
		final <- seq
	}
	if res, err := wn.Writer().Apply(ctx, last); err != nil || res.Seq != seq {
		t.Fatalf("last block: seq %d (want %d), %v", res.Seq, seq, err)
	}
	for range watchers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	events, rollbacks, conns := 0, 0, 0
	for _, w := range ws {
		events, rollbacks, conns = events+w.events, rollbacks+w.rollbacks, conns+w.conns
	}
	t.Logf("%d changes; the watchers took %d events (%d rollbacks) over %d connections", seq, events, rollbacks, conns)
	if rollbacks == 0 || conns < 2*watchers {
		t.Fatalf("a weak run: %d rollback events, %d connections", rollbacks, conns)
	}
}

// run follows the watcher's addresses until it has the event of the seq
// final names, reconnecting at random points to a random node.
func (w *watcher) run(t *testing.T, rng *rand.Rand, nodes []string, snaps *snapshots, final chan uint64) error {
	target := uint64(0) // 0: not known yet
	for conn := 0; ; conn++ {
		w.conns++
		if conn > 10000 {
			return fmt.Errorf("no end after %d connections", conn)
		}
		q := url.Values{"address": w.addrs}
		useHeader := rng.IntN(2) == 0
		if !useHeader {
			q.Set("after_seq", strconv.FormatUint(w.last, 10))
		}
		req, _ := http.NewRequest(http.MethodGet, nodes[rng.IntN(len(nodes))]+"/v1/events?"+q.Encode(), nil)
		if useHeader {
			req.Header.Set("Last-Event-ID", strconv.FormatUint(w.last, 10))
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
			resp.Body.Close()
			return fmt.Errorf("GET %s: %d %s", req.URL, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		drop := 1 + rng.IntN(8) // events on this connection
		var failed error
		done := false
		_ = readEvents(bufio.NewReader(resp.Body), func(ev sseEvent) bool {
			if failed = w.apply(ev); failed != nil {
				return false
			}
			if failed = w.check(snaps); failed != nil {
				return false
			}
			if target == 0 {
				select {
				case target = <-final:
				default:
				}
			}
			if target != 0 && w.last >= target {
				done = true
				return false
			}
			drop--
			return drop > 0
		})
		resp.Body.Close()
		if failed != nil || done {
			return failed
		}
		if target == 0 {
			select {
			case target = <-final:
			default:
			}
		}
	}
}

package query_test

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/utxo-cache/utxo-cache/cache"
	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/internal/testredis"
	"github.com/utxo-cache/utxo-cache/query"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
	"github.com/utxo-cache/utxo-cache/tiers/memory"
	"github.com/utxo-cache/utxo-cache/tiers/redis"
	"github.com/utxo-cache/utxo-cache/writer"
)

// TestRedisRestoredFromOlderSnapshot is issue 12 §2 end to end on the read
// path: the Redis tier alone (or behind a memory tier that does not hold
// the keys), over a real store. Answers are filled into Redis, Redis saves,
// five blocks change every answer, redis-server is killed and restarts from
// its snapshot. Every answer, before and after, must equal a fresh disk
// read; before the fix the restored entries were served with the tip of the
// newer state.
func TestRedisRestoredFromOlderSnapshot(t *testing.T) {
	for _, withMemory := range []bool{false, true} {
		name := "redis"
		if withMemory {
			name = "memory+redis"
		}
		t.Run(name, func(t *testing.T) { testRedisRestored(t, withMemory) })
	}
}

func testRedisRestored(t *testing.T, withMemory bool) {
	rs := testredis.Start(t)
	store, err := disk.Open(t.TempDir(), disk.Options{PruneDepth: 1000, RollbackWindow: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	rt, err := redis.New(redis.Options{
		URL: rs.URL(), Namespace: "restore", CallTimeout: time.Second,
		// The prober does not tick during the test: the restart must be
		// noticed by the reads themselves, between two probes, as a real
		// Redis restarting in well under ProbeInterval is.
		ProbeInterval: 2 * time.Minute,
		StartSeq:      store.Published().Seq,
		PublishedSeq:  func() uint64 { return store.Published().Seq },
		Logger:        slog.New(slog.NewTextHandler(t.Output(), nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	poll(t, "the Redis tier healthy", rt.Healthy)

	all := query.Admission{All: true} // every answer through Redis
	srv := query.New(store, query.Options{Tiers: []cache.Tier{rt}, HotAddresses: -1, Admission: all})
	defer srv.Close()
	fresh := query.New(store, query.Options{HotAddresses: -1}) // no tiers: every answer read from the disk
	defer fresh.Close()
	w := writer.New(store, writer.Options{})
	defer w.Close()
	w.Subscribe(srv)
	ctx := context.Background()
	apply := func(from, to uint64) {
		for h := from; h <= to; h++ {
			if _, err := w.Apply(ctx, moveBlock(h)); err != nil {
				t.Fatal(err)
			}
		}
	}

	// The reads: "hot"'s balance and listings hold one output of value h at
	// height h, and outpoint (t 5, 0) is live at 5 and spent at 6.
	reads := []namedRead{
		{"balance", func(s *query.Server) (query.Answer, error) { return s.Balance(ctx, "hot") }},
		{"listing", func(s *query.Server) (query.Answer, error) { return s.AddressUtxos(ctx, "hot", false, 10, "") }},
		{"listing desc", func(s *query.Server) (query.Answer, error) { return s.AddressUtxos(ctx, "hot", true, 10, "") }},
		{"outpoint", func(s *query.Server) (query.Answer, error) {
			return s.Utxo(ctx, chain.OutPoint{TxHash: hashOf('t', 5)})
		}},
		{"lookup", func(s *query.Server) (query.Answer, error) {
			return s.Lookup(ctx, []chain.OutPoint{{TxHash: hashOf('t', 5)}, {TxHash: hashOf('t', 4)}, {TxHash: hashOf('t', 9)}})
		}},
	}
	checkAll := func(s *query.Server, when string) (fromRedis int) {
		t.Helper()
		return compareReads(t, s, fresh, reads, when)
	}

	apply(1, 5)
	// Fills go to Redis off the read path: read until every answer is a hit.
	poll(t, "every answer at 5 from Redis", func() bool { return checkAll(srv, "at 5") == len(reads) })
	rs.Save()

	apply(6, 10)
	poll(t, "every answer at 10 from Redis", func() bool { return checkAll(srv, "at 10") == len(reads) })

	rs.RestartFromDump() // Redis now holds the answers at 5, under floors of 5
	after := srv
	if withMemory {
		// A node whose memory tier does not hold these keys (restarted,
		// or evicted them) asks Redis, and would keep what it serves.
		mem, err := memory.New(memory.Options{MaxBytes: 16 << 20})
		if err != nil {
			t.Fatal(err)
		}
		defer mem.Close()
		after = query.New(store, query.Options{Tiers: []cache.Tier{mem, rt}, HotAddresses: -1, Admission: all})
		defer after.Close()
		w.Subscribe(after)
	}
	for range 50 {
		checkAll(after, "after the restore")
	}
	if st := rt.Stats(); st.Rewinds == 0 {
		t.Fatalf("the restore went unnoticed (stats %+v): the reads above prove nothing", st)
	}
	apply(11, 12) // changes go on, with the tier degraded
	for range 10 {
		checkAll(after, "after the restore and two blocks")
	}
}

// namedRead is one read a test makes of a server.
type namedRead struct {
	name string
	do   func(s *query.Server) (query.Answer, error)
}

// compareReads makes every read through s and through fresh (a server with
// no tiers: the disk), fails on any difference, and returns how many of s's
// answers came from Redis.
func compareReads(t *testing.T, s, fresh *query.Server, reads []namedRead, when string) (fromRedis int) {
	t.Helper()
	for _, r := range reads {
		got, err := r.do(s)
		if err != nil {
			t.Fatalf("%s: %s: %v", when, r.name, err)
		}
		want, err := r.do(fresh)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != want.Status || got.Seq != want.Seq || got.Tip != want.Tip ||
			!bytes.Equal(got.AppendBody(nil), want.AppendBody(nil)) {
			t.Fatalf("%s: %s from the %s tier:\n got seq %d %s\nwant seq %d %s (the disk)",
				when, r.name, got.Tier, got.Seq, got.AppendBody(nil), want.Seq, want.AppendBody(nil))
		}
		if got.Tier == "redis" {
			fromRedis++
		}
	}
	return fromRedis
}

// poll waits until cond holds, or fails the test after 10s.
func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

package jetstream

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/internal/model"
	"github.com/utxo-cache/utxo-cache/internal/testnats"
	"github.com/utxo-cache/utxo-cache/replication"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
	"github.com/utxo-cache/utxo-cache/writer"
)

// matchLog holds each change read from the stream to the store's own log
// record of its seq (kind and after figures), and returns how many of those
// records are above the max payload (with headerRoom): the ones that went
// as objects.
func (f *fixture) matchLog(t *testing.T, changes []*chain.Change) (big int) {
	t.Helper()
	for _, c := range changes {
		rec := f.record(t, c.Seq)
		want, _, err := chain.DecodeChangeCBOR(rec, chain.Limits{}.EnsureDefaults())
		if err != nil {
			t.Fatal(err)
		}
		if c.After != want.After || c.Kind != want.Kind {
			t.Fatalf("change %d: %+v, the store's log %+v", c.Seq, c.After, want.After)
		}
		if int64(len(rec))+headerRoom > 64<<10 {
			big++
		}
	}
	return big
}

// record returns change seq's record from the store's own change log.
func (f *fixture) record(t *testing.T, seq uint64) []byte {
	t.Helper()
	v, err := f.store.PublishedView()
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	cur, err := v.ChangeCursor(seq - 1)
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	rec, err := cur.Next()
	if err != nil || rec == nil {
		t.Fatalf("change %d in the log: %v", seq, err)
	}
	return append([]byte(nil), rec...)
}

// bigBlocks applies n blocks of many transactions and outputs.
func (f *fixture) bigBlocks(t *testing.T, n int, opts model.GenOptions, seed uint64) {
	t.Helper()
	g := f.g
	f.g = model.NewGen(seed, opts)
	defer func() { f.g = g }()
	f.blocks(t, n)
}

// client is the test's own connection to the server, for looking at and
// tampering with what the publisher put there.
func client(t *testing.T, url string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// streamMsg returns stream message seq.
func streamMsg(t *testing.T, js jetstream.JetStream, opts Options, seq uint64) *jetstream.RawStreamMsg {
	t.Helper()
	s, err := js.Stream(context.Background(), opts.EnsureDefaults().stream())
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetMsg(context.Background(), seq)
	if err != nil {
		t.Fatalf("stream message %d: %v", seq, err)
	}
	return m
}

// objectSeqs lists the change objects of the bucket.
func objectSeqs(t *testing.T, js jetstream.JetStream, opts Options) []string {
	t.Helper()
	obs, err := js.ObjectStore(context.Background(), opts.EnsureDefaults().changesBucket())
	if err != nil {
		t.Fatal(err)
	}
	infos, err := obs.List(context.Background())
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, in := range infos {
		out = append(out, in.Name)
	}
	return out
}

// replica bootstraps a store from the bucket and follows the stream with
// replication.Tail, which verifies every change; Run's end is sent on the
// returned channel. The test's cleanup stops it, then closes src.
func replica(t *testing.T, src *Source) (*disk.Store, <-chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	dir := filepath.Join(t.TempDir(), "replica")
	waitFor(t, 30*time.Second, "a bootstrap from the bucket", func() bool {
		_, err := replication.Bootstrap(ctx, replication.TailOptions{Source: src}, dir, 1<<30, disk.Options{})
		return err == nil // until the publisher has put its first checkpoint
	})
	rs, err := disk.Open(dir, disk.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var tail *replication.Tail
	rw := writer.New(rs, writer.Options{SkipUnknownInputs: true, Verify: func(st disk.State) error { return tail.Verify(st) }})
	if tail, err = replication.NewTail(rs, rw, replication.TailOptions{Source: src}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); done <- tail.Run(ctx) }()
	t.Cleanup(func() { cancel(); wg.Wait(); src.Close(); _ = rw.Close(); _ = rs.Close() })
	return rs, done
}

// sameState fails unless the replica's published state is the writer's.
func sameState(t *testing.T, rs *disk.Store, f *fixture) {
	t.Helper()
	st, want := rs.Published(), f.store.Published()
	if st.Seq != want.Seq || st.Digest != want.Digest || st.Tip != want.Tip || st.UtxoCount != want.UtxoCount {
		t.Fatalf("replica %+v, the writer %+v", st, want)
	}
}

// TestChangeAboveMaxPayload: with the server's default max_payload (1 MiB),
// a change of more than 1 MiB (a block of tens of thousands of outputs)
// goes to the object store, a pointer with its seq takes its place in the
// stream, and a replica that bootstrapped before it reads, verifies and
// applies it, and the small changes around it.
func TestChangeAboveMaxPayload(t *testing.T) {
	noLeaks(t)
	srv := testnats.Start(t)
	f := newFixture(t, 1000)
	opts := Options{URLs: srv.URL(), Retention: 1000, CheckpointInterval: time.Hour, Logger: testLogger(t)}
	f.publish(t, opts)
	src, err := NewSource(opts)
	if err != nil {
		t.Fatal(err)
	}
	f.blocks(t, 3)
	rs, done := replica(t, src)
	waitFor(t, 30*time.Second, "the replica at seq 3", func() bool { return rs.Published().Seq == 3 })

	f.bigBlocks(t, 1, model.GenOptions{Addresses: 4, MaxTxs: 6000, MaxOutputs: 12}, 7)
	big := f.store.Published().Seq
	f.blocks(t, 2)
	n := len(f.record(t, big))
	if n <= 1<<20 {
		t.Fatalf("change %d is %d bytes: the test needs more than 1 MiB", big, n)
	}
	last := f.store.Published().Seq
	start := time.Now()
	waitFor(t, 60*time.Second, "the replica at the writer's seq", func() bool {
		select {
		case err := <-done:
			t.Fatalf("the replica stopped: %v", err)
		default:
		}
		return rs.Published().Seq == last
	})
	sameState(t, rs, f)
	t.Logf("change %d of %d bytes on the replica, verified, %v after the writer applied the next two", big, n, time.Since(start))
	js := client(t, srv.URL())
	m := streamMsg(t, js, opts, big)
	if len(m.Data) != 0 || m.Header.Get(headerBodyObject) != changeObject(big) {
		t.Fatalf("stream message %d: %d bytes, headers %v; want a pointer", big, len(m.Data), m.Header)
	}
	if m := streamMsg(t, js, opts, big+1); len(m.Data) == 0 || m.Header.Get(headerBodyObject) != "" {
		t.Fatalf("stream message %d (small): %d bytes, headers %v; want the change itself", big+1, len(m.Data), m.Header)
	}
}

// TestLargeChangesRetention: on a server with a max_payload of 64 KiB,
// changes of every size reach a reader in order, each the store's own
// record; the writer deletes the objects of changes the stream no longer
// holds, so the bucket follows the stream's retention.
func TestLargeChangesRetention(t *testing.T) {
	noLeaks(t)
	srv := testnats.StartMaxPayload(t, 64<<10)
	f := newFixture(t, 6)
	opts := Options{URLs: srv.URL(), Retention: 6, CheckpointInterval: time.Hour, Logger: testLogger(t)}
	p := f.publish(t, opts)
	src, err := NewSource(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	gen := model.GenOptions{Addresses: 4, MaxTxs: 300, MaxOutputs: 8}
	next := uint64(1)
	bigs := 0
	for round := range 5 {
		f.bigBlocks(t, 2, gen, uint64(100+round))
		f.blocks(t, 1)
		last := f.store.Published().Seq
		waitFor(t, 30*time.Second, "the stream has the writer's changes", func() bool { return p.Status().StreamSeq == last })
		bigs += f.matchLog(t, readAll(t, src, next-1, last))
		next = last + 1
	}
	if bigs < 5 {
		t.Fatalf("%d changes above the max payload: the test needs more", bigs)
	}
	// The stream keeps the last 6 changes; the bucket no object before them.
	js := client(t, srv.URL())
	first := f.store.Published().Seq - 5
	for _, name := range objectSeqs(t, js, opts) {
		if name < changeObject(first) {
			t.Errorf("object %s kept, the stream starts at %d", name, first)
		}
	}
	if len(objectSeqs(t, js, opts)) == 0 {
		t.Fatal("no change object at all")
	}

	// A replica bootstraps from a checkpoint larger than a message (put in
	// chunks that fit) and catches up.
	last := f.store.Published().Seq
	waitFor(t, 30*time.Second, "a checkpoint of more than 64 KiB", func() bool {
		dl, err := src.Checkpoint(context.Background())
		if err != nil {
			return false
		}
		_ = dl.Body.Close()
		return dl.Bytes > 64<<10 && dl.Want.Seq+3 >= last
	})
	src2, err := NewSource(opts)
	if err != nil {
		t.Fatal(err)
	}
	rs, done := replica(t, src2)
	waitFor(t, 30*time.Second, "the replica at the writer's seq", func() bool {
		select {
		case err := <-done:
			t.Fatalf("the replica stopped: %v", err)
		default:
		}
		return rs.Published().Seq == last
	})
	sameState(t, rs, f)
}

// TestChangeObjectGone: a replica that meets a pointer whose object is
// gone must bootstrap again (as for a gap); one whose object is not what
// the pointer says stops as diverged.
func TestChangeObjectGone(t *testing.T) {
	noLeaks(t)
	srv := testnats.StartMaxPayload(t, 64<<10)
	f := newFixture(t, 1000)
	opts := Options{URLs: srv.URL(), Retention: 1000, CheckpointInterval: time.Hour, Logger: testLogger(t)}
	p := f.publish(t, opts)
	f.blocks(t, 2)
	f.bigBlocks(t, 1, model.GenOptions{Addresses: 4, MaxTxs: 600, MaxOutputs: 8}, 5)
	big := f.store.Published().Seq
	if n := len(f.record(t, big)); n+headerRoom <= 64<<10 {
		t.Fatalf("change %d is %d bytes: the test needs more than 64 KiB", big, n)
	}
	f.blocks(t, 1)
	waitFor(t, 30*time.Second, "the stream has the writer's changes", func() bool { return p.Status().StreamSeq == big+1 })
	p.Close()
	js := client(t, srv.URL())
	ctx := context.Background()
	obs, err := js.ObjectStore(ctx, opts.EnsureDefaults().changesBucket())
	if err != nil {
		t.Fatal(err)
	}

	// Tampered: the object holds another change's record.
	if _, err := obs.PutBytes(ctx, changeObject(big), f.record(t, big-1)); err != nil {
		t.Fatal(err)
	}
	src, err := NewSource(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	b, err := src.Changes(ctx, replication.ChangesRequest{After: big - 1, Wait: time.Second})
	if err != nil || len(b.Changes) != 0 || !errors.Is(b.DecodeErr, errBody) {
		t.Fatalf("a tampered object: %v, %+v; want no change and errBody", err, b)
	}

	// Gone.
	if err := obs.Delete(ctx, changeObject(big)); err != nil {
		t.Fatal(err)
	}
	b, err = src.Changes(ctx, replication.ChangesRequest{After: big - 2, Wait: time.Second})
	if !errors.Is(err, replication.ErrNeedBootstrap) || !errors.Is(err, replication.ErrLogTruncated) {
		t.Fatalf("after %d, the object of %d gone: %+v, %v; want ErrLogTruncated", big-2, big, b, err)
	}
}

// TestRestartBetweenPutAndPublish: a writer that stops after putting a
// change's object and before publishing its pointer (here, an object of
// other bytes is left under the name) leaves the stream at the change
// before; the next writer on the same store puts the object again and
// publishes the pointer at the change's seq, and a replica following
// throughout reads every change, verified.
func TestRestartBetweenPutAndPublish(t *testing.T) {
	noLeaks(t)
	srv := testnats.StartMaxPayload(t, 64<<10)
	f := newFixture(t, 1000)
	opts := Options{URLs: srv.URL(), Retention: 1000, CheckpointInterval: time.Hour, Logger: testLogger(t)}
	crashed := make(chan uint64, 1)
	crashing := opts
	crashing.afterPut = func(seq uint64) error {
		select {
		case crashed <- seq:
		default:
		}
		return errors.New("test: the writer stops here")
	}
	p, err := NewPublisher(f.store, f.w, filepath.Join(t.TempDir(), "staging"), chain.Limits{}, crashing, nil)
	if err != nil {
		t.Fatal(err)
	}
	f.w.Subscribe(p)
	src, err := NewSource(opts)
	if err != nil {
		t.Fatal(err)
	}
	f.blocks(t, 3)
	rs, done := replica(t, src)
	waitFor(t, 30*time.Second, "the replica at seq 3", func() bool { return rs.Published().Seq == 3 })

	f.bigBlocks(t, 1, model.GenOptions{Addresses: 4, MaxTxs: 600, MaxOutputs: 8}, 11)
	big := f.store.Published().Seq
	f.blocks(t, 2)
	var seq uint64
	select {
	case seq = <-crashed:
	case <-time.After(30 * time.Second):
		t.Fatal("the publisher never put the large change")
	}
	p.Close()
	if seq != big {
		t.Fatalf("put change %d, want %d", seq, big)
	}
	js := client(t, srv.URL())
	ctx := context.Background()
	s, err := js.Stream(ctx, opts.EnsureDefaults().stream())
	if err != nil {
		t.Fatal(err)
	}
	if last := s.CachedInfo().State.LastSeq; last != big-1 {
		t.Fatalf("the stream at %d after the stop, want %d", last, big-1)
	}
	obs, err := js.ObjectStore(ctx, opts.EnsureDefaults().changesBucket())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := obs.PutBytes(ctx, changeObject(big), []byte("not the change")); err != nil {
		t.Fatal(err)
	}

	p2, err := NewPublisher(f.store, f.w, filepath.Join(t.TempDir(), "staging2"), chain.Limits{}, opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p2.Close()
	f.w.Subscribe(p2)
	f.blocks(t, 1)
	last := f.store.Published().Seq
	waitFor(t, 60*time.Second, "the replica at the writer's seq", func() bool {
		select {
		case err := <-done:
			t.Fatalf("the replica stopped: %v", err)
		default:
		}
		return rs.Published().Seq == last
	})
	sameState(t, rs, f)
	if m := streamMsg(t, js, opts, big); m.Header.Get(headerBodyObject) != changeObject(big) {
		t.Fatalf("stream message %d: headers %v, want a pointer", big, m.Header)
	}
}

// TestObjectsLeftByAnEarlierWriter: change objects an earlier writer left
// in the bucket are found by the background listing; those of changes
// before the stream's first are deleted, and one beyond its last (put
// before a crash) is kept until it is put again.
func TestObjectsLeftByAnEarlierWriter(t *testing.T) {
	noLeaks(t)
	srv := testnats.Start(t)
	f := newFixture(t, 1000)
	opts := Options{URLs: srv.URL(), Retention: 3, CheckpointInterval: time.Hour, Logger: testLogger(t)}
	js := client(t, srv.URL())
	ctx := context.Background()
	obs, err := js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: opts.EnsureDefaults().changesBucket(),
		Storage: jetstream.FileStorage, Replicas: opts.EnsureDefaults().Replicas})
	if err != nil {
		t.Fatal(err)
	}
	for _, seq := range []uint64{1, 2, 100} {
		if _, err := obs.PutBytes(ctx, changeObject(seq), []byte("left by an earlier writer")); err != nil {
			t.Fatal(err)
		}
	}
	p := f.publish(t, opts)
	f.blocks(t, 8)
	waitFor(t, 30*time.Second, "the stream has the writer's changes", func() bool { return p.Status().StreamSeq == 8 })
	waitFor(t, 30*time.Second, "the objects before the stream's first deleted", func() bool {
		f.blocks(t, 1) // each window may delete what the listing found
		names := objectSeqs(t, js, opts)
		return len(names) == 1 && names[0] == changeObject(100)
	})
}

// TestBrokenConsumerReadFromLeader: a consumer that delivers nothing while
// the writer says the stream holds the next change (here one started past
// the stream's end; in a cluster, one placed on a server whose copy of the
// stream stopped short), that cannot be started (nats-server may place it
// on a server the replica's own server cannot reach, and its creation never
// answers), whose Next fails (the consumer's server goes out of reach), or
// that skips messages (it takes no acks: a pull whose answer was lost with
// its connection is not sent again) does not stop the replica while the
// stream's leader answers: the Source reads the changes the writer has
// announced from the leader, a change too large for a message among them,
// each the store's own record, in order. Without that, every read would
// stall or fail here, or the skip would be taken for a stream that lost
// changes (a bootstrap). A read with nothing new to read from the leader
// fails as the relay's failure (ErrRelayFailed), not the writer's.
func TestBrokenConsumerReadFromLeader(t *testing.T) {
	noLeaks(t)
	srv := testnats.StartMaxPayload(t, 64<<10)
	f := newFixture(t, 1000)
	opts := Options{URLs: srv.URL(), Retention: 1000, CheckpointInterval: time.Hour, Logger: testLogger(t)}
	p := f.publish(t, opts)
	f.blocks(t, 3)
	f.bigBlocks(t, 1, model.GenOptions{Addresses: 4, MaxTxs: 600, MaxOutputs: 8}, 7)
	f.blocks(t, 2)
	last := f.store.Published().Seq
	waitFor(t, 30*time.Second, "the stream has the writer's changes", func() bool { return p.Status().StreamSeq == last })

	for _, tc := range []struct {
		name  string
		fault func(it jetstream.MessagesContext) error
		start func(next uint64) uint64
		// failsIdle: once the replica has every change, a read fails (no
		// consumer, and nothing new to read from the leader).
		failsIdle bool
	}{
		{name: "stalls", start: func(next uint64) uint64 { return next + 1000 }},
		{name: "not started", fault: func(jetstream.MessagesContext) error { return errors.New("consumer placed out of reach") }, failsIdle: true},
		{name: "next fails", fault: func(it jetstream.MessagesContext) error { it.Stop(); return nil }},
		{name: "skips", start: func(next uint64) uint64 { return next + 2 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := opts
			o.Logger = testLogger(t)
			var faults atomic.Int64
			o.consumerFault = func(it jetstream.MessagesContext) error {
				faults.Add(1)
				if tc.fault == nil {
					return nil
				}
				return tc.fault(it)
			}
			o.consumerStart = tc.start
			src, err := NewSource(o)
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			waitStatus(t, src, last)
			got := readAll(t, src, 0, last)
			if f.matchLog(t, got) == 0 {
				t.Fatal("no change above the max payload: the test needs one")
			}
			if faults.Load() == 0 {
				t.Fatal("no consumer was started: the fault was not exercised")
			}
			if tc.failsIdle {
				// The relay failed, not the writer: the replica's log must
				// not say the writer is unreachable.
				_, err := src.Changes(context.Background(), replication.ChangesRequest{After: last, Wait: time.Second})
				if !errors.Is(err, replication.ErrRelayFailed) || errors.Is(err, replication.ErrNeedBootstrap) {
					t.Fatalf("read with the consumer failing and nothing new: %v, want ErrRelayFailed", err)
				}
			}
		})
	}
}

// waitStatus waits until src has heard the writer's status announce that
// the stream holds seq.
func waitStatus(t *testing.T, src *Source, seq uint64) {
	t.Helper()
	waitFor(t, 30*time.Second, "the writer's status", func() bool {
		src.mu.Lock()
		defer src.mu.Unlock()
		return src.mu.streamSeq == seq
	})
}

// TestSkippedMessageGoneIsTruncation: a consumer that skips a message the
// stream no longer holds (here deleted from its middle, so the stream's
// first message is still before it) is not filled in: the leader does not
// have it either, and the Source reports the stream as having lost changes
// the replica needs (ErrLogTruncated, a bootstrap) before it hands over any
// change past the gap.
func TestSkippedMessageGoneIsTruncation(t *testing.T) {
	noLeaks(t)
	srv := testnats.Start(t)
	f := newFixture(t, 1000)
	opts := Options{URLs: srv.URL(), Retention: 1000, CheckpointInterval: time.Hour, Logger: testLogger(t)}
	p := f.publish(t, opts)
	f.blocks(t, 6)
	waitFor(t, 10*time.Second, "the stream has change 6", func() bool { return p.Status().StreamSeq == 6 })
	st, err := client(t, srv.URL()).Stream(context.Background(), opts.EnsureDefaults().stream())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteMsg(context.Background(), 4); err != nil {
		t.Fatal(err)
	}

	src, err := NewSource(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	waitStatus(t, src, 6)
	next := uint64(3)
	for calls := 0; ; calls++ {
		if calls == 20 {
			t.Fatalf("20 reads without an error, at change %d", next)
		}
		b, err := src.Changes(context.Background(), replication.ChangesRequest{After: next - 1, Wait: time.Second})
		if err != nil {
			if !errors.Is(err, replication.ErrNeedBootstrap) || !errors.Is(err, replication.ErrLogTruncated) {
				t.Fatalf("after %d (message 4 deleted): %v, want ErrLogTruncated", next-1, err)
			}
			return
		}
		for _, c := range b.Changes {
			if c.Seq != next || c.Seq == 4 {
				t.Fatalf("change %d, want %d (message 4 is deleted)", c.Seq, next)
			}
			next++
		}
		if next > 6 {
			t.Fatal("read past the deleted message 4 without an error")
		}
	}
}

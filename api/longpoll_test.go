package api_test

import (
	"context"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/utxo-cache/utxo-cache/api"
	"github.com/utxo-cache/utxo-cache/query"
)

// balanceReads is a Reader that reports every Balance read it serves, with
// the seq of its answer, on reads.
type balanceReads struct {
	api.Reader
	reads chan uint64
}

func (b balanceReads) Balance(ctx context.Context, address string) (query.Answer, error) {
	ans, err := b.Reader.Balance(ctx, address)
	b.reads <- ans.Seq
	return ans, err
}

// longPollStack is a writer whose balance reads are reported, with a
// --max-wait long enough that no test's long-poll ends by itself unless it
// asks for a short wait.
func longPollStack(t *testing.T) (*stack, chan uint64) {
	reads := make(chan uint64, 64)
	s := newStack(t, stackConfig{
		api:  api.Options{MaxWait: time.Minute},
		wrap: func(r api.Reader) api.Reader { return balanceReads{Reader: r, reads: reads} },
	})
	return s, reads
}

// longPoll serves GET target with If-None-Match inm in the background; the
// answer arrives on the channel.
func longPoll(s *stack, ctx context.Context, target, inm string) <-chan *response {
	done := make(chan *response, 1)
	req := call{method: "GET", target: target, header: []string{"If-None-Match", inm}}.request().WithContext(ctx)
	go func() {
		rec := httptest.NewRecorder()
		s.h.ServeHTTP(rec, req)
		done <- &response{code: rec.Code, hdr: rec.Result().Header, body: rec.Body.Bytes()}
	}()
	return done
}

// nextRead is the seq of the next balance read served.
func nextRead(t *testing.T, reads <-chan uint64) uint64 {
	t.Helper()
	select {
	case seq := <-reads:
		return seq
	case <-time.After(30 * time.Second):
		t.Fatal("no balance read within 30s")
		return 0
	}
}

// answer is the long-poll's answer.
func answer(t *testing.T, done <-chan *response) *response {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(30 * time.Second):
		t.Fatal("the long-poll did not answer within 30s")
		return nil
	}
}

// TestLongPollAnswersChange: a read with If-None-Match and wait whose ETag
// matches waits; a block that does not change its answer (another
// address) wakes it to read again and wait on, and the block that changes
// it gets it answered 200 with the new ETag, from that block's state.
func TestLongPollAnswersChange(t *testing.T) {
	t.Parallel()
	s, reads := longPollStack(t)
	s.apply(tx("a", nil, out("alice", 1), out("bob", 2)))
	const target = "/v1/addresses/alice/balance"
	first := s.get(target)
	nextRead(t, reads)
	etag := first.hdr.Get("ETag")
	if first.code != 200 || etag == "" {
		t.Fatalf("GET %s: %s %v", target, first, first.hdr)
	}

	done := longPoll(s, context.Background(), target+"?wait=60", etag)
	seq1 := s.reads.Published().Seq
	if got := nextRead(t, reads); got != seq1 {
		t.Fatalf("long-poll read at seq %d, published %d", got, seq1)
	}

	// bob's block: the long-poll reads again at its seq and keeps waiting.
	r2 := s.postBlock(s.next(tx("b", spends(op("a", 1)), out("carol", 2))))
	seq2 := writeSeq(t, r2)
	if got := nextRead(t, reads); got != seq2 {
		t.Fatalf("long-poll re-read at seq %d, want %d (bob's block)", got, seq2)
	}

	// alice's block: answered 200 from it.
	r3 := s.postBlock(s.next(tx("c", spends(op("a", 0)), out("alice", 5))))
	seq3 := writeSeq(t, r3)
	if got := nextRead(t, reads); got != seq3 {
		t.Fatalf("long-poll re-read at seq %d, want %d (alice's block)", got, seq3)
	}
	r := answer(t, done)
	checkInvariants(t, call{method: "GET", target: target}, r)
	if r.code != 200 || r.hdr.Get("X-Commit-Seq") != strconv.FormatUint(seq3, 10) {
		t.Fatalf("long-poll: %s %v, want 200 at seq %d", r, r.hdr, seq3)
	}
	now := s.get(target)
	nextRead(t, reads)
	if got := r.hdr.Get("ETag"); got == etag || got != now.hdr.Get("ETag") || string(r.body) != string(now.body) {
		t.Fatalf("long-poll answered ETag %q body %s; before %q, now %q %s", got, r.body, etag, now.hdr.Get("ETag"), now.body)
	}
	select {
	case seq := <-reads:
		t.Fatalf("an extra balance read at seq %d", seq)
	default:
	}
}

// TestLongPollUnchanged: with no publish during its wait, a long-poll
// answers 304 with its ETag once the wait has ended, after one read before
// and one after the wait.
func TestLongPollUnchanged(t *testing.T) {
	t.Parallel()
	s, reads := longPollStack(t)
	s.apply(tx("a", nil, out("alice", 1)))
	const target = "/v1/addresses/alice/balance"
	first := s.get(target)
	nextRead(t, reads)
	etag := first.hdr.Get("ETag")
	seq := s.reads.Published().Seq

	start := time.Now()
	r := answer(t, longPoll(s, context.Background(), target+"?wait=0.2", etag))
	elapsed := time.Since(start)
	checkInvariants(t, call{method: "GET", target: target}, r)
	if r.code != 304 || r.hdr.Get("ETag") != etag || r.hdr.Get("X-Commit-Seq") != strconv.FormatUint(seq, 10) {
		t.Fatalf("long-poll: %s %v, want 304 %s at seq %d", r, r.hdr, etag, seq)
	}
	if p := s.reads.Published().Seq; p != seq {
		t.Fatalf("published seq %d, was %d: the test published nothing", p, seq)
	}
	// Read, waited the whole wait (nothing was published to end it), read
	// again.
	if a, b := nextRead(t, reads), nextRead(t, reads); a != seq || b != seq {
		t.Fatalf("reads at seq %d and %d, want %d", a, b, seq)
	}
	if elapsed < 200*time.Millisecond {
		t.Fatalf("answered after %s, before its 0.2s wait ended", elapsed)
	}
	select {
	case seq := <-reads:
		t.Fatalf("a third balance read at seq %d", seq)
	default:
	}

	// Without wait, If-None-Match answers at once, as it always has; with
	// another ETag, a wait does not delay the 200.
	if r := s.get(target, "If-None-Match", etag); r.code != 304 {
		t.Fatalf("If-None-Match without wait: %s", r)
	}
	nextRead(t, reads)
	if r := s.get(target+"?wait=60", "If-None-Match", `W/"other"`); r.code != 200 || r.hdr.Get("ETag") != etag {
		t.Fatalf("If-None-Match of another ETag with wait: %s %v", r, r.hdr)
	}
	nextRead(t, reads)
	// "*" matches every ETag: it does not long-poll.
	if r := s.get(target+"?wait=60", "If-None-Match", "*"); r.code != 304 || r.hdr.Get("ETag") != etag {
		t.Fatalf("If-None-Match: * with wait: %s %v", r, r.hdr)
	}
	nextRead(t, reads)
	select {
	case seq := <-reads:
		t.Fatalf("If-None-Match: * read again at seq %d", seq)
	default:
	}
}

// TestLongPollMinSeq: min_seq is waited for first, and the long-poll goes on
// from there within the same wait: a block that reaches min_seq without
// changing the answer does not answer it.
func TestLongPollMinSeq(t *testing.T) {
	t.Parallel()
	s, reads := longPollStack(t)
	s.apply(tx("a", nil, out("alice", 1), out("bob", 2)))
	const target = "/v1/addresses/alice/balance"
	first := s.get(target)
	nextRead(t, reads)
	etag := first.hdr.Get("ETag")
	seq := s.reads.Published().Seq

	done := longPoll(s, context.Background(), target+"?wait=60&min_seq="+strconv.FormatUint(seq+1, 10), etag)
	seq2 := writeSeq(t, s.postBlock(s.next(tx("b", spends(op("a", 1)), out("carol", 2)))))
	if got := nextRead(t, reads); got != seq2 {
		t.Fatalf("first read at seq %d, want %d (min_seq)", got, seq2)
	}
	seq3 := writeSeq(t, s.postBlock(s.next(tx("c", spends(op("a", 0)), out("dave", 1)))))
	if got := nextRead(t, reads); got != seq3 {
		t.Fatalf("re-read at seq %d, want %d", got, seq3)
	}
	r := answer(t, done)
	if r.code != 200 || r.hdr.Get("X-Commit-Seq") != strconv.FormatUint(seq3, 10) || r.hdr.Get("ETag") == etag {
		t.Fatalf("long-poll with min_seq: %s %v, want 200 at seq %d", r, r.hdr, seq3)
	}
}

// TestLongPollClientGone: a long-poll whose client goes away ends at once
// (499, no further read); one cut short by Drain answers 304 at once.
func TestLongPollClientGone(t *testing.T) {
	t.Parallel()
	s, reads := longPollStack(t)
	s.apply(tx("a", nil, out("alice", 1)))
	const target = "/v1/addresses/alice/balance"
	first := s.get(target)
	nextRead(t, reads)
	etag := first.hdr.Get("ETag")

	ctx, cancel := context.WithCancel(context.Background())
	done := longPoll(s, ctx, target+"?wait=60", etag)
	nextRead(t, reads)
	cancel()
	if r := answer(t, done); r.code != 499 {
		t.Fatalf("long-poll of a client gone: %s", r)
	}
	select {
	case seq := <-reads:
		t.Fatalf("a balance read at seq %d after the client went away", seq)
	default:
	}

	done = longPoll(s, context.Background(), target+"?wait=60", etag)
	nextRead(t, reads)
	s.h.(*api.API).Drain()
	if r := answer(t, done); r.code != 304 || r.hdr.Get("ETag") != etag {
		t.Fatalf("long-poll at Drain: %s %v", r, r.hdr)
	}
	// It read again unless Drain came before it began to wait.
	if n := len(reads); n > 1 {
		t.Fatalf("%d balance reads after Drain", n)
	}
}

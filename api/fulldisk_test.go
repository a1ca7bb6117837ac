package api_test

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/utxo-cache/utxo-cache/api"
	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/writer"
)

// settableSpace is a writer.DiskSpace whose figure the test sets.
type settableSpace struct{ avail atomic.Uint64 }

func (s *settableSpace) AvailableBytes() (uint64, error) { return s.avail.Load(), nil }

// TestFullDiskAnswers507 checks the HTTP face of the free-space guard,
// against the OpenAPI document: on a nearly full disk a block and a
// rollback answer 507 insufficient_storage and change nothing, reads go on,
// /readyz stays 200 and says why writes are refused; with room back, writes
// are taken again and /readyz is plain ready.
func TestFullDiskAnswers507(t *testing.T) {
	t.Parallel()
	space := &settableSpace{}
	space.avail.Store(1 << 40)
	var s *stack
	s = newStack(t, stackConfig{
		writer: writer.Options{Space: space, Reserve: 1 << 20},
		api:    api.Options{WritesRefused: func() error { return s.w.WritesRefused() }},
	})
	s.apply(tx("1", nil, out("alice", 10)))
	s.apply(tx("2", spends(op("1", 0)), out("bob", 10)))
	before := s.state()

	space.avail.Store(1<<20 - 1)
	r := s.do(call{method: http.MethodPost, target: "/v1/blocks", auth: true, allow5xx: true, ctype: "application/json",
		body: chain.AppendBlockJSON(nil, s.next(tx("3", spends(op("2", 0)), out("carol", 10))))})
	wantError(t, r, http.StatusInsufficientStorage, "insufficient_storage")
	if !strings.Contains(string(r.body), "bytes available") {
		t.Fatalf("the refusal does not give the figures: %s", r)
	}
	s.unchanged(before, "a refused block")
	r = s.do(call{method: http.MethodPost, target: "/v1/rollback", auth: true, allow5xx: true, ctype: "application/json",
		body: []byte(`{"height":1}`)})
	wantError(t, r, http.StatusInsufficientStorage, "insufficient_storage")
	s.unchanged(before, "a refused rollback")
	if r := s.get("/v1/addresses/bob/balance"); r.code != 200 || !strings.Contains(string(r.body), `"value":"10"`) {
		t.Fatalf("a read on a full disk: %s", r)
	}
	r = s.get("/readyz")
	if r.code != 200 || !strings.HasPrefix(string(r.body), `{"status":"ready","writes":"refused","reason":"insufficient_storage","message":"writer: insufficient storage: `) {
		t.Fatalf("/readyz on a full disk: %s", r)
	}

	space.avail.Store(1 << 40)
	if r := s.get("/readyz"); r.code != 200 || string(r.body) != `{"status":"ready"}` {
		t.Fatalf("/readyz with room: %s", r)
	}
	if r := s.postBlock(s.next(tx("3", spends(op("2", 0)), out("carol", 10)))); r.code != 200 {
		t.Fatalf("a block once room returned: %s", r)
	}
}

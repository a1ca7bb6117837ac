package loadtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/internal/model"
)

// fakeWriter is a writer's block and rollback endpoints over a model: it
// refuses what the service refuses (409 not_next_block for a block that
// does not follow its tip) and records what it applied. It stands for one
// configuration's service on its own copy of the preloaded store.
type fakeWriter struct {
	srv *httptest.Server

	mu     sync.Mutex
	m      *model.Model // guarded by mu
	seq    uint64       // guarded by mu: the commit sequence
	writes []string     // guarded by mu: "block H hash", "rollback H"
}

func newFakeWriter(t *testing.T, m *model.Model) *fakeWriter {
	fw := &fakeWriter{m: m, seq: 1000}
	fw.srv = httptest.NewServer(http.HandlerFunc(fw.serve))
	t.Cleanup(fw.srv.Close)
	return fw
}

func (fw *fakeWriter) serve(rw http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	fw.mu.Lock()
	defer fw.mu.Unlock()
	refuse := func(status int, code string, err error) {
		rw.WriteHeader(status)
		fmt.Fprintf(rw, `{"error":{"code":%q,"message":%q}}`, code, err.Error())
	}
	switch r.URL.Path {
	case "/v1/blocks":
		b, err := chain.DecodeBlockCBOR(body, chain.Limits{})
		if err != nil {
			refuse(http.StatusBadRequest, "invalid_block", err)
			return
		}
		applied, err := fw.m.Apply(b, false)
		switch {
		case errors.Is(err, chain.ErrNotNextBlock):
			refuse(http.StatusConflict, "not_next_block", err)
			return
		case err != nil:
			refuse(http.StatusUnprocessableEntity, "invalid_block", err)
			return
		}
		if applied {
			fw.seq++
			fw.writes = append(fw.writes, fmt.Sprintf("block %d %s", b.Height, b.Hash))
		}
		fmt.Fprintf(rw, `{"applied":%v,"seq":%d}`, applied, fw.seq)
	case "/v1/rollback":
		var req struct{ Height uint64 }
		if err := json.Unmarshal(body, &req); err != nil {
			refuse(http.StatusBadRequest, "invalid_argument", err)
			return
		}
		before := fw.m.Tip()
		if err := fw.m.Rollback(req.Height); err != nil {
			refuse(http.StatusConflict, "rollback_too_deep", err)
			return
		}
		if fw.m.Tip() != before {
			fw.seq++
		}
		fw.writes = append(fw.writes, fmt.Sprintf("rollback %d", req.Height))
		fmt.Fprintf(rw, `{"seq":%d}`, fw.seq)
	default:
		rw.WriteHeader(http.StatusNotFound)
	}
}

func (fw *fakeWriter) state() (chain.Tip, []string) {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	return fw.m.Tip(), slices.Clone(fw.writes)
}

func newTestFeed(w *world, fw *fakeWriter) *feed {
	return &feed{w: w, client: fw.srv.Client(), writer: fw.srv.URL, token: "tok", apply: newSyncHist(), rollback: newSyncHist()}
}

// TestFeedReplaysOnEachCopy is issue 8 §2: configurations run one after
// another, each on its own copy of the preloaded store, and a feed that
// stops in the middle of a rollback's new branch (as a rate phase may end
// anywhere) must not leave the next configuration's feed posting over a
// gap. Each configuration's feed posts the same script from the preload's
// tip, and the model follows each copy.
func TestFeedReplaysOnEachCopy(t *testing.T) {
	w := checkWorld(t)
	w.setScript(4, 3)
	w.freeze()
	w.prepareScript(12)
	ctx := context.Background()

	// The first configuration's feed stops one block into the new branch
	// of its first rollback.
	w.reset()
	first := newFakeWriter(t, w.base.model.Clone())
	f := newTestFeed(w, first)
	rollbacks := 0
	for posted := 0; rollbacks == 0 || posted == 0; {
		b, _, _, isRollback, err := f.step(ctx)
		switch {
		case err != nil:
			t.Fatal(err)
		case isRollback:
			rollbacks++
		case rollbacks > 0:
			posted++
			if b == nil {
				t.Fatal("a block step returned no block")
			}
		}
	}
	tip1, writes1 := first.state()
	if tip1 != w.modelTip() {
		t.Fatalf("first copy at %v, model at %v", tip1, w.modelTip())
	}

	// Without a reset, the next copy (at the preload's tip) refuses the
	// feed's next block: what `make loadtest` ran into.
	stale := newFakeWriter(t, w.base.model.Clone())
	if _, _, _, _, err := newTestFeed(w, stale).step(ctx); err == nil || !strings.Contains(err.Error(), "status 409") {
		t.Fatalf("a stale feed on a fresh copy: %v, want a 409", err)
	}

	// With it, the next configuration posts the same writes and goes on
	// past where the first stopped, through further rollbacks.
	w.reset()
	second := newFakeWriter(t, w.base.model.Clone())
	f = newTestFeed(w, second)
	for range 3 * len(writes1) {
		if _, _, _, _, err := f.step(ctx); err != nil {
			t.Fatal(err)
		}
	}
	tip2, writes2 := second.state()
	if !slices.Equal(writes2[:len(writes1)], writes1) {
		t.Fatalf("the second configuration's first writes differ:\n%q\n%q", writes2[:len(writes1)], writes1)
	}
	if n := countPrefix(writes2, "rollback "); n < 2 {
		t.Errorf("%d rollbacks in %q", n, writes2)
	}
	if tip2 != w.modelTip() {
		t.Errorf("second copy at %v, model at %v", tip2, w.modelTip())
	}
	w.mu.RLock()
	count, digest := w.model.Count(), w.model.Digest()
	w.mu.RUnlock()
	second.mu.Lock()
	if count != second.m.Count() || digest != second.m.Digest() {
		t.Errorf("model %d UTXOs %s, second copy %d %s", count, digest, second.m.Count(), second.m.Digest())
	}
	second.mu.Unlock()
}

// TestFeedScriptDeterministic: the script is made from the seed and the
// rollback settings alone, so two worlds of one seed make the same one,
// whether they make it ahead of time or step by step; a rollback comes
// every `every` blocks and its new branch follows at once.
func TestFeedScriptDeterministic(t *testing.T) {
	a, b := checkWorld(t), checkWorld(t)
	a.setScript(5, 2)
	b.setScript(5, 2)
	a.prepareScript(30)
	var bs []feedStep
	for range len(a.script.steps) {
		bs = append(bs, b.nextStep())
	}
	render := func(steps []feedStep) []string {
		var out []string
		for _, st := range steps {
			if st.block == nil {
				out = append(out, fmt.Sprintf("rollback %d", st.rollbackTo))
			} else {
				out = append(out, fmt.Sprintf("block %d %s", st.block.Height, st.block.Hash))
			}
		}
		return out
	}
	ra, rb := render(a.script.steps), render(bs)
	if !slices.Equal(ra, rb) {
		t.Fatalf("scripts differ:\n%q\n%q", ra, rb)
	}
	// 30 blocks with a rollback of 2 after every 5: block steps 1-5, a
	// rollback, the 2 re-made blocks and 3 new ones, a rollback, ...
	if n := countPrefix(ra, "rollback "); n != 5 {
		t.Errorf("%d rollbacks in %d steps, want 5:\n%q", n, len(ra), ra)
	}
	for i, st := range a.script.steps {
		if st.block != nil {
			continue
		}
		if i < 5 || a.script.steps[i-1].block == nil || a.script.steps[i+1].block == nil ||
			a.script.steps[i+1].block.Height != st.rollbackTo+1 || a.script.steps[i-1].block.Height != st.rollbackTo+2 {
			t.Errorf("step %d: rollback to %d not between blocks %v and %v", i, st.rollbackTo, a.script.steps[i-1], a.script.steps[i+1])
		}
	}
}

func countPrefix(lines []string, prefix string) int {
	n := 0
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

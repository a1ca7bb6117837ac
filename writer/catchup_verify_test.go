package writer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/changeset"
	"github.com/utxo-cache/utxo-cache/internal/model"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

// errMismatch is the test's verification failure.
var errMismatch = errors.New("figures differ from the record")

// verifyingReplica is a store and writer whose Verify compares each state
// with the after figures of want (by seq), as a replica's follower does,
// and notes every state it verified and every state published.
type verifyingReplica struct {
	store *disk.Store
	w     *Writer
	want  map[uint64]chain.Summary

	mu        sync.Mutex
	verified  []uint64
	published []uint64
}

func newVerifyingReplica(t *testing.T, opts disk.Options, want map[uint64]chain.Summary) *verifyingReplica {
	t.Helper()
	s, err := disk.Open(storeDir(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	r := &verifyingReplica{store: s, want: want}
	r.w = New(s, Options{WindowBlocks: 10, LiveMargin: 1, Verify: func(st disk.State) error {
		a, ok := r.want[st.Seq]
		if !ok || st.Tip != a.Tip || st.UtxoCount != a.UtxoCount || st.Digest != a.Digest {
			return fmt.Errorf("seq %d at %s %d %s, record %s %d %s: %w", st.Seq, st.Tip, st.UtxoCount, st.Digest, a.Tip, a.UtxoCount, a.Digest, errMismatch)
		}
		r.mu.Lock()
		r.verified = append(r.verified, st.Seq)
		r.mu.Unlock()
		return nil
	}})
	t.Cleanup(func() { _ = r.w.Close() })
	r.w.Subscribe(r)
	return r
}

func (r *verifyingReplica) Changed(*changeset.Set) {}

func (r *verifyingReplica) AfterPublish(*changeset.Set) {
	r.mu.Lock()
	r.published = append(r.published, r.store.Published().Seq)
	r.mu.Unlock()
}

// verifyChain applies n random blocks one by one to a writer and returns
// them, with the after figures of each seq.
func verifyChain(t *testing.T, opts disk.Options, n int) ([]*chain.Block, map[uint64]chain.Summary) {
	t.Helper()
	s, err := disk.Open(storeDir(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	w := New(s, Options{})
	defer w.Close()
	m := model.New(opts.PruneDepth, opts.RollbackWindow)
	g := model.NewGen(5, model.GenOptions{})
	want := map[uint64]chain.Summary{}
	var blocks []*chain.Block
	for range n {
		b := g.Block(m)
		if _, err := m.Apply(b, false); err != nil {
			t.Fatal(err)
		}
		res, err := w.Apply(context.Background(), b)
		if err != nil {
			t.Fatal(err)
		}
		st := s.Published()
		want[res.Seq] = chain.Summary{Tip: st.Tip, UtxoCount: st.UtxoCount, Digest: st.Digest}
		blocks = append(blocks, b)
	}
	return blocks, want
}

// TestCatchUpVerified: a writer with Verify (a replica) applies a catch-up
// batch in windows, and verifies every block of each window with the
// window's state right after it, before the window is committed: every seq
// is verified once, in order, and published states are window ends.
func TestCatchUpVerified(t *testing.T) {
	opts := disk.Options{PruneDepth: 3, RollbackWindow: 6, LogRetention: 10_000}
	blocks, want := verifyChain(t, opts, 60)
	r := newVerifyingReplica(t, opts, want)
	res, err := r.w.ApplyBlocks(context.Background(), blocks, blocks[len(blocks)-1].Height)
	if err != nil {
		t.Fatal(err)
	}
	if res.Windows < 5 || res.Done != len(blocks) || res.Seq != uint64(len(blocks)) {
		t.Fatalf("%+v: want windows, every block applied", res)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.verified) != len(blocks) {
		t.Fatalf("%d states verified for %d blocks", len(r.verified), len(blocks))
	}
	for i, s := range r.verified {
		if s != uint64(i+1) {
			t.Fatalf("verified seqs %v: want 1..%d in order", r.verified, len(blocks))
		}
	}
	if len(r.published) != res.Windows+(len(blocks)-res.WindowBlocks) {
		t.Fatalf("%d publishes for %d windows and %d blocks alone", len(r.published), res.Windows, len(blocks)-res.WindowBlocks)
	}
	if st := r.store.Published(); st.Digest != want[st.Seq].Digest || st.Tip != want[st.Seq].Tip {
		t.Fatalf("replica at %+v, want %+v", st, want[st.Seq])
	}
}

// TestCatchUpVerifyFails: a record in the middle of a window whose figures
// the block does not give fails Verify in the window: the window is dropped
// unwritten, its blocks go alone, and the writer fails at the bad one with
// the Verify error, the blocks before it applied, verified and published,
// the bad one never published, and later requests refused.
func TestCatchUpVerifyFails(t *testing.T) {
	opts := disk.Options{PruneDepth: 3, RollbackWindow: 6, LogRetention: 10_000}
	blocks, want := verifyChain(t, opts, 60)
	const bad = 35 // the 35th block, seq 35: in the window of blocks 31..40
	a := want[bad]
	a.UtxoCount++
	want[bad] = a
	r := newVerifyingReplica(t, opts, want)
	res, err := r.w.ApplyBlocks(context.Background(), blocks, blocks[len(blocks)-1].Height)
	if !errors.Is(err, errMismatch) {
		t.Fatalf("ApplyBlocks with record %d wrong: %v, want the Verify error", bad, err)
	}
	if res.Done != bad-1 || res.Seq != bad-1 || res.Windows != 3 || res.WindowBlocks != 30 {
		t.Fatalf("%+v: want 3 windows of 10 and blocks 31..34 alone before the bad one", res)
	}
	if st := r.store.Published(); st.Seq != bad-1 || st.Digest != want[bad-1].Digest {
		t.Fatalf("published %+v, want seq %d", st, bad-1)
	}
	if !errors.Is(r.w.Failed(), errMismatch) {
		t.Fatalf("writer after a failed verification: %v", r.w.Failed())
	}
	r.mu.Lock()
	for _, s := range r.published {
		if s >= bad {
			t.Errorf("seq %d published, at or past the bad record %d", s, bad)
		}
	}
	r.mu.Unlock()
	if _, err := r.w.ApplyBlocks(context.Background(), blocks[bad:], blocks[len(blocks)-1].Height); !errors.Is(err, errMismatch) {
		t.Fatalf("a batch after the failure: %v", err)
	}
}

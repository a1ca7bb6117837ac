package replication

import (
	"bytes"
	"errors"
	"testing"

	"github.com/utxo-cache/utxo-cache/internal/model"
)

// TestChangeStreamIsTheLog: a streamed change-log answer is byte for byte
// the answer Changes builds, for every starting seq of a chain with
// rollbacks and every bound (at least one change, none beyond the bound
// unless alone); its errors come before anything is written; and the
// streams open at once are bounded, a closed one giving its slot back.
func TestChangeStreamIsTheLog(t *testing.T) {
	cw := newCatchUpWriter(t, 7, model.GenOptions{})
	cw.steps(60)
	src := NewSourceWith(cw.store, cw.w, SourceOptions{Staging: t.TempDir(), MaxChangeStreams: 2})
	seq := cw.store.Published().Seq
	for _, maxBytes := range []int{0, 1, 700, 4 << 10, 1 << 20} {
		for after := uint64(0); after <= seq; after++ {
			want, n, wantSeq, wantTip, err := src.Changes(after, maxBytes)
			if err != nil {
				t.Fatalf("Changes(%d, %d): %v", after, maxBytes, err)
			}
			cs, err := src.OpenChanges(after, maxBytes)
			if err != nil {
				t.Fatalf("OpenChanges(%d, %d): %v", after, maxBytes, err)
			}
			var got bytes.Buffer
			written, err := cs.WriteTo(&got)
			if cerr := cs.Close(); err == nil {
				err = cerr
			}
			if err != nil || written != int64(got.Len()) || !bytes.Equal(got.Bytes(), want) || cs.Seq != wantSeq || cs.Tip != wantTip {
				t.Fatalf("after %d, at most %d bytes: streamed %d bytes (%d counted) at seq %d, %v; Changes has %d changes, %d bytes at seq %d",
					after, maxBytes, got.Len(), written, cs.Seq, err, n, len(want), wantSeq)
			}
		}
	}

	if _, err := src.OpenChanges(seq+1, 1<<20); !errors.Is(err, ErrAhead) {
		t.Fatalf("OpenChanges above the seq: %v, want ErrAhead", err)
	}
	a, err := src.OpenChanges(0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	b, err := src.OpenChanges(seq, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := src.OpenChanges(0, 1<<20); !errors.Is(err, ErrBusy) {
		t.Fatalf("a third stream of two: %v, want ErrBusy", err)
	}
	_ = a.Close()
	_ = a.Close() // again: gives back nothing more
	c, err := src.OpenChanges(0, 1<<20)
	if err != nil {
		t.Fatalf("a stream after one closed: %v", err)
	}
	if _, err := src.OpenChanges(0, 1<<20); !errors.Is(err, ErrBusy) {
		t.Fatalf("a third stream of two, after a double Close: %v, want ErrBusy", err)
	}
	_, _ = b.Close(), c.Close()
	// Errors found on opening free the slot too.
	for range 3 {
		if _, err := src.OpenChanges(seq+1, 1<<20); !errors.Is(err, ErrAhead) {
			t.Fatalf("OpenChanges above the seq: %v, want ErrAhead", err)
		}
	}
}

package diskspace

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestDefaultBallastBytes(t *testing.T) {
	for _, c := range []struct{ total, want uint64 }{
		{0, 0}, {99, 0}, {100, 1}, {20 << 20, 20 << 20 / 100}, {100 << 30, 1 << 30}, {1 << 50, 1 << 30},
	} {
		if got := DefaultBallastBytes(c.total); got != c.want {
			t.Errorf("DefaultBallastBytes(%d) = %d, want %d", c.total, got, c.want)
		}
	}
}

// TestBallast creates, keeps, refuses and removes a ballast in a real
// directory: its space is allocated, an existing one is left as it is, one
// that would eat into the space to keep free is refused with nothing left
// behind, and removing it reports what it held.
func TestBallast(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data") // created by EnsureBallast
	u, err := UsageOf(dir)
	if err != nil || u.Total == 0 || u.Available > u.Total {
		t.Fatalf("UsageOf a directory to be: %+v, %v", u, err)
	}
	if _, err := EnsureBallast(dir, 1<<20, u.Available); !errors.Is(err, ErrNoRoom) {
		t.Fatalf("a ballast that leaves less than keepFree: %v; want ErrNoRoom", err)
	}
	if n, _ := BallastSize(dir); n != 0 {
		t.Fatalf("a refused ballast left %d bytes", n)
	}
	if _, err := os.Stat(BallastPath(dir) + ".tmp"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused ballast left its temporary file: %v", err)
	}
	b, err := EnsureBallast(dir, 1<<20, 0)
	if err != nil || !b.Created || b.Size != 1<<20 {
		t.Fatalf("EnsureBallast: %+v, %v", b, err)
	}
	fi, err := os.Stat(b.Path)
	if err != nil || fi.Size() != 1<<20 {
		t.Fatalf("the ballast file: %v, %v", fi, err)
	}
	if st, ok := allocatedBytes(fi); ok && st < 1<<20 {
		t.Fatalf("the ballast is sparse: %d bytes allocated of %d", st, fi.Size())
	}
	if b, err := EnsureBallast(dir, 2<<20, 0); err != nil || b.Created || b.Size != 1<<20 {
		t.Fatalf("EnsureBallast with one in place: %+v, %v; want it kept", b, err)
	}
	if n, err := RemoveBallast(dir); err != nil || n != 1<<20 {
		t.Fatalf("RemoveBallast: %d, %v", n, err)
	}
	if n, err := RemoveBallast(dir); err != nil || n != 0 {
		t.Fatalf("RemoveBallast of none: %d, %v", n, err)
	}
	if b, err := EnsureBallast(dir, 0, 0); err != nil || b.Created {
		t.Fatalf("a ballast of 0 bytes: %+v, %v", b, err)
	}
}

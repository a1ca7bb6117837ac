package replication

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
	"github.com/utxo-cache/utxo-cache/writer"
)

// testStore is a store with a few blocks, closed for offline checkpoints.
func testStore(t *testing.T) (string, disk.State) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "store")
	s, err := disk.Open(dir, disk.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w := writer.New(s, writer.Options{})
	var prev chain.Hash
	for h := uint64(1); h <= 5; h++ {
		b := &chain.Block{Height: h, PrevHash: prev, Hash: chain.Hash{byte(h), 0xb1}, Txs: []chain.Tx{{
			Hash: chain.Hash{byte(h), 0x71}, Outputs: []chain.Output{{Address: "alice", Value: h}, {Address: "bob", Value: 2 * h}},
		}}}
		if _, err := w.Apply(context.Background(), b); err != nil {
			t.Fatal(err)
		}
		prev = b.Hash
	}
	_ = w.Close()
	st := s.Published()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, st
}

func archive(t *testing.T, dir string) (*bytes.Buffer, Manifest) {
	t.Helper()
	s, err := disk.Open(dir, disk.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cp, err := TakeOffline(s, filepath.Join(dir, "staging"))
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	var buf bytes.Buffer
	if err := cp.Stream(&buf); err != nil {
		t.Fatal(err)
	}
	return &buf, cp.Manifest
}

// TestInstallRoundTrip: a checkpoint installs, verified, with the figures of
// the store it came from.
func TestInstallRoundTrip(t *testing.T) {
	dir, st := testStore(t)
	buf, m := archive(t, dir)
	if !m.Matches(st) {
		t.Fatalf("manifest %s, store %+v", m, st)
	}
	dst := filepath.Join(t.TempDir(), "restored")
	got, err := Install(buf, dst, &m, 1<<30, disk.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Equal(m) {
		t.Fatalf("installed %s, want %s", got, m)
	}
	s, err := disk.Open(dst, disk.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !m.Matches(s.Published()) {
		t.Fatalf("the installed store is at %+v", s.Published())
	}
	if _, err := os.Stat(filepath.Join(dst, manifestName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the manifest stayed in the store: %v", err)
	}
}

// TestInstallRefuses: a checkpoint whose figures differ from the announced
// ones, or whose archive is not one this package writes, leaves nothing.
func TestInstallRefuses(t *testing.T) {
	dir, _ := testStore(t)
	buf, m := archive(t, dir)
	raw := buf.Bytes()

	wrong := m
	wrong.UtxoCount++
	dst := filepath.Join(t.TempDir(), "a")
	if _, err := Install(bytes.NewReader(raw), dst, &wrong, 1<<30, disk.Options{}, nil); !errors.Is(err, ErrMismatch) {
		t.Fatalf("announced count off by one: %v, want ErrMismatch", err)
	}
	wantNothing(t, dst)

	dst = filepath.Join(t.TempDir(), "b")
	if _, err := Install(bytes.NewReader(raw), dst, &m, 1024, disk.Options{}, nil); !errors.Is(err, ErrBadArchive) {
		t.Fatalf("over the size bound: %v, want ErrBadArchive", err)
	}
	wantNothing(t, dst)

	dst = filepath.Join(t.TempDir(), "c")
	if _, err := Install(bytes.NewReader(raw[:len(raw)/2]), dst, &m, 1<<30, disk.Options{}, nil); err == nil {
		t.Fatal("a truncated archive installed")
	}
	wantNothing(t, dst)

	for _, name := range []string{"../escape", "sub/file", ".hidden"} {
		var evil bytes.Buffer
		tw := tar.NewWriter(&evil)
		_ = tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: 1, Typeflag: tar.TypeReg})
		_, _ = tw.Write([]byte{1})
		_ = tw.Close()
		dst = filepath.Join(t.TempDir(), "d")
		if _, err := Install(&evil, dst, &m, 1<<30, disk.Options{}, nil); !errors.Is(err, ErrBadArchive) {
			t.Fatalf("entry %q: %v, want ErrBadArchive", name, err)
		}
		wantNothing(t, dst)
		if _, err := os.Stat(filepath.Join(filepath.Dir(dst), "escape")); err == nil {
			t.Fatal("an entry escaped the directory")
		}
	}
}

func wantNothing(t *testing.T, dst string) {
	t.Helper()
	for _, p := range []string{dst, dst + ".installing"} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s exists after a refused install: %v", p, err)
		}
	}
}

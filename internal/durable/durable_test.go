package durable

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWriteFileAtomic writes a file, replaces it, and fails a write: the
// failed write leaves the previous content and no temporary file.
func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.tar")
	for _, content := range []string{"first", "second, longer"} {
		n, err := WriteFileAtomic(path, func(w io.Writer) (int64, error) {
			n, err := io.WriteString(w, content)
			return int64(n), err
		})
		if err != nil || n != int64(len(content)) {
			t.Fatalf("WriteFileAtomic(%q) = %d, %v", content, n, err)
		}
		wantFiles(t, dir, "out.tar")
		wantContent(t, path, content)
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o644 {
			t.Fatalf("stat %s: %v, %v; want mode 0644", path, fi, err)
		}
	}

	boom := errors.New("boom")
	n, err := WriteFileAtomic(path, func(w io.Writer) (int64, error) {
		_, _ = io.WriteString(w, "half")
		return 4, boom
	})
	if !errors.Is(err, boom) || n != 4 {
		t.Fatalf("a failing write: %d, %v; want 4, %v", n, err, boom)
	}
	wantFiles(t, dir, "out.tar")
	wantContent(t, path, "second, longer")

	if _, err := WriteFileAtomic(filepath.Join(dir, "missing", "out"), func(io.Writer) (int64, error) { return 0, nil }); err == nil {
		t.Fatal("WriteFileAtomic into a missing directory succeeded")
	}
}

// TestRename renames within a directory and across two.
func TestRename(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	if err := os.Mkdir(b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(a, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Rename(a, filepath.Join(dir, "c")); err != nil {
		t.Fatal(err)
	}
	if err := Rename(filepath.Join(dir, "c"), filepath.Join(b, "d")); err != nil {
		t.Fatal(err)
	}
	wantFiles(t, dir, "b")
	wantContent(t, filepath.Join(b, "d"), "x")
	if err := Rename(a, filepath.Join(dir, "e")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Rename of a missing file: %v, want ErrNotExist", err)
	}
}

func TestSyncDir(t *testing.T) {
	dir := t.TempDir()
	if err := SyncDir(dir); err != nil {
		t.Fatal(err)
	}
	if err := SyncDir(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("SyncDir of a missing directory: %v, want ErrNotExist", err)
	}
}

func TestSyncClose(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	if err := SyncClose(f, nil); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("f is still open after SyncClose: %v", err)
	}
	boom := errors.New("boom")
	g, err := os.Create(filepath.Join(t.TempDir(), "g"))
	if err != nil {
		t.Fatal(err)
	}
	if err := SyncClose(g, boom); !errors.Is(err, boom) {
		t.Fatalf("SyncClose(g, boom) = %v, want boom", err)
	}
	if err := g.Close(); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("g is still open after SyncClose with an error: %v", err)
	}
}

func wantFiles(t *testing.T, dir string, want ...string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("%s holds %q, want %q", dir, got, want)
	}
}

func wantContent(t *testing.T, path, want string) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil || string(got) != want {
		t.Fatalf("%s holds %q (%v), want %q", path, got, err, want)
	}
}

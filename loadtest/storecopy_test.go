package loadtest

import (
	"bytes"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCopyStore: the copy holds the same files with the same bytes, is
// independent of the source, and the copier refuses an existing
// destination and anything that is not a file or a directory.
func TestCopyStore(t *testing.T) {
	src := filepath.Join(t.TempDir(), "store")
	r := rand.New(rand.NewPCG(1, 2))
	files := map[string][]byte{
		"MANIFEST-000001": make([]byte, 1234),
		"000005.sst":      make([]byte, 300_000),
		"000006.log":      nil,
		"OPTIONS-000003":  []byte("[Version]\n"),
		"sub/dir/x":       make([]byte, 17),
	}
	var want int64
	for name, b := range files {
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		path := filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		want += int64(len(b))
	}
	if err := os.Mkdir(filepath.Join(src, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}

	dst := filepath.Join(t.TempDir(), "copy")
	n, err := copyStore(src, dst)
	if err != nil || n != want {
		t.Fatalf("copyStore = %d, %v; want %d bytes", n, err, want)
	}
	if got, want := tree(t, dst), tree(t, src); got != want {
		t.Fatalf("copy:\n%s\nsource:\n%s", got, want)
	}
	for name, b := range files {
		got, err := os.ReadFile(filepath.Join(dst, name))
		if err != nil || !bytes.Equal(got, b) {
			t.Errorf("%s: %d bytes, %v; want %d", name, len(got), err, len(b))
		}
	}
	// Writing to the copy leaves the source alone (no shared inodes).
	if err := os.WriteFile(filepath.Join(dst, "000006.log"), []byte("recycled"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(src, "000006.log")); len(b) != 0 {
		t.Errorf("the source changed with the copy: %q", b)
	}

	if _, err := copyStore(src, dst); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("copy onto an existing directory: %v", err)
	}
	if err := os.Symlink("000005.sst", filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	if _, err := copyStore(src, filepath.Join(t.TempDir(), "copy2")); err == nil || !strings.Contains(err.Error(), "neither a file nor a directory") {
		t.Errorf("copy of a store with a symlink: %v", err)
	}
}

// tree lists the files and directories under root with their sizes.
func tree(t *testing.T, root string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		info, err := d.Info()
		if err != nil {
			return err
		}
		size := info.Size()
		if d.IsDir() {
			size = 0
		}
		fmt.Fprintf(&b, "%s %s %d\n", rel, d.Type(), size)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

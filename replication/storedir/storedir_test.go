package storedir

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestOnOS runs the protocol on the operating system's file system: the
// names SetCurrent writes are those Current reads, Forget leaves none, and
// RemoveAllBut keeps the named store and what is not a store.
func TestOnOS(t *testing.T) {
	root := t.TempDir()
	d := New(OS(), root)
	if name, err := d.Current(); name != "" || err != nil {
		t.Fatalf("Current of an empty directory = %q, %v", name, err)
	}
	for _, dir := range []string{"store-1", "store-2", Installing("store-3"), "ballast.d"} {
		if err := os.Mkdir(filepath.Join(root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "store-4"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"store-1", "store-2"} {
		if err := d.SetCurrent(name); err != nil {
			t.Fatal(err)
		}
		if got, err := d.Current(); got != name || err != nil {
			t.Fatalf("Current after SetCurrent(%s) = %q, %v", name, got, err)
		}
	}
	if raw, err := os.ReadFile(filepath.Join(root, CurrentFile)); string(raw) != "store-2\n" || err != nil {
		t.Fatalf("CURRENT holds %q (%v), want one line", raw, err)
	}
	if err := d.RemoveAllBut("store-2"); err != nil {
		t.Fatal(err)
	}
	wantEntries(t, root, CurrentFile, "ballast.d", "store-2", "store-4")
	if err := d.Forget(); err != nil {
		t.Fatal(err)
	}
	if err := d.Forget(); err != nil {
		t.Fatalf("Forget without CURRENT: %v", err)
	}
	if name, err := d.Current(); name != "" || err != nil {
		t.Fatalf("Current after Forget = %q, %v", name, err)
	}
	wantEntries(t, root, "ballast.d", "store-2", "store-4")
}

// TestCurrentRefuses: a CURRENT this package did not write, or that names
// a store that is not there, is ErrBadCurrent; SetCurrent refuses what is
// not an installed store.
func TestCurrentRefuses(t *testing.T) {
	root := t.TempDir()
	d := New(OS(), root)
	for _, dir := range []string{"store-1", Installing("store-2")} {
		if err := os.Mkdir(filepath.Join(root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "store-3"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, content := range []string{"", "\n", "data\n", "../store-1\n", "store-1/x\n", Installing("store-2") + "\n", "store-3\n", "store-9\n"} {
		if err := os.WriteFile(filepath.Join(root, CurrentFile), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if name, err := d.Current(); !errors.Is(err, ErrBadCurrent) {
			t.Errorf("CURRENT %q: Current = %q, %v; want ErrBadCurrent", content, name, err)
		}
	}
	for _, name := range []string{"", "data", "../store-1", Installing("store-2"), "store-3", "store-9"} {
		if err := d.SetCurrent(name); err == nil {
			t.Errorf("SetCurrent(%q) succeeded", name)
		}
	}
	if err := os.WriteFile(filepath.Join(root, CurrentFile), []byte(" store-1 \n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if name, err := d.Current(); name != "store-1" || err != nil {
		t.Errorf("Current of a padded name = %q, %v", name, err)
	}
}

func TestNames(t *testing.T) {
	name := NewStoreName(time.Unix(1, 5))
	if name != "store-1000000005" || !validName(name) {
		t.Fatalf("NewStoreName = %q", name)
	}
	if got := Installing(name); got != "store-1000000005.installing" || validName(got) {
		t.Fatalf("Installing(%s) = %q", name, got)
	}
	d := New(OS(), "/data")
	if got := d.Path(Installing(name)); got != "/data/store-1000000005.installing" {
		t.Fatalf("Path = %q", got)
	}
}

func wantEntries(t *testing.T, dir string, want ...string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	if !slices.Equal(got, want) {
		t.Fatalf("%s holds %q, want %q", dir, got, want)
	}
}

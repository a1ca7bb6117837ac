package harness

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// HostImage describes an image built from programs installed on this
// machine (Debian packages), for the tests that cannot pull the upstream
// images: each program is copied with the shared libraries ldd lists, onto
// an empty base.
type HostImage struct {
	Ref        string            // the image's name, localhost/…
	Programs   map[string]string // host path → path in the image
	Entrypoint []string          // nil: none (the command names the program)
	User       string            // uid:gid the container runs as
	OwnedDirs  []string          // empty directories in the image owned by User (volumes' mount points)
}

var lddPath = regexp.MustCompile(`(?:=>\s*)?(/\S+)\s+\(0x`)

// BuildHostImage builds img with podman and removes it in t's cleanup.
func BuildHostImage(t testing.TB, pm *Podman, img HostImage) {
	t.Helper()
	ctx := t.TempDir()
	rootfs := filepath.Join(ctx, "rootfs")
	for src, dst := range img.Programs {
		copyFile(t, src, filepath.Join(rootfs, dst), 0o755)
		out, err := exec.Command("ldd", src).CombinedOutput()
		if err != nil && !bytes.Contains(out, []byte("not a dynamic executable")) {
			t.Fatalf("ldd %s: %v\n%s", src, err, out)
		}
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			if m := lddPath.FindStringSubmatch(sc.Text()); m != nil {
				copyFile(t, m[1], filepath.Join(rootfs, m[1]), 0o755) // follows symlinks: the loader's name holds the file
			}
		}
	}
	owned := filepath.Join(ctx, "owned")
	for _, d := range img.OwnedDirs {
		if err := os.MkdirAll(filepath.Join(owned, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(owned, 0o755); err != nil {
		t.Fatal(err)
	}
	var cf strings.Builder
	fmt.Fprintf(&cf, "FROM scratch\nCOPY rootfs/ /\nCOPY --chown=%s owned/ /\nENV PATH=/usr/local/bin:/usr/bin:/bin\nUSER %s\n", img.User, img.User)
	if img.Entrypoint != nil {
		fmt.Fprintf(&cf, "ENTRYPOINT [%s]\n", quoteAll(img.Entrypoint))
	}
	if err := os.WriteFile(filepath.Join(ctx, "Containerfile"), []byte(cf.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	pm.MustRun(5*time.Minute, "build", "--pull=never", "--layers=false", "-t", img.Ref, ctx)
	t.Cleanup(func() {
		if _, err := pm.Run(time.Minute, "rmi", "-f", img.Ref); err != nil {
			t.Logf("remove image %s: %v", img.Ref, err)
		}
	})
}

func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}

func copyFile(t testing.TB, src, dst string, mode os.FileMode) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// Package deploy_test runs the files of deploy/: the image, the Prometheus
// configuration and rules, the dashboard, the compose stack and the
// Kubernetes manifests, each with the real tool or validator.
package deploy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/utxo-cache/utxo-cache/deploy/internal/harness"
)

// imageConfig is the part of `podman image inspect` the test checks.
type imageConfig struct {
	Config struct {
		User       string            `json:"User"`
		Labels     map[string]string `json:"Labels"`
		Entrypoint []string          `json:"Entrypoint"`
	} `json:"Config"`
}

// buildImage runs `make image` for a tag of this test and removes the image
// in the test's cleanup. It returns the image's reference.
func buildImage(t *testing.T, pm *harness.Podman, revision string) string {
	t.Helper()
	root := harness.RepoRoot(t)
	name := "localhost/utxo-cache-test"
	version := fmt.Sprintf("t%d", time.Now().UnixNano())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "make", "--no-print-directory", "-C", root, "image",
		"IMAGE="+name, "VERSION="+version, "REVISION="+revision, "IMAGE_CTX="+filepath.Join(t.TempDir(), "ctx"))
	cmd.Env = pm.Env()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make image: %v\n%s", err, out)
	}
	ref := name + ":" + version
	t.Cleanup(func() {
		if _, err := pm.Run(time.Minute, "rmi", "-f", ref); err != nil {
			t.Logf("remove image: %v", err)
		}
	})
	return ref
}

// TestImage builds the image with make image (podman, no registry), checks
// its labels, user, lack of a shell and lack of a load harness, then runs it
// as a read-only container on the host's loopback: it answers /healthz,
// applies posted blocks, serves them, and stops cleanly on SIGTERM.
func TestImage(t *testing.T) {
	pm := harness.NewPodman(t)
	const revision = "0123456789abcdef0123456789abcdef01234567"
	ref := buildImage(t, pm, revision)

	var inspected []imageConfig
	if err := json.Unmarshal([]byte(pm.MustRun(time.Minute, "image", "inspect", ref)), &inspected); err != nil || len(inspected) != 1 {
		t.Fatalf("image inspect: %v (%d images)", err, len(inspected))
	}
	cfg := inspected[0].Config
	if uid, err := strconv.Atoi(strings.Split(cfg.User, ":")[0]); err != nil || uid == 0 {
		t.Errorf("image user %q: want a numeric non-root uid", cfg.User)
	}
	version := ref[strings.LastIndex(ref, ":")+1:]
	for label, want := range map[string]string{
		"org.opencontainers.image.source":   "https://github.com/utxo-cache/utxo-cache",
		"org.opencontainers.image.version":  version,
		"org.opencontainers.image.revision": revision,
	} {
		if got := cfg.Labels[label]; got != want {
			t.Errorf("label %s = %q, want %q", label, got, want)
		}
	}
	// No shell: running /bin/sh in the image must fail for want of it.
	if out, err := pm.Run(time.Minute, "run", "--rm", "--network", "none", "--entrypoint", "/bin/sh", ref, "-c", "true"); err == nil {
		t.Errorf("the image has a shell: /bin/sh ran (%q)", out)
	} else if !strings.Contains(err.Error(), "/bin/sh") {
		t.Errorf("running /bin/sh failed for another reason than its absence: %v", err)
	}

	// The image ships the service alone: its binary has no load harness
	// (that is utxo-loadtest, a module of its own).
	if out, err := pm.Run(time.Minute, "run", "--rm", "--network", "none", ref, "loadtest", "--help"); err == nil {
		t.Errorf("the image's utxo-cache runs the load harness: loadtest --help printed %q", out)
	} else if !strings.Contains(err.Error(), `unknown command "loadtest"`) {
		t.Errorf("loadtest failed for another reason than its absence: %v", err)
	}

	// A container as Kubernetes would run it: read-only root, no
	// privileges, the store on a volume, the token in a mounted file.
	dataDir := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(dataDir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dataDir, 0o777); err != nil { // the image's user (65532) writes here
		t.Fatal(err)
	}
	const token = "image-test-admin-token"
	tokenFile := filepath.Join(t.TempDir(), "admin-token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	port := harness.FreePort(t)
	name := "utxo-cache-image-test-" + version
	pm.MustRun(2*time.Minute, "run", "-d", "--name", name, "--network", "host", "--read-only",
		"--cap-drop", "ALL", "--security-opt", "no-new-privileges",
		"-v", dataDir+":/data", "-v", tokenFile+":/run/secrets/admin-token:ro",
		"-e", "UTXO_CACHE_LISTEN=127.0.0.1:"+strconv.Itoa(port),
		"-e", "UTXO_CACHE_ADMIN_TOKEN_FILE=/run/secrets/admin-token",
		ref)
	stopped := false
	t.Cleanup(func() {
		if !stopped || t.Failed() {
			if logs, err := pm.Run(time.Minute, "logs", name); err == nil && t.Failed() {
				t.Logf("container log:\n%s", logs)
			}
		}
		if _, err := pm.Run(time.Minute, "rm", "-f", "-t", "1", name); err != nil {
			t.Logf("remove container: %v", err)
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := harness.NewClient("http://127.0.0.1:" + strconv.Itoa(port))
	harness.Eventually(t, time.Minute, "the container answers /healthz", func() error { return c.Healthy(ctx) })

	var seq uint64
	for h := uint64(1); h <= 3; h++ {
		s, err := c.PostBlock(ctx, token, harness.Block(h, "addr_image", 1000*h))
		if err != nil {
			t.Fatalf("post block %d: %v", h, err)
		}
		seq = s
	}
	if seq != 3 {
		t.Fatalf("seq after 3 blocks = %d, want 3", seq)
	}
	bal, err := c.BalanceAt(ctx, "addr_image", seq)
	if err != nil {
		t.Fatal(err)
	}
	if bal.Value != "6000" || bal.UTXOCount != 3 {
		t.Fatalf("balance of addr_image = %+v, want 6000 in 3 outputs", bal)
	}
	tip, err := c.TipAt(ctx, seq)
	if err != nil {
		t.Fatal(err)
	}
	if tip.Tip == nil || tip.Tip.Height != 3 || tip.UTXOCount != 3 {
		t.Fatalf("tip = %+v, want height 3 with 3 UTXOs", tip)
	}
	if m, _ := filepath.Glob(filepath.Join(dataDir, "MANIFEST-*")); len(m) == 0 {
		t.Fatalf("the store is not on the volume: no Pebble MANIFEST in %s", dataDir)
	}

	// SIGTERM (podman stop) closes the store and exits 0.
	pm.MustRun(time.Minute, "stop", "-t", "30", name)
	stopped = true
	code := strings.TrimSpace(pm.MustRun(time.Minute, "inspect", "--format", "{{.State.ExitCode}}", name))
	if code != "0" {
		t.Fatalf("exit code after podman stop = %s, want 0 (a clean shutdown)", code)
	}
}

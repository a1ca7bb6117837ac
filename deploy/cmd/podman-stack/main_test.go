package main

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPrint runs `podman-stack print` on deploy/compose.yaml: every service
// appears once, in depends_on order, with its image from the environment.
func TestPrint(t *testing.T) {
	t.Setenv("UTXO_CACHE_IMAGE", "localhost/utxo-cache:print-test")
	// The project as an operator lays it out: deploy/'s files and the env
	// files made from their examples.
	deploy, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, f := range []string{"compose.yaml", "redis.conf", "prometheus.yaml", "prometheus-alerts.yaml", "grafana"} {
		if err := os.Symlink(filepath.Join(deploy, f), filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"admin", "replication", "grafana"} {
		b, err := os.ReadFile(filepath.Join(deploy, f+".env.example"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f+".env"), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(dir) // as the README runs it: -f compose.yaml, relative
	out := captureStdout(t, func() error {
		return run([]string{"-p", "pt", "print"})
	})
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 7 {
		t.Fatalf("print gave %d commands, want 7 (one per service):\n%s", len(lines), out)
	}
	pos := map[string]int{}
	for i, l := range lines {
		for _, svc := range []string{"redis", "writer", "replica-1", "replica-2", "node-exporter", "prometheus", "grafana"} {
			if strings.Contains(l, "--name pt_"+svc+"_1 ") {
				pos[svc] = i
			}
		}
	}
	if len(pos) != 7 || pos["redis"] > pos["writer"] || pos["writer"] > pos["replica-1"] || pos["replica-2"] > pos["prometheus"] || pos["prometheus"] > pos["grafana"] {
		t.Fatalf("services out of depends_on order %v:\n%s", pos, out)
	}
	if !strings.Contains(lines[pos["redis"]], " -v "+filepath.Join(dir, "redis.conf")+":") {
		t.Errorf("redis command %q does not bind-mount redis.conf by its absolute path", lines[pos["redis"]])
	}
	if !strings.Contains(lines[pos["writer"]], " localhost/utxo-cache:print-test serve ") {
		t.Errorf("writer command %q does not use UTXO_CACHE_IMAGE", lines[pos["writer"]])
	}
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{{}, {"-f", "../../compose.yaml", "start"}, {"-f", "../../compose.yaml", "down", "-x"}, {"-bogus"}} {
		var usage usageError
		if err := run(args); !errors.As(err, &usage) {
			t.Errorf("run(%q) = %v, want a usage error", args, err)
		}
	}
	if err := run([]string{"-f", "no-such.yaml", "print"}); err == nil {
		t.Error("a missing compose file was accepted")
	}
}

func captureStdout(t *testing.T, f func() error) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stdout
	os.Stdout = w
	done := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		done <- string(b)
	}()
	ferr := f()
	os.Stdout = old
	w.Close()
	out := <-done
	if ferr != nil {
		t.Fatal(ferr)
	}
	return out
}

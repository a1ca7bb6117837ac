package harness

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// BuildBinary builds cmd/utxo-cache as `make image` does (static, trimmed),
// so the two share the Go build cache, into a directory of t's, and returns
// its path.
func BuildBinary(t testing.TB) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "utxo-cache")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, "./cmd/utxo-cache")
	cmd.Dir = RepoRoot(t)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/utxo-cache: %v\n%s", err, b)
	}
	return out
}

// WriteSecret writes a token file (mode 0600, with a trailing newline, as an
// operator's editor would) under t's temporary directory.
func WriteSecret(t testing.TB, name, token string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Node is a utxo-cache serve process and its client.
type Node struct {
	*Process
	*Client
	Addr string // host:port
}

// StartRedis runs redis-server with deploy/redis.conf on a free loopback
// port (the file's port, address and directory overridden) and returns its
// URL once it answers.
func StartRedis(t testing.TB) string {
	t.Helper()
	bin := NeedTool(t, "redis-server", "apt-get install -y redis-server")
	port := FreePort(t)
	p := Start(t, "redis", nil, bin, filepath.Join(DeployDir(t), "redis.conf"),
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", t.TempDir(), "--daemonize", "no")
	addr := "127.0.0.1:" + strconv.Itoa(port)
	Eventually(t, 30*time.Second, "redis-server answers", func() error {
		if p.Exited() {
			t.Fatalf("redis-server exited: %s", p.Tail(2000))
		}
		return dialOK(addr)
	})
	return "redis://" + addr + "/0"
}

// StartWriter runs `utxo-cache serve` as a writer with both tokens (from
// files) and the given Redis URL ("" for none), and waits for /healthz.
func StartWriter(t testing.TB, bin, adminToken, replToken, redisURL string) *Node {
	t.Helper()
	addr := "127.0.0.1:" + strconv.Itoa(FreePort(t))
	args := []string{"serve", "--data-dir", filepath.Join(t.TempDir(), "writer"), "--listen", addr,
		"--admin-token-file", WriteSecret(t, "admin-token", adminToken),
		"--replication-token-file", WriteSecret(t, "replication-token", replToken)}
	if redisURL != "" {
		args = append(args, "--redis-url", redisURL)
	}
	return startNode(t, "writer", bin, addr, args)
}

// StartReplica runs `utxo-cache serve --replica-of writer` and waits for
// /healthz.
func StartReplica(t testing.TB, name, bin string, writer *Node, replToken, redisURL string) *Node {
	t.Helper()
	addr := "127.0.0.1:" + strconv.Itoa(FreePort(t))
	args := []string{"serve", "--replica-of", writer.Base, "--data-dir", filepath.Join(t.TempDir(), name), "--listen", addr,
		"--replication-token-file", WriteSecret(t, name+"-replication-token", replToken)}
	if redisURL != "" {
		args = append(args, "--redis-url", redisURL)
	}
	return startNode(t, name, bin, addr, args)
}

func startNode(t testing.TB, name, bin, addr string, args []string) *Node {
	t.Helper()
	p := Start(t, name, nil, bin, args...)
	n := &Node{Process: p, Client: NewClient("http://" + addr), Addr: addr}
	Eventually(t, time.Minute, name+" answers /healthz", func() error {
		if p.Exited() {
			t.Fatalf("%s exited: %s", name, p.Tail(2000))
		}
		return n.Healthy(context.Background())
	})
	return n
}

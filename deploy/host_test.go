package deploy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/utxo-cache/utxo-cache/deploy/internal/harness"
)

// TestSystemdUnit checks utxo-cache.service with systemd-analyze verify
// (its ExecStart pointed at a built binary): any complaint fails the test.
func TestSystemdUnit(t *testing.T) {
	analyze := harness.NeedTool(t, "systemd-analyze", "apt-get install -y systemd")
	bin := harness.BuildBinary(t)
	unit, err := os.ReadFile(filepath.Join(harness.DeployDir(t), "utxo-cache.service"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(unit), "ExecStart=/usr/local/bin/utxo-cache serve --config /etc/utxo-cache/config.yaml") {
		t.Fatal("utxo-cache.service no longer starts /usr/local/bin/utxo-cache serve --config /etc/utxo-cache/config.yaml")
	}
	p := filepath.Join(t.TempDir(), "utxo-cache.service")
	if err := os.WriteFile(p, []byte(strings.ReplaceAll(string(unit), "/usr/local/bin/utxo-cache", bin)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", p).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("systemd-analyze verify utxo-cache.service: %v\n%s", err, out)
	}
}

// TestConfigAndEnvFile runs serve as the unit does: --config config.yaml
// and the environment of utxo-cache.env (its admin token filled in, its
// Redis URL pointed at a test Redis), with only the data directory and the
// listen address overridden. The settings take effect: JSON logs, writes
// enabled by the token, the Redis tier up.
func TestConfigAndEnvFile(t *testing.T) {
	dir := harness.DeployDir(t)
	bin := harness.BuildBinary(t)
	redisURL := harness.StartRedis(t)
	b, err := os.ReadFile(filepath.Join(dir, "utxo-cache.env"))
	if err != nil {
		t.Fatal(err)
	}
	const token = "env-file-admin-token"
	var env []string
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || !strings.HasPrefix(k, "UTXO_CACHE_") {
			t.Fatalf("utxo-cache.env: %q is not a UTXO_CACHE_ setting", line)
		}
		switch k {
		case "UTXO_CACHE_ADMIN_TOKEN":
			v = token
		case "UTXO_CACHE_REDIS_URL":
			v = redisURL
		}
		env = append(env, k+"="+v)
	}
	addr := "127.0.0.1:" + strconv.Itoa(harness.FreePort(t))
	p := harness.Start(t, "serve", env, bin, "serve", "--config", filepath.Join(dir, "config.yaml"),
		"--data-dir", filepath.Join(t.TempDir(), "data"), "--listen", addr)
	c := harness.NewClient("http://" + addr)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	harness.Eventually(t, time.Minute, "serve answers /healthz", func() error {
		if p.Exited() {
			t.Fatalf("serve exited: %s", p.Tail(2000))
		}
		return c.Healthy(ctx)
	})
	if _, err := c.PostBlock(ctx, token, harness.Block(1, "addr_env", 5)); err != nil {
		t.Fatalf("a write with the env file's token: %v", err)
	}
	harness.Eventually(t, time.Minute, "the Redis tier is up", func() error {
		return metricIs(ctx, c, "utxo_cache_redis_up", "1")
	})
	if err := p.Stop(30 * time.Second); err != nil {
		t.Fatalf("serve did not stop cleanly: %v", err)
	}
	sc := bufio.NewScanner(strings.NewReader(p.Tail(1 << 20)))
	lines := 0
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "{") {
			continue // the one plain "serving on" line for a terminal
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line is not JSON (config.yaml sets log-format: json): %q", line)
		}
		lines++
	}
	if lines == 0 {
		t.Fatalf("no JSON log line (config.yaml sets log-format: json):\n%s", p.Tail(2000))
	}
}

// metricIs is nil when /metrics has the unlabelled sample name with value.
func metricIs(ctx context.Context, c *harness.Client, name, value string) error {
	req, err := newGet(ctx, c.Base+"/metrics")
	if err != nil {
		return err
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == name {
			if f[1] == value {
				return nil
			}
			return fmt.Errorf("%s = %s, want %s", name, f[1], value)
		}
	}
	return fmt.Errorf("no %s in /metrics", name)
}

var redisLine = regexp.MustCompile(`redis on 127\.0\.0\.1:(\d+); admin token: (\S+)`)

// TestLocalStack runs local-stack.sh: it builds the binary, starts a
// private redis-server and serve with a generated token; a posted block is
// served; Ctrl-C (SIGINT to the group) stops both.
func TestLocalStack(t *testing.T) {
	harness.NeedTool(t, "redis-server", "apt-get install -y redis-server")
	harness.NeedTool(t, "redis-cli", "apt-get install -y redis-tools")
	root := harness.RepoRoot(t)
	addr := "127.0.0.1:" + strconv.Itoa(harness.FreePort(t))
	p := harness.Start(t, "local-stack", []string{"UTXO_CACHE_LISTEN=" + addr, "UTXO_CACHE_ADMIN_TOKEN="},
		"bash", filepath.Join(root, "deploy", "local-stack.sh"), filepath.Join(t.TempDir(), "data"))
	c := harness.NewClient("http://" + addr)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var redisPort, token string
	harness.Eventually(t, 4*time.Minute, "local-stack.sh serves", func() error {
		if p.Exited() {
			t.Fatalf("local-stack.sh exited: %s", p.Tail(2000))
		}
		if m := redisLine.FindStringSubmatch(p.Tail(1 << 16)); m != nil {
			redisPort, token = m[1], m[2]
		}
		if token == "" {
			return fmt.Errorf("no token announced yet")
		}
		return c.Healthy(ctx)
	})
	if _, err := c.PostBlock(ctx, token, harness.Block(1, "addr_local", 3)); err != nil {
		t.Fatalf("post with the announced token: %v", err)
	}
	if bal, err := c.BalanceAt(ctx, "addr_local", 1); err != nil || bal.Value != "3" {
		t.Fatalf("balance = %+v, %v; want 3", bal, err)
	}
	if err := syscall.Kill(-p.PID(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, time.Minute, "local-stack.sh exits on Ctrl-C", func() error {
		if !p.Exited() {
			return fmt.Errorf("still running")
		}
		return nil
	})
	if conn, err := net.DialTimeout("tcp", "127.0.0.1:"+redisPort, time.Second); err == nil {
		conn.Close()
		t.Fatalf("the stack's redis-server on port %s still answers after Ctrl-C", redisPort)
	}
}

func newGet(ctx context.Context, url string) (*http.Request, error) {
	return http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
}

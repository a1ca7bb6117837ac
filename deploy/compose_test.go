package deploy_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/utxo-cache/utxo-cache/deploy/internal/compose"
	"github.com/utxo-cache/utxo-cache/deploy/internal/harness"
	"github.com/utxo-cache/utxo-cache/deploy/internal/promcheck"
)

// The compose stack's fixed loopback ports (deploy/compose.yaml), below the
// kernel's ephemeral range so that no test's random port takes them.
const (
	composeWriter     = "127.0.0.1:18080"
	composeReplica1   = "127.0.0.1:18081"
	composeReplica2   = "127.0.0.1:18082"
	composeRedis      = "127.0.0.1:16379"
	composePrometheus = "127.0.0.1:19090"
	composeNode       = "127.0.0.1:19100"
)

// composeServices are the services the test starts: all but grafana, whose
// image no Debian package provides (TestGrafanaProvisioning checks its files).
var composeServices = []string{"redis", "writer", "replica-1", "replica-2", "node-exporter", "prometheus"}

// TestComposeStack runs deploy/compose.yaml with podman, through the same
// code as cmd/podman-stack (internal/compose; Debian 12's podman-compose
// 1.0.3 cannot run host-networked services): the image of make image for
// the writer and both replicas, and for Redis, Prometheus and node-exporter
// images built from this machine's Debian packages (no registry is
// reachable). A block posted to the writer is read with min_seq on both
// replicas, whose tips and digests equal the writer's; Prometheus scrapes
// all four targets with the alert rules loaded, and every node reports the
// Redis tier up. Then the stack is torn down, volumes included, and nothing
// of it may remain.
func TestComposeStack(t *testing.T) {
	pm := harness.NewPodman(t)
	redisBin := harness.NeedTool(t, "redis-server", "apt-get install -y redis-server")
	promBin := harness.NeedTool(t, "prometheus", "apt-get install -y prometheus")
	nodeBin := harness.NeedTool(t, "prometheus-node-exporter", "apt-get install -y prometheus-node-exporter")
	for _, addr := range []string{composeWriter, composeReplica1, composeReplica2, composeRedis, composePrometheus, composeNode} {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("the compose stack's port %s is taken (another stack running?): %v", addr, err)
		}
		l.Close()
	}

	suffix := randomHex(t, 4)
	env := map[string]string{"UTXO_CACHE_IMAGE": buildImage(t, pm, "compose-test")}
	for name, img := range map[string]harness.HostImage{
		"REDIS_IMAGE": {Ref: "localhost/deploytest-redis:" + suffix, User: "65534:65534",
			Programs: map[string]string{redisBin: "/usr/local/bin/redis-server"}},
		"PROMETHEUS_IMAGE": {Ref: "localhost/deploytest-prometheus:" + suffix, User: "65534:65534",
			Programs: map[string]string{promBin: "/bin/prometheus"}, Entrypoint: []string{"/bin/prometheus"},
			OwnedDirs: []string{"prometheus"}},
		"NODE_EXPORTER_IMAGE": {Ref: "localhost/deploytest-node-exporter:" + suffix, User: "65534:65534",
			Programs: map[string]string{nodeBin: "/bin/node_exporter"}, Entrypoint: []string{"/bin/node_exporter"}},
	} {
		harness.BuildHostImage(t, pm, img)
		env[name] = img.Ref
	}

	// The project directory, as an operator lays it out: deploy/'s files and
	// the three env files made from their examples.
	project := t.TempDir()
	for _, f := range []string{"compose.yaml", "redis.conf", "prometheus.yaml", "prometheus-alerts.yaml", "grafana"} {
		copyTree(t, filepath.Join(harness.DeployDir(t), f), filepath.Join(project, f))
	}
	admin, repl := randomHex(t, 32), randomHex(t, 32)
	for name, value := range map[string]string{"admin": admin, "replication": repl, "grafana": randomHex(t, 16)} {
		example, err := os.ReadFile(filepath.Join(harness.DeployDir(t), name+".env.example"))
		if err != nil {
			t.Fatal(err)
		}
		filled := strings.Replace(string(example), "=\n", "="+value+"\n", 1)
		if filled == string(example) {
			t.Fatalf("%s.env.example has no empty setting to fill", name)
		}
		if err := os.WriteFile(filepath.Join(project, name+".env"), []byte(filled), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	name := "uctest" + suffix
	stack, err := compose.Load(filepath.Join(project, "compose.yaml"), name, func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	})
	if err != nil {
		t.Fatal(err)
	}
	run := func(ctx context.Context, args ...string) (string, error) { return pm.Run(3*time.Minute, args...) }
	t.Cleanup(func() {
		if err := stack.Down(context.Background(), run, true); err != nil {
			t.Errorf("down: %v", err)
		}
		label := "label=io.podman.compose.project=" + name
		left := pm.MustRun(time.Minute, "ps", "-a", "-q", "--filter", label)
		vols := pm.MustRun(time.Minute, "volume", "ls", "-q", "--filter", label)
		if strings.TrimSpace(left+vols) != "" {
			t.Errorf("after down, the stack left containers %q and volumes %q; removing them", left, vols)
			for _, id := range strings.Fields(left) {
				pm.Run(time.Minute, "rm", "-f", id) //nolint:errcheck // best effort after a reported failure
			}
			for _, v := range strings.Fields(vols) {
				pm.Run(time.Minute, "volume", "rm", "-f", v) //nolint:errcheck // best effort after a reported failure
			}
		}
	})
	if err := stack.Up(context.Background(), run, composeServices); err != nil {
		t.Fatalf("up: %v", err)
	}
	logsOnFailure(t, pm, name)

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	writer := harness.NewClient("http://" + composeWriter)
	replicas := []*harness.Client{harness.NewClient("http://" + composeReplica1), harness.NewClient("http://" + composeReplica2)}
	harness.Eventually(t, 2*time.Minute, "the writer answers /healthz", func() error { return writer.Healthy(ctx) })
	for _, r := range replicas {
		harness.Eventually(t, 2*time.Minute, r.Base+" is ready", func() error { return r.Ready(ctx) })
	}

	var seq uint64
	for h := uint64(1); h <= 2; h++ {
		s, err := writer.PostBlock(ctx, admin, harness.Block(h, "addr_compose", 7*h))
		if err != nil {
			t.Fatal(err)
		}
		seq = s
	}
	want, err := writer.TipAt(ctx, seq)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range replicas {
		// min_seq waits up to the replica's --max-wait (2 s) and then answers
		// 503 behind: on a loaded machine, ask again.
		var got harness.Tip
		harness.Eventually(t, time.Minute, fmt.Sprintf("%s answers at min_seq=%d", r.Base, seq), func() error {
			var err error
			got, err = r.TipAt(ctx, seq)
			return err
		})
		if got.Tip == nil || got.Tip.Height != 2 || got.Tip.Hash != want.Tip.Hash ||
			got.UTXOCount != want.UTXOCount || got.UTXODigest != want.UTXODigest {
			t.Fatalf("%s tip %+v, want the writer's %+v", r.Base, got, want)
		}
		if got.Replication == nil || got.Replication.Seq < seq {
			t.Fatalf("%s replication %+v, want seq >= %d", r.Base, got.Replication, seq)
		}
		bal, err := r.BalanceAt(ctx, "addr_compose", seq)
		if err != nil || bal.Value != "21" {
			t.Fatalf("%s balance of addr_compose = %+v, %v; want 21", r.Base, bal, err)
		}
	}
	// Writes go to the writer only.
	if _, err := replicas[0].PostBlock(ctx, admin, harness.Block(3, "addr_compose", 1)); err == nil {
		t.Fatal("a replica applied a posted block")
	}

	// Prometheus, as configured by prometheus.yaml, scrapes every target and
	// has loaded the alert rules.
	pc := &promcheck.Client{Base: "http://" + composePrometheus, HTTP: &http.Client{Timeout: 30 * time.Second}}
	harness.Eventually(t, 2*time.Minute, "Prometheus scrapes the writer, both replicas and node-exporter", func() error {
		n, err := pc.Series(ctx, `up == 1`)
		if err != nil {
			return err
		}
		if n != 4 {
			return fmt.Errorf("%d of 4 targets up", n)
		}
		return nil
	})
	// Every node uses the stack's Redis (run with redis.conf).
	harness.Eventually(t, time.Minute, "the writer and both replicas use Redis", func() error {
		n, err := pc.Series(ctx, `utxo_cache_redis_up == 1`)
		if err != nil {
			return err
		}
		if n != 3 {
			return fmt.Errorf("%d of 3 nodes report utxo_cache_redis_up 1", n)
		}
		return nil
	})
	rules, err := prometheusRuleCount(ctx, pc)
	if err != nil {
		t.Fatal(err)
	}
	alerts, err := promcheck.Alerts(filepath.Join(project, "prometheus-alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if rules != len(alerts) {
		t.Fatalf("Prometheus loaded %d rules, want the %d alerts of prometheus-alerts.yaml", rules, len(alerts))
	}
}

// prometheusRuleCount is the number of rules Prometheus has loaded.
func prometheusRuleCount(ctx context.Context, pc *promcheck.Client) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, pc.Base+"/api/v1/rules", nil)
	if err != nil {
		return 0, err
	}
	resp, err := pc.HTTP.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var ans struct {
		Data struct {
			Groups []struct {
				Rules []json.RawMessage `json:"rules"`
			} `json:"groups"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&ans); err != nil {
		return 0, fmt.Errorf("decode /api/v1/rules: %w", err)
	}
	n := 0
	for _, g := range ans.Data.Groups {
		n += len(g.Rules)
	}
	return n, nil
}

// logsOnFailure logs every container's output of the project when t fails
// (registered after up, so it runs before the cleanup that takes them down).
func logsOnFailure(t *testing.T, pm *harness.Podman, project string) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		ids, err := pm.Run(time.Minute, "ps", "-a", "--format", "{{.Names}}", "--filter", "label=io.podman.compose.project="+project)
		if err != nil {
			t.Log(err)
			return
		}
		for _, id := range strings.Fields(ids) {
			out, _ := pm.Run(time.Minute, "logs", "--tail", "30", id)
			t.Logf("logs of %s:\n%s", id, out)
		}
	})
}

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// copyTree copies a file or a directory tree.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if info.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestComposeSecretsFromEnvFiles checks that compose.yaml holds no secret:
// the tokens and Grafana's password come from env files (the writer's
// admin token to the writer only), their examples hold no value, and git
// ignores the filled-in copies.
func TestComposeSecretsFromEnvFiles(t *testing.T) {
	dir := harness.DeployDir(t)
	stack, err := compose.Load(filepath.Join(dir, "compose.yaml"), "check", func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range stack.Services {
		for k := range s.Environment {
			if strings.Contains(k, "TOKEN") || strings.Contains(k, "PASSWORD") || strings.Contains(k, "SECRET") {
				t.Errorf("service %s sets %s in compose.yaml", name, k)
			}
		}
		for _, a := range s.Command {
			if strings.HasPrefix(a, "--admin-token") || strings.HasPrefix(a, "--replication-token") {
				t.Errorf("service %s passes a token on its command line: %s", name, a)
			}
		}
	}
	want := map[string][]string{
		"writer":    {"admin.env", "replication.env"},
		"replica-1": {"replication.env"},
		"replica-2": {"replication.env"},
		"grafana":   {"grafana.env"},
	}
	for svc, files := range want {
		if got := stack.Services[svc].EnvFile; !slices.Equal(got, files) {
			t.Errorf("service %s env_file = %v, want %v", svc, got, files)
		}
	}
	ignore, err := os.ReadFile(filepath.Join(dir, ".gitignore"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"admin.env", "replication.env", "grafana.env"} {
		if !slices.Contains(strings.Split(string(ignore), "\n"), "/"+f) {
			t.Errorf("deploy/.gitignore does not ignore %s", f)
		}
		example, err := os.ReadFile(filepath.Join(dir, f+".example"))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(example), "\n") {
			if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(k, "#") && v != "" {
				t.Errorf("%s.example gives %s a value", f, k)
			}
		}
	}
}

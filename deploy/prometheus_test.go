package deploy_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/utxo-cache/utxo-cache/deploy/internal/harness"
	"github.com/utxo-cache/utxo-cache/deploy/internal/promcheck"
)

// TestPromtool checks prometheus.yaml and prometheus-alerts.yaml with
// Prometheus's own promtool, runs the alert rules' unit tests, and checks
// that every alert has one.
func TestPromtool(t *testing.T) {
	promtool := harness.NeedTool(t, "promtool", "apt-get install -y prometheus")
	dir := harness.DeployDir(t)
	for _, args := range [][]string{
		{"check", "config", "prometheus.yaml"},
		{"check", "rules", "prometheus-alerts.yaml"},
		{"test", "rules", "prometheus-alerts.test.yaml"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		cmd := exec.CommandContext(ctx, promtool, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}

	alerts, err := promcheck.Alerts(filepath.Join(dir, "prometheus-alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "prometheus-alerts.test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `yaml:"alertname"`
				ExpAlerts []any  `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	if err := yaml.Unmarshal(b, &tests); err != nil {
		t.Fatal(err)
	}
	fires := map[string]bool{}
	for _, tc := range tests.Tests {
		for _, at := range tc.AlertRuleTest {
			if len(at.ExpAlerts) > 0 {
				fires[at.Alertname] = true
			}
		}
	}
	for _, a := range alerts {
		if !fires[a.Name] {
			t.Errorf("alert %s has no unit test in prometheus-alerts.test.yaml that makes it fire", a.Name)
		}
	}
}

// TestQueriesReturnSeries runs a writer and a replica (sharing a Redis run
// with deploy/redis.conf), node-exporter, and a real Prometheus with
// deploy/prometheus.yaml and its alert rules (only the targets rewritten to
// this test's ports). After some traffic, every dashboard panel's query and
// every alert's measure (its expression without the threshold) must return
// series, and so must each metric selector in them: no panel or alert names
// a metric or label the service does not export.
func TestQueriesReturnSeries(t *testing.T) {
	promBin := harness.NeedTool(t, "prometheus", "apt-get install -y prometheus")
	nodeExporter := harness.NeedTool(t, "prometheus-node-exporter", "apt-get install -y prometheus-node-exporter")
	dir := harness.DeployDir(t)
	bin := harness.BuildBinary(t)

	redisURL := harness.StartRedis(t)
	const admin, repl = "prom-test-admin", "prom-test-replication"
	writer := harness.StartWriter(t, bin, admin, repl, redisURL)
	replica := harness.StartReplica(t, "replica", bin, writer, repl, redisURL)
	nodeAddr := "127.0.0.1:" + strconv.Itoa(harness.FreePort(t))
	node := harness.Start(t, "node-exporter", nil, nodeExporter, "--web.listen-address="+nodeAddr,
		"--collector.disable-defaults", "--collector.filesystem")

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	traffic(t, ctx, writer, replica, admin)

	// deploy/prometheus.yaml, targets moved to this test's ports and the
	// intervals shortened; everything else as shipped.
	promDir := t.TempDir()
	cfg := rewritePrometheusConfig(t, filepath.Join(dir, "prometheus.yaml"), map[string]string{
		"writer": writer.Addr, "replica": replica.Addr, "node": nodeAddr,
	}, filepath.Join(dir, "prometheus-alerts.yaml"))
	cfgPath := filepath.Join(promDir, "prometheus.yaml")
	if err := os.WriteFile(cfgPath, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	promAddr := "127.0.0.1:" + strconv.Itoa(harness.FreePort(t))
	prom := harness.Start(t, "prometheus", nil, promBin, "--config.file="+cfgPath,
		"--storage.tsdb.path="+filepath.Join(promDir, "data"), "--web.listen-address="+promAddr)
	pc := &promcheck.Client{Base: "http://" + promAddr, HTTP: &http.Client{Timeout: 30 * time.Second}}

	// Enough scrapes of every target for a rate over the dashboard's window.
	harness.Eventually(t, 2*time.Minute, "Prometheus has scraped every target 5 times", func() error {
		if prom.Exited() || node.Exited() {
			t.Fatalf("prometheus or node-exporter exited:\n%s\n%s", prom.Tail(2000), node.Tail(2000))
		}
		n, err := pc.Series(ctx, `count_over_time(up[1m]) >= 5 and up == 1`)
		if err != nil {
			return err
		}
		if n != 3 {
			return fmt.Errorf("%d of 3 targets up with 5 scrapes", n)
		}
		return nil
	})

	queries, err := promcheck.DashboardQueries(filepath.Join(dir, "grafana", "utxo-cache.json"), "1m")
	if err != nil {
		t.Fatal(err)
	}
	if len(queries) < 20 {
		t.Fatalf("the dashboard has %d queries; expected the full set", len(queries))
	}
	alerts, err := promcheck.Alerts(filepath.Join(dir, "prometheus-alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range alerts {
		ms, err := promcheck.Measures(a.Expr)
		if err != nil {
			t.Errorf("alert %s: %v", a.Name, err)
			continue
		}
		for _, m := range ms {
			queries = append(queries, promcheck.Query{Source: "alert: " + a.Name, Expr: m})
		}
	}
	for _, q := range queries {
		sels, err := promcheck.Selectors(q.Expr)
		if err != nil {
			t.Errorf("%s: %v", q.Source, err)
			continue
		}
		for _, s := range sels {
			if n, err := pc.Series(ctx, s); err != nil || n == 0 {
				t.Errorf("%s: selector %s returns no series (%v)", q.Source, s, err)
			}
		}
		if n, err := pc.Series(ctx, q.Expr); err != nil || n == 0 {
			t.Errorf("%s: %s returns no series (%v)", q.Source, q.Expr, err)
		}
	}
	t.Logf("%d queries (dashboard panels and alert measures) return series", len(queries))
}

// traffic gives the writer and the replica some of everything the
// dashboard shows: applied and rejected blocks, reads hitting each tier, a
// replicated change, a read-your-writes wait, and a 503 behind.
func traffic(t *testing.T, ctx context.Context, writer, replica *harness.Node, admin string) {
	t.Helper()
	var seq uint64
	for h := uint64(1); h <= 5; h++ {
		s, err := writer.PostBlock(ctx, admin, harness.Block(h, "addr_prom", h))
		if err != nil {
			t.Fatal(err)
		}
		seq = s
	}
	// A block that does not connect: rejected, counted by event.
	if _, err := writer.PostBlock(ctx, admin, harness.Block(9, "addr_prom", 1)); err == nil {
		t.Fatal("a block that does not connect to the tip was applied")
	}
	// The replica may still be bootstrapping (503 unavailable) or behind
	// (503 behind after its --max-wait): read until it has the state.
	harness.Eventually(t, 2*time.Minute, "the replica serves seq "+strconv.FormatUint(seq, 10), func() error {
		_, err := replica.BalanceAt(ctx, "addr_prom", seq)
		return err
	})
	for _, n := range []*harness.Node{writer, replica, writer, replica} {
		if _, err := n.BalanceAt(ctx, "addr_prom", seq); err != nil {
			t.Fatal(err)
		}
	}
	// A replica asked for a state it does not have and told not to wait.
	err := replica.Get(ctx, "/v1/tip?min_seq=1000000&wait=0", nil)
	if err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("GET /v1/tip far ahead of the replica: %v, want 503 behind", err)
	}
	harness.Eventually(t, time.Minute, "the replica is ready", func() error { return replica.Ready(ctx) })
}

// rewritePrometheusConfig returns the configuration file at path with each
// static target replaced: the writer's and the replicas' (by their role
// label) and node-exporter's (job node); with 1 s intervals, and the rule
// file named by its absolute path.
func rewritePrometheusConfig(t *testing.T, path string, targets map[string]string, rules string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	global := cfg["global"].(map[string]any)
	global["scrape_interval"], global["evaluation_interval"] = "1s", "1s"
	ruleFiles := cfg["rule_files"].([]any)
	if len(ruleFiles) != 1 || ruleFiles[0] != filepath.Base(rules) {
		t.Fatalf("rule_files = %v, want [%s]", ruleFiles, filepath.Base(rules))
	}
	cfg["rule_files"] = []any{rules}
	var seen []string
	for _, sc := range cfg["scrape_configs"].([]any) {
		job := sc.(map[string]any)
		for _, st := range job["static_configs"].([]any) {
			static := st.(map[string]any)
			key := job["job_name"].(string)
			if labels, ok := static["labels"].(map[string]any); ok && key == "utxo-cache" {
				key, _ = labels["role"].(string)
			}
			addr, ok := targets[key]
			if !ok {
				t.Fatalf("prometheus.yaml: no test target for job %s, %s", job["job_name"], key)
			}
			static["targets"] = []any{addr}
			seen = append(seen, key)
		}
	}
	slices.Sort(seen)
	if !slices.Equal(seen, []string{"node", "replica", "writer"}) {
		t.Fatalf("prometheus.yaml scrapes %v, want the writer, the replicas and node-exporter", seen)
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

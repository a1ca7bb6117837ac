package deploy_test

import (
	"encoding/json"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/utxo-cache/utxo-cache/deploy/internal/compose"
	"github.com/utxo-cache/utxo-cache/deploy/internal/harness"
)

// TestGrafanaProvisioning checks what Grafana would load from the compose
// stack, since no Grafana runs here (no Debian package, no registry): the
// data source's uid is the one every panel names and its URL is where the
// stack's Prometheus listens; the dashboard file is mounted inside the
// directory the dashboard provider reads; panel ids are unique. The panels'
// queries themselves run against a real Prometheus in
// TestQueriesReturnSeries.
func TestGrafanaProvisioning(t *testing.T) {
	dir := harness.DeployDir(t)
	var ds struct {
		Datasources []struct {
			UID, Type, URL string
		} `yaml:"datasources"`
	}
	readYAML(t, filepath.Join(dir, "grafana/provisioning/datasources/prometheus.yaml"), &ds)
	if len(ds.Datasources) != 1 || ds.Datasources[0].Type != "prometheus" {
		t.Fatalf("data sources %+v, want one Prometheus", ds.Datasources)
	}
	var providers struct {
		Providers []struct {
			Options struct{ Path string } `yaml:"options"`
		} `yaml:"providers"`
	}
	readYAML(t, filepath.Join(dir, "grafana/provisioning/dashboards/utxo-cache.yaml"), &providers)
	if len(providers.Providers) != 1 {
		t.Fatalf("dashboard providers %+v, want one", providers.Providers)
	}

	var dash struct {
		UID    string `json:"uid"`
		Panels []struct {
			ID         int    `json:"id"`
			Type       string `json:"type"`
			Title      string `json:"title"`
			Datasource *struct {
				UID string `json:"uid"`
			} `json:"datasource"`
			Targets []struct {
				Datasource struct {
					UID string `json:"uid"`
				} `json:"datasource"`
			} `json:"targets"`
		} `json:"panels"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "grafana/utxo-cache.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatal(err)
	}
	if dash.UID == "" {
		t.Error("the dashboard has no uid (provisioning would give it a new one at every start)")
	}
	ids := map[int]bool{}
	for _, p := range dash.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != ds.Datasources[0].UID {
			t.Errorf("panel %q names data source %+v, want uid %q", p.Title, p.Datasource, ds.Datasources[0].UID)
		}
		for _, tg := range p.Targets {
			if tg.Datasource.UID != ds.Datasources[0].UID {
				t.Errorf("panel %q: a target names data source %q", p.Title, tg.Datasource.UID)
			}
		}
	}

	stack, err := compose.Load(filepath.Join(dir, "compose.yaml"), "check", func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	var promListen string
	for _, arg := range stack.Services["prometheus"].Command {
		if v, ok := strings.CutPrefix(arg, "--web.listen-address="); ok {
			promListen = v
		}
	}
	if want := "http://" + promListen; promListen == "" || ds.Datasources[0].URL != want {
		t.Errorf("data source URL %q, want the stack's Prometheus %q", ds.Datasources[0].URL, want)
	}
	mounts := map[string]string{} // container path → host path
	for _, v := range stack.Services["grafana"].Volumes {
		parts := strings.Split(v, ":")
		mounts[parts[1]] = parts[0]
	}
	if mounts["/etc/grafana/provisioning"] != "./grafana/provisioning" {
		t.Errorf("grafana mounts %v: want ./grafana/provisioning at /etc/grafana/provisioning", mounts)
	}
	found := false
	for target, src := range mounts {
		if src == "./grafana/utxo-cache.json" && path.Dir(target) == providers.Providers[0].Options.Path {
			found = true
		}
	}
	if !found {
		t.Errorf("grafana mounts %v: the dashboard is not inside the provider's path %s", mounts, providers.Providers[0].Options.Path)
	}
	if !slices.Contains(stack.Services["grafana"].EnvFile, "grafana.env") {
		t.Error("grafana's admin password does not come from grafana.env")
	}
}

func readYAML(t *testing.T, p string, out any) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, out); err != nil {
		t.Fatalf("%s: %v", p, err)
	}
}

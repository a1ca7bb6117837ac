package compose

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func write(t *testing.T, text string) string {
	t.Helper()
	dir := t.TempDir()
	p := filepath.Join(dir, "compose.yaml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a.env"), []byte("A=1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const sample = `
x-common: &common
  image: ${IMG:-localhost/app:latest}
  network_mode: host
services:
  db:
    image: ${DB}
  app:
    <<: *common
    command: ["serve", "--x"]
    env_file: [a.env]
    volumes: [data:/data, ./a.env:/etc/a.env:ro]
    depends_on: [db]
    stop_grace_period: 30s
volumes:
  data:
`

func TestLoadAndRunArgs(t *testing.T) {
	p, err := Load(write(t, sample), "proj", func(k string) (string, bool) {
		return map[string]string{"DB": "localhost/db:1"}[k], k == "DB"
	})
	if err != nil {
		t.Fatal(err)
	}
	order, err := p.Order([]string{"app"})
	if err != nil || !reflect.DeepEqual(order, []string{"db", "app"}) {
		t.Fatalf("Order(app) = %v, %v; want [db app]", order, err)
	}
	args, err := p.RunArgs("app")
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(args, " ")
	for _, want := range []string{
		"--name proj_app_1", "--label io.podman.compose.project=proj", "--network host", "--stop-timeout 30",
		"--env-file " + filepath.Join(p.Dir, "a.env"), "-v proj_data:/data", "-v " + filepath.Join(p.Dir, "a.env") + ":/etc/a.env:ro",
		"localhost/app:latest serve --x",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("run args %q lack %q", got, want)
		}
	}
	if db, _ := p.RunArgs("db"); db[len(db)-1] != "localhost/db:1" {
		t.Errorf("db image = %q, want the variable's value", db[len(db)-1])
	}
}

func TestLoadRefuses(t *testing.T) {
	env := func(string) (string, bool) { return "x", true }
	for name, text := range map[string]string{
		"unknown service key": "services:\n  a:\n    image: i\n    ports: [\"80:80\"]\n",
		"unknown top level":   "services:\n  a:\n    image: i\nnetworks:\n  n: {}\n",
		"volume options":      "services:\n  a:\n    image: i\nvolumes:\n  v:\n    driver: local\n",
	} {
		if _, err := Load(write(t, text), "p", env); !errors.Is(err, ErrUnsupported) {
			t.Errorf("%s: Load error = %v, want ErrUnsupported", name, err)
		}
	}
	for name, text := range map[string]string{
		"undeclared volume":  "services:\n  a:\n    image: i\n    volumes: [v:/data]\n",
		"unknown dependency": "services:\n  a:\n    image: i\n    depends_on: [b]\n",
		"no image":           "services:\n  a:\n    command: [x]\n",
	} {
		if _, err := Load(write(t, text), "p", env); err == nil {
			t.Errorf("%s: loaded", name)
		}
	}
	if _, err := Load(write(t, "services:\n  a:\n    image: ${NOPE}\n"), "p", func(string) (string, bool) { return "", false }); err == nil || !strings.Contains(err.Error(), "NOPE") {
		t.Errorf("an unset ${NOPE}: %v, want an error naming it", err)
	}
}

func TestOrderCycle(t *testing.T) {
	p, err := Load(write(t, "services:\n  a:\n    image: i\n    depends_on: [b]\n  b:\n    image: i\n    depends_on: [a]\n"), "p", os.LookupEnv)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Order(nil); err == nil {
		t.Fatal("a depends_on cycle was ordered")
	}
}

// TestRelativeFileGivesAbsoluteMounts: a compose file named by a relative
// path still gives podman absolute bind sources (a relative one would be
// taken for a named volume, silently empty).
func TestRelativeFileGivesAbsoluteMounts(t *testing.T) {
	p := write(t, sample)
	t.Chdir(filepath.Dir(p))
	proj, err := Load("compose.yaml", "proj", func(k string) (string, bool) { return "x", true })
	if err != nil {
		t.Fatal(err)
	}
	args, err := proj.RunArgs("app")
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range args {
		if (a == "-v" || a == "--env-file") && i+1 < len(args) {
			src, _, _ := strings.Cut(args[i+1], ":")
			if !filepath.IsAbs(src) && !strings.HasPrefix(src, "proj_") {
				t.Errorf("%s %s: not absolute", a, args[i+1])
			}
		}
	}
}

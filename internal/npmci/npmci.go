// Package npmci installs, for tests, the npm packages a folder of the
// repository pins in its package-lock.json (the OpenAPI linter, the wallet
// clients the front ends are tested with), the way CI does: npm ci, and
// only when node_modules does not already hold the pinned versions.
//
// A test calls Ensure before it runs node or npx in that folder. Without
// Node.js or npm it fails with the install command; it never skips.
package npmci

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Ensure runs npm ci in dir unless each of pkgs is installed in
// dir/node_modules at the version dir/package-lock.json pins. what names,
// in failure messages, what needs the packages. Ensure is not safe for
// concurrent use on one dir (two npm ci in one folder collide): each folder
// belongs to one test package.
func Ensure(t testing.TB, dir, what string, pkgs ...string) {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found: %s needs Node.js 20 or later and npm (Debian: apt-get install -y nodejs npm), then (cd %s && npm ci)",
				tool, what, dir)
		}
	}
	var lock struct {
		Packages map[string]struct {
			Version string `json:"version"`
		} `json:"packages"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &lock); err != nil {
		t.Fatalf("%s: %v", filepath.Join(dir, "package-lock.json"), err)
	}
	var stale []string
	for _, pkg := range pkgs {
		want := lock.Packages["node_modules/"+pkg].Version
		if want == "" {
			t.Fatalf("%s pins no %s", filepath.Join(dir, "package-lock.json"), pkg)
		}
		var have struct {
			Version string `json:"version"`
		}
		if b, err := os.ReadFile(filepath.Join(dir, "node_modules", pkg, "package.json")); err != nil ||
			json.Unmarshal(b, &have) != nil || have.Version != want {
			stale = append(stale, pkg+" "+want+" (installed: "+have.Version+")")
		}
	}
	if len(stale) == 0 {
		return
	}
	t.Logf("installing %s: npm ci in %s", strings.Join(stale, ", "), dir)
	cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci in %s: %v\n%s", dir, err, strings.TrimSpace(string(out)))
	}
}

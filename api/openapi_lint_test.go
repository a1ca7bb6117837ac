package api_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// redoclyDir holds the pinned Redocly CLI (package.json, package-lock.json),
// its configuration (redocly.yaml: the recommended rules) and the problems it
// is told to ignore, each with its reason (.redocly.lint-ignore.yaml).
var redoclyDir = filepath.Join("..", "tools", "redocly")

// TestOpenAPILint lints openapi.yaml with Redocly CLI, the tool API
// consumers' tooling is most likely to run first, and fails on any error or
// warning. A fresh clone has no node_modules: the test installs the pinned
// version with npm ci first. Without npm it fails and says what to install.
func TestOpenAPILint(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("npm"); err != nil {
		t.Fatalf("npm not found: linting openapi.yaml needs Node.js 20.19 or later and npm " +
			"(Debian: apt-get install -y nodejs npm), then (cd tools/redocly && npm ci)")
	}
	ensureRedocly(t)

	cmd := exec.Command("npx", "--no", "--", "redocly", "lint", "--config", "redocly.yaml", "--format", "json",
		filepath.Join("..", "..", "api", "openapi.yaml"))
	cmd.Dir = redoclyDir
	cmd.Env = append(os.Environ(), "REDOCLY_TELEMETRY=off", "REDOCLY_SUPPRESS_UPDATE_NOTICE=true", "NO_COLOR=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()

	var report struct {
		Totals struct {
			Errors   int `json:"errors"`
			Warnings int `json:"warnings"`
			Ignored  int `json:"ignored"`
		} `json:"totals"`
		Version  string `json:"version"`
		Problems []struct {
			RuleID   string `json:"ruleId"`
			Severity string `json:"severity"`
			Message  string `json:"message"`
			Location []struct {
				Pointer string `json:"pointer"`
			} `json:"location"`
		} `json:"problems"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &report); err != nil {
		t.Fatalf("redocly lint (exit: %v) printed no JSON report: %v\nstdout:\n%s\nstderr:\n%s", runErr, err, stdout.String(), stderr.String())
	}
	for _, p := range report.Problems {
		where := ""
		if len(p.Location) > 0 {
			where = p.Location[0].Pointer
		}
		t.Errorf("openapi.yaml %s: %s [%s]: %s", where, p.Severity, p.RuleID, p.Message)
	}
	if report.Totals.Errors != 0 || report.Totals.Warnings != 0 || runErr != nil {
		t.Fatalf("redocly %s lint: %d errors, %d warnings (exit: %v); reproduce with: "+
			"cd tools/redocly && npx redocly lint --config redocly.yaml ../../api/openapi.yaml\nstderr:\n%s",
			report.Version, report.Totals.Errors, report.Totals.Warnings, runErr, stderr.String())
	}
	t.Logf("redocly %s lint: 0 errors, 0 warnings, %d ignored (.redocly.lint-ignore.yaml)", report.Version, report.Totals.Ignored)
}

// ensureRedocly runs npm ci in redoclyDir unless node_modules already holds
// the version package-lock.json pins.
func ensureRedocly(t *testing.T) {
	t.Helper()
	var lock struct {
		Packages map[string]struct {
			Version string `json:"version"`
		} `json:"packages"`
	}
	b, err := os.ReadFile(filepath.Join(redoclyDir, "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &lock); err != nil {
		t.Fatalf("package-lock.json: %v", err)
	}
	want := lock.Packages["node_modules/@redocly/cli"].Version
	if want == "" {
		t.Fatal("tools/redocly/package-lock.json pins no @redocly/cli")
	}
	var installed struct {
		Version string `json:"version"`
	}
	if b, err := os.ReadFile(filepath.Join(redoclyDir, "node_modules", "@redocly", "cli", "package.json")); err == nil {
		if json.Unmarshal(b, &installed) == nil && installed.Version == want {
			return
		}
	}
	t.Logf("installing @redocly/cli %s (installed: %q): npm ci in tools/redocly", want, installed.Version)
	cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund")
	cmd.Dir = redoclyDir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci in tools/redocly: %v\n%s", err, strings.TrimSpace(string(out)))
	}
}

package api_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/utxo-cache/utxo-cache/internal/npmci"
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
	npmci.Ensure(t, redoclyDir, "linting openapi.yaml", "@redocly/cli")

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

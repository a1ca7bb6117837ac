package lint

import (
	"strings"
	"testing"
)

// The load harness (loadtest/, the utxo-loadtest binary) is a module of its
// own so that the service's binary and image ship what production runs: no
// load generator, no ceiling handler, no chain generator, none of their
// dependencies. These are the packages the harness brings; the service's
// commands must link none of them (tests may: internal/workload seeds the
// service's own tests).
var harnessOnly = []string{
	"loadtest",                // the harness (its own module)
	"api/bare",                // the ceiling the harness measures the service against
	"internal/workload",       // the seeded chain generator
	"github.com/HdrHistogram", // the harness's latency histograms
}

// TestServiceBinaryLinksNoLoadGenerator lists what the service module's
// commands link (`go list -deps ./cmd/...`, no test files) and fails on any
// package of the harness.
func TestServiceBinaryLinksNoLoadGenerator(t *testing.T) {
	root := strings.TrimSpace(goCmd(t, "", "list", "-m", "-f", "{{.Dir}}"))
	modPath := strings.TrimSpace(goCmd(t, root, "list", "-m"))
	deps := strings.Fields(goCmd(t, root, "list", "-deps", "./cmd/..."))
	// Guard against a vacuous pass: the service links its API package.
	if !strings.Contains(" "+strings.Join(deps, " ")+" ", " "+modPath+"/api ") {
		t.Fatalf("go list -deps ./cmd/... does not list %s/api: is it seeing the module?", modPath)
	}
	for _, dep := range deps {
		rel, inModule := relativeTo(dep, modPath)
		for _, h := range harnessOnly {
			if (inModule && isUnder(rel, h)) || isUnder(dep, h) {
				t.Errorf("the service's commands link %s: it belongs to the load harness (utxo-loadtest), not the service binary", dep)
			}
		}
	}
}

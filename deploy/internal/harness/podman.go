package harness

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// containersConf is the podman configuration the tests run with (through
// CONTAINERS_CONF, so the machine's own configuration is left alone): runc
// as the runtime and no default rlimits, because on these machines the
// kernel refuses podman's default rlimits and crun does not support the
// cgroup layout. deploy/README.md gives operators the same two settings.
const containersConf = `[containers]
default_ulimits = []

[engine]
runtime = "runc"
`

// Podman runs podman for one test.
type Podman struct {
	t   testing.TB
	bin string
	env []string
}

// NewPodman skips t when podman (or runc) is not installed and otherwise
// returns a runner using the tests' containers.conf.
func NewPodman(t testing.TB) *Podman {
	t.Helper()
	bin := NeedTool(t, "podman", "apt-get install -y podman runc")
	NeedTool(t, "runc", "apt-get install -y runc")
	conf := filepath.Join(t.TempDir(), "containers.conf")
	if err := os.WriteFile(conf, []byte(containersConf), 0o644); err != nil {
		t.Fatal(err)
	}
	return &Podman{t: t, bin: bin, env: []string{"CONTAINERS_CONF=" + conf}}
}

// Env is the environment podman runs with (for make image and
// podman-compose).
func (p *Podman) Env() []string { return append(os.Environ(), p.env...) }

// Run runs podman with args, bounded by timeout, and returns its standard
// output; a failure includes its standard error.
func (p *Podman) Run(timeout time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, p.bin, args...)
	cmd.Env = p.Env()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("podman %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return stdout.String(), nil
}

// MustRun is Run that fails t on an error.
func (p *Podman) MustRun(timeout time.Duration, args ...string) string {
	p.t.Helper()
	out, err := p.Run(timeout, args...)
	if err != nil {
		p.t.Fatal(err)
	}
	return out
}

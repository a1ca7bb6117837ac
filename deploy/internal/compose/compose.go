// Package compose runs a compose file with podman alone, for machines whose
// podman-compose cannot (Debian 12's 1.0.3 adds a bridge network to every
// container, so `network_mode: host` fails). It understands exactly the
// subset of the Compose specification deploy/compose.yaml uses, and refuses
// any other key, so the file cannot silently grow something this runner
// would ignore.
//
// Containers and volumes carry the label io.podman.compose.project=NAME, the
// one podman-compose uses, so either tool can see and remove them.
package compose

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Service is the part of a compose service this runner supports.
type Service struct {
	Image           string            `yaml:"image"`
	Command         []string          `yaml:"command"`
	EnvFile         []string          `yaml:"env_file"`
	Environment     map[string]string `yaml:"environment"`
	Volumes         []string          `yaml:"volumes"`
	NetworkMode     string            `yaml:"network_mode"`
	Restart         string            `yaml:"restart"`
	ReadOnly        bool              `yaml:"read_only"`
	SecurityOpt     []string          `yaml:"security_opt"`
	CapDrop         []string          `yaml:"cap_drop"`
	StopGracePeriod string            `yaml:"stop_grace_period"`
	DependsOn       []string          `yaml:"depends_on"`
}

// Project is a loaded compose file.
type Project struct {
	Name     string
	Dir      string // the compose file's directory, absolute: relative paths start here
	Services map[string]Service
	Volumes  []string // named volumes, as declared
}

// ErrUnsupported is returned for a compose file using something this
// runner does not implement.
var ErrUnsupported = errors.New("unsupported compose setting")

var variable = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?\}`)

// Load reads the compose file at path for project name, substituting
// ${VAR} and ${VAR:-default} from lookup (a variable lookup returns unset
// or empty takes the default; ${VAR} unset is an error).
func Load(path, name string, lookup func(string) (string, bool)) (*Project, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read compose file: %w", err)
	}
	var missing []string
	text := variable.ReplaceAllStringFunc(string(raw), func(m string) string {
		sub := variable.FindStringSubmatch(m)
		if v, ok := lookup(sub[1]); ok && v != "" {
			return v
		}
		if sub[2] == "" {
			missing = append(missing, sub[1])
			return ""
		}
		return sub[3]
	})
	if len(missing) > 0 {
		return nil, fmt.Errorf("compose file %s: variables not set: %s", path, strings.Join(missing, ", "))
	}
	var doc map[string]any
	if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
		return nil, fmt.Errorf("compose file %s: %w", path, err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("compose file: %w", err)
	}
	// Bind mounts and env files are relative to the file's directory; podman
	// takes a bind source that is not absolute for a named volume.
	p := &Project{Name: name, Dir: filepath.Dir(abs), Services: map[string]Service{}}
	for key, v := range doc {
		switch {
		case key == "services":
			if err := strictDecode(v, &p.Services); err != nil {
				return nil, fmt.Errorf("compose file %s: services: %w", path, err)
			}
		case key == "volumes":
			vols, _ := v.(map[string]any)
			for name, def := range vols {
				if def != nil {
					return nil, fmt.Errorf("compose file %s: volume %s has options: %w", path, name, ErrUnsupported)
				}
				p.Volumes = append(p.Volumes, name)
			}
			slices.Sort(p.Volumes)
		case strings.HasPrefix(key, "x-"):
		default:
			return nil, fmt.Errorf("compose file %s: top-level %q: %w", path, key, ErrUnsupported)
		}
	}
	for name, s := range p.Services {
		if s.Image == "" {
			return nil, fmt.Errorf("service %s: no image", name)
		}
		for _, d := range s.DependsOn {
			if _, ok := p.Services[d]; !ok {
				return nil, fmt.Errorf("service %s depends on unknown service %s", name, d)
			}
		}
		for _, v := range s.Volumes {
			src, _, _ := strings.Cut(v, ":")
			if !isPath(src) && !slices.Contains(p.Volumes, src) {
				return nil, fmt.Errorf("service %s: volume %s is not declared", name, src)
			}
		}
	}
	return p, nil
}

// strictDecode decodes v (already parsed, merge keys resolved) into out,
// refusing unknown keys.
func strictDecode(v any, out any) error {
	b, err := yaml.Marshal(v)
	if err != nil {
		return err
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(out); err != nil {
		return fmt.Errorf("%w: %w", ErrUnsupported, err)
	}
	return nil
}

func isPath(s string) bool { return strings.HasPrefix(s, ".") || strings.HasPrefix(s, "/") }

// Order returns the named services and everything they depend on, each
// after its dependencies (all services when names is empty).
func (p *Project) Order(names []string) ([]string, error) {
	if len(names) == 0 {
		for n := range p.Services {
			names = append(names, n)
		}
		slices.Sort(names)
	}
	var order []string
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(string) error
	visit = func(n string) error {
		s, ok := p.Services[n]
		if !ok {
			return fmt.Errorf("no service %s", n)
		}
		switch state[n] {
		case 1:
			return fmt.Errorf("depends_on cycle through %s", n)
		case 2:
			return nil
		}
		state[n] = 1
		deps := slices.Clone(s.DependsOn)
		slices.Sort(deps)
		for _, d := range deps {
			if err := visit(d); err != nil {
				return err
			}
		}
		state[n] = 2
		order = append(order, n)
		return nil
	}
	for _, n := range names {
		if err := visit(n); err != nil {
			return nil, err
		}
	}
	return order, nil
}

// Runner runs one podman command and returns its standard output.
type Runner func(ctx context.Context, args ...string) (string, error)

func (p *Project) label() string { return "io.podman.compose.project=" + p.Name }

func (p *Project) container(service string) string { return p.Name + "_" + service + "_1" }

func (p *Project) volume(name string) string { return p.Name + "_" + name }

// RunArgs are the arguments of `podman run` for one service.
func (p *Project) RunArgs(service string) ([]string, error) {
	s, ok := p.Services[service]
	if !ok {
		return nil, fmt.Errorf("no service %s", service)
	}
	args := []string{"run", "-d", "--name", p.container(service),
		"--label", p.label(), "--label", "com.docker.compose.project=" + p.Name,
		"--label", "com.docker.compose.service=" + service}
	if s.NetworkMode != "" {
		args = append(args, "--network", s.NetworkMode)
	}
	if s.Restart != "" {
		args = append(args, "--restart", s.Restart)
	}
	if s.ReadOnly {
		args = append(args, "--read-only")
	}
	for _, o := range s.SecurityOpt {
		args = append(args, "--security-opt", o)
	}
	for _, c := range s.CapDrop {
		args = append(args, "--cap-drop", c)
	}
	if s.StopGracePeriod != "" {
		d, err := time.ParseDuration(s.StopGracePeriod)
		if err != nil {
			return nil, fmt.Errorf("service %s: stop_grace_period: %w", service, err)
		}
		args = append(args, "--stop-timeout", strconv.Itoa(int(d.Seconds())))
	}
	for _, f := range s.EnvFile {
		if !filepath.IsAbs(f) {
			f = filepath.Join(p.Dir, f)
		}
		if _, err := os.Stat(f); err != nil {
			return nil, fmt.Errorf("service %s: env_file: %w", service, err)
		}
		args = append(args, "--env-file", f)
	}
	keys := make([]string, 0, len(s.Environment))
	for k := range s.Environment {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		args = append(args, "-e", k+"="+s.Environment[k])
	}
	for _, v := range s.Volumes {
		src, rest, _ := strings.Cut(v, ":")
		if isPath(src) {
			if !filepath.IsAbs(src) {
				src = filepath.Join(p.Dir, src)
			}
			if _, err := os.Stat(src); err != nil {
				return nil, fmt.Errorf("service %s: volume: %w", service, err)
			}
		} else {
			src = p.volume(src)
		}
		args = append(args, "-v", src+":"+rest)
	}
	args = append(args, s.Image)
	return append(args, s.Command...), nil
}

// Up creates the declared volumes the services use and starts the services
// (with their dependencies) in dependency order.
func (p *Project) Up(ctx context.Context, run Runner, services []string) error {
	order, err := p.Order(services)
	if err != nil {
		return err
	}
	for _, svc := range order {
		for _, v := range p.Services[svc].Volumes {
			src, _, _ := strings.Cut(v, ":")
			if isPath(src) {
				continue
			}
			if _, err := run(ctx, "volume", "exists", p.volume(src)); err == nil {
				continue
			}
			if _, err := run(ctx, "volume", "create", "--label", p.label(), p.volume(src)); err != nil {
				return fmt.Errorf("create volume %s: %w", src, err)
			}
		}
		args, err := p.RunArgs(svc)
		if err != nil {
			return err
		}
		if _, err := run(ctx, args...); err != nil {
			return fmt.Errorf("start %s: %w", svc, err)
		}
	}
	return nil
}

// Down stops (SIGTERM, then SIGKILL after each service's grace period) and
// removes every container of the project, then, with volumes, its volumes.
func (p *Project) Down(ctx context.Context, run Runner, volumes bool) error {
	order, err := p.Order(nil)
	if err != nil {
		return err
	}
	var errs []error
	for _, svc := range slices.Backward(order) {
		if _, err := run(ctx, "container", "exists", p.container(svc)); err != nil {
			continue
		}
		if _, err := run(ctx, "stop", p.container(svc)); err != nil {
			errs = append(errs, fmt.Errorf("stop %s: %w", svc, err))
		}
		if _, err := run(ctx, "rm", "-f", p.container(svc)); err != nil {
			errs = append(errs, fmt.Errorf("remove %s: %w", svc, err))
		}
	}
	if volumes {
		out, err := run(ctx, "volume", "ls", "-q", "--filter", "label="+p.label())
		if err != nil {
			errs = append(errs, fmt.Errorf("list volumes: %w", err))
		}
		for _, v := range strings.Fields(out) {
			if _, err := run(ctx, "volume", "rm", v); err != nil {
				errs = append(errs, fmt.Errorf("remove volume %s: %w", v, err))
			}
		}
	}
	return errors.Join(errs...)
}

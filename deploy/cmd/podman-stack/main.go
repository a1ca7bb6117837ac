// Command podman-stack runs deploy/compose.yaml with podman alone, where
// podman-compose cannot (Debian 12's podman-compose 1.0.3 fails on
// `network_mode: host`). deploy/compose_test.go runs the stack through the
// same code.
//
//	go run ./cmd/podman-stack [-f compose.yaml] [-p utxo-cache] up [SERVICE...]
//	go run ./cmd/podman-stack [-f compose.yaml] [-p utxo-cache] down [-v]
//	go run ./cmd/podman-stack [-f compose.yaml] [-p utxo-cache] print [SERVICE...]
//
// `up` starts the services (all by default) in depends_on order; `down`
// stops and removes them, and with -v their volumes (the stores); `print`
// shows the podman commands `up` would run. ${VAR:-default} in the file is
// taken from the environment (UTXO_CACHE_IMAGE, REDIS_IMAGE, …).
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"

	"github.com/utxo-cache/utxo-cache/deploy/internal/compose"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "podman-stack:", err)
		var usage usageError
		if errors.As(err, &usage) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

type usageError struct{ error }

func run(args []string) error {
	fs := flag.NewFlagSet("podman-stack", flag.ContinueOnError)
	file := fs.String("f", "compose.yaml", "the compose file")
	name := fs.String("p", "utxo-cache", "the project name (prefix of containers and volumes)")
	if err := fs.Parse(args); err != nil {
		return usageError{err}
	}
	if fs.NArg() == 0 {
		return usageError{errors.New("no command: up, down or print")}
	}
	p, err := compose.Load(*file, *name, os.LookupEnv)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch cmd, rest := fs.Arg(0), fs.Args()[1:]; cmd {
	case "up":
		return p.Up(ctx, podman, rest)
	case "down":
		volumes := false
		for _, a := range rest {
			if a != "-v" {
				return usageError{fmt.Errorf("down: unknown argument %q", a)}
			}
			volumes = true
		}
		return p.Down(ctx, podman, volumes)
	case "print":
		order, err := p.Order(rest)
		if err != nil {
			return err
		}
		for _, svc := range order {
			a, err := p.RunArgs(svc)
			if err != nil {
				return err
			}
			fmt.Println("podman " + strings.Join(a, " "))
		}
		return nil
	default:
		return usageError{fmt.Errorf("unknown command %q: up, down or print", cmd)}
	}
}

// podman runs podman, its standard error in the error.
func podman(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "podman", args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("podman %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return stdout.String(), nil
}

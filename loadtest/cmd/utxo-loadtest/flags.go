package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// The command line follows utxo-cache's (its settings.go): every flag --NAME
// can also be set with the environment variable UTXO_CACHE_<NAME>, the flag
// winning, and the help lists each flag with its default and variable.

// envPrefix starts the environment variable of every flag.
const envPrefix = "UTXO_CACHE_"

// envName returns the environment variable that sets flag name:
// UTXO_CACHE_ + name in upper case with '-' as '_' ("chain-profile" →
// UTXO_CACHE_CHAIN_PROFILE).
func envName(flagName string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// commandLine is the command's flags and help text. The command defines
// its flags on fs, then calls parse, which resolves every setting in one
// order:
//
//  1. a flag on the command line;
//  2. else the environment variable envName(flag), when set and not empty;
//  3. else the flag's default.
type commandLine struct {
	fs       *flag.FlagSet
	synopsis string // after "Usage: "
	about    string // paragraphs printed under the synopsis

	// fromEnv holds the flags that parse took from the environment.
	fromEnv map[string]bool
}

func newCommandLine(name, synopsis, about string) *commandLine {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	// parse reports errors and prints help itself, to the right stream.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return &commandLine{fs: fs, synopsis: synopsis, about: about}
}

// parse parses args and then the environment (see commandLine). It returns
// flag.ErrHelp after printing the help to e.stdout for -h/--help, and a
// *usageError for a bad flag or a bad environment value. An empty variable
// counts as unset, which is also what an operator who clears one with
// NAME= means.
func (c *commandLine) parse(e *env, args []string) error {
	if err := c.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			c.usage(e.stdout)
			return flag.ErrHelp
		}
		return &usageError{msg: err.Error()}
	}
	onCommandLine := make(map[string]bool)
	c.fs.Visit(func(f *flag.Flag) { onCommandLine[f.Name] = true })
	c.fromEnv = make(map[string]bool)
	var err error
	c.fs.VisitAll(func(f *flag.Flag) {
		if err != nil || onCommandLine[f.Name] {
			return
		}
		name := envName(f.Name)
		v := e.getenv(name)
		if v == "" {
			return
		}
		if setErr := f.Value.Set(v); setErr != nil {
			err = usagef("environment %s=%q: %v", name, v, setErr)
			return
		}
		c.fromEnv[f.Name] = true
	})
	return err
}

// usage prints the command's help: synopsis, description, and every flag
// with its default and environment variable.
func (c *commandLine) usage(w io.Writer) {
	fmt.Fprintf(w, "Usage: %s\n\n", c.synopsis)
	if c.about != "" {
		fmt.Fprintf(w, "%s\n\n", strings.TrimSpace(c.about))
	}
	fmt.Fprintf(w, "Flags (each also read from the environment variable shown; the flag wins):\n")
	c.fs.VisitAll(func(f *flag.Flag) {
		valueName, help := flag.UnquoteUsage(f)
		if valueName != "" {
			fmt.Fprintf(w, "  --%s %s\n", f.Name, valueName)
		} else {
			fmt.Fprintf(w, "  --%s\n", f.Name)
		}
		for _, line := range strings.Split(help, "\n") {
			fmt.Fprintf(w, "        %s\n", line)
		}
		if f.DefValue != "" {
			fmt.Fprintf(w, "        default: %s\n", f.DefValue)
		}
		fmt.Fprintf(w, "        env: %s\n", envName(f.Name))
	})
}

// given reports whether flag name has a value from the command line or the
// environment (after parse).
func (c *commandLine) given(name string) bool {
	found := c.fromEnv[name]
	c.fs.Visit(func(f *flag.Flag) {
		if f.Name == name {
			found = true
		}
	})
	return found
}

// usageError is a mistake in the command line: exit status 2.
type usageError struct{ msg string }

func (u *usageError) Error() string { return u.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// exitError asks for a specific exit status; its message, if any, has
// already been printed.
type exitError struct{ code int }

func (x *exitError) Error() string { return fmt.Sprintf("exit status %d", x.code) }

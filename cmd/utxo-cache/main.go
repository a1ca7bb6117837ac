// Command utxo-cache is the operator's tool for a utxo-cache store: it ingests
// block files, rolls the chain back, prints the store's figures, backs a
// store up and restores it, and (in subcommands that live in their own
// files) serves the HTTP API as a writer or a read replica and imports
// Bitcoin blocks. The load harness is a binary of its own
// (loadtest/cmd/utxo-loadtest).
//
// # Shape
//
// Each subcommand is one row of the commands table below and one file holding
// its run function, which parses its own flag.FlagSet through commandLine
// (settings.go): every flag can also come from the environment variable
// UTXO_CACHE_<NAME>, and a flag given on the command line wins. cmd/ is the
// only place that turns flags and environment into the Options structs of the
// packages it drives (CONTRIBUTING.md, options).
//
// # Exit status
//
//	0  success (also --help)
//	1  operational error: a bad block, a refused rollback, a store that
//	   cannot be opened, an archive that does not verify
//	2  usage error: an unknown command or flag, a bad flag value, missing
//	   arguments
//	128+n  an offline command (ingest, import-bitcoin, import-cardano) stopped by signal n
//	       after finishing cleanly (130 SIGINT, 143 SIGTERM); serve's
//	       graceful stop on a signal is its normal end and exits 0
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
)

// command is one subcommand. run parses args itself (see commandLine) and
// returns nil, flag.ErrHelp after printing its help, a *usageError, an
// *exitError, or any other error for an operational failure.
type command struct {
	name    string
	summary string // one line for `utxo-cache help`
	run     func(e *env, args []string) error
}

// commands is the subcommand table, in the order `utxo-cache help` lists
// them. A new subcommand adds one row here and one file with its run function.
var commands = []command{
	{"ballast", "create, remove or show the data directory's ballast file: room held in reserve for a full disk", runBallast},
	{"checkpoint", "write a backup of a store no process has open: a tar archive that restore verifies", runCheckpoint},
	{"import-bitcoin", "apply Bitcoin Core blk*.dat or raw block files (bz2 ok) to a store, resumably", runImportBitcoin},
	{"import-cardano", "apply cardano-node ImmutableDB chunks or Cardano block files to a store, resumably", runImportCardano},
	{"ingest", "apply the blocks of JSONL or CBOR files (or stdin) to a store, resumably", runIngest},
	{"restore", "verify a checkpoint archive and install it as a new store", runRestore},
	{"rollback", "roll a store's chain back to a height or block hash", runRollback},
	{"serve", "run the writer and the HTTP API over a store (the service), or a read replica of a writer", runServe},
	{"stats", "print a store's tip, UTXO count and digest (--json: docs/digest.md)", runStats},
}

// env is what a command sees of its process, so that everything it prints
// and reads from the environment goes through one place.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	// stderrIsTerminal enables progress lines (ingest).
	stderrIsTerminal bool
}

func main() {
	e := &env{
		stdin:            os.Stdin,
		stdout:           os.Stdout,
		stderr:           os.Stderr,
		getenv:           os.Getenv,
		stderrIsTerminal: isTerminal(os.Stderr),
	}
	os.Exit(run(e, os.Args[1:]))
}

// isTerminal reports whether f is a character device (a terminal, in
// practice), without a terminal library.
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// run dispatches args to a subcommand and returns the process's exit status.
func run(e *env, args []string) int {
	if len(args) == 0 {
		printHelp(e.stderr)
		return 2
	}
	name := args[0]
	switch name {
	case "help", "-h", "-help", "--help":
		if len(args) > 1 { // `help CMD` is `CMD --help`
			if c := lookup(args[1]); c != nil {
				return exitStatus(e, c.name, c.run(e, []string{"--help"}))
			}
			fmt.Fprintf(e.stderr, "utxo-cache: unknown command %q\n\n", args[1])
			printHelp(e.stderr)
			return 2
		}
		printHelp(e.stdout)
		return 0
	}
	c := lookup(name)
	if c == nil {
		fmt.Fprintf(e.stderr, "utxo-cache: unknown command %q\n\n", name)
		printHelp(e.stderr)
		return 2
	}
	return exitStatus(e, c.name, c.run(e, args[1:]))
}

func lookup(name string) *command {
	for i := range commands {
		if commands[i].name == name {
			return &commands[i]
		}
	}
	return nil
}

func printHelp(w io.Writer) {
	fmt.Fprintf(w, "utxo-cache: a UTXO-set store and cache for wallet backends.\n\n")
	fmt.Fprintf(w, "Usage: utxo-cache COMMAND [flags] [args]\n\nCommands:\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, c := range commands {
		fmt.Fprintf(tw, "  %s\t%s\n", c.name, c.summary)
	}
	fmt.Fprintf(tw, "  help\tthis list; `utxo-cache help COMMAND` is COMMAND --help\n")
	tw.Flush()
	fmt.Fprintf(w, "\nEvery flag --NAME can also be set with the environment variable UTXO_CACHE_<NAME>\n"+
		"(upper case, '-' as '_'); a flag on the command line wins.\n"+
		"Exit status: 0 ok, 1 operational error, 2 usage error, 130/143 stopped by SIGINT/SIGTERM.\n")
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

// exitStatus prints err for the operator and maps it to an exit status.
func exitStatus(e *env, name string, err error) int {
	var ue *usageError
	var xe *exitError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &xe):
		return xe.code
	case errors.As(err, &ue):
		fmt.Fprintf(e.stderr, "utxo-cache %s: %s\nRun 'utxo-cache %s --help' for usage.\n", name, ue.msg, name)
		return 2
	default:
		fmt.Fprintf(e.stderr, "utxo-cache %s: %s\n", name, strings.TrimSpace(err.Error()))
		return 1
	}
}

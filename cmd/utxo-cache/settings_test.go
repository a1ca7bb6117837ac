package main

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// helpFlagRE finds the flags a --help output documents.
var helpFlagRE = regexp.MustCompile(`(?m)^  --([a-z][a-z0-9-]*)`)

func TestEnvironmentAndFlagPrecedence(t *testing.T) {
	t.Parallel()
	c := newTestChain(5)
	dir := t.TempDir()
	file := writeJSONL(t, dir, "blocks.jsonl", c.blocks[:3])
	storeA, storeB := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	mustCLI(t, "ingest", "--data-dir", storeA, file)
	mustCLI(t, "ingest", "--data-dir", storeB, writeJSONL(t, dir, "all.jsonl", c.blocks))

	envA := []string{"UTXO_CACHE_DATA_DIR=" + storeA}
	r := cli(t, envA, nil, "stats", "--json")
	if got := strings.TrimSpace(r.stdout); r.code != 0 || got != c.stats(3) {
		t.Fatalf("stats with UTXO_CACHE_DATA_DIR: got %s, want %s\n%s", got, c.stats(3), r)
	}
	r = cli(t, envA, nil, "stats", "--json", "--data-dir", storeB)
	if got := strings.TrimSpace(r.stdout); r.code != 0 || got != c.stats(5) {
		t.Fatalf("the flag must win over the environment: got %s, want %s\n%s", got, c.stats(5), r)
	}

	// Every flag has its variable, booleans included.
	r = cli(t, append(envA, "UTXO_CACHE_JSON=true"), nil, "stats")
	if got := strings.TrimSpace(r.stdout); r.code != 0 || got != c.stats(3) {
		t.Fatalf("UTXO_CACHE_JSON=true: %s", r)
	}
	wantFail(t, cli(t, []string{"UTXO_CACHE_PRUNE_DEPTH=soon"}, nil, "ingest", "--data-dir", storeA, file),
		2, "UTXO_CACHE_PRUNE_DEPTH")
}

func TestEnvName(t *testing.T) {
	for flag, want := range map[string]string{
		"data-dir":            "UTXO_CACHE_DATA_DIR",
		"skip-unknown-inputs": "UTXO_CACHE_SKIP_UNKNOWN_INPUTS",
		"json":                "UTXO_CACHE_JSON",
	} {
		if got := envName(flag); got != want {
			t.Errorf("envName(%q) = %q, want %q", flag, got, want)
		}
	}
}

func TestHelp(t *testing.T) {
	t.Parallel()
	flags := map[string][]string{
		"ingest":   {"data-dir", "format", "skip-unknown-inputs", "prune-depth", "rollback-window"},
		"rollback": {"data-dir", "height", "hash", "rollback-window"},
		"stats":    {"data-dir", "json"},
	}
	for _, c := range commands {
		// Help text is generated from each command's FlagSet, so every
		// command gets the structural checks; the lists above also pin
		// the flags of these commands.
		names := flags[c.name]
		name := c.name
		for _, args := range [][]string{{name, "--help"}, {name, "-h"}, {"help", name}} {
			r := mustCLI(t, args...)
			if !strings.HasPrefix(r.stdout, "Usage: utxo-cache "+name) {
				t.Fatalf("%v: %s", args, r)
			}
			documented := helpFlagRE.FindAllStringSubmatch(r.stdout, -1)
			if len(documented) == 0 {
				t.Errorf("%v documents no flag:\n%s", args, r.stdout)
			}
			for _, m := range documented {
				if !strings.Contains(r.stdout, "env: "+envName(m[1])) {
					t.Errorf("%v does not name the variable of --%s", args, m[1])
				}
			}
			for _, f := range names {
				for _, want := range []string{"--" + f, envName(f)} {
					if !strings.Contains(r.stdout, want) {
						t.Errorf("%v does not mention %s:\n%s", args, want, r.stdout)
					}
				}
			}
		}
	}
	// Defaults are documented.
	r := mustCLI(t, "ingest", "--help")
	for _, want := range []string{"default: ./data", "default: 2160", "default: 4320"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("ingest --help lacks %q", want)
		}
	}

	r = mustCLI(t, "help")
	for _, c := range commands {
		if !strings.Contains(r.stdout, "  "+c.name+" ") {
			t.Errorf("help does not list %s:\n%s", c.name, r.stdout)
		}
	}
	wantFail(t, cli(t, nil, nil), 2, "Commands:")
	wantFail(t, cli(t, nil, nil, "frobnicate"), 2, `unknown command "frobnicate"`)
	wantFail(t, cli(t, nil, nil, "help", "frobnicate"), 2, `unknown command "frobnicate"`)
}

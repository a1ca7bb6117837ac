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
		"serve": {"data-dir", "listen", "admin-token", "admin-token-file", "prune-depth", "rollback-window", "redis-url",
			"memory-cache-bytes", "replica-of", "replication-token", "replication-retention", "max-lag-blocks", "max-wait",
			"apply-priority-wait"},
		"checkpoint": {"data-dir", "out"},
		"restore":    {"data-dir"},
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

	// serve's help gives each setting of docs/settings.md its default, under
	// that flag, and its variable. A setting whose default is "none" has no
	// default line and says what none means.
	r = mustCLI(t, "serve", "--help")
	entries := helpEntries(r.stdout)
	for _, want := range []struct {
		flag, def, none string // def "" means none, which the help text explains with none
	}{
		{flag: "data-dir", def: "./data"},
		{flag: "listen", def: "127.0.0.1:8080"},
		{flag: "admin-token", none: "none: writes answer 403"},
		{flag: "admin-token-file", none: "trailing newline is ignored"},
		{flag: "prune-depth", def: "2160"},
		{flag: "rollback-window", def: "4320"},
		{flag: "redis-url", none: "none: tier off"},
		{flag: "memory-cache-bytes", def: "256MiB"},
		{flag: "replica-of", none: "none: run as the writer"},
		{flag: "replication-token", none: "none: replication off"},
		{flag: "replication-retention", def: "0"}, // 0: the rollback window, which the text says
		{flag: "max-lag-blocks", def: "10"},
		{flag: "max-wait", def: "2s"},
		{flag: "apply-priority-wait", def: "50ms"},
		{flag: "stall-timeout", def: "30s"},
		{flag: "max-change-streams", def: "32"},
	} {
		e, ok := entries[want.flag]
		switch {
		case !ok:
			t.Errorf("serve --help lacks --%s:\n%s", want.flag, r.stdout)
			continue
		case e.def != want.def:
			t.Errorf("serve --help: --%s default %q, want %q (docs/settings.md)", want.flag, e.def, want.def)
		case want.def == "" && !strings.Contains(e.text, want.none):
			t.Errorf("serve --help: --%s does not say %q:\n%s", want.flag, want.none, e.text)
		}
		if env := "UTXO_CACHE_" + strings.ToUpper(strings.ReplaceAll(want.flag, "-", "_")); e.env != env {
			t.Errorf("serve --help: --%s env %q, want %q (docs/settings.md)", want.flag, e.env, env)
		}
	}
	if text := entries["replication-retention"].text; !strings.Contains(text, "default: the rollback window") {
		t.Errorf("serve --help: --replication-retention does not say what 0 means:\n%s", text)
	}
	if n, err := parseSize(entries["memory-cache-bytes"].def); err != nil || n != 256<<20 {
		t.Errorf("serve's --memory-cache-bytes default %q parses as %d, %v; want 256 MiB (%d)",
			entries["memory-cache-bytes"].def, n, err, 256<<20)
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
	wantFail(t, cli(t, nil, nil, "serve", "--apply-priority-wait", "-1ms"), 2, "--apply-priority-wait -1ms: must not be negative")
}

// helpEntry is what a --help output says of one flag.
type helpEntry struct {
	text     string // the help lines, without default and env
	def, env string // "" when the help has no such line
}

// helpEntries splits a --help output into its flags' entries, by flag name.
func helpEntries(out string) map[string]helpEntry {
	entries := make(map[string]helpEntry)
	name := ""
	for _, line := range strings.Split(out, "\n") {
		if m := helpFlagRE.FindStringSubmatch(line); m != nil {
			name = m[1]
			entries[name] = helpEntry{}
			continue
		}
		body, ok := strings.CutPrefix(line, "        ")
		if name == "" || !ok {
			name = ""
			continue
		}
		e := entries[name]
		if v, ok := strings.CutPrefix(body, "default: "); ok {
			e.def = v
		} else if v, ok := strings.CutPrefix(body, "env: "); ok {
			e.env = v
		} else {
			e.text += body + "\n"
		}
		entries[name] = e
	}
	return entries
}

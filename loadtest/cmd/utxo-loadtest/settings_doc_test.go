package main

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// settingsDoc documents the flags of every program of the repository, this
// one's in its "## utxo-loadtest" section.
var settingsDoc = filepath.Join("..", "..", "..", "docs", "settings.md")

var (
	// helpFlagRE finds a flag of the --help output.
	helpFlagRE = regexp.MustCompile(`(?m)^  --([a-z][a-z0-9-]*)`)
	// docFlagRowRE finds a flag's row in a settings table: | `--name VALUE` | `ENV` | ...
	docFlagRowRE = regexp.MustCompile("^\\| `--([a-z][a-z0-9-]*)[^`]*` \\| ([^|]*) \\|")
)

// TestSettingsDoc keeps the harness's section of docs/settings.md and its
// flag definitions from drifting apart: the section's table rows are exactly
// the flags --help prints, each with its environment variable.
func TestSettingsDoc(t *testing.T) {
	code, out, _ := runWith([]string{"--help"}, nil)
	if code != 0 {
		t.Fatalf("--help: exit %d", code)
	}
	_, list, ok := strings.Cut(out, "\nFlags")
	if !ok {
		t.Fatalf("--help prints no flag list:\n%s", out)
	}
	var flags []string
	for _, m := range helpFlagRE.FindAllStringSubmatch(list, -1) {
		flags = append(flags, m[1])
	}
	if len(flags) == 0 {
		t.Fatalf("--help lists no flags:\n%s", list)
	}

	f, err := os.Open(settingsDoc)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	documented := map[string]string{}
	in, found := false, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if heading, ok := strings.CutPrefix(line, "## "); ok {
			in = strings.Trim(strings.Fields(heading)[0], "`:") == "utxo-loadtest"
			found = found || in
			continue
		}
		if m := docFlagRowRE.FindStringSubmatch(line); in && m != nil {
			documented[m[1]] = strings.TrimSpace(m[2])
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if !found {
		t.Fatal("docs/settings.md has no \"## utxo-loadtest\" section")
	}
	for _, name := range flags {
		env, ok := documented[name]
		if !ok {
			t.Errorf("--%s is missing from docs/settings.md's utxo-loadtest section", name)
			continue
		}
		want := "UTXO_CACHE_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
		if !strings.Contains(env, want) {
			t.Errorf("docs/settings.md: --%s's environment variable is %q, want %s", name, env, want)
		}
	}
	for name := range documented {
		if !slices.Contains(flags, name) {
			t.Errorf("docs/settings.md's utxo-loadtest section documents --%s, which utxo-loadtest does not have", name)
		}
	}
}

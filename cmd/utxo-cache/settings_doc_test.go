package main

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// settingsDoc is the one page that documents every command's settings.
var settingsDoc = filepath.Join("..", "..", "docs", "settings.md")

// otherBinarySections are sections of docs/settings.md that document the
// flags of a program other than this binary: the load harness, utxo-loadtest
// (make loadtest, make soak, make loadtest-replicas), whose own tests check
// its section.
var otherBinarySections = map[string]bool{"utxo-loadtest": true}

// docFlagRowRE finds a flag's row in a settings table: | `--name VALUE` | `ENV` | ...
var docFlagRowRE = regexp.MustCompile("^\\| `--([a-z][a-z0-9-]*)[^`]*` \\| ([^|]*) \\|")

// TestSettingsDoc keeps docs/settings.md and the flag definitions from
// drifting apart: every command of the commands table has a section whose
// table rows are exactly the flags its --help prints, each with its
// environment variable, and no section documents a flag of a command this
// binary does not have. The flags come from each command's own FlagSet (its
// --help), so a new command or flag is covered without touching this test.
func TestSettingsDoc(t *testing.T) {
	t.Parallel()
	sections := docSections(t)
	for _, c := range commands {
		want := helpFlags(t, c.name)
		doc, ok := sections[c.name]
		if !ok {
			t.Errorf("docs/settings.md has no section \"## %s\" for the command %s (flags: --%s)",
				c.name, c.name, strings.Join(want, ", --"))
			continue
		}
		documented := make([]string, 0, len(doc))
		for name, env := range doc {
			documented = append(documented, name)
			if !slices.Contains(want, name) {
				t.Errorf("docs/settings.md, section %s, documents --%s, which `utxo-cache %s` does not have", c.name, name, c.name)
			} else if wantEnv := "`" + envName(name) + "`"; env != wantEnv {
				t.Errorf("docs/settings.md, section %s: --%s's environment variable is %s, want %s", c.name, name, env, wantEnv)
			}
		}
		for _, name := range want {
			if !slices.Contains(documented, name) {
				t.Errorf("docs/settings.md, section %s, does not document --%s (see `utxo-cache %s --help`)", c.name, name, c.name)
			}
		}
	}
	for name, doc := range sections {
		if lookup(name) != nil || len(doc) == 0 || otherBinarySections[name] {
			continue
		}
		t.Errorf("docs/settings.md documents flags in section %q, which is no command of utxo-cache", name)
	}
}

// TestSettingsDocumentedOnce keeps the flag tables out of the README: the
// settings are documented in docs/settings.md alone, so that they cannot
// differ between two pages again.
func TestSettingsDocumentedOnce(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for i, line := range strings.Split(string(b), "\n") {
		if docFlagRowRE.MatchString(line) {
			t.Errorf("README.md:%d documents a flag in a table; settings are documented in docs/settings.md only:\n%s", i+1, line)
		}
	}
}

// helpFlags returns the flags `utxo-cache NAME --help` lists, sorted.
func helpFlags(t *testing.T, name string) []string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	e := &env{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr, getenv: func(string) string { return "" }}
	if code := run(e, []string{name, "--help"}); code != 0 {
		t.Fatalf("utxo-cache %s --help: exit status %d\n%s", name, code, stderr.String())
	}
	// The flags follow the "Flags" line; the description above it may
	// quote flags too.
	_, list, ok := strings.Cut(stdout.String(), "\nFlags ")
	if !ok {
		t.Fatalf("utxo-cache %s --help prints no flag list:\n%s", name, stdout.String())
	}
	var flags []string
	for _, m := range helpFlagRE.FindAllStringSubmatch(list, -1) {
		flags = append(flags, m[1])
	}
	slices.Sort(flags)
	return flags
}

// docSections returns, for each "## " section of docs/settings.md, the flags
// its tables document with their environment column. A section is named by
// the first word of its heading ("## utxo-loadtest: the load harness" is
// "utxo-loadtest").
func docSections(t *testing.T) map[string]map[string]string {
	t.Helper()
	f, err := os.Open(settingsDoc)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sections := make(map[string]map[string]string)
	var current map[string]string
	var currentName string
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if heading, ok := strings.CutPrefix(line, "## "); ok {
			currentName = strings.Trim(strings.Fields(heading)[0], "`:")
			if sections[currentName] != nil {
				t.Errorf("docs/settings.md:%d: a second section %q", n, currentName)
			}
			current = make(map[string]string)
			sections[currentName] = current
			continue
		}
		m := docFlagRowRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		if current == nil {
			t.Errorf("docs/settings.md:%d: a flag outside any section: %s", n, line)
			continue
		}
		if _, dup := current[m[1]]; dup {
			t.Errorf("docs/settings.md:%d: --%s twice in section %s", n, m[1], currentName)
		}
		current[m[1]] = strings.TrimSpace(m[2])
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return sections
}

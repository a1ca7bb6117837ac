package main

import (
	"fmt"
	"os"
	"strings"
)

// Secrets (bearer tokens) can be given inline, as a flag or an environment
// variable, or as a file: --NAME-file PATH (UTXO_CACHE_NAME_FILE). A file
// keeps the secret out of the command line, which every local user can read
// (ps, /proc/PID/cmdline) and which pprof's /debug/pprof/cmdline would serve
// (the admin listener does not register it). Setting both is a usage error:
// neither silently wins.

// resolveSecret returns the secret of flag name from its inline value or
// from the file at path, whichever is set ("" when neither is). It runs
// before anything is created, so a refused secret leaves no store behind.
func resolveSecret(name, inline, path string) (string, error) {
	switch {
	case inline != "" && path != "":
		return "", usagef("--%s and --%s-file are both set (by flags, environment or config file): give one", name, name)
	case path == "":
		if err := checkSecret(inline); err != nil {
			return "", usagef("--%s: %v", name, err)
		}
		return inline, nil
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("--%s-file: %w", name, err)
	}
	// Editors and `echo` end the file with a newline; it is not part of the secret.
	secret := strings.TrimRight(string(raw), "\r\n")
	if secret == "" {
		return "", fmt.Errorf("--%s-file %s: the file is empty", name, path)
	}
	if err := checkSecret(secret); err != nil {
		return "", fmt.Errorf("--%s-file %s: %v", name, path, err)
	}
	return secret, nil
}

// checkSecret refuses a bearer token no client could send: HTTP strips a
// header value's surrounding whitespace and forbids control characters, so
// such a token would never match and writes would answer 401 forever.
func checkSecret(s string) error {
	if strings.TrimSpace(s) != s {
		return fmt.Errorf("the token starts or ends with whitespace, which an Authorization header cannot carry")
	}
	for _, c := range s {
		if c < 0x20 || c == 0x7f {
			return fmt.Errorf("the token holds a control character, which an Authorization header cannot carry")
		}
	}
	return nil
}

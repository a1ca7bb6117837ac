package loadtest

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
)

// ErrRemoteTarget marks a target that is not on this machine's loopback
// interface while remote targets are not allowed.
var ErrRemoteTarget = errors.New("loadtest: target is not a loopback address")

// CheckTarget parses a target base URL ("http://127.0.0.1:8080") and, unless
// allowRemote, refuses any host but localhost, 127.0.0.0/8 and ::1.
//
// The default is loopback only because the harness sends tens of thousands
// of requests a second and posts blocks with the admin token: pointed at a
// shared or production service by a typo, it would be an attack. Host names
// other than "localhost" are refused without being resolved (a name that
// resolves to loopback today may not tomorrow). --allow-remote lifts the
// check for a deliberate run against another machine.
func CheckTarget(raw string, allowRemote bool) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("loadtest: target %q: %w", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("loadtest: target %q: scheme must be http or https", raw)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("loadtest: target %q: give a base URL without credentials, query or fragment", raw)
	}
	host := u.Hostname()
	if host == "" {
		return nil, fmt.Errorf("loadtest: target %q has no host", raw)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	if allowRemote || isLoopbackHost(host) {
		return u, nil
	}
	return nil, fmt.Errorf("%w: %s (pass --allow-remote to load a service on another machine)", ErrRemoteTarget, raw)
}

// isLoopbackHost reports whether host (no port, no brackets) is "localhost"
// or a loopback IP literal.
func isLoopbackHost(host string) bool {
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return true
	}
	if i := strings.IndexByte(host, '%'); i >= 0 { // fe80::1%lo zones are never loopback anyway
		host = host[:i]
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

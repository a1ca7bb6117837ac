package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// TestRedisFlagsRefused: contradictory or incomplete Redis deployment flags
// are usage errors (exit 2) that name the flags, before the store is
// created.
func TestRedisFlagsRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pw := writeFile(t, dir, "pw", []byte("secret\n"))
	for _, c := range []struct {
		name  string
		args  []string
		parts []string
	}{
		{"URL and cluster", []string{"--redis-url", "redis://127.0.0.1:6379/0", "--redis-cluster", "127.0.0.1:7000"}, []string{"exclusive"}},
		{"cluster and sentinel", []string{"--redis-cluster", "127.0.0.1:7000", "--redis-sentinel-master", "m", "--redis-sentinels", "127.0.0.1:26379"}, []string{"exclusive"}},
		{"master without sentinels", []string{"--redis-sentinel-master", "m"}, []string{"--redis-sentinel-master needs --redis-sentinels"}},
		{"sentinels without a master", []string{"--redis-sentinels", "127.0.0.1:26379"}, []string{"--redis-sentinels needs --redis-sentinel-master"}},
		{"TLS without a deployment", []string{"--redis-tls"}, []string{"need a Redis deployment"}},
		{"user without a password", []string{"--redis-cluster", "127.0.0.1:7000", "--redis-username", "u"}, []string{"--redis-username needs --redis-password-file"}},
		{"TLS twice", []string{"--redis-url", "rediss://127.0.0.1:6379/0", "--redis-tls"}, []string{"already asks for TLS"}},
		{"TLS with redis://", []string{"--redis-url", "redis://127.0.0.1:6379/0", "--redis-tls"}, []string{"write rediss://"}},
		{"CA without TLS", []string{"--redis-cluster", "127.0.0.1:7000", "--redis-ca-file", pw}, []string{"--redis-ca-file needs --redis-tls"}},
		{"unknown admission", []string{"--redis-url", "redis://127.0.0.1:6379/0", "--redis-admission", "some"}, []string{`--redis-admission "some"`, "want cost or all"}},
		{"admission without a tier", []string{"--redis-admission", "all"}, []string{"need a Redis tier"}},
		{"min cost without a tier", []string{"--redis-min-cost", "1ms"}, []string{"need a Redis tier"}},
		{"negative min cost", []string{"--redis-url", "redis://127.0.0.1:6379/0", "--redis-min-cost", "-1ms"}, []string{"--redis-min-cost -1ms", "0 or more"}},
		{"min cost with all", []string{"--redis-url", "redis://127.0.0.1:6379/0", "--redis-admission", "all", "--redis-min-cost", "1ms"}, []string{"--redis-min-cost applies to --redis-admission cost"}},
	} {
		store := filepath.Join(dir, "refused")
		args := append([]string{"serve", "--listen", "127.0.0.1:0", "--data-dir", store}, c.args...)
		r := cli(t, nil, nil, args...)
		t.Run(c.name, func(t *testing.T) {
			wantFail(t, r, 2, c.parts...)
			if _, err := os.Stat(store); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("a refused serve left %s behind (%v)", store, err)
			}
		})
	}
	var r redisFlags
	r.cluster, r.username, r.passwordFile = " 127.0.0.1:7000, 127.0.0.1:7001 ,", "u", pw
	if err := r.check(""); err != nil {
		t.Fatal(err)
	}
	d := r.deployment()
	if len(d.ClusterAddrs) != 2 || d.ClusterAddrs[1] != "127.0.0.1:7001" || d.Password != "secret" || d.Username != "u" || d.ClusterURL != "" {
		t.Fatalf("deployment %+v", d)
	}
	r = redisFlags{cluster: "redis://127.0.0.1:7000?addr=127.0.0.1:7001"}
	if err := r.check(""); err != nil || r.deployment().ClusterURL != r.cluster {
		t.Fatalf("cluster URL: %v %+v", err, r.deployment())
	}
}

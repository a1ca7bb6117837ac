package main

import (
	"flag"
	"strings"

	"github.com/utxo-cache/utxo-cache/node"
)

// redisFlags are the Redis tier's deployment flags besides --redis-url: a
// cluster, a Sentinel set, and the credentials and TLS of any of them.
type redisFlags struct {
	cluster, sentinelMaster, sentinels string
	username, passwordFile, caFile     string
	tls                                bool
	password                           string // read from passwordFile by check
}

func (r *redisFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&r.cluster, "redis-cluster", "", "shared Redis tier on a Redis Cluster: seed `NODES` host:port,host:port,… or a URL redis[s]://[user@]host:port?addr=host:port&addr=…; not with --redis-url")
	fs.StringVar(&r.sentinelMaster, "redis-sentinel-master", "", "shared Redis tier on the primary that Sentinels watch under `NAME`; with --redis-sentinels")
	fs.StringVar(&r.sentinels, "redis-sentinels", "", "the Sentinels' `ADDRESSES` host:port,host:port,…; with --redis-sentinel-master")
	fs.StringVar(&r.username, "redis-username", "", "ACL user `NAME` of every Redis connection; with --redis-password-file")
	fs.StringVar(&r.passwordFile, "redis-password-file", "", "`FILE` holding the Redis password (a trailing newline is ignored)")
	fs.BoolVar(&r.tls, "redis-tls", false, "dial Redis with TLS (for --redis-url: use rediss:// instead)")
	fs.StringVar(&r.caFile, "redis-ca-file", "", "PEM `FILE` of the certificates that sign the Redis servers' (default: the system's); with --redis-tls or rediss://")
}

// deployments counts the Redis deployments given: --redis-url (url),
// --redis-cluster, and a Sentinel set (either of its two flags).
func (r *redisFlags) deployments(url string) int {
	n := 0
	for _, given := range []bool{url != "", r.cluster != "", r.sentinelMaster != "" || r.sentinels != ""} {
		if given {
			n++
		}
	}
	return n
}

// check refuses contradictory Redis flags with a usage error, and reads
// the password file.
func (r *redisFlags) check(url string) error {
	n := r.deployments(url)
	rediss := strings.HasPrefix(url, "rediss://") || strings.HasPrefix(r.cluster, "rediss://")
	switch {
	case n > 1:
		return usagef("--redis-url, --redis-cluster and --redis-sentinel-master are exclusive: give one Redis deployment")
	case r.sentinelMaster != "" && r.sentinels == "":
		return usagef("--redis-sentinel-master needs --redis-sentinels, the Sentinels to ask")
	case r.sentinelMaster == "" && r.sentinels != "":
		return usagef("--redis-sentinels needs --redis-sentinel-master, the name of the master they watch")
	case n == 0 && (r.username != "" || r.passwordFile != "" || r.tls || r.caFile != ""):
		return usagef("--redis-username, --redis-password-file, --redis-tls and --redis-ca-file need a Redis deployment (--redis-url, --redis-cluster or --redis-sentinel-master)")
	case r.username != "" && r.passwordFile == "":
		return usagef("--redis-username needs --redis-password-file")
	case r.tls && rediss:
		return usagef("--redis-tls: the rediss:// URL already asks for TLS")
	case r.tls && (url != "" || strings.Contains(r.cluster, "://")):
		return usagef("--redis-tls with a redis:// URL: write rediss:// instead")
	case r.caFile != "" && !r.tls && !rediss:
		return usagef("--redis-ca-file needs --redis-tls (or a rediss:// URL)")
	}
	if r.passwordFile != "" {
		pw, err := resolveSecret("redis-password", "", r.passwordFile)
		if err != nil {
			return err
		}
		r.password = pw
	}
	return nil
}

// deployment is the node's Redis deployment of the flags (--redis-url
// travels apart, as node.Config.RedisURL).
func (r *redisFlags) deployment() node.RedisDeployment {
	d := node.RedisDeployment{
		SentinelMaster: r.sentinelMaster,
		SentinelAddrs:  splitList(r.sentinels),
		Username:       r.username,
		Password:       r.password,
		TLS:            r.tls,
		CAFile:         r.caFile,
	}
	if strings.Contains(r.cluster, "://") {
		d.ClusterURL = r.cluster
	} else {
		d.ClusterAddrs = splitList(r.cluster)
	}
	return d
}

// splitList splits a comma-separated list, dropping blanks.
func splitList(s string) []string {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

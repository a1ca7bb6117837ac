package redis

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// The deployments the tier talks to.
const (
	deploySingle   = "single"   // one server (URL)
	deployCluster  = "cluster"  // a Redis Cluster (ClusterAddrs, ClusterURL)
	deploySentinel = "sentinel" // a primary found through Sentinels
)

// deployment is a checked connection setting: which kind of deployment, an
// address for the logs (no password), and the client to build.
type deployment struct {
	kind      string
	addr      string
	newClient func() goredis.UniversalClient
}

// validateDeployment refuses contradictory or incomplete connection
// settings, without reading any file.
func (o Options) validateDeployment() error {
	n := 0
	for _, set := range []bool{o.URL != "", len(o.ClusterAddrs) > 0 || o.ClusterURL != "", o.SentinelMaster != "" || len(o.SentinelAddrs) > 0} {
		if set {
			n++
		}
	}
	switch {
	case n == 0:
		return errors.New("redis: options: a Redis deployment is required: URL, a cluster (ClusterAddrs or ClusterURL), or Sentinels (SentinelMaster and SentinelAddrs)")
	case n > 1:
		return errors.New("redis: options: URL, cluster and Sentinel are exclusive: give one deployment")
	case len(o.ClusterAddrs) > 0 && o.ClusterURL != "":
		return errors.New("redis: options: give the cluster as ClusterAddrs or as ClusterURL, not both")
	case o.SentinelMaster != "" && len(o.SentinelAddrs) == 0:
		return errors.New("redis: options: SentinelMaster needs SentinelAddrs, the Sentinels to ask")
	case o.SentinelMaster == "" && len(o.SentinelAddrs) > 0:
		return errors.New("redis: options: SentinelAddrs need SentinelMaster, the name of the master they watch")
	case o.Password == "" && o.Username != "":
		return errors.New("redis: options: Username needs a Password")
	}
	for _, a := range append(append([]string(nil), o.ClusterAddrs...), o.SentinelAddrs...) {
		if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
			return fmt.Errorf("redis: options: address %q is not host:port", a)
		}
	}
	return nil
}

// connect checks the connection settings (URLs parse, the CA file reads)
// and returns the deployment, its clients bounded by CallTimeout. It does
// not dial. It expects defaults to be applied.
func (o Options) connect() (*deployment, error) {
	if err := o.validateDeployment(); err != nil {
		return nil, err
	}
	var tlsConf *tls.Config
	rediss := scheme(o.URL) == "rediss" || scheme(o.ClusterURL) == "rediss"
	if o.CAFile != "" && !o.TLS && !rediss {
		return nil, errors.New("redis: options: CAFile without TLS (TLS, or a rediss:// URL)")
	}
	if o.TLS || o.CAFile != "" {
		tlsConf = &tls.Config{MinVersion: tls.VersionTLS12}
		if o.CAFile != "" {
			pem, err := os.ReadFile(o.CAFile)
			if err != nil {
				return nil, fmt.Errorf("redis: options: CA file: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("redis: options: CA file %s holds no PEM certificate", o.CAFile)
			}
			tlsConf.RootCAs = pool
		}
	}
	// auth merges the URL's credentials and TLS with the options'.
	auth := func(user, pass *string, conf **tls.Config, scheme string) error {
		if *user != "" || *pass != "" {
			if o.Password != "" {
				return errors.New("redis: options: credentials in the URL and in Username/Password: give them once")
			}
		} else {
			*user, *pass = o.Username, o.Password
		}
		if scheme == "rediss" {
			if o.TLS {
				return errors.New("redis: options: TLS is implied by rediss://")
			}
			if tlsConf != nil { // a CA file for a rediss:// URL
				c := tlsConf.Clone()
				c.ServerName = (*conf).ServerName
				*conf = c
			}
		} else if o.TLS {
			return errors.New("redis: options: TLS with a redis:// URL: use rediss://")
		}
		return nil
	}
	switch {
	case o.URL != "":
		ro, err := goredis.ParseURL(o.URL)
		if err != nil {
			return nil, fmt.Errorf("redis: options: URL: %w", hideURL(err))
		}
		if err := auth(&ro.Username, &ro.Password, &ro.TLSConfig, scheme(o.URL)); err != nil {
			return nil, err
		}
		boundSingle(ro, o.CallTimeout)
		return &deployment{kind: deploySingle, addr: ro.Addr, newClient: func() goredis.UniversalClient { return goredis.NewClient(ro) }}, nil
	case o.SentinelMaster != "":
		fo := &goredis.FailoverOptions{
			MasterName:    o.SentinelMaster,
			SentinelAddrs: o.SentinelAddrs,
			Username:      o.Username,
			Password:      o.Password,
			TLSConfig:     tlsConf,
		}
		t := o.CallTimeout
		fo.DialTimeout, fo.DialerRetries, fo.ReadTimeout, fo.WriteTimeout, fo.PoolTimeout = t, 1, t, t, t
		fo.ContextTimeoutEnabled, fo.MaxRetries, fo.Protocol, fo.DisableIdentity = true, -1, 2, true
		return &deployment{kind: deploySentinel, addr: o.SentinelMaster + "@" + strings.Join(o.SentinelAddrs, ","),
			newClient: func() goredis.UniversalClient { return goredis.NewFailoverClient(fo) }}, nil
	default:
		co := &goredis.ClusterOptions{Addrs: o.ClusterAddrs, Username: o.Username, Password: o.Password, TLSConfig: tlsConf}
		if o.ClusterURL != "" {
			var err error
			if co, err = goredis.ParseClusterURL(o.ClusterURL); err != nil {
				return nil, fmt.Errorf("redis: options: ClusterURL: %w", hideURL(err))
			}
			if err := auth(&co.Username, &co.Password, &co.TLSConfig, scheme(o.ClusterURL)); err != nil {
				return nil, err
			}
		}
		t := o.CallTimeout
		co.DialTimeout, co.DialerRetries, co.ReadTimeout, co.WriteTimeout, co.PoolTimeout = t, 1, t, t, t
		co.ContextTimeoutEnabled, co.MaxRetries, co.Protocol, co.DisableIdentity = true, -1, 2, true
		// Redirections (MOVED, ASK during a slot migration) are followed
		// within the call's CallTimeout; TRYAGAIN and CLUSTERDOWN fail the
		// call (see Tier, "Cluster").
		co.MaxRedirects = 3
		// Every call's keys share one slot: the command goes to that slot's
		// master as it is, without go-redis's per-command routing policies
		// (an MGET split by key and merged back).
		co.DisableRoutingPolicies = true
		co.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
		return &deployment{kind: deployCluster, addr: strings.Join(co.Addrs, ","),
			newClient: func() goredis.UniversalClient { return goredis.NewClusterClient(co) }}, nil
	}
}

// boundSingle bounds every call of a single-server client by callTimeout,
// through its context and the socket deadlines; nothing is retried: a retry
// cannot fit in the budget, and a failure is better reported (and degraded
// on) than hidden. RESP2 and a short connection preamble (HELLO, AUTH,
// SELECT): no CLIENT SETINFO or maintenance-notification handshakes to time
// out on.
func boundSingle(ro *goredis.Options, callTimeout time.Duration) {
	ro.DialTimeout = callTimeout
	ro.DialerRetries = 1
	ro.ReadTimeout = callTimeout
	ro.WriteTimeout = callTimeout
	ro.PoolTimeout = callTimeout
	ro.ContextTimeoutEnabled = true
	ro.MaxRetries = -1
	ro.Protocol = 2
	ro.DisableIdentity = true
	ro.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
}

// hideURL drops the URL from a url.Error, whose message would repeat it,
// password included.
func hideURL(err error) error {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		return uerr.Err
	}
	return err
}

// scheme is the scheme of a URL that parsed.
func scheme(raw string) string {
	s, _, _ := strings.Cut(raw, "://")
	return strings.ToLower(s)
}

package redis

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/utxo-cache/utxo-cache/internal/testredis"
)

// writeTLSFiles writes a CA and a server certificate for 127.0.0.1 signed
// by it, as PEM files in dir: ca.pem, server.pem, server.key.
func writeTLSFiles(t *testing.T, dir string) {
	t.Helper()
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	caKey, srvKey := key(), key()
	now := time.Now()
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	srv := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	srvDER, err := x509.CreateCertificate(rand.Reader, srv, ca, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	srvKeyDER, err := x509.MarshalECPrivateKey(srvKey)
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string]*pem.Block{
		"ca.pem":     {Type: "CERTIFICATE", Bytes: caDER},
		"server.pem": {Type: "CERTIFICATE", Bytes: srvDER},
		"server.key": {Type: "EC PRIVATE KEY", Bytes: srvKeyDER},
	} {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// TestTLS: a redis-server that speaks TLS on a second port, with a
// certificate signed by a CA of the test's own. The tier given a rediss://
// URL and the CA file is healthy and serves; without the CA file (the
// system's roots do not know it) it never becomes healthy.
func TestTLS(t *testing.T) {
	dir := t.TempDir()
	writeTLSFiles(t, dir)
	port := testredis.FreePort(t)
	conf := filepath.Join(dir, "tls.conf")
	text := fmt.Sprintf("tls-port %d\ntls-cert-file %s\ntls-key-file %s\ntls-ca-cert-file %s\ntls-auth-clients no\nsave \"\"\nappendonly no\n",
		port, filepath.Join(dir, "server.pem"), filepath.Join(dir, "server.key"), filepath.Join(dir, "ca.pem"))
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	testredis.StartConfig(t, conf)
	o := Options{URL: fmt.Sprintf("rediss://127.0.0.1:%d/0", port), CAFile: filepath.Join(dir, "ca.pem"), Namespace: testNS,
		CallTimeout: time.Second, ProbeInterval: 20 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))}
	tier := openTier(t, o)
	waitFor(t, 10*time.Second, "healthy over TLS", tier.Healthy)
	ctx := context.Background()
	publish(t, tier, 4)
	tier.Set(ctx, "k", "g", entryAt(4))
	if e, ok := tier.Get(ctx, "k", "g"); !ok || e.Seq != 4 {
		t.Fatalf("Get over TLS: %v %v", e.Seq, ok)
	}
	o.CAFile = ""
	untrusted := openTier(t, o)
	for range 3 {
		if untrusted.fence() {
			t.Fatal("healthy with a server certificate no trusted CA signed")
		}
	}
	if err := untrusted.Ping(ctx); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("Ping without the CA: %v, want a certificate error", err)
	}
}
